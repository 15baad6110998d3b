#include "tpu/isa/machine.h"
#include "tpu/isa/suggest.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <set>

namespace tpu::generated {
extern const std::vector<std::pair<std::string_view, std::string_view>> kDramPresets;
}

namespace tpu::isa {
namespace {

using nlohmann::json;

// hbm.detailed.preset names a device (configs/dram/NAME.json, built in): its
// sections are the defaults, the config's own keys override them.
void expand_dram_preset(json& j, const std::string& where) {
  if (!j.is_object() || !j.contains("hbm") || !j["hbm"].is_object()) return;
  json& h = j["hbm"];
  if (!h.contains("detailed") || !h["detailed"].is_object() || !h["detailed"].contains("preset")) return;
  json& d = h["detailed"];
  if (!d["preset"].is_string()) throw Error(fmt::format("{}: hbm.detailed.preset must be a string", where));
  const std::string name = d["preset"].get<std::string>();
  std::vector<std::string> names;
  for (const auto& [n, text] : generated::kDramPresets) {
    names.emplace_back(n);
    if (n != name) continue;
    json base = json::parse(text);
    base.merge_patch(d);
    d = std::move(base);
    return;
  }
  throw Error(fmt::format("{}: hbm.detailed.preset = '{}' is not a device preset ({})", where, name, fmt::join(names, ", ")));
}

// Reads one object of the config, checking every key it holds is known.
class Section {
 public:
  Section(const json& j, std::string path, const std::string& where) : path_(std::move(path)), where_(where) {
    if (!j.is_object()) fail(path_, "must be an object");
    j_ = &j;
  }
  ~Section() = default;

  template <typename T>
  void uint(const char* key, T& out, uint64_t lo, uint64_t hi, bool required = true) {
    seen_.insert(key);
    auto it = j_->find(key);
    if (it == j_->end()) {
      if (required) fail(name(key), "is missing");
      return;
    }
    // A float is taken when it is a whole number an uint64 holds (1e9 for a clock).
    const bool whole_float = it->is_number_float() && it->get<double>() >= 0 && it->get<double>() < 0x1p64 &&
                             it->get<double>() == std::floor(it->get<double>());
    if (!it->is_number_unsigned() && !whole_float) fail(name(key), "must be a non-negative integer");
    uint64_t v = it->is_number_unsigned() ? it->get<uint64_t>() : uint64_t(it->get<double>());
    if (v < lo || v > hi) fail(name(key), fmt::format("= {} is outside {}..{}", v, lo, hi));
    out = static_cast<T>(v);
  }
  void str(const char* key, std::string& out, const std::set<std::string>& allowed) {
    seen_.insert(key);
    auto it = j_->find(key);
    if (it == j_->end()) fail(name(key), "is missing");
    if (!it->is_string()) fail(name(key), "must be a string");
    out = it->get<std::string>();
    if (!allowed.empty() && !allowed.count(out))
      fail(name(key), fmt::format("= '{}' is not one of: {}", out, fmt::join(allowed, ", ")));
  }
  template <typename Set>
  void str(const char* key, std::string& out, const Set& allowed) {
    str(key, out, std::set<std::string>(allowed.begin(), allowed.end()));
  }
  const json* optional_child(const char* key) {
    seen_.insert(key);
    auto it = j_->find(key);
    return it == j_->end() ? nullptr : &*it;
  }
  const json& child(const char* key) {
    seen_.insert(key);
    auto it = j_->find(key);
    if (it == j_->end()) fail(name(key), "is missing");
    return *it;
  }
  void skip(const char* key) { seen_.insert(key); }
  void finish() {
    for (const auto& [k, v] : j_->items())
      if (!seen_.count(k)) fail(name(k.c_str()), "is not a known parameter");
  }
  std::string name(const char* key) const { return path_.empty() ? key : path_ + "." + key; }
  [[noreturn]] void fail(const std::string& what, const std::string& msg) const {
    throw Error(fmt::format("{}: {} {}", where_, what, msg));
  }

