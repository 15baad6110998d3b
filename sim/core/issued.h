// What the scalar unit pushes into a unit's queue: the decoded instruction,
// its pc, and its operands with scalar registers already read.
#pragma once

#include <array>
#include <cstdint>
#include <ostream>

#include "tpu/isa/isa.h"

namespace tpu::sim {

struct Issued {
  isa::Instruction insn;
  uint32_t pc = 0;
  std::array<uint64_t, isa::kMaxOperands> v{};  // register values for Sreg operands, else the operand
  uint64_t issue_cycle = 0;

  uint64_t operator[](size_t i) const { return v[i]; }
  bool operator==(const Issued& o) const { return pc == o.pc && issue_cycle == o.issue_cycle && insn == o.insn; }
};

// sc_fifo needs these for its (unused) tracing and printing hooks.
inline std::ostream& operator<<(std::ostream& os, const Issued& i) { return os << "pc " << i.pc; }

// A unit's state in one cycle, for utilization, stall accounting and waveforms.
enum class UnitState : uint8_t { Idle = 0, Busy = 1, Stalled = 2, Blocked = 3 };

}  // namespace tpu::sim
