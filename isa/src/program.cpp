#include "tpu/isa/program.h"

#include <fmt/format.h>

#include "tpu/isa/file.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <iterator>
#include <set>

#include "tpu/isa/isa.h"

namespace tpu::isa {
namespace {

// Section tags in file order. Version 1.0 has the first four; 1.1 adds the
// optional ones after them (each present only when it has content, in this
// order), and is written only by programs that have one.
constexpr uint32_t tag(const char (&s)[5]) {
  return uint32_t(uint8_t(s[0])) | uint32_t(uint8_t(s[1])) << 8 | uint32_t(uint8_t(s[2])) << 16 |
         uint32_t(uint8_t(s[3])) << 24;
}
enum Section : size_t { kTrgt, kCode, kData, kSyms, kChks, kKern, kTile, kHeap, kTmap, kMaxSections };
constexpr size_t kRequiredSections = 4;
constexpr uint32_t kSectionTags[] = {tag("TRGT"), tag("CODE"), tag("DATA"), tag("SYMS"), tag("CHKS"),
                                     tag("KERN"), tag("TILE"), tag("HEAP"), tag("TMAP")};
constexpr const char* kSectionNames[] = {"TRGT", "CODE", "DATA", "SYMS", "CHKS", "KERN", "TILE", "HEAP", "TMAP"};
// The first minor version that may hold each section.
constexpr uint16_t kSectionMinor[] = {0, 0, 0, 0, 1, 1, 2, 3, 4};
constexpr const char* kCheckKindNames[kNumCheckKinds] = {"expect_eq", "expect_almost_eq", "expect_close"};
constexpr size_t kHeaderBytes = 16;
constexpr size_t kSectionEntryBytes = 24;

constexpr const char* kDtypeNames[kNumDtypes] = {"pred", "s8",  "s16", "s32",  "s64", "u8", "u16",
                                                 "u32",  "u64", "f16", "bf16", "f32", "f64"};
constexpr size_t kDtypeSizes[kNumDtypes] = {1, 1, 2, 4, 8, 1, 2, 4, 8, 2, 2, 4, 8};

bool valid_symbol_name(std::string_view n) {
  if (n.empty() || n.size() > kMaxSymbolName) return false;
  if (!(std::isalpha(static_cast<unsigned char>(n[0])) || n[0] == '_')) return false;
  for (char c : n)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.')) return false;
  return true;
}

// Saturating multiply so that hostile dimensions cannot wrap around.
uint64_t mul_sat(uint64_t a, uint64_t b) {
  if (a != 0 && b > UINT64_MAX / a) return UINT64_MAX;
  return a * b;
}

bool range_fits(uint64_t addr, uint64_t size, uint64_t limit) { return addr <= limit && size <= limit - addr; }

class Writer {
 public:
  void u8(uint8_t v) { buf_.push_back(v); }
  void u16(uint16_t v) { put(v, 2); }
  void u32(uint32_t v) { put(v, 4); }
  void u64(uint64_t v) { put(v, 8); }
  void bytes(const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    buf_.insert(buf_.end(), b, b + n);
  }
  void patch_u64(size_t at, uint64_t v) {
    for (int i = 0; i < 8; ++i) buf_[at + i] = uint8_t(v >> (8 * i));
  }
  size_t size() const { return buf_.size(); }
  std::vector<uint8_t> take() { return std::move(buf_); }

 private:
  void put(uint64_t v, int n) {
    for (int i = 0; i < n; ++i) buf_.push_back(uint8_t(v >> (8 * i)));
  }
  std::vector<uint8_t> buf_;
};

// Bounds-checked little-endian reader over one section; errors name the
// section and the absolute file offset.
class Reader {
 public:
  Reader(const uint8_t* base, size_t begin, size_t end, const char* what)
      : base_(base), pos_(begin), end_(end), what_(what) {}
  uint8_t u8() { return uint8_t(get(1)); }
  uint16_t u16() { return uint16_t(get(2)); }
  uint32_t u32() { return uint32_t(get(4)); }
  uint64_t u64() { return get(8); }
  std::string str(size_t n) {
    need(n);
    std::string s(reinterpret_cast<const char*>(base_ + pos_), n);
    pos_ += n;
    return s;
  }
  std::vector<uint8_t> bytes(uint64_t n) {
    need(n);
    std::vector<uint8_t> v(base_ + pos_, base_ + pos_ + n);
    pos_ += n;
    return v;
  }
  size_t pos() const { return pos_; }
  size_t remaining() const { return end_ - pos_; }
  [[noreturn]] void fail(const std::string& msg, size_t at) const {
    throw Error(fmt::format("{} section, offset {}: {}", what_, at, msg));
  }
  [[noreturn]] void fail(const std::string& msg) const { fail(msg, pos_); }
  void expect_end() const {
    if (pos_ != end_) fail(fmt::format("{} trailing bytes", end_ - pos_));
  }

