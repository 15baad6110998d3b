// Chrome / Perfetto trace-event JSON: one process per core, one track
// (thread) per unit, one complete event per instruction with its text and
// operands in args, and counter tracks for queue depths, busy % per unit and
// HBM bytes per cycle. Instructions of one unit that overlap in time (a
// pipeline, transfers in flight) go to extra lanes of that unit ("dma (lane
// 2)", tid unit + 100 x lane), so the slices of every track are disjoint, as
// the trace-event format requires; a "kernels" track shows tpuc's kernels. Events go to the
// file as they happen, so a long run does not hold them in memory, and the
// file is closed as valid JSON however the run ends (finish(), or the
// destructor when an error unwinds).
#pragma once

#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "observer.h"
#include "tpu/isa/program.h"

namespace tpu::sim {

class TraceWriter : public TraceSink {
 public:
  // Opens path for writing; throws Error when it cannot.
  // Events outside the cycles [window_start, window_end) are left out.
  // With several chips, a track's core is chip * cores + core (ChipTracks)
  // and each core of each chip is a process, "chip K core C".
  TraceWriter(const std::string& path, const isa::Program& program, uint64_t clock_hz, int chips, int cores, int mxus,
              uint64_t window_start = 0, uint64_t window_end = UINT64_MAX);
  ~TraceWriter() override;
  TraceWriter(const TraceWriter&) = delete;
  TraceWriter& operator=(const TraceWriter&) = delete;

  void instruction(int track, uint32_t pc, uint64_t start_cycle, uint64_t end_cycle, uint64_t work) override;
  void counter(int track, const char* name, uint64_t cycle, int64_t value) override;
  // The kernels track: one slice per kernel (stats.json "kernels": name, first_cycle, last_cycle).
  void kernels(const nlohmann::json& kernels);
  // Closes the JSON and the file; throws Error when anything failed to reach it.
  void finish();

  // Events a trace holds at most; later ones are dropped and the file says
  // so (a program that never halts would otherwise fill the disk).
  static constexpr uint64_t kMaxEvents = 4'000'000;

 private:
  bool full(uint64_t cycle);
  void put(const std::string& json_object);
  const std::string& text_of(uint32_t pc);
  // The tid of the first lane of `unit` (in process pid) free at `start`,
  // named when first used.
  int lane(int pid, int unit, uint64_t start, uint64_t end);

  static constexpr int kMaxLanes = 64;
  static constexpr int kKernelTrack = 50;

  std::string path_;
  const isa::Program& program_;
  int cores_;
  double us_per_cycle_;
  std::FILE* out_ = nullptr;
  bool first_ = true;
  uint64_t events_ = 0;
  std::vector<std::string> text_;  // disassembly by pc, filled on first use
  uint64_t window_start_, window_end_;
  std::map<std::pair<int, int>, std::vector<uint64_t>> lanes_;  // (pid, unit) -> each lane's last end
};

}  // namespace tpu::sim
