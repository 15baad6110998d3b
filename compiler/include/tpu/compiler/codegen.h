// The back end: kernel planning (fusion, tiling, buffer assignment) and code
// generation to assembly for one TensorCore. Input: a function after the IR
// pipeline (passes.h). docs/compiler.md describes the kernels and the schedule.
#pragma once

#include <string>

#include "tpu/ir/ir.h"
#include "tpu/isa/machine.h"
#include "tpu/isa/target.h"

namespace tpu::compiler {

struct Plan;  // opaque: kernels, buffers, fused expressions

// What the scheduler assumes about the machine beyond the target (the code
// is correct on any machine with the target; these only order it well).
struct ScheduleHints {
  double dma_bytes_per_cycle = 64;
  double dma_latency_cycles = 150;
  double dma_burst_bytes = 64;  // the DMA sends at most dma_bursts_per_cycle bursts a cycle
  double dma_bursts_per_cycle = 1;
  // VPU instructions per cycle, and of them loads, stores and arithmetic.
  double vpu_width = 1, vpu_load = 1, vpu_store = 1, vpu_alu = 1;
  // The scalar unit: instructions issued a cycle, bubble after a taken branch.
  double scalar_width = 1, branch_penalty = 2;
  // Repeated runs of the schedule become loops (false: straight-line code).
  bool loops = true;
};
// From a validated config: HBM bandwidth and latency per cycle, the DMA
// burst and the VPU's issue slots.
ScheduleHints schedule_hints(const isa::MachineConfig& config);

struct Backend {
  explicit Backend(const ir::Function& f, const isa::Target& t, const ScheduleHints& hints = {});
  ~Backend();
  Backend(const Backend&) = delete;
  Backend& operator=(const Backend&) = delete;

  // The kernel plan in text (for --dump-after-each-pass and tests).
  std::string describe() const;
  // Assembly text, each kernel commented with the HLO ops it came from.
  std::string assembly() const;

 private:
  Plan* plan_;
  ScheduleHints hints_;
};

}  // namespace tpu::compiler
