// tpusim --log-units: every instruction of the chosen units as a debug line
// ("cycles 120..128 core0.mxu0 pc 37: mxu.lw ..."), for debugging a program
// without a trace viewer.
#pragma once

#include <set>
#include <string>
#include <vector>

#include "observer.h"
#include "tpu/isa/program.h"

namespace tpu::sim {

class EventLog : public TraceSink {
 public:
  // units: names as in stats.json ("scalar", "dma", "vpu", "mxu0", ...) or "all";
  // throws Error for a name that is not a unit.
  EventLog(const isa::Program& program, const std::vector<std::string>& units);
  void instruction(int track, uint32_t pc, uint64_t start, uint64_t end, uint64_t work) override;
  void counter(int, const char*, uint64_t, int64_t) override {}
  bool wants_counters() const override { return false; }

 private:
  const isa::Program& program_;
  std::set<std::string> units_;
  bool all_ = false;
};

}  // namespace tpu::sim
