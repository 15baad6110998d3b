// The vector unit: 32 registers of L 32-bit lanes. Instructions dispatch in
// order, up to vpu.issue.width per cycle within the ALU, load and store
// slots, each once its source and destination registers are ready (a
// scoreboard); a result is ready `latency` cycles later.
#pragma once

#include <systemc>

#include <array>
#include <vector>

#include "../core/queued_unit.h"
#include "../mem/accumulators.h"
#include "../mem/memory.h"
#include "tpu/sim/config.h"

namespace tpu::sim {

using isa::VpuClass;
using isa::VpuSlot;

// What an instruction's semantics may touch.
struct VpuContext {
  uint32_t lanes;
  std::vector<uint32_t>& regs;  // 32 x lanes
  SparseMemory& vmem;
  Accumulators& acc;
  std::string error;  // set by a handler on a fault

  uint32_t* reg(uint64_t r) { return regs.data() + r * lanes; }
};

// Executes one VPU instruction's semantics (no timing); false on a fault
// (ctx.error says why). Exposed for tests.
bool vpu_execute(VpuContext& ctx, const Issued& is);

class Vpu : public sc_core::sc_module, public QueuedUnit {
 public:
  sc_core::sc_in<bool> clk{"clk"};

  Vpu(sc_core::sc_module_name name, int core, const MachineConfig& cfg, RunControl& rc, SemaphoreFile& sems,
      SparseMemory& vmem, Accumulators& acc);

  // No work left after cycle `now` (results due in now + 1 are ready by then).
  bool idle(uint64_t now) const { return !head_ && queue_.num_available() == 0 && now + 1 >= last_complete_ && !signals_pending(); }
  bool in_flight(uint64_t now) const { return now + 1 < last_complete_ || now < busy_until_ || signals_pending(); }

 private:
  void tick();
  void step(uint64_t now);

  const MachineConfig& cfg_;
  std::vector<uint32_t> regs_;
  VpuContext ctx_;
  std::array<uint64_t, isa::kNumVregs> ready_at_{};
  uint64_t busy_until_ = 0;
  uint64_t last_complete_ = 0;
};

}  // namespace tpu::sim
