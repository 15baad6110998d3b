#include "tpu/isa/npy.h"

#include <fmt/format.h>

#include "tpu/isa/file.h"

namespace tpu::isa {
namespace {

// Parses numpy's header dict: {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
void parse_header(const std::string& h, NpyArray& a, const std::string& path) {
  auto fail = [&](const std::string& what) { throw Error(fmt::format("{}: bad .npy header: {}", path, what)); };
  auto value_of = [&](const std::string& key) {
    auto k = h.find("'" + key + "'");
    if (k == std::string::npos) fail("no '" + key + "'");
    auto colon = h.find(':', k);
    if (colon == std::string::npos) fail("no ':' after '" + key + "'");
    size_t v = colon + 1;
    while (v < h.size() && h[v] == ' ') ++v;
    return v;
  };
  size_t d = value_of("descr");
  if (d >= h.size() || h[d] != '\'') fail("descr is not a string");
  auto end = h.find('\'', d + 1);
  if (end == std::string::npos) fail("unterminated descr");
  a.descr = h.substr(d + 1, end - d - 1);
  size_t f = value_of("fortran_order");
  if (h.compare(f, 5, "False") != 0) fail("fortran_order arrays are not supported (save in C order)");
  size_t s = value_of("shape");
  if (s >= h.size() || h[s] != '(') fail("shape is not a tuple");
  size_t close = h.find(')', s);
  if (close == std::string::npos) fail("unterminated shape");
  std::string inner = h.substr(s + 1, close - s - 1);
  size_t i = 0;
  while (i < inner.size()) {
    while (i < inner.size() && (inner[i] == ' ' || inner[i] == ',')) ++i;
    if (i >= inner.size()) break;
    if (!std::isdigit(static_cast<unsigned char>(inner[i]))) fail("shape has a non-integer");
    uint64_t v = 0;
    while (i < inner.size() && std::isdigit(static_cast<unsigned char>(inner[i]))) {
      if (v > (UINT64_MAX - 9) / 10) fail("dimension too large");
      v = v * 10 + uint64_t(inner[i++] - '0');
    }
    if (a.shape.size() == kMaxRank) fail("rank above 8");
    a.shape.push_back(v);
  }
}

size_t descr_size(const std::string& descr) {
  if (descr.size() < 3 || (descr[0] != '<' && descr[0] != '|')) return 0;
  if (descr[1] != 'f' && descr[1] != 'i' && descr[1] != 'u' && descr[1] != 'b') return 0;
  if (descr.size() != 3 || descr[2] < '1' || descr[2] > '8') return 0;
  size_t n = size_t(descr[2] - '0');
  return (n == 1 || n == 2 || n == 4 || n == 8) ? n : 0;
}

}  // namespace

NpyArray read_npy(const std::string& path) {
  const std::string b = read_file(path, kMaxBinaryFileBytes);
  auto byte = [&](size_t i) { return size_t(uint8_t(b[i])); };
  if (b.size() < 10 || std::string(b.begin(), b.begin() + 6) != "\x93NUMPY")
    throw Error(fmt::format("{}: not a .npy file (bad magic)", path));
  const int major = int(byte(6));
  size_t header_len, header_at;
  if (major == 1) {
    header_len = byte(8) | byte(9) << 8;
    header_at = 10;
  } else if (major == 2 || major == 3) {
    if (b.size() < 12) throw Error(fmt::format("{}: truncated .npy header", path));
    header_len = byte(8) | byte(9) << 8 | byte(10) << 16 | byte(11) << 24;
    header_at = 12;
  } else {
    throw Error(fmt::format("{}: .npy format version {} is not supported", path, major));
  }
  if (header_len > b.size() - header_at) throw Error(fmt::format("{}: truncated .npy header", path));
  NpyArray a;
  parse_header(std::string(b.begin() + long(header_at), b.begin() + long(header_at + header_len)), a, path);
  const size_t esize = descr_size(a.descr);
  if (esize == 0) throw Error(fmt::format("{}: dtype '{}' is not supported (little-endian int, uint, float, bool)", path, a.descr));
  uint64_t n = 1;
  for (uint64_t d : a.shape) n = (d != 0 && n > UINT64_MAX / d) ? UINT64_MAX : n * d;
  const size_t at = header_at + header_len;
  if (n > (b.size() - at) / esize || n * esize != b.size() - at)
    throw Error(fmt::format("{}: holds {} data bytes, its header promises {} elements of {} bytes", path, b.size() - at, n, esize));
  a.data.assign(b.begin() + long(at), b.end());
  return a;
}

void write_npy(const std::string& path, const NpyArray& a) {
  // "(2, 3)"; a 1-tuple keeps its comma: "(4,)"; a scalar is "()".
  std::string shape = fmt::format("{}", fmt::join(a.shape, ", "));
  if (a.shape.size() == 1) shape += ",";
  std::string header = fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': ({}), }}", a.descr, shape);
  const size_t unpadded = 10 + header.size() + 1;
  header.append((64 - unpadded % 64) % 64, ' ');
  header += '\n';
  std::string bytes("\x93NUMPY\x01\x00", 8);
  bytes += char(header.size() & 0xff);
  bytes += char(header.size() >> 8);
  bytes += header;
  bytes.append(reinterpret_cast<const char*>(a.data.data()), a.data.size());
  write_file(path, bytes);
}

std::string npy_descr(Dtype d) {
  switch (d) {
    case Dtype::pred: return "|b1";
    case Dtype::s8: return "|i1";
    case Dtype::u8: return "|u1";
    case Dtype::s16: return "<i2";
    case Dtype::u16:
    case Dtype::bf16: return "<u2";
    case Dtype::f16: return "<f2";
    case Dtype::s32: return "<i4";
    case Dtype::u32: return "<u4";
    case Dtype::f32: return "<f4";
    case Dtype::s64: return "<i8";
    case Dtype::u64: return "<u8";
    case Dtype::f64: return "<f8";
  }
  return "?";
}

std::vector<uint8_t> npy_to_tensor(const NpyArray& a, const TensorSymbol& sym, const std::string& where) {
  const std::string want = npy_descr(sym.dtype);
  bool ok = a.descr == want || (sym.dtype == Dtype::bf16 && a.descr == "<i2") ||
            (sym.dtype == Dtype::pred && (a.descr == "|u1" || a.descr == "|i1"));
  if (!ok)
    throw Error(fmt::format("{}: dtype '{}' does not match {} '{}' of dtype {} (expected '{}')", where, a.descr,
                            symbol_kind_directive(sym.kind) + 1, sym.name, dtype_name(sym.dtype), want));
  if (a.shape != sym.dims)
    throw Error(fmt::format("{}: shape ({}) does not match {} '{}' of shape ({})", where, fmt::join(a.shape, ", "),
                            symbol_kind_directive(sym.kind) + 1, sym.name, fmt::join(sym.dims, ", ")));
  return a.data;
}

NpyArray tensor_to_npy(const TensorSymbol& sym, std::vector<uint8_t> bytes) {
  return NpyArray{npy_descr(sym.dtype), sym.dims, std::move(bytes)};
}

}  // namespace tpu::isa
