// One MXU: its instruction queue, the double-buffered weight registers, the
// input stream from VMEM, the array (PE-level or fast), and the drain of
// result rows into the accumulators. Timing is in docs/timing.md.
#pragma once

#include <systemc>

#include <memory>
#include <ostream>
#include <vector>

#include "../core/queued_unit.h"
#include "../mem/accumulators.h"
#include "../mem/memory.h"
#include "../mem/zeroed.h"
#include "datapath.h"
#include "mxu_unit.h"
#include "tpu/sim/config.h"

namespace tpu::sim {

enum class MxuPath { Fast, Pe };

class Mxu : public sc_core::sc_module, public QueuedUnit, public MxuUnit {
 public:
  sc_core::sc_in<bool> clk{"clk"};

  Mxu(sc_core::sc_module_name name, int core, int index, const MachineConfig& cfg, MxuPath path, RunControl& rc,
      SemaphoreFile& sems, SparseMemory& vmem, Accumulators& acc);

  void bind_clock(sc_core::sc_clock& c) override { clk(c); }
  void settle(uint64_t last) override { QueuedUnit::settle(last); }
  sc_core::sc_fifo<Issued>& instruction_queue() override { return queue(); }
  void attach_trace(TraceSink* t) override { set_trace(t); }
  bool idle(uint64_t now) const override { return !head_ && queue_.num_available() == 0 && !in_flight(now); }
  bool in_flight(uint64_t now) const override {
    return now < last_complete_ || streaming_ || loading_ || in_flight_ > 0 || signals_pending();
  }
  uint64_t macs() const override { return macs_; }
  uint32_t rows_in_flight() const override { return in_flight_; }
  // Whether a row was streamed / a weight row read in the cycle just ticked
  // (the waveform's view, as the RTL reports it).
  bool streaming() const override { return streamed_now_; }
  bool loading() const override { return loaded_now_; }
  int pending_instructions() const override { return queue_depth(); }
  UnitState unit_state() const override { return state(); }
  uint32_t current_pc() const override { return QueuedUnit::current_pc(); }
  const UnitStats& unit_stats() const override { return stats(); }
  std::string blocked_report() const override { return blocked_on(); }

  // Every accumulator row write, with its cycle and the value written (for
  // the RTL lockstep check).
  struct AccWrite {
    uint64_t cycle;
    uint64_t row;
    std::vector<uint32_t> data;
  };
  void log_acc_writes(std::vector<AccWrite>* sink) { acc_log_ = sink; }

  // Writes the MXU command stream as it executes: one line per instruction
  // started (`cmd CYCLE OP DTYPE ACC_ROW ROWS`) and one line per VMEM row read,
  // with its bytes: `wrow HEX` for the current weight load, `xrow HEX` for the
  // current stream (the two interleave). tests/hw/lockstep.cpp replays it.
  void record_commands(std::ostream* out) { record_ = out; }

 private:
  enum class Shadow { Free, Loading, Loaded };
  struct WeightLoad {
    uint64_t start = 0;
    uint64_t src = 0, stride = 0;
    bool transpose = false, int8 = false;
  };
  struct Stream {
    uint64_t start = 0, src = 0, stride = 0, rows = 0, acc_row = 0;
    bool accumulate = false, int8 = false;
    int buf = 0;
  };

  void tick();
  void drain(uint64_t now);
  bool dispatch(const Issued& is, uint64_t now);
  void advance_load(uint64_t now);
  void advance_stream(uint64_t now);
  uint32_t elem_bytes(bool int8) const { return int8 ? 1 : 2; }
  void read_operands(uint64_t addr, bool int8, uint32_t* out);
  bool check_vmem_rows(const Issued& is, uint64_t base, uint64_t stride, uint64_t rows, bool int8);

  const uint32_t n_;
  const isa::MxuTiming timing_;
  const int index_;
  SparseMemory& vmem_;
  Accumulators& acc_;
  std::unique_ptr<MxuArray> array_;

  std::vector<uint32_t> staging_;  // the shadow weights as they load
  std::vector<uint32_t> load_row_;  // a row of a transposed load
  int active_ = -1;                // buffer in use by new streams, -1 before the first swap
  bool int8_[2] = {false, false};
  Shadow shadow_ = Shadow::Free;
  uint64_t buf_drained_[2] = {0, 0};  // cycle in which the last row using the buffer reaches the accumulators
  bool loading_ = false, streaming_ = false;
  bool loaded_now_ = false, streamed_now_ = false;
  WeightLoad load_;
  Stream stream_;
  std::vector<MxuRow> slots_;  // rows in flight, by feed cycle mod 2N
  Zeroed<uint32_t> row_store_;  // the slots' operands and results
  uint32_t in_flight_ = 0;
  uint64_t last_complete_ = 0;  // last cycle in which any started work finishes
  uint64_t load_done_ = 0;      // the cycle after the last weight load's last row
  uint64_t macs_ = 0;
  std::vector<uint8_t> row_bytes_;
  std::vector<AccWrite>* acc_log_ = nullptr;
  std::ostream* record_ = nullptr;
  void record_row(const char* kind, uint64_t addr, bool int8);
};

}  // namespace tpu::sim
