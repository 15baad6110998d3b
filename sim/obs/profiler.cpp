#include "profiler.h"

#include <fmt/format.h>

#include <algorithm>

#include "tpu/isa/isa.h"

namespace tpu::sim {

namespace {

// A kernel is bound by what comes nearest its peak: the MXUs or the VPU
// (compute), HBM (memory) or the scalar unit issuing instructions (issue);
// when nothing reaches half of its peak, by latency (waiting on
// dependences). docs/stats.md.
constexpr double kSaturated = 0.5;

}  // namespace

Profiler::Profiler(const isa::Program& program, const isa::MachineConfig& config)
    : program_(program), config_(config), tracks_(int(config.target.cores) * isa::kUnitSlots) {
  is_wait_.resize(program.code.size());
  for (size_t pc = 0; pc < program.code.size(); ++pc) {
    const auto d = isa::decode(program.code[pc]);
    is_wait_[pc] = d && d->op == isa::Opcode::WAIT;
  }
  kernels_.resize(program.kernels.size());
  for (auto& k : kernels_) k.units.resize(size_t(tracks_));
}

void Profiler::instruction(int track, uint32_t pc, uint64_t start, uint64_t end, uint64_t work) {
  if (pc >= program_.kernel_of.size() || program_.kernel_of[pc] == isa::kNoKernel || track < 0 || track >= tracks_) return;
  Kernel& k = kernels_[program_.kernel_of[pc]];
  k.first = std::min(k.first, start);
  k.last = std::max(k.last, end);
  ++k.instructions;
  const int unit = track % isa::kUnitSlots;
  if (unit == isa::kUnitDma) k.hbm_bytes += work;
  if (unit >= isa::kUnitMxu0) k.macs += work;
  if (is_wait_[pc]) return;
  Busy& b = k.units[size_t(track)];
  const uint64_t from = std::max(start, b.covered);
  if (end > from) b.cycles += end - from;
  b.covered = std::max(b.covered, end);
}

nlohmann::json Profiler::kernels_json() const {
  using nlohmann::json;
  const auto& t = config_.target;
  const double peak_macs = double(t.mxu_dim * t.mxu_dim * t.mxus_per_core * t.cores);
  const double peak_bytes = config_.hbm_peak_bytes_per_s() / double(config_.clock_hz);  // 0: ideal memory, no roof
  json out = json::array();
  for (size_t i = 0; i < kernels_.size(); ++i) {
    const Kernel& k = kernels_[i];
    const isa::KernelInfo& info = program_.kernels[i];
    json ops = json::array();
    for (const auto& o : info.ops) ops.push_back(o.op);
    const uint64_t cycles = k.instructions ? k.last - k.first : 0;
    json busy = json::object();
    double vpu = 0, scalar = 0;
    for (int tr = 0; tr < tracks_; ++tr) {
      const uint64_t c = k.units[size_t(tr)].cycles;
      if (!c) continue;
      busy[fmt::format("core{}.{}", track_core(tr), unit_name(track_unit(tr)))] = c;
      const double frac = cycles ? double(c) / double(cycles) : 0;
      if (track_unit(tr) == 2) vpu = std::max(vpu, frac);
      if (track_unit(tr) == 0) scalar = std::max(scalar, frac);
    }
    const double mxu = cycles ? double(k.macs) / (double(cycles) * peak_macs) : 0;
    const double hbm = cycles && peak_bytes > 0 ? double(k.hbm_bytes) / (double(cycles) * peak_bytes) : 0;
    const std::pair<const char*, double> limits[] = {{"compute", std::max(mxu, vpu)}, {"memory", hbm}, {"issue", scalar}};
    const auto* top = &limits[0];
    for (const auto& l : limits)
      if (l.second > top->second) top = &l;
    const double intensity = k.hbm_bytes ? double(k.macs) / double(k.hbm_bytes) : 0;
    out.push_back({
        {"index", i},
        {"name", info.name},
        {"ops", ops},
        {"first_cycle", k.instructions ? k.first : 0},
        {"last_cycle", k.last},
        {"cycles", cycles},
        {"instructions", k.instructions},
        {"busy_cycles", busy},
        {"macs", k.macs},
        {"mxu_utilization", mxu},
        {"vpu_busy", vpu},
        {"hbm_bytes", k.hbm_bytes},
        {"hbm_bytes_per_cycle", cycles ? double(k.hbm_bytes) / double(cycles) : 0.0},
        {"hbm_bandwidth_bytes_per_s", cycles ? double(k.hbm_bytes) / double(cycles) * double(config_.clock_hz) : 0.0},
        {"hbm_bandwidth_utilization", hbm},
        {"bound", top->second >= kSaturated ? top->first : "latency"},
        {"roofline",
         {{"macs_per_hbm_byte", intensity},
          {"peak_macs_per_cycle", peak_macs},
          {"peak_hbm_bytes_per_cycle", peak_bytes},
          {"ridge_macs_per_hbm_byte", peak_bytes > 0 ? peak_macs / peak_bytes : 0.0},
          {"attainable_macs_per_cycle", k.hbm_bytes && peak_bytes > 0 ? std::min(peak_macs, intensity * peak_bytes) : peak_macs},
          {"achieved_macs_per_cycle", cycles ? double(k.macs) / double(cycles) : 0.0}}},
    });
  }
  return out;
}

nlohmann::json Profiler::ops_json() const {
  using nlohmann::json;
  // Each kernel's cycles, shared among its ops by their work (equally when
  // none is given).
  std::vector<std::pair<std::string, std::pair<double, std::vector<size_t>>>> ops;
  auto entry = [&](const std::string& name) -> std::pair<double, std::vector<size_t>>& {
    for (auto& o : ops)
      if (o.first == name) return o.second;
    ops.push_back({name, {0.0, {}}});
    return ops.back().second;
  };
  for (size_t i = 0; i < kernels_.size(); ++i) {
    const auto& info = program_.kernels[i];
    const double cycles = kernels_[i].instructions ? double(kernels_[i].last - kernels_[i].first) : 0;
    double total = 0;
    for (const auto& o : info.ops) total += double(o.work);
    for (const auto& o : info.ops) {
      auto& e = entry(o.op);
      e.first += cycles * (total > 0 ? double(o.work) / total : 1.0 / double(info.ops.size()));
      if (e.second.empty() || e.second.back() != i) e.second.push_back(i);
    }
  }
  std::stable_sort(ops.begin(), ops.end(), [](const auto& a, const auto& b) { return a.second.first > b.second.first; });
  json out = json::array();
  for (const auto& [name, v] : ops) out.push_back({{"op", name}, {"cycles", v.first}, {"kernels", v.second}});
  return out;
}

}  // namespace tpu::sim