 private:
  const json* j_ = nullptr;
  std::string path_;
  std::string where_;
  std::set<std::string> seen_;
};

}  // namespace

const std::vector<DramField>& dram_fields() {
  using D = DramParams;
  static const std::vector<DramField> f = {
      {"organisation", "channels", &D::channels, 1, 1024, "independent channels of all stacks (a pseudo-channel counts as one)"},
      {"organisation", "ranks", &D::ranks, 1, 16, "ranks (stack IDs) per channel"},
      {"organisation", "bankgroups", &D::bankgroups, 1, 64, "bank groups per rank"},
      {"organisation", "banks_per_group", &D::banks_per_group, 1, 64, "banks per bank group"},
      {"organisation", "rows", &D::rows, 1, 1u << 24, "rows per bank"},
      {"organisation", "row_bytes", &D::row_bytes, 8, 1u << 20, "bytes an activate opens (the page of a channel)"},
      {"organisation", "bus_bits", &D::bus_bits, 8, 1024, "data bus width of a channel"},
      {"organisation", "burst_length", &D::burst_length, 2, 64, "BL: beats a column command moves"},
      {"organisation", "beats_per_clock", &D::beats_per_clock, 2, 8, "data beats a clock: 2 (double data rate), 4 (HBM3)"},
      {"timing", "tck_ps", &D::tck_ps, 100, 100000, "clock period, picoseconds"},
      {"timing", "CL", &D::CL, 1, 255, "read command to first data"},
      {"timing", "CWL", &D::CWL, 0, 255, "write command to first data"},
      {"timing", "tRCDRD", &D::tRCDRD, 1, 255, "activate to read"},
      {"timing", "tRCDWR", &D::tRCDWR, 1, 255, "activate to write"},
      {"timing", "tRP", &D::tRP, 1, 255, "precharge to activate"},
      {"timing", "tRAS", &D::tRAS, 1, 255, "activate to precharge"},
      {"timing", "tRFC", &D::tRFC, 1, 4095, "all-bank refresh to activate"},
      {"timing", "tRFCb", &D::tRFCb, 1, 4095, "per-bank refresh to activate of that bank"},
      {"timing", "tREFI", &D::tREFI, 2, 1u << 20, "all-bank refresh interval"},
      {"timing", "tREFIb", &D::tREFIb, 2, 1u << 20, "per-bank refresh interval (one bank after another)"},
      {"timing", "tRRD_S", &D::tRRD_S, 1, 255, "activate to activate, other bank group"},
      {"timing", "tRRD_L", &D::tRRD_L, 1, 255, "activate to activate, same bank group"},
      {"timing", "tWTR_S", &D::tWTR_S, 0, 255, "end of write data to read, other bank group"},
      {"timing", "tWTR_L", &D::tWTR_L, 0, 255, "end of write data to read, same bank group"},
      {"timing", "tFAW", &D::tFAW, 1, 1023, "window in which a rank takes at most four activates"},
      {"timing", "tWR", &D::tWR, 1, 255, "end of write data to precharge"},
      {"timing", "tCCD_S", &D::tCCD_S, 1, 255, "column command to column command, other bank group"},
      {"timing", "tCCD_L", &D::tCCD_L, 1, 255, "column command to column command, same bank group"},
      {"timing", "tRTP", &D::tRTP, 1, 255, "read to precharge"},
      {"timing", "tRTRS", &D::tRTRS, 0, 255, "rank to rank switch on the data bus"},
      {"timing", "tRPRE", &D::tRPRE, 0, 255, "read preamble"},
      {"timing", "tWPRE", &D::tWPRE, 0, 255, "write preamble"},
      {"controller", "cmd_queue_depth", &D::cmd_queue_depth, 1, 1024, "entries per command queue"},
      {"controller", "trans_queue_depth", &D::trans_queue_depth, 1, 4096, "read transactions waiting per channel"},
      {"controller", "write_buffer", &D::write_buffer, 1, 4096, "writes buffered per channel; full: drain them"},
      {"controller", "write_drain_threshold", &D::write_drain_threshold, 1, 4096,
       "drain the write buffer when it holds more than this many and the command queues are empty"},
      {"controller", "row_hit_cap", &D::row_hit_cap, 1, 1u << 20, "row hits after which a waiting conflict may close the row"},
      {"controller", "dual_command", &D::dual_command, 0, 1, "1: a row and a column command issue in the same cycle (HBM)"},
  };
  return f;
}

const std::vector<DramTextField>& dram_text_fields() {
  using D = DramParams;
  static const std::vector<DramTextField> f = {
      {"address_mapping", &D::address_mapping, {}, "address bits, most significant first: six of ro ra bg ba ch co"},
      {"address_hash", &D::address_hash, {"none", "xor"},
       "xor: the channel is XORed with the bits above it folded to its width, the bank group and bank with the row folded "
       "likewise (strided streams spread over every channel and bank)"},
      {"page_policy", &D::page_policy, {"open", "closed"}, "open: rows stay open; closed: every access auto-precharges"},
      {"queue_structure", &D::queue_structure, {"per_bank", "per_rank"}, "one command queue per bank or per rank"},
      {"refresh", &D::refresh, {"all_bank", "per_bank"}, "REF of a rank every tREFI, or REFb of one bank every tREFIb"},
  };
  return f;
}

#define TPU_CONFIG_FIELD(path, lo, hi, unit, doc)                                          \
  ConfigField {                                                                            \
    #path, [](const MachineConfig& c) { return uint64_t(c.path); },                        \
        [](MachineConfig& c, uint64_t v) { c.path = static_cast<decltype(c.path)>(v); }, lo, hi, unit, doc \
  }

const std::vector<ConfigField>& config_fields() {
  static const std::vector<ConfigField> f = {
      TPU_CONFIG_FIELD(clock_hz, 1000000, 100000000000ull, "Hz", "core clock"),
      TPU_CONFIG_FIELD(core.queue_depth, 1, 1024, "entries", "entries of each unit's instruction queue"),
      TPU_CONFIG_FIELD(core.branch_penalty, 0, 64, "cycles", "bubbles after a taken branch"),
      TPU_CONFIG_FIELD(core.issue_width, 1, 16, "instructions", "instructions the scalar unit issues per cycle ([timing.md](timing.md))"),
      TPU_CONFIG_FIELD(vpu.latency.alu, 1, 256, "cycles", "result latency of the `alu` class: add, compare, select, logic, moves, conversions"),
      TPU_CONFIG_FIELD(vpu.latency.mul, 1, 256, "cycles", "... of `mul`"),
      TPU_CONFIG_FIELD(vpu.latency.div, 1, 256, "cycles", "... of `div`: divide, sqrt, rsqrt, pow"),
      TPU_CONFIG_FIELD(vpu.latency.transcendental, 1, 256, "cycles", "... of `transcendental`: exp, log, tanh, logistic"),
      TPU_CONFIG_FIELD(vpu.latency.load, 1, 256, "cycles", "... of `load`: vld.*, vlda"),
      TPU_CONFIG_FIELD(vpu.latency.store, 1, 256, "cycles", "... of `store`: vst.*, vsta"),
      TPU_CONFIG_FIELD(vpu.latency.reduce, 1, 256, "cycles", "... of `reduce`: cross-lane reductions"),
      TPU_CONFIG_FIELD(vpu.issue.width, 1, 16, "instructions", "VPU instructions dispatched per cycle"),
      TPU_CONFIG_FIELD(vpu.issue.alu, 1, 16, "instructions", "of those, at most this many arithmetic ones"),
      TPU_CONFIG_FIELD(vpu.issue.load, 1, 16, "instructions", "... loads"),
      TPU_CONFIG_FIELD(vpu.issue.store, 1, 16, "instructions", "... stores"),
      TPU_CONFIG_FIELD(dma.max_outstanding, 1, 1024, "transfers", "DMA transfers in flight"),
      TPU_CONFIG_FIELD(dma.burst_bytes, 1, 1u << 20, "bytes", "largest HBM burst: a transfer is cut into bursts of at most this"),
      TPU_CONFIG_FIELD(dma.bursts_per_cycle, 1, 64, "bursts", "bursts the DMA engine sends to HBM per cycle"),
      TPU_CONFIG_FIELD(hbm.ideal.latency_ns, 0, 100000, "ns", "`ideal` model: latency of every burst"),
      TPU_CONFIG_FIELD(hbm.simple.bandwidth_bytes_per_s, 1000000, 1000000000000000ull, "bytes/s", "`simple` model: peak bandwidth"),
      TPU_CONFIG_FIELD(hbm.simple.latency_ns, 0, 100000, "ns", "`simple` model: latency added after a burst leaves the server"),
      TPU_CONFIG_FIELD(noc.link_bytes_per_cycle, 1, 1u << 20, "bytes",
                       "bytes a core's port into the on-chip crossbar carries per cycle, each way (`detailed` model)"),
      TPU_CONFIG_FIELD(noc.hop_latency, 0, 1000, "cycles", "cycles a request, and its data, spend crossing"),
      TPU_CONFIG_FIELD(noc.credits, 1, 4096, "requests", "requests a channel's input buffer holds (credit-based flow control)"),
      TPU_CONFIG_FIELD(ici.x, 0, 4096, "chips", "chips along the system's first axis; 0 (with y and z): the preset's shape for target.chips"),
      TPU_CONFIG_FIELD(ici.y, 0, 4096, "chips", "... along the second axis"),
      TPU_CONFIG_FIELD(ici.z, 0, 4096, "chips", "... along the third axis"),
      TPU_CONFIG_FIELD(ici.dims, 1, 3, "axes", "axes of the preset's shape: 1 a ring, 2 a 2-D torus, 3 a 3-D torus"),
      TPU_CONFIG_FIELD(ici.wrap, 0, 1, "", "1: every axis of more than two chips wraps around (ring, torus); 0: a mesh"),
      TPU_CONFIG_FIELD(ici.link_bandwidth_bytes_per_s, 1000000, 100000000000000ull, "bytes/s", "what one link carries in each direction"),
      TPU_CONFIG_FIELD(ici.hop_latency_ns, 0, 1000000, "ns", "time a packet takes to cross one link (and a credit to come back)"),
      TPU_CONFIG_FIELD(ici.packet_bytes, 16, 65536, "bytes", "largest packet: a transfer is cut into packets of at most this"),
      TPU_CONFIG_FIELD(ici.buffer_packets, 1, 65536, "packets", "packets a link's receiver buffers per virtual channel (its credits)"),
  };
  return f;
}
#undef TPU_CONFIG_FIELD

namespace {

// Reads the table's parameters that sit directly in section `path`.
void read_fields(Section& s, const std::string& path, MachineConfig& c) {
  for (const ConfigField& f : config_fields()) {
    const std::string key = f.key;
    const size_t dot = key.rfind('.');
    if ((dot == std::string::npos ? std::string() : key.substr(0, dot)) != path) continue;
    uint64_t v = 0;
    s.uint(key.c_str() + (dot == std::string::npos ? 0 : dot + 1), v, f.min, f.max);
    f.set(c, v);
  }
}

bool pow2(uint64_t v) { return v && !(v & (v - 1)); }

void validate_dram(const DramParams& d, const std::string& where) {
  auto fail = [&](const std::string& m) { throw Error(fmt::format("{}: hbm.detailed: {}", where, m)); };
  for (auto [name, v] : {std::pair<const char*, uint64_t>{"channels", d.channels}, {"ranks", d.ranks}, {"bankgroups", d.bankgroups},
                         {"banks_per_group", d.banks_per_group}, {"rows", d.rows}, {"row_bytes", d.row_bytes}})
    if (!pow2(v)) fail(fmt::format("organisation.{} = {} is not a power of two", name, v));
  if (d.bus_bits % 8 || !pow2(d.request_bytes()))
    fail(fmt::format("a request (bus_bits / 8 x burst_length = {} bytes) must be a power of two", d.request_bytes()));
  if (d.burst_length % d.beats_per_clock)
    fail(fmt::format("organisation.burst_length = {} is not a multiple of beats_per_clock = {}", d.burst_length, d.beats_per_clock));
  if (d.row_bytes < d.request_bytes())
    fail(fmt::format("organisation.row_bytes = {} is less than a request ({} bytes)", d.row_bytes, d.request_bytes()));
  std::string m = d.address_mapping;
  std::vector<std::string> want = {"ro", "ra", "bg", "ba", "ch", "co"};
  bool ok = m.size() == 12;
  for (size_t i = 0; ok && i < 12; i += 2) {
    auto it = std::find(want.begin(), want.end(), m.substr(i, 2));
    if (it == want.end()) ok = false;
    else want.erase(it);
  }
  if (!ok) fail(fmt::format("controller.address_mapping = '{}' must name each of ro ra bg ba ch co once", m));
  if (d.tRFC >= d.tREFI) fail(fmt::format("timing.tRFC = {} must be less than tREFI = {}", d.tRFC, d.tREFI));
  if (d.tRAS < d.tRCDRD) fail(fmt::format("timing.tRAS = {} is less than tRCDRD = {}", d.tRAS, d.tRCDRD));
  if (d.write_drain_threshold > d.write_buffer)
    fail(fmt::format("controller.write_drain_threshold = {} exceeds write_buffer = {}", d.write_drain_threshold, d.write_buffer));
}

}  // namespace

uint64_t MachineConfig::hbm_latency_cycles() const {
  return (uint64_t(hbm.simple.latency_ns) * clock_hz + 999999999) / 1000000000;
}

uint64_t MachineConfig::hbm_bytes_per_cycle_fp() const {
  unsigned __int128 fp = (unsigned __int128)hbm.simple.bandwidth_bytes_per_s * 1024 / clock_hz;
  return fp < 1 ? 1 : uint64_t(fp);
}

double MachineConfig::hbm_peak_bytes_per_s() const {
  if (hbm.model == "detailed") return hbm.detailed.peak_bytes_per_s();
  if (hbm.model == "simple") return double(hbm.simple.bandwidth_bytes_per_s);
  return 0;
}

double MachineConfig::hbm_unloaded_latency_ns() const {
  if (hbm.model == "detailed") {
    const DramParams& d = hbm.detailed;
    return double(d.tRP + d.tRCDRD + d.CL + d.burst_cycles()) * d.tck_ps / 1000.0;
  }
  return hbm.model == "simple" ? hbm.simple.latency_ns : hbm.ideal.latency_ns;
}

double MachineConfig::dma_latency_cycles() const {
  return hbm_unloaded_latency_ns() * double(clock_hz) / 1e9 + kDmaEngineCycles;
}

std::array<uint32_t, 3> MachineConfig::ici_shape() const {
  if (ici.x != 0) return {ici.x, ici.y, ici.z};
  // The prime factors of the count, largest first, each to the shortest axis.
  std::array<uint32_t, 3> s = {1, 1, 1};
  std::vector<uint32_t> primes;
  uint64_t n = target.chips;
  for (uint32_t p = 2; uint64_t(p) * p <= n; ++p)
    for (; n % p == 0; n /= p) primes.push_back(p);
  if (n > 1) primes.push_back(uint32_t(n));
  const size_t axes = std::min<size_t>(3, std::max<uint32_t>(1, ici.dims));
  for (auto it = primes.rbegin(); it != primes.rend(); ++it) {
    size_t a = 0;
    for (size_t i = 1; i < axes; ++i)
      if (s[i] < s[a]) a = i;
    s[a] *= *it;
  }
  std::sort(s.begin(), s.end(), std::greater<>());  // the unused axes stay 1, last
  return s;
}

uint64_t MachineConfig::ici_bytes_per_cycle_fp() const {
  unsigned __int128 fp = (unsigned __int128)ici.link_bandwidth_bytes_per_s * 1024 / clock_hz;
  return fp < 1 ? 1 : uint64_t(fp);
}

uint64_t MachineConfig::ici_hop_cycles() const { return (uint64_t(ici.hop_latency_ns) * clock_hz + 999999999) / 1000000000; }

std::array<uint32_t, 3> parse_topology(const std::string& text) {
  std::array<uint32_t, 3> s = {1, 1, 1};
  size_t axis = 0, start = 0;
  for (;;) {
    const size_t x = std::min(text.find('x', start), text.size());
    const std::string part = text.substr(start, x - start);
    if (axis == 3 || part.empty() || part.size() > 4 || part.find_first_not_of("0123456789") != std::string::npos ||
        std::stoul(part) < 1 || std::stoul(part) > 4096)
      throw Error(fmt::format("topology '{}' is not of the form X, XxY or XxYxZ (each 1..4096)", text));
    s[axis++] = uint32_t(std::stoul(part));
    if (x == text.size()) break;
    start = x + 1;
  }
  return s;
}

std::string topology_text(const std::array<uint32_t, 3>& s) {
  if (s[2] > 1) return fmt::format("{}x{}x{}", s[0], s[1], s[2]);
  return s[1] > 1 ? fmt::format("{}x{}", s[0], s[1]) : fmt::format("{}", s[0]);
}

VpuSlot vpu_slot(VpuClass c) {
  switch (c) {
    case VpuClass::Load: return VpuSlot::Load;
    case VpuClass::Store: return VpuSlot::Store;
    case VpuClass::Transpose: return VpuSlot::Whole;
    default: return VpuSlot::Alu;
  }
}

uint32_t MachineConfig::vpu_latency(VpuClass c) const {
  const VpuLatency& l = vpu.latency;
  switch (c) {
    case VpuClass::Alu: return l.alu;
    case VpuClass::Mul: return l.mul;
    case VpuClass::Div: return l.div;
    case VpuClass::Transcendental: return l.transcendental;
    case VpuClass::Load: return l.load;
    case VpuClass::Store: return l.store;
    case VpuClass::Reduce: return l.reduce;
    case VpuClass::Transpose: return uint32_t(target.vpu_lanes);
    case VpuClass::None: break;
  }
  return 1;
}

MachineConfig config_from_json(const std::string& text, const std::string& where) {
  MachineConfig c;
  c.target = target_from_json(text, where);
  json j = json::parse(text);  // already validated as JSON above
  expand_dram_preset(j, where);
  Section top(j, "", where);
  top.skip("name");
  top.skip("target");
  if (j.contains("description")) {
    top.skip("description");
    if (!j["description"].is_string()) top.fail("description", "must be a string");
    c.description = j["description"].get<std::string>();
  }
  read_fields(top, "", c);
  for (const char* sec : {"core", "dma", "noc"}) {
    Section s(top.child(sec), sec, where);
    read_fields(s, sec, c);
    s.finish();
  }
  {
    Section v(top.child("vpu"), "vpu", where);
    for (const char* sub : {"latency", "issue"}) {
      const std::string path = std::string("vpu.") + sub;
      Section s(v.child(sub), path, where);
      read_fields(s, path, c);
      s.finish();
    }
    v.finish();
  }
  if (const json* s = top.optional_child("ici")) {
    Section i(*s, "ici", where);
    read_fields(i, "ici", c);
    i.finish();
  }
  {
    Section h(top.child("hbm"), "hbm", where);
    h.str("model", c.hbm.model, {"ideal", "simple", "detailed"});
    for (auto [sub, has] : {std::pair{"ideal", &c.hbm.has_ideal}, {"simple", &c.hbm.has_simple}})
      if (const json* s = h.optional_child(sub)) {
        const std::string path = std::string("hbm.") + sub;
        Section i(*s, path, where);
        read_fields(i, path, c);
        i.finish();
        *has = true;
      }
    if (const json* s = h.optional_child("detailed")) {
      Section d(*s, "hbm.detailed", where);
      DramParams& p = c.hbm.detailed;
      if (s->contains("preset")) {
        d.skip("preset");
        p.preset = s->at("preset").is_string() ? s->at("preset").get<std::string>() : "";
      }
      if (s->contains("description")) {
        d.skip("description");
        if (!s->at("description").is_string()) d.fail("hbm.detailed.description", "must be a string");
        p.description = s->at("description").get<std::string>();
      }
      for (const char* sec : {"organisation", "timing", "controller"}) {
        Section part(d.child(sec), fmt::format("hbm.detailed.{}", sec), where);
        for (const auto& f : dram_fields())
          if (std::string(f.section) == sec) part.uint(f.key, p.*f.member, f.min, f.max);
        if (std::string(sec) == "controller")
          for (const auto& f : dram_text_fields()) part.str(f.key, p.*f.member, f.allowed);
        part.finish();
      }
      d.finish();
      validate_dram(p, where);
      if (p.capacity_bytes() < c.target.hbm_bytes)
        h.fail("detailed", fmt::format("holds {} bytes, less than target.hbm_bytes = {}", p.capacity_bytes(), c.target.hbm_bytes));
      c.hbm.has_detailed = true;
    }
    const bool have = c.hbm.model == "ideal" ? c.hbm.has_ideal : c.hbm.model == "simple" ? c.hbm.has_simple : c.hbm.has_detailed;
    if (!have) h.fail(c.hbm.model.c_str(), fmt::format("is missing: hbm.model = '{}' needs its section", c.hbm.model));
    h.finish();
  }
  top.finish();
  const IciParams& ici = c.ici;
  if ((ici.x == 0) != (ici.y == 0) || (ici.x == 0) != (ici.z == 0))
    throw Error(fmt::format("{}: ici.x, ici.y and ici.z are all 0 (the preset's shape) or all set, not {}, {}, {}", where, ici.x, ici.y, ici.z));
  const auto shape = c.ici_shape();
  if (uint64_t(shape[0]) * shape[1] * shape[2] != c.target.chips)
    throw Error(fmt::format("{}: the ICI topology {} holds {} chips, target.chips = {}", where, topology_text(shape),
                            uint64_t(shape[0]) * shape[1] * shape[2], c.target.chips));
  return c;
}

namespace {

// Every parameter's dotted path in a config.
void collect_keys(const json& j, const std::string& prefix, std::vector<std::string>& out) {
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string key = prefix.empty() ? it.key() : prefix + "." + it.key();
    if (it->is_object()) collect_keys(*it, key, out);
    else out.push_back(key);
  }
}
std::vector<std::string> parameter_keys(const json& j) {
  std::vector<std::string> out;
  collect_keys(j, "", out);
  return out;
}

// Replaces the value at a dotted path that the config already has.
void apply_setting(json& j, const std::string& setting) {
  const size_t eq = setting.find('=');
  if (eq == std::string::npos || eq == 0) throw Error(fmt::format("--set '{}' is not KEY=VALUE", setting));
  const std::string key = setting.substr(0, eq), text = setting.substr(eq + 1);
  json* at = &j;
  for (size_t start = 0; start <= key.size();) {
    const size_t dot = std::min(key.find('.', start), key.size());
    const std::string part = key.substr(start, dot - start);
    if (!at->is_object() || !at->contains(part))
      throw Error(fmt::format("--set {}: the config has no parameter '{}'{}", setting, key, did_you_mean(key, parameter_keys(j))));
    at = &(*at)[part];
    start = dot + 1;
  }
  if (at->is_object()) throw Error(fmt::format("--set {}: '{}' is a section, not a parameter", setting, key));
  // A number or a JSON literal as written; anything else is a string (hbm.model=simple).
  json value = json::parse(text, nullptr, false);
  *at = value.is_discarded() ? json(text) : value;
}

// A base's values with a file's laid over them (sections merged key by key).
void lay_over(json& base, const json& over) {
  for (auto it = over.begin(); it != over.end(); ++it) {
    if (it->is_object() && base.contains(it.key()) && base[it.key()].is_object()) lay_over(base[it.key()], *it);
    else base[it.key()] = *it;
  }
}
// The text of a preset, or of a config file with its base laid under it;
// `from` is the file naming it as its base ("" for --config).
std::string config_text(const std::string& name, const std::string& from = "", int depth = 0) {
  if (auto preset = preset_text(name)) return std::string(*preset);
  const auto names = preset_names();
  if (name.find('/') == std::string::npos && name.find(".json") == std::string::npos) {
    if (!from.empty()) throw Error(fmt::format("{}: base '{}' is not a preset{}", from, name, did_you_mean(name, names)));
    const std::string guess = closest(name, names);
    throw Error(fmt::format("unknown preset '{}' ({}presets: {})", name, guess.empty() ? "" : "did you mean '" + guess + "'? ",
                            fmt::join(names, ", ")));
  }
  const std::string path = from.empty() || !std::filesystem::path(name).is_relative()
                               ? name
                               : (std::filesystem::path(from).parent_path() / name).string();
  const std::string text = read_text_file(path);
  json j = json::parse(text, nullptr, false);
  if (!j.is_object() || !j.contains("base")) return text;
  if (!j["base"].is_string()) throw Error(fmt::format("{}: \"base\" must be a preset's name or a config file's path", path));
  if (depth == 8) throw Error(fmt::format("{}: more than 8 bases in a row (a config that is its own base?)", path));
  json merged = json::parse(config_text(j["base"].get<std::string>(), path, depth + 1), nullptr, false);
  if (!merged.is_object()) throw Error(fmt::format("{}: base {} is not a JSON object", path, j["base"].get<std::string>()));
  j.erase("base");
  lay_over(merged, j);
  return merged.dump();
}

}  // namespace

