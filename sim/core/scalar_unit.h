// The scalar unit: fetches and decodes up to core.issue_width instructions
// per cycle, in order, executes
// the scalar ones (address arithmetic, branches, loops, SMEM) and pushes
// every other one, with its registers read, into its unit's queue.
#pragma once

#include <systemc>

#include <array>
#include <vector>

#include "../mem/memory.h"
#include "../obs/observer.h"
#include "issued.h"
#include "run_control.h"
#include "semaphores.h"
#include "sleep.h"
#include "tpu/sim/config.h"

namespace tpu::sim {

struct DecodedProgram {
  std::vector<std::optional<isa::Instruction>> insns;
  std::vector<uint64_t> words;
};

struct ScalarParams {
  int core = 0;
  int chip = 0;
  const MachineConfig* config = nullptr;
  const DecodedProgram* program = nullptr;
};

class ScalarUnit : public sc_core::sc_module {
 public:
  sc_core::sc_in<bool> clk{"clk"};

  ScalarUnit(sc_core::sc_module_name name, const ScalarParams& p, RunControl& rc, SemaphoreFile& sems,
             SparseMemory& smem);

  // Queues of the units this one issues to: dma, vpu, then mxu0..mxuN-1.
  void bind_queues(sc_core::sc_fifo<Issued>* dma, sc_core::sc_fifo<Issued>* vpu,
                   std::vector<sc_core::sc_fifo<Issued>*> mxus);
  void set_trace(TraceSink* t) { trace_ = t; }

  bool halted() const { return halted_; }
  UnitState state() const { return state_; }
  // Issuing, or in a taken branch's bubbles: moving without help from other units.
  bool progressing(uint64_t now) const { return state_ == UnitState::Busy || now < next_issue_; }
  uint32_t pc() const { return pc_; }
  const UnitStats& stats() const { return stats_; }
  // The end of the run in cycle `last`: the cycles slept so far are counted.
  void settle(uint64_t last) { sleep_.settle(last, stats_); }
  const std::array<uint64_t, 5>& issued_by_class() const { return by_class_; }

 private:
  void tick();
  bool issue(uint64_t now, const char*& stall);
  static uint64_t sregs_named(const isa::Instruction& in);
  static uint64_t sreg_written(const isa::Instruction& in);
  void execute_scalar(const isa::Instruction& in, uint64_t now);
  bool push(const isa::Instruction& in, int unit, uint64_t now, const char*& stall);
  void jump(int64_t target, uint64_t now);
  void set(int rd, uint64_t v) {
    if (rd != 0) regs_[size_t(rd)] = v;
  }
  void finish(UnitState s, const char* cause) {
    state_ = s;
    stats_.account(s, cause);
  }

  ScalarParams p_;
  RunControl& rc_;
  SemaphoreFile& sems_;
  SparseMemory& smem_;
  sc_core::sc_fifo<Issued>* dma_q_ = nullptr;
  sc_core::sc_fifo<Issued>* vpu_q_ = nullptr;
  std::vector<sc_core::sc_fifo<Issued>*> mxu_q_;
  TraceSink* trace_ = nullptr;

  std::array<uint64_t, isa::kNumSregs> regs_{};
  uint32_t pc_ = 0;
  bool halted_ = false;
  bool waiting_ = false;
  uint64_t wait_start_ = 0;
  uint64_t next_issue_ = 0;  // first cycle after a taken branch's bubbles
  UnitState state_ = UnitState::Idle;
  UnitStats stats_;
  // Sleeping (sleep.h): on a grant, on room in a full queue (full_), or
  // once halted for ever (never_).
  Sleep sleep_;
  sc_core::sc_fifo<Issued>* full_ = nullptr;
  sc_core::sc_event never_;
  std::array<uint64_t, 5> by_class_{};
};

}  // namespace tpu::sim
