// Chrome / Perfetto trace-event JSON: one process per core, one track
// (thread) per unit, one complete event per instruction with its text and
// operands in args, and counter tracks for queue depths.
#pragma once

#include <string>
#include <vector>

#include "observer.h"
#include "tpu/isa/program.h"

namespace tpu::sim {

class TraceWriter : public TraceSink {
 public:
  TraceWriter(const isa::Program& program, uint64_t clock_hz, int cores, int mxus);
  void instruction(int track, uint32_t pc, uint64_t start_cycle, uint64_t end_cycle) override;
  void counter(int track, const char* name, uint64_t cycle, int64_t value) override;
  void write(const std::string& path) const;

 private:
  struct Event {
    int track;
    uint32_t pc;
    uint64_t start, end;
  };
  struct Counter {
    int track;
    const char* name;
    uint64_t cycle;
    int64_t value;
  };
  const isa::Program& program_;
  uint64_t clock_hz_;
  int cores_, mxus_;
  std::vector<Event> events_;
  std::vector<Counter> counters_;
};

}  // namespace tpu::sim