 private:
  void need(uint64_t n) const {
    if (n > end_ - pos_) fail(fmt::format("truncated: need {} bytes, {} left", n, end_ - pos_));
  }
  uint64_t get(int n) {
    need(n);
    uint64_t v = 0;
    for (int i = 0; i < n; ++i) v |= uint64_t(base_[pos_ + i]) << (8 * i);
    pos_ += n;
    return v;
  }
  const uint8_t* base_;
  size_t pos_;
  size_t end_;
  const char* what_;
};

void write_target(Writer& w, const Target& t) {
  w.u8(uint8_t(t.name.size()));
  w.bytes(t.name.data(), t.name.size());
  for (const auto& f : target_fields()) w.u64(t.*f.member);
}

Target read_target(Reader& r) {
  Target t;
  size_t n = r.u8();
  t.name = r.str(n);
  for (const auto& f : target_fields()) t.*f.member = r.u64();
  r.expect_end();
  try {
    validate(t);
  } catch (const Error& e) {
    r.fail(e.what(), r.pos());
  }
  return t;
}

// The program's peak HBM, when it gives one, holds every symbol and data
// segment and fits the target.
void check_heap(const Program& p, const std::function<void(const std::string&)>& fail) {
  if (p.hbm_peak == 0) return;
  if (p.hbm_peak > p.target.hbm_bytes)
    fail(fmt::format("peak HBM of {} bytes exceeds the target's {}", p.hbm_peak, p.target.hbm_bytes));
  for (const auto& s : p.symbols)
    if (!range_fits(s.hbm_addr, s.local_bytes(), p.hbm_peak))
      fail(fmt::format("symbol '{}' ({} bytes at {:#x}) lies above the peak HBM of {} bytes", s.name, s.local_bytes(), s.hbm_addr, p.hbm_peak));
  for (const auto& d : p.data)
    if (!range_fits(d.hbm_addr, d.bytes.size(), p.hbm_peak))
      fail(fmt::format("data segment at {:#x} lies above the peak HBM of {} bytes", d.hbm_addr, p.hbm_peak));
}

void check_symbols_and_data(const Program& p, const std::function<void(const std::string&)>& fail) {
  std::set<std::string> names;
  for (const auto& s : p.symbols) {
    if (!valid_symbol_name(s.name)) fail(fmt::format("symbol name '{}' is not an identifier of at most {} characters", s.name, kMaxSymbolName));
    if (!names.insert(s.name).second) fail(fmt::format("symbol '{}' is defined twice", s.name));
    if (static_cast<int>(s.dtype) >= kNumDtypes) fail(fmt::format("symbol '{}' has an unknown dtype", s.name));
    if (s.dims.size() > kMaxRank) fail(fmt::format("symbol '{}' has rank {} (at most {})", s.name, s.dims.size(), kMaxRank));
    for (uint64_t d : s.dims)
      if (d > kMaxDim) fail(fmt::format("symbol '{}' has dimension {} (at most 2^48)", s.name, d));
    if (!s.tiles.empty()) {
      if (s.tiles.size() != s.dims.size())
        fail(fmt::format("symbol '{}' has {} tiles for rank {}", s.name, s.tiles.size(), s.dims.size()));
      for (size_t i = 0; i < s.tiles.size(); ++i)
        if (s.tiles[i] == 0 || s.dims[i] % s.tiles[i] != 0)
          fail(fmt::format("symbol '{}': {} tiles do not divide dimension {} of {}", s.name, s.tiles[i], i, s.dims[i]));
      if (s.tile_of.empty() && s.tile_count() != p.target.chips)
        fail(fmt::format("symbol '{}' has {} tiles, the target has {} chip(s)", s.name, s.tile_count(), p.target.chips));
      if (!s.tile_of.empty()) {
        if (s.tile_of.size() != p.target.chips)
          fail(fmt::format("symbol '{}' maps {} chips to tiles, the target has {}", s.name, s.tile_of.size(), p.target.chips));
        std::vector<bool> held(s.tile_count() < (uint64_t(1) << 20) ? s.tile_count() : 0);
        for (uint32_t t : s.tile_of) {
          if (t >= held.size()) fail(fmt::format("symbol '{}': tile {} of {}", s.name, t, s.tile_count()));
          held[t] = true;
        }
        if (std::find(held.begin(), held.end(), false) != held.end()) fail(fmt::format("symbol '{}': a tile no chip holds", s.name));
      }
    } else if (!s.tile_of.empty()) {
      fail(fmt::format("symbol '{}' maps chips to tiles but has none", s.name));
    }
    uint64_t bytes = s.local_bytes();
    if (!range_fits(s.hbm_addr, bytes, p.target.hbm_bytes))
      fail(fmt::format("symbol '{}' ({} bytes at {:#x}) does not fit in HBM of {} bytes", s.name, bytes, s.hbm_addr,
                       p.target.hbm_bytes));
  }
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  for (const auto& d : p.data) {
    if (d.bytes.empty()) fail(fmt::format("data segment at {:#x} is empty", d.hbm_addr));
    if (!range_fits(d.hbm_addr, d.bytes.size(), p.target.hbm_bytes))
      fail(fmt::format("data segment of {} bytes at {:#x} does not fit in HBM of {} bytes", d.bytes.size(), d.hbm_addr,
                       p.target.hbm_bytes));
    ranges.emplace_back(d.hbm_addr, d.hbm_addr + d.bytes.size());
  }
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i)
    if (ranges[i].first < ranges[i - 1].second)
      fail(fmt::format("data segments at {:#x} and {:#x} overlap", ranges[i - 1].first, ranges[i].first));
}

void check_checks(const Program& p, const std::function<void(const std::string&)>& fail) {
  const auto outs = p.outputs();
  for (size_t i = 0; i < p.checks.size(); ++i) {
    const Check& c = p.checks[i];
    if (int(c.kind) >= kNumCheckKinds) fail(fmt::format("check {} has an unknown kind", i));
    if (c.actual >= outs.size() || c.expected >= outs.size())
      fail(fmt::format("check {} compares outputs {} and {}; the program has {}", i, c.actual, c.expected, outs.size()));
    const TensorSymbol& a = *outs[c.actual];
    const TensorSymbol& e = *outs[c.expected];
    if (a.dtype != e.dtype || a.dims != e.dims) fail(fmt::format("check {} compares '{}' and '{}' of different types", i, a.name, e.name));
    const bool almost = c.kind == CheckKind::expect_almost_eq, close = c.kind == CheckKind::expect_close;
    const bool is_float = a.dtype == Dtype::f16 || a.dtype == Dtype::bf16 || a.dtype == Dtype::f32 || a.dtype == Dtype::f64;
    if ((almost || close) && !is_float) fail(fmt::format("check {} ({}) needs float outputs, not {}", i, check_kind_name(c.kind), dtype_name(a.dtype)));
    if (almost ? !(c.tolerance >= 0 && c.tolerance <= 1e300) : c.tolerance != 0)
      fail(fmt::format("check {} has tolerance {} ({})", i, c.tolerance, almost ? "a finite value >= 0" : "only expect_almost_eq has one"));
    if (close ? c.min_ulp > c.max_ulp : (c.min_ulp != 0 || c.max_ulp != 0))
      fail(fmt::format("check {} has ulp range {}..{} ({})", i, c.min_ulp, c.max_ulp, close ? "min above max" : "only expect_close has one"));
  }
}

// A kernel name or an op: printable, no quote or backslash (it is a string
// in assembly), at most kMaxDebugText characters.
bool valid_debug_text(const std::string& t) {
  if (t.size() > kMaxDebugText) return false;
  for (char c : t)
    if (uint8_t(c) < 0x20 || c == '"' || c == '\\' || uint8_t(c) == 0x7f) return false;
  return true;
}

void check_kernels(const Program& p, const std::function<void(const std::string&)>& fail) {
  if (p.kernels.size() > kMaxKernels) fail(fmt::format("{} kernels: at most {}", p.kernels.size(), kMaxKernels));
  for (size_t k = 0; k < p.kernels.size(); ++k) {
    const KernelInfo& ki = p.kernels[k];
    if (!valid_debug_text(ki.name)) fail(fmt::format("kernel {} has a name that is not printable text of at most {} characters", k, kMaxDebugText));
    if (ki.ops.size() > kMaxKernelOps) fail(fmt::format("kernel {} has {} ops: at most {}", k, ki.ops.size(), kMaxKernelOps));
    for (const auto& o : ki.ops)
      if (!valid_debug_text(o.op)) fail(fmt::format("kernel {} has an op that is not printable text of at most {} characters", k, kMaxDebugText));
  }
  if (p.kernels.empty() ? !p.kernel_of.empty() : p.kernel_of.size() != p.code.size())
    fail(fmt::format("{} instructions have a kernel, the program has {} instructions and {} kernels", p.kernel_of.size(), p.code.size(),
                     p.kernels.size()));
  for (size_t pc = 0; pc < p.kernel_of.size(); ++pc)
    if (p.kernel_of[pc] != kNoKernel && p.kernel_of[pc] >= p.kernels.size())
      fail(fmt::format("instruction {} belongs to kernel {}; there are {}", pc, p.kernel_of[pc], p.kernels.size()));
}

// KERN: u32 kernels, each u16 name_len, name, u32 ops, each u16 len, text,
// u64 work; then the pc map as runs: u32 runs, each u32 count, u32 kernel.
void write_kernels(Writer& w, const Program& p) {
  auto text = [&](const std::string& t) {
    w.u16(uint16_t(t.size()));
    w.bytes(t.data(), t.size());
  };
  w.u32(uint32_t(p.kernels.size()));
  for (const auto& k : p.kernels) {
    text(k.name);
    w.u32(uint32_t(k.ops.size()));
    for (const auto& o : k.ops) text(o.op), w.u64(o.work);
  }
  std::vector<std::pair<uint32_t, uint32_t>> runs;
  for (uint32_t k : p.kernel_of) {
    if (!runs.empty() && runs.back().second == k) ++runs.back().first;
    else runs.push_back({1, k});
  }
  w.u32(uint32_t(runs.size()));
  for (const auto& [n, k] : runs) w.u32(n), w.u32(k);
}

void read_kernels(Reader& r, Program& p) {
  const uint32_t n = r.u32();
  if (n == 0 || n > kMaxKernels) r.fail(fmt::format("{} kernels: 1 to {}", n, kMaxKernels));
  for (uint32_t k = 0; k < n; ++k) {
    KernelInfo ki;
    ki.name = r.str(r.u16());
    const uint32_t ops = r.u32();
    if (ops > kMaxKernelOps) r.fail(fmt::format("kernel {} has {} ops: at most {}", k, ops, kMaxKernelOps));
    for (uint32_t o = 0; o < ops; ++o) {
      KernelOp op;
      op.op = r.str(r.u16());
      op.work = r.u64();
      ki.ops.push_back(std::move(op));
    }
    p.kernels.push_back(std::move(ki));
  }
  const uint32_t runs = r.u32();
  uint32_t last = 0;
  for (uint32_t i = 0; i < runs; ++i) {
    const size_t at = r.pos();
    const uint32_t count = r.u32(), k = r.u32();
    if (count == 0 || count > p.code.size() - p.kernel_of.size() || (i > 0 && k == last))
      r.fail(fmt::format("run {} of the pc map ({} instructions of kernel {}) is not canonical or runs past the code", i, count, k), at);
    p.kernel_of.insert(p.kernel_of.end(), count, k);
    last = k;
  }
}

}  // namespace

