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

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "tpu/isa/isa.h"

namespace tpu::compiler {

// A loop step that alternates, for a value that takes two buffers in turn:
// it adds d after even trips and takes it back after odd ones (the writer
// keeps d's sign in a register it negates every trip). Stored in a step's
// place as kToggle + d; steps proper fit in 32 bits.
constexpr int64_t kToggle = int64_t(1) << 40;
inline int64_t toggle_step(int64_t d) { return kToggle + d; }
inline bool toggles(int64_t step) { return step > kToggle / 2; }
// What a value with this step has gained after i trips (i < 0: before).
inline int64_t after_trips(int64_t step, int64_t i) { return toggles(step) ? (i % 2 != 0 ? step - kToggle : 0) : i * step; }
// The step as it stands i trips later.
inline int64_t step_after(int64_t step, int64_t i) { return toggles(step) && i % 2 != 0 ? 2 * kToggle - step : step; }

// A bound value kOffset + d stands for d plus what scalar register
// kOffsetReg holds at run time (the place of a dynamic slice's piece,
// computed by the kernel that reads it): the writer loads d and adds the
// register. Other values (addresses, sizes, the steps' negative bases) lie
// far from kOffset, and so do d's a loop computes from it. A kernel that
// uses it leaves kOffsetReg out of the registers the writer assigns
// (LoopOptions::registers).
constexpr uint64_t kOffset = uint64_t(1) << 62;
constexpr int kOffsetReg = 31;
inline bool is_offset(uint64_t v) {
  const auto d = int64_t(v - kOffset);
  return d > -(int64_t(1) << 60) && d < (int64_t(1) << 60);
}

// One scheduled instruction. Its operands that hold a scalar value (a DMA's
// addresses and byte counts, an MXU's rows) are bound: value i of `vals`
// goes in the scalar register the writer loads or steps for it, operand
// `at[i]` of `insn`. A VPU load or store's VMEM (or accumulator) address
// `rs1 + imm` is one bound value, value `addr`: its first value goes in
// the immediate (operand at[addr] + 1) and the register holds what loops
// add to it. Bound operands are 0 in `insn` until the writer fills them.
struct Scheduled {
  static constexpr size_t kMaxBound = 6;  // dma.ld2d's six
  int unit = 0;          // the unit's number (isa.def); -1: a comment line
  isa::Instruction insn;
  std::vector<uint64_t> vals;
  std::array<int8_t, kMaxBound> at{};
  int addr = -1;
  std::string comment;   // a comment line's text ("": a blank line)
  int kernel = -1;       // the kernel it belongs to; -1: none
  double t = 0;          // its estimated dispatch cycle (the schedule's order)
  // An explicit loop (Emitter::repeat): a line (unit -1) with `loop` > 0
  // opens a loop of that many trips, one with -1 closes it; loops nest.
  // Inside, each instruction's bound values step by steps[l][v] from one
  // iteration of the l-th loop around it (innermost first) to the next
  // (or toggle: toggle_step()).
  int64_t loop = 0;
  std::vector<std::vector<int64_t>> steps;
  // A line (unit -1) in a stated loop's body, at its top level: the loop's
  // first trip starts here (what stands before it is the iteration before's
  // pipelined part, and the first iteration's part of it goes before the loop).
  bool entry = false;
};

struct LoopOptions {
  bool enabled = true;     // false: straight-line code, as scheduled
  int min_body = 16;       // a loop body smaller than this is unrolled until it is not
  int max_period = 4096;   // the longest run of instructions that may form a body
  int registers = 31;      // s1 .. s<registers> hold constants and loop registers
  bool kernels = true;     // write .in_kernel where the kernel changes
  // The scalar unit: instructions a cycle, bubble cycles after a taken branch.
  double issue_width = 1, branch_penalty = 0;
};

// The program: its instructions, where the kernel changes (pc, kernel)
// and the comment lines that stand before an instruction (pc, text).
struct LoopCode {
  std::vector<isa::Instruction> code;
  std::vector<std::pair<size_t, int>> kernel_marks;
  std::vector<std::pair<size_t, std::string>> notes;
  size_t loops = 0;
};
// What the writer leaves in the scalar registers for the code after it:
// the constants it loaded outside loops (least recently used first out)
// and the kernel it marked last. Code written in segments (one per kernel)
// passes it on, so the segments read as one program; a branch target
// starts from a fresh one.
struct WriterState {
  uint64_t val[32] = {}, stamp[32] = {}, clock = 0;
  bool valid[32] = {};
  int kernel = -1;
  bool marked = false;
};
LoopCode write_loops(const std::vector<Scheduled>& prog, const LoopOptions& opt, WriterState& state);

// Appends the instructions that put constant v in scalar register r (li,
// and lih for the upper half when it has one).
void load_constant(std::vector<isa::Instruction>& code, int r, uint64_t v);

}  // namespace tpu::compiler
