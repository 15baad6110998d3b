// The back end: kernel planning (fusion, tiling, buffer assignment) and code
// generation to a program for the chip's TensorCores. Input: a function after the IR
// pipeline (passes.h). docs/compiler.md describes the kernels and the schedule.
#pragma once

#include <string>

#include "tpu/asm/assembler.h"
#include "tpu/ir/ir.h"
#include "tpu/isa/machine.h"
#include "tpu/isa/target.h"

namespace tpu::compiler {

namespace backend {
struct Plan;  // opaque: kernels, buffers, fused expressions (src/plan.h)
}

struct Generated {
  isa::Program program;
  std::vector<as::Note> notes;  // comment lines by pc, for as::disassemble
};

struct Backend {
  // The code is correct on any machine with `m.target`; the rest of `m`
  // (clock, HBM, issue widths, latencies) orders it well for that machine.
  // `loops`: repeated runs of the schedule become loops (false: straight-line code).
  Backend(const ir::Function& f, const isa::MachineConfig& m, bool loops = true);
  ~Backend();
  Backend(const Backend&) = delete;
  Backend& operator=(const Backend&) = delete;

  // The kernel plan in text (for --dump-after-each-pass and tests).
  std::string describe() const;
  // The program, and for its listing each kernel's comments: the HLO ops
  // it came from and how it is tiled.
  Generated generate() const;

 private:
  backend::Plan* plan_;
  isa::MachineConfig machine_;
  bool loops_;
};

}  // namespace tpu::compiler