const char* check_kind_name(CheckKind k) { return int(k) < kNumCheckKinds ? kCheckKindNames[int(k)] : "?"; }

std::optional<CheckKind> check_kind_from_name(std::string_view name) {
  for (int i = 0; i < kNumCheckKinds; ++i)
    if (name == kCheckKindNames[i]) return CheckKind(i);
  return std::nullopt;
}

const char* dtype_name(Dtype d) {
  auto i = static_cast<size_t>(d);
  return i < kNumDtypes ? kDtypeNames[i] : "?";
}

std::optional<Dtype> dtype_from_name(std::string_view name) {
  for (int i = 0; i < kNumDtypes; ++i)
    if (name == kDtypeNames[i]) return static_cast<Dtype>(i);
  return std::nullopt;
}

size_t dtype_size(Dtype d) {
  auto i = static_cast<size_t>(d);
  return i < kNumDtypes ? kDtypeSizes[i] : 0;
}

double float_bits_value(Dtype d, uint64_t bits) {
  switch (d) {
    case Dtype::f64: {
      double x;
      std::memcpy(&x, &bits, 8);
      return x;
    }
    case Dtype::f32:
    case Dtype::bf16: {  // bf16: the top half of an f32
      const uint32_t b = d == Dtype::f32 ? uint32_t(bits) : uint32_t(bits) << 16;
      float x;
      std::memcpy(&x, &b, 4);
      return x;
    }
    case Dtype::f16: {
      const int e = int(bits >> 10 & 0x1f), m = int(bits & 0x3ff);
      const double s = bits >> 15 & 1 ? -1 : 1;
      if (e == 0x1f) return m ? NAN : s * INFINITY;
      return s * (e ? std::ldexp(1024 + m, e - 25) : std::ldexp(m, -24));
    }
    default: return NAN;
  }
}

