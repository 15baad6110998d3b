// The chip top: the clock, HBM, and one TensorCore per configured core, each
// wiring its scalar unit, DMA engine, VPU and MXUs to its memories, queues
// and semaphores. A monitor on the falling edge (after every unit has
// evaluated the cycle) detects the end of the run, deadlocks and the cycle
// limit, and samples waveforms and counters.
#pragma once

#include <systemc>

#include <chrono>
#include <memory>
#include <ostream>
#include <vector>

#include "../dma/dma_engine.h"
#include "../mem/accumulators.h"
#include "../mem/hbm_simple.h"
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
  TensorCore(sc_core::sc_module_name name, int index, const MachineConfig& cfg, const DecodedProgram& program,
             MxuModel model, RunControl& rc, HbmSimple& hbm, const std::string& rtl_trace = {});

  void bind_clock(sc_core::sc_clock& clk);
  bool finished(uint64_t now) const;
  bool in_flight(uint64_t now) const;
  bool any_busy(uint64_t now) const;
  std::string blocked_report() const;
  void set_trace(TraceSink* t);

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
  Chip(sc_core::sc_module_name name, const MachineConfig& cfg, const DecodedProgram& program, const SimOptions& opts,
       RunControl& rc, TraceSink* trace);

  HbmSimple hbm;
  std::vector<std::unique_ptr<TensorCore>> cores;
  sc_core::sc_clock clk;

  bool done() const { return done_; }
  uint64_t end_cycle() const { return end_cycle_; }
  void attach_vcd(VcdWriter* vcd);
  bool progress_shown() const { return progress_shown_; }
  // A time series every `every` cycles: CSV rows to `csv` (may be null) and
  // counter tracks on the trace. finish_intervals writes the last, partial
  // row; the rows add up to the run's totals.
  void attach_intervals(uint64_t every, std::ostream* csv);
  void finish_intervals(uint64_t end_cycle);

 private:
  void monitor();
  void sample_counters(uint64_t now);
  // The counters the time series differences: per unit busy cycles, per MXU
  // MACs, HBM bytes read and written.
  std::vector<uint64_t> interval_counters() const;
  void interval_row(uint64_t end);

  const SimOptions& opts_;
  RunControl& rc_;
  TraceSink* trace_;
  VcdWriter* vcd_ = nullptr;
  bool done_ = false;
  uint64_t end_cycle_ = 0;
  std::vector<int64_t> last_depth_;
  uint64_t every_ = 0, row_start_ = 0;
  std::ostream* csv_ = nullptr;
  std::vector<uint64_t> row_base_;
  std::vector<std::pair<int, std::string>> columns_;  // track (or -1: HBM) and column name
  std::chrono::steady_clock::time_point wall_start_ = std::chrono::steady_clock::now();
  bool progress_shown_ = false;
};

}  // namespace tpu::sim
