// Memory trace replay (tpusim --hbm-trace): DRAMsim3's trace format and
// semantics, through the detailed HBM model alone (docs/memory.md).
#pragma once

#include <string>

#include "tpu/isa/machine.h"

namespace tpu::sim {

struct TraceReplayResult {
  std::string stats_json;  // the run's stats (docs/stats.md, "hbm" as for a program)
  uint64_t requests = 0;
  uint64_t drain_cycles = 0;
  double wall_seconds = 0;
};

// Throws Error for a malformed trace (naming the line) and for a timing
// violation the checker found (`check`).
TraceReplayResult replay_hbm_trace(const std::string& path, const isa::MachineConfig& cfg, bool check = true);

}  // namespace tpu::sim