const char* symbol_kind_directive(SymbolKind k) {
  switch (k) {
    case SymbolKind::Input: return ".input";
    case SymbolKind::Output: return ".output";
    case SymbolKind::Constant: return ".const";
  }
  return "?";
}

uint64_t TensorSymbol::elements() const {
  uint64_t n = 1;
  for (uint64_t d : dims) n = mul_sat(n, d);
  return n;
}

uint64_t TensorSymbol::bytes() const { return mul_sat(elements(), dtype_size(dtype)); }

uint64_t TensorSymbol::tile_count() const {
  uint64_t n = 1;
  for (uint64_t t : tiles) n = mul_sat(n, t);
  return n;
}

std::vector<uint64_t> TensorSymbol::local_dims() const {
  std::vector<uint64_t> d = dims;
  for (size_t i = 0; i < tiles.size() && i < d.size(); ++i) d[i] /= std::max<uint64_t>(1, tiles[i]);
  return d;
}

uint64_t TensorSymbol::local_bytes() const {
  uint64_t n = dtype_size(dtype);
  for (uint64_t d : local_dims()) n = mul_sat(n, d);
  return n;
}

void copy_tile(const TensorSymbol& s, uint64_t chip, const uint8_t* from, uint8_t* to, bool to_local) {
  const size_t rank = s.dims.size();
  const std::vector<uint64_t> local = s.local_dims();
  // The tile's coordinates (row-major over tiles) and its first element.
  std::vector<uint64_t> at(rank, 0);
  chip = s.tile_index(chip);
  for (size_t i = rank; i-- > 0;) {
    at[i] = chip % s.tiles[i] * local[i];
    chip /= s.tiles[i];
  }
  const uint64_t esz = dtype_size(s.dtype);
  const uint64_t row = rank ? local[rank - 1] * esz : esz;  // contiguous in both
  uint64_t rows = 1;
  for (size_t i = 0; i + 1 < rank; ++i) rows *= local[i];
  std::vector<uint64_t> idx(rank, 0);
  for (uint64_t r = 0; r < rows; ++r) {
    uint64_t g = 0;  // global element offset of the row's first element
    for (size_t i = 0; i < rank; ++i) g = g * s.dims[i] + at[i] + idx[i];
    const uint64_t l = r * row, gb = g * esz;
    if (to_local) std::memcpy(to + l, from + gb, row);
    else std::memcpy(to + gb, from + l, row);
    for (size_t i = rank - 1; i-- > 0;) {  // next row: the index of every axis but the last
      if (++idx[i] < local[i]) break;
      idx[i] = 0;
    }
  }
}

