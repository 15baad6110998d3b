// Where the cycles went, by kernel and by HLO op: every instruction event is
// credited to the kernel its pc belongs to (the program's KERN section, from
// tpuc), and each kernel's cycles are shared among the HLO ops it computes by
// their work. docs/stats.md defines every field.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <vector>

#include "observer.h"
#include "tpu/isa/machine.h"
#include "tpu/isa/program.h"

namespace tpu::sim {

class Profiler : public TraceSink {
 public:
  Profiler(const isa::Program& program, const isa::MachineConfig& config);

  void instruction(int track, uint32_t pc, uint64_t start, uint64_t end, uint64_t work) override;
  void counter(int, const char*, uint64_t, int64_t) override {}
  bool wants_counters() const override { return false; }

  // stats.json's "kernels" and "ops" (empty lists for a program without kernels).
  nlohmann::json kernels_json() const;
  nlohmann::json ops_json() const;

 private:
  struct Busy {
    uint64_t cycles = 0, covered = 0;  // union of the unit's instruction intervals
  };
  struct Kernel {
    uint64_t first = UINT64_MAX, last = 0, instructions = 0, macs = 0, hbm_bytes = 0;
    std::vector<Busy> units;  // by track
  };

  const isa::Program& program_;
  const isa::MachineConfig& config_;
  std::vector<bool> is_wait_;  // by pc: a wait is a stall, not work
  std::vector<Kernel> kernels_;
  int tracks_;
};

}  // namespace tpu::sim
