// A chip: HBM and one TensorCore per configured core, each wiring its
// scalar unit, DMA engine, VPU and MXUs to its memories, queues and
// semaphores. The system (system.h) gives it the clock and, on the falling
// edge (after every unit has evaluated the cycle), calls end_cycle, which
// samples waveforms and counters; the system then detects the end of the
// run, deadlocks and the cycle limit from every chip's state.
#pragma once

#include <systemc>

#include <memory>
#include <vector>

#include "../dma/dma_engine.h"
#include "../mem/accumulators.h"
#include "../mem/memory_system.h"
#include "../mem/memory.h"
#include "../mxu/mxu.h"
#include "../obs/observer.h"
#include "../obs/vcd_writer.h"
#include "../vpu/vpu.h"
#include "run_control.h"
#include "scalar_unit.h"
#include "semaphores.h"
#include "tpu/sim/simulator.h"

namespace tpu::sim {

class TensorCore : public sc_core::sc_module {
 public:
  TensorCore(sc_core::sc_module_name name, int chip, int index, const MachineConfig& cfg, const DecodedProgram& program,
             MxuModel model, RunControl& rc, MemorySystem& hbm, const std::string& rtl_trace = {});

  void bind_clock(sc_core::sc_clock& clk);
  bool finished(uint64_t now) const;
  bool in_flight(uint64_t now) const;
  bool any_busy(uint64_t now) const;
  std::string blocked_report() const;
  void set_trace(TraceSink* t);
  // The end of the run in cycle `last`: sleeping units count the cycles slept.
  void settle(uint64_t last);

  const int index;
  SparseMemory vmem;
  SparseMemory smem;
  Accumulators acc;
  SemaphoreFile sems;
  DmaEngine dma;
  Vpu vpu;
  std::vector<std::unique_ptr<MxuUnit>> mxus;
  ScalarUnit scalar;
};

class Chip : public sc_core::sc_module {
 public:
  Chip(sc_core::sc_module_name name, int index, const MachineConfig& cfg, const DecodedProgram& program, const SimOptions& opts,
       RunControl& rc, TraceSink* trace, sc_core::sc_clock& clk);

  const int index;
  MemorySystem hbm;
  std::vector<std::unique_ptr<TensorCore>> cores;

  // The falling edge of cycle `now`: HBM's cycle ends, samples are taken.
  // False if that found a fault.
  bool end_cycle(uint64_t now);
  // Every core has halted and drained (the first such cycle is kept).
  bool finished(uint64_t now);
  bool in_flight(uint64_t now) const;
  bool any_busy(uint64_t now) const;
  bool sems_quiet(sc_core::sc_time edge) const;
  std::string blocked_report() const;
  // The cycle after the one in which the chip finished (0 until then).
  uint64_t finish_cycle() const { return finish_cycle_; }
  // Registers the chip's signals, each scope prefixed by `prefix` (System samples them).
  void attach_vcd(VcdWriter* vcd, const std::string& prefix);
  // A time series, a row every `every` cycles (the growth of each counter:
  // busy cycles per unit, MACs per MXU, HBM bytes), also drawn as counter
  // tracks on the trace. Unless `fixed`, past 4096 rows pairs of rows merge
  // and the interval doubles. finish_series closes the last, partial row;
  // the rows add up to the run's totals.
  void attach_series(uint64_t every, bool fixed);
  void finish_series(uint64_t end_cycle);
  const TimeSeries& series() const { return series_; }

 private:
  void sample_counters(uint64_t now);
  // The counters the time series differences: per unit busy cycles, per MXU
  // MACs, HBM bytes read and written.
  std::vector<uint64_t> series_counters() const;
  void series_row(uint64_t end);

  const SimOptions& opts_;
  RunControl& rc_;
  TraceSink* trace_;
  bool counters_;  // trace_ takes counter samples
  uint64_t finish_cycle_ = 0;
  std::vector<int64_t> last_depth_;
  TimeSeries series_;
  bool fixed_ = false;
  uint64_t row_start_ = 0;
  std::vector<uint64_t> row_base_;
  // The trace track of a busy column; -1 HBM bytes, -2 MACs, kChannelColumn - c
  // the device bytes of HBM channel c.
  std::vector<int> column_track_;
  static constexpr int kChannelColumn = -100;
  std::vector<std::string> channel_counter_names_;
};

}  // namespace tpu::sim