std::vector<const TensorSymbol*> Program::inputs() const {
  std::vector<const TensorSymbol*> v;
  for (const auto& s : symbols)
    if (s.kind == SymbolKind::Input) v.push_back(&s);
  return v;
}

std::vector<const TensorSymbol*> Program::outputs() const {
  std::vector<const TensorSymbol*> v;
  for (const auto& s : symbols)
    if (s.kind == SymbolKind::Output) v.push_back(&s);
  return v;
}

void validate(const Program& p) {
  validate(p.target);
  if (p.code.size() > kMaxInstructions)
    throw Error(fmt::format("{} instructions: at most {} are allowed", p.code.size(), kMaxInstructions));
  if (p.symbols.size() > kMaxSymbols) throw Error(fmt::format("{} symbols: at most {}", p.symbols.size(), kMaxSymbols));
  if (p.data.size() > kMaxDataSegments)
    throw Error(fmt::format("{} data segments: at most {}", p.data.size(), kMaxDataSegments));
  if (p.checks.size() > kMaxChecks) throw Error(fmt::format("{} checks: at most {}", p.checks.size(), kMaxChecks));
  check_symbols_and_data(p, [](const std::string& m) { throw Error(m); });
  check_checks(p, [](const std::string& m) { throw Error(m); });
  check_kernels(p, [](const std::string& m) { throw Error(m); });
  check_heap(p, [](const std::string& m) { throw Error(m); });
}