MachineConfig load_config(const std::string& preset_or_path, const std::vector<std::string>& settings) {
  const std::string text = config_text(preset_or_path);
  const std::string where = preset_text(preset_or_path) ? fmt::format("preset '{}'", preset_or_path) : preset_or_path;
  if (settings.empty()) return config_from_json(text, where);
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    throw Error(fmt::format("{}: not valid JSON: {}", where, e.what()));
  }
  expand_dram_preset(j, where);
  for (const std::string& s : settings) apply_setting(j, s);
  return config_from_json(j.dump(), fmt::format("{} with --set {}", where, fmt::join(settings, " --set ")));
}

std::string MachineConfig::to_json() const {
  json t;
  for (const auto& f : target_fields()) t[f.key] = target.*f.member;
  json j = {{"name", target.name}, {"description", description}, {"target", t}, {"hbm", {{"model", hbm.model}}}};
  for (const ConfigField& f : config_fields()) {
    const std::string key = f.key;
    if ((key.rfind("hbm.ideal.", 0) == 0 && !hbm.has_ideal) || (key.rfind("hbm.simple.", 0) == 0 && !hbm.has_simple)) continue;
    std::string ptr = "/" + key;
    std::replace(ptr.begin(), ptr.end(), '.', '/');
    j[json::json_pointer(ptr)] = f.get(*this);
  }
  json& h = j["hbm"];
  if (hbm.has_detailed) {
    json d;
    if (!hbm.detailed.preset.empty()) d["preset"] = hbm.detailed.preset;
    if (!hbm.detailed.description.empty()) d["description"] = hbm.detailed.description;
    for (const auto& f : dram_fields()) d[f.section][f.key] = hbm.detailed.*f.member;
    for (const auto& f : dram_text_fields()) d["controller"][f.key] = hbm.detailed.*f.member;
    h["detailed"] = d;
  }
  return j.dump(2) + "\n";
}

}  // namespace tpu::isa
