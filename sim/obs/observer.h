// What units report besides their architectural effects: per-cycle state
// for statistics and waveforms, and instruction intervals for the timeline.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "../core/issued.h"

namespace tpu::sim {

// Per-unit counters, updated by the unit itself once per cycle.
struct UnitStats {
  uint64_t busy_cycles = 0;
  uint64_t stall_cycles = 0;
  std::map<std::string, uint64_t> stalls;  // by cause
  uint64_t instructions = 0;

  void account(UnitState s, const char* cause) {
    if (s == UnitState::Busy) ++busy_cycles;
    if (s == UnitState::Stalled || s == UnitState::Blocked) {
      ++stall_cycles;
      ++stalls[cause];
    }
  }
};

// Receives one event per executed instruction (track = core * 16 + unit
// number as in the ISA's Unit operand) and counter samples.
class TraceSink {
 public:
  virtual ~TraceSink() = default;
  virtual void instruction(int track, uint32_t pc, uint64_t start_cycle, uint64_t end_cycle) = 0;
  virtual void counter(int track, const char* name, uint64_t cycle, int64_t value) = 0;
};

inline int track_id(int core, int unit) { return core * 16 + unit; }

}  // namespace tpu::sim