std::vector<uint8_t> save(const Program& p) {
  validate(p);
  Writer w;
  w.bytes(kProgramMagic, sizeof kProgramMagic);
  std::vector<size_t> present = {kTrgt, kCode, kData, kSyms};
  if (!p.checks.empty()) present.push_back(kChks);
  if (!p.kernels.empty()) present.push_back(kKern);
  const bool tiled = std::any_of(p.symbols.begin(), p.symbols.end(), [](const TensorSymbol& s) { return !s.tiles.empty(); });
  if (tiled) present.push_back(kTile);
  if (p.hbm_peak != 0) present.push_back(kHeap);
  if (std::any_of(p.symbols.begin(), p.symbols.end(), [](const TensorSymbol& s) { return !s.tile_of.empty(); })) present.push_back(kTmap);
  const size_t sections = present.size();
  w.u16(kProgramVersionMajor);
  w.u16(kSectionMinor[present.back()]);
  w.u32(uint32_t(sections));
  const size_t table = w.size();
  for (size_t i = 0; i < sections; ++i) {
    w.u32(kSectionTags[present[i]]);
    w.u32(0);
    w.u64(0);
    w.u64(0);
  }
  for (size_t i = 0; i < sections; ++i) {
    const size_t begin = w.size();
    switch (present[i]) {
      case kTrgt: write_target(w, p.target); break;
      case kCode:
        for (uint64_t word : p.code) w.u64(word);
        break;
      case kData:
        w.u32(uint32_t(p.data.size()));
        for (const auto& d : p.data) {
          w.u64(d.hbm_addr);
          w.u64(d.bytes.size());
          w.bytes(d.bytes.data(), d.bytes.size());
        }
        break;
      case kSyms:
        w.u32(uint32_t(p.symbols.size()));
        for (const auto& s : p.symbols) {
          w.u8(uint8_t(s.kind));
          w.u8(uint8_t(s.dtype));
          w.u8(uint8_t(s.dims.size()));
          w.u8(uint8_t(s.name.size()));
          w.bytes(s.name.data(), s.name.size());
          w.u64(s.hbm_addr);
          for (uint64_t d : s.dims) w.u64(d);
        }
        break;
      case kChks:
        w.u32(uint32_t(p.checks.size()));
        for (const auto& c : p.checks) {
          uint64_t tol = 0;
          std::memcpy(&tol, &c.tolerance, 8);
          w.u8(uint8_t(c.kind));
          w.u32(c.actual);
          w.u32(c.expected);
          w.u64(tol);
          w.u64(c.min_ulp);
          w.u64(c.max_ulp);
        }
        break;
      case kKern: write_kernels(w, p); break;
      case kTile: {
        uint32_t n = 0;
        for (const auto& s : p.symbols) n += s.tiles.empty() ? 0 : 1;
        w.u32(n);
        for (size_t k = 0; k < p.symbols.size(); ++k) {
          if (p.symbols[k].tiles.empty()) continue;
          w.u32(uint32_t(k));
          w.u8(uint8_t(p.symbols[k].tiles.size()));
          for (uint64_t t : p.symbols[k].tiles) w.u64(t);
        }
        break;
      }
      case kHeap: w.u64(p.hbm_peak); break;
      case kTmap: {
        uint32_t n = 0;
        for (const auto& s : p.symbols) n += s.tile_of.empty() ? 0 : 1;
        w.u32(n);
        for (size_t k = 0; k < p.symbols.size(); ++k) {
          if (p.symbols[k].tile_of.empty()) continue;
          w.u32(uint32_t(k));
          for (uint32_t t : p.symbols[k].tile_of) w.u32(t);
        }
        break;
      }
    }
    w.patch_u64(table + i * kSectionEntryBytes + 8, begin);
    w.patch_u64(table + i * kSectionEntryBytes + 16, w.size() - begin);
  }
  return w.take();
}

