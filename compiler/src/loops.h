// Loops from a scheduled program (internal to the back end).
//
// The emitter schedules every tile of a kernel as straight-line code: that is
// where its cost model places each instruction. This pass writes that
// schedule out compactly. It finds runs of instructions that repeat with
// operands that step by a constant (the next tile's addresses), folds each
// into a counted loop (`loop rc, top`) whose address registers step with
// `addi`, and folds runs of such loops into outer loops, so a kernel's code
// size follows the shape of its work, not its tile count. The instructions
// keep their order, so the units see the same work in the same order; the
// scalar unit adds one `addi` per stepping register and one `loop` per
// iteration. Scalar registers are assigned here: constants outside loops
// come from a least-recently-used cache in s1..s28 (as straight-line code
// always did), and a loop nest pins the registers it needs.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tpu::compiler {

// One scheduled instruction. In `text` each '@' is a scalar-register operand
// and a '$' a VMEM (or accumulator) address written `s0, addr`; their values
// are in `vals`, in order.
struct Scheduled {
  int unit = 0;  // the unit's number (isa.def); -1: a comment line
  std::string text;
  std::vector<uint64_t> vals;
  int kernel = -1;  // the kernel it belongs to (.in_kernel); -1: none
  double t = 0;     // its estimated dispatch cycle (the schedule's order)
};

struct LoopOptions {
  bool enabled = true;     // false: straight-line code, as scheduled
  int min_body = 16;       // a loop body smaller than this is unrolled until it is not
  int max_period = 4096;   // the longest run of instructions that may form a body
  int registers = 31;      // s1 .. s<registers> hold constants and loop registers
  bool kernels = true;     // write .in_kernel where the kernel changes
  // The scalar unit: instructions a cycle, bubble cycles after a taken branch.
  double issue_width = 1, branch_penalty = 0;
  std::string label = "l"; // prefix of the loops' labels (unique per program)
};

// The program's text (one instruction or directive a line, `.in_kernel`
// where the kernel changes) and its instruction count.
struct LoopCode {
  std::string text;
  size_t instructions = 0;
  size_t loops = 0;
};
LoopCode write_loops(const std::vector<Scheduled>& prog, const LoopOptions& opt);

}  // namespace tpu::compiler
