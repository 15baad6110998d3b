#include "event_log.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "tpu/isa/isa.h"
#include "tpu/sim/simulator.h"

namespace tpu::sim {

std::string check_log_units(const std::vector<std::string>& units) {
  for (const auto& u : units) {
    const bool ok = u == "all" || u == "scalar" || u == "dma" || u == "vpu" ||
                    (u.size() == 4 && u.rfind("mxu", 0) == 0 && u[3] >= '0' && u[3] <= '7');
    if (!ok) return fmt::format("--log-units: '{}' is not a unit (scalar, dma, vpu, mxu0..mxu7 or all)", u);
  }
  return {};
}

EventLog::EventLog(const isa::Program& program, const std::vector<std::string>& units) : program_(program) {
  if (auto why = check_log_units(units); !why.empty()) throw Error(why);
  for (const auto& u : units) {
    if (u == "all") all_ = true;
    units_.insert(u);
  }
}

void EventLog::instruction(int track, uint32_t pc, uint64_t start, uint64_t end, uint64_t work) {
  const std::string unit = unit_name(track_unit(track));
  if (!all_ && !units_.count(unit)) return;
  const auto d = pc < program_.code.size() ? isa::decode(program_.code[pc]) : std::nullopt;
  spdlog::debug("cycles {}..{} core{}.{} pc {}: {}{}", start, end, track_core(track), unit, pc, d ? isa::disassemble(*d, pc) : "?",
                work ? fmt::format(" ({} {})", work, track_unit(track) == isa::kUnitDma ? "bytes" : "MACs") : "");
}

}  // namespace tpu::sim