void save_file(const Program& p, const std::string& path) {
  std::vector<uint8_t> bytes = save(p);
  write_file(path, std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
}

Program load(const uint8_t* bytes, size_t size) {
  Reader h(bytes, 0, size, "header");
  if (size < sizeof kProgramMagic || std::memcmp(bytes, kProgramMagic, sizeof kProgramMagic) != 0) {
    // Text a compiler reads: say so, rather than only that the magic is wrong.
    const std::string_view head(reinterpret_cast<const char*>(bytes), std::min<size_t>(size, 4096));
    const size_t word = head.find_first_not_of(" \t\r\n");
    const auto starts = [&](std::string_view w) { return word != std::string_view::npos && head.substr(word, w.size()) == w; };
    const bool source = starts("HloModule") || starts("module") || starts("func.func") || starts("#loc") || starts("//");
    const bool assembly = !source && (starts(".target") || starts("#") || starts(".kernel"));
    h.fail(source     ? "not a .tpu program (bad magic): it reads as HLO or StableHLO text: compile it with tpuc first"
           : assembly ? "not a .tpu program (bad magic): it reads as assembly: assemble it with tpu-as first"
                      : "not a .tpu program (bad magic)",
           0);
  }
  h.str(sizeof kProgramMagic);
  uint16_t major = h.u16();
  uint16_t minor = h.u16();
  if (major != kProgramVersionMajor || minor > kProgramVersionMinor)
    h.fail(fmt::format("version {}.{} is not supported (this tool reads {}.{})", major, minor, kProgramVersionMajor,
                       kProgramVersionMinor),
           8);
  const uint32_t sections = h.u32();
  if (minor == 0 ? sections != kRequiredSections : (sections <= kRequiredSections || sections > kMaxSections))
    h.fail(fmt::format("{} sections: version 1.0 has {}, later ones from {} to {}", sections, kRequiredSections, kRequiredSections + 1,
                       size_t(kMaxSections)),
           12);

  size_t expected_offset = kHeaderBytes + sections * kSectionEntryBytes;
  size_t begin[kMaxSections] = {}, end[kMaxSections] = {};
  bool has[kMaxSections] = {};
  size_t id = 0;  // the section this entry must be (required) or may be (optional, in order)
  for (size_t i = 0; i < sections; ++i, ++id) {
    size_t at = h.pos();
    uint32_t t = h.u32();
    uint32_t reserved = h.u32();
    uint64_t off = h.u64();
    uint64_t len = h.u64();
    if (i >= kRequiredSections)
      while (id < kMaxSections && kSectionTags[id] != t) ++id;
    if (id >= kMaxSections || t != kSectionTags[id])
      h.fail(i < kRequiredSections ? fmt::format("section {} has tag {:#010x}, expected {}", i, t, kSectionNames[i])
                                   : fmt::format("section {} has tag {:#010x}: not an optional section in its place", i, t),
             at);
    if (reserved != 0) h.fail(fmt::format("section {} has non-zero reserved field", kSectionNames[id]), at + 4);
    if (minor < kSectionMinor[id])
      h.fail(fmt::format("a {} section needs version 1.{}, the file says 1.{}", kSectionNames[id], kSectionMinor[id], minor), at);
    if (off != expected_offset)
      h.fail(fmt::format("section {} starts at {}, expected {}", kSectionNames[id], off, expected_offset), at + 8);
    if (len > size - std::min<uint64_t>(off, size))
      h.fail(fmt::format("section {} ({} bytes at {}) runs past the end of the file ({} bytes)", kSectionNames[id], len,
                         off, size),
             at + 16);
    has[id] = true;
    begin[id] = off;
    end[id] = off + len;
    expected_offset = end[id];
  }
  if (expected_offset != size) h.fail(fmt::format("{} bytes after the last section", size - expected_offset), expected_offset);

  Program p;
  Reader tr(bytes, begin[0], end[0], "TRGT");
  p.target = read_target(tr);

  Reader cr(bytes, begin[1], end[1], "CODE");
  if (cr.remaining() % kInsnBytes != 0) cr.fail(fmt::format("size {} is not a multiple of {}", cr.remaining(), kInsnBytes));
  if (cr.remaining() / kInsnBytes > kMaxInstructions)
    cr.fail(fmt::format("{} instructions: at most {}", cr.remaining() / kInsnBytes, kMaxInstructions));
  p.code.reserve(cr.remaining() / kInsnBytes);
  while (cr.remaining() > 0) p.code.push_back(cr.u64());

  Reader dr(bytes, begin[2], end[2], "DATA");
  uint32_t nseg = dr.u32();
  if (nseg > kMaxDataSegments) dr.fail(fmt::format("{} segments: at most {}", nseg, kMaxDataSegments));
  for (uint32_t i = 0; i < nseg; ++i) {
    DataSegment d;
    d.hbm_addr = dr.u64();
    uint64_t n = dr.u64();
    d.bytes = dr.bytes(n);
    p.data.push_back(std::move(d));
  }
  dr.expect_end();

  Reader sr(bytes, begin[3], end[3], "SYMS");
  uint32_t nsym = sr.u32();
  if (nsym > kMaxSymbols) sr.fail(fmt::format("{} symbols: at most {}", nsym, kMaxSymbols));
  for (uint32_t i = 0; i < nsym; ++i) {
    size_t at = sr.pos();
    TensorSymbol s;
    uint8_t kind = sr.u8();
    uint8_t dtype = sr.u8();
    uint8_t rank = sr.u8();
    uint8_t name_len = sr.u8();
    if (kind > uint8_t(SymbolKind::Constant)) sr.fail(fmt::format("symbol {} has unknown kind {}", i, kind), at);
    if (dtype >= kNumDtypes) sr.fail(fmt::format("symbol {} has unknown dtype {}", i, dtype), at + 1);
    if (rank > kMaxRank) sr.fail(fmt::format("symbol {} has rank {} (at most {})", i, rank, kMaxRank), at + 2);
    s.kind = SymbolKind(kind);
    s.dtype = Dtype(dtype);
    s.name = sr.str(name_len);
    s.hbm_addr = sr.u64();
    for (uint8_t k = 0; k < rank; ++k) s.dims.push_back(sr.u64());
    p.symbols.push_back(std::move(s));
  }
  sr.expect_end();
  if (has[kTile]) {
    Reader tr(bytes, begin[kTile], end[kTile], "TILE");
    const uint32_t n = tr.u32();
    if (n == 0 || n > p.symbols.size()) tr.fail(fmt::format("{} tiled symbols: 1 to {}", n, p.symbols.size()));
    for (uint32_t i = 0; i < n; ++i) {
      const size_t at = tr.pos();
      const uint32_t k = tr.u32();
      const uint8_t rank = tr.u8();
      if (k >= p.symbols.size() || !p.symbols[k].tiles.empty())
        tr.fail(fmt::format("entry {} names symbol {}: not one of the {} symbols, or twice", i, k, p.symbols.size()), at);
      if (rank != p.symbols[k].dims.size())
        tr.fail(fmt::format("symbol '{}' has rank {}, its tiles {}", p.symbols[k].name, p.symbols[k].dims.size(), rank), at + 4);
      for (uint8_t d = 0; d < rank; ++d) p.symbols[k].tiles.push_back(tr.u64());
    }
    tr.expect_end();
  }
  if (has[kTmap]) {
    Reader mr(bytes, begin[kTmap], end[kTmap], "TMAP");
    const uint32_t n = mr.u32();
    if (n == 0 || n > p.symbols.size()) mr.fail(fmt::format("{} mapped symbols: 1 to {}", n, p.symbols.size()));
    for (uint32_t i = 0; i < n; ++i) {
      const size_t at = mr.pos();
      const uint32_t k = mr.u32();
      if (k >= p.symbols.size() || p.symbols[k].tiles.empty() || !p.symbols[k].tile_of.empty())
        mr.fail(fmt::format("entry {} names symbol {}: not a tiled one of the {} symbols, or twice", i, k, p.symbols.size()), at);
      if (mr.remaining() / 4 < p.target.chips) mr.fail(fmt::format("symbol '{}' maps fewer than {} chips", p.symbols[k].name, p.target.chips), at);
      for (uint64_t c = 0; c < p.target.chips; ++c) p.symbols[k].tile_of.push_back(mr.u32());
    }
    mr.expect_end();
  }
  check_symbols_and_data(p, [&](const std::string& m) { throw Error(m); });

  if (has[kChks]) {
    Reader kr(bytes, begin[kChks], end[kChks], "CHKS");
    const uint32_t n = kr.u32();
    if (n == 0 || n > kMaxChecks) kr.fail(fmt::format("{} checks: 1 to {} in version 1.1", n, kMaxChecks));
    for (uint32_t i = 0; i < n; ++i) {
      Check c;
      const uint8_t kind = kr.u8();
      if (kind >= kNumCheckKinds) kr.fail(fmt::format("check {} has unknown kind {}", i, kind), kr.pos() - 1);
      c.kind = CheckKind(kind);
      c.actual = kr.u32();
      c.expected = kr.u32();
      const uint64_t tol = kr.u64();
      std::memcpy(&c.tolerance, &tol, 8);
      c.min_ulp = kr.u64();
      c.max_ulp = kr.u64();
      p.checks.push_back(c);
    }
    kr.expect_end();
    check_checks(p, [&](const std::string& m) { kr.fail(m, begin[kChks]); });
  }
  if (has[kKern]) {
    Reader kr(bytes, begin[kKern], end[kKern], "KERN");
    read_kernels(kr, p);
    kr.expect_end();
    check_kernels(p, [&](const std::string& m) { kr.fail(m, begin[kKern]); });
  }
  if (has[kHeap]) {
    Reader hr(bytes, begin[kHeap], end[kHeap], "HEAP");
    p.hbm_peak = hr.u64();
    hr.expect_end();
    if (p.hbm_peak == 0) hr.fail("peak HBM of 0 bytes: a program without one has no HEAP section", begin[kHeap]);
    check_heap(p, [&](const std::string& m) { hr.fail(m, begin[kHeap]); });
  }
  return p;
}

Program load_file(const std::string& path) {
  const std::string bytes = read_file(path, kMaxBinaryFileBytes);
  try {
    return load(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  } catch (const Error& e) {
    throw Error(fmt::format("{}: {}", path, e.what()));
  }
}

}  // namespace tpu::isa
