// Memory trace replay (tpusim --hbm-trace): DRAMsim3's trace format and
// semantics, through the detailed HBM model alone (docs/memory.md).
#pragma once

#include <string>

#include "tpu/isa/error.h"
#include "tpu/isa/machine.h"

namespace tpu::sim {

struct TraceReplayResult {
  std::string stats_json;  // the run's stats (docs/stats.md, "hbm" as for a program)
  uint64_t requests = 0;
  uint64_t drain_cycles = 0;
  double wall_seconds = 0;
};

// Memory cycles a replay may take unless told otherwise (10 s of HBM2 time;
// an idle stretch costs about a microsecond of host time per refresh).
inline constexpr uint64_t kDefaultTraceMaxCycles = 10'000'000'000ull;

struct CycleLimit : Error {
  using Error::Error;
};

// Throws Error for a malformed trace (naming the line) and for a timing
// violation the checker found (`check`); CycleLimit when a request's cycle or
// the replay passes `max_cycles` (0: no limit).
TraceReplayResult replay_hbm_trace(const std::string& path, const isa::MachineConfig& cfg, bool check = true,
                                   uint64_t max_cycles = kDefaultTraceMaxCycles);

}  // namespace tpu::sim
