#include "scalar_unit.h"

#include <fmt/format.h>

namespace tpu::sim {

using isa::Opcode;

ScalarUnit::ScalarUnit(sc_core::sc_module_name name, const ScalarParams& p, RunControl& rc, SemaphoreFile& sems,
                       SparseMemory& smem)
    : sc_core::sc_module(name), p_(p), rc_(rc), sems_(sems), smem_(smem) {
  SC_HAS_PROCESS(ScalarUnit);
  SC_METHOD(tick);
  sensitive << clk.pos();
  dont_initialize();
}

void ScalarUnit::bind_queues(sc_core::sc_fifo<Issued>* dma, sc_core::sc_fifo<Issued>* vpu,
                             std::vector<sc_core::sc_fifo<Issued>*> mxus) {
  dma_q_ = dma;
  vpu_q_ = vpu;
  mxu_q_ = std::move(mxus);
}

void ScalarUnit::tick() {
  const uint64_t now = rc_.cycle();
  if (halted_) return finish(UnitState::Idle, "");
  if (now < next_issue_) return finish(UnitState::Stalled, "branch");
  if (waiting_) {
    if (!sems_.take_grant(0)) {
      const auto& in = *p_.program->insns[pc_];
      sems_.request_wait(0, int(in[1]), uint32_t(in[2]));
      return finish(UnitState::Blocked, "semaphore");
    }
    waiting_ = false;
    if (trace_) trace_->instruction(track_id(p_.core, 0), pc_, wait_start_, now, 0);
    ++pc_;
  }
  // Up to core.issue_width instructions in order; the group ends at a taken
  // branch, a wait, halt, a full queue, or an instruction naming a scalar
  // register written earlier in the group.
  uint64_t written = 0;
  const char* stall = nullptr;
  const auto& prog = *p_.program;
  uint32_t n = 0;
  for (; n < p_.config->core.issue_width; ++n) {
    const bool valid = pc_ < prog.insns.size() && prog.insns[pc_];
    if (n > 0 && (!valid || (sregs_named(*prog.insns[pc_]) & written))) break;
    const uint64_t w = valid ? sreg_written(*prog.insns[pc_]) : 0;
    if (!issue(now, stall)) break;
    written |= w;
    if (halted_ || waiting_ || now < next_issue_) {
      ++n;
      break;
    }
  }
  if (rc_.faulted()) return;
  if (n > 0) return finish(UnitState::Busy, "");
  if (stall) finish(UnitState::Stalled, stall);
}

// The scalar registers an instruction names (bit i for s_i; s0 is left out).
uint64_t ScalarUnit::sregs_named(const isa::Instruction& in) {
  const auto& ops = isa::format_spec(isa::spec(in.op).format).operands;
  uint64_t m = 0;
  for (size_t i = 0; i < ops.size(); ++i)
    if (ops[i].kind == isa::OperandKind::Sreg && in[i] != 0) m |= uint64_t(1) << in[i];
  return m;
}

// The scalar register a scalar instruction writes (its first operand), as a mask.
uint64_t ScalarUnit::sreg_written(const isa::Instruction& in) {
  if (isa::spec(in.op).unit != isa::ExecUnit::Scalar) return 0;
  switch (in.op) {
    case Opcode::NOP: case Opcode::HALT: case Opcode::STS: case Opcode::JMP:
    case Opcode::BEQ: case Opcode::BNE: case Opcode::BLT: case Opcode::BGE: case Opcode::BLTU: case Opcode::BGEU:
      return 0;
    default:
      return in[0] != 0 ? uint64_t(1) << in[0] : 0;
  }
}

// Issues the instruction at pc; false when it could not (a fault, or a full
// queue: `stall` names it).
bool ScalarUnit::issue(uint64_t now, const char*& stall) {
  const auto& prog = *p_.program;
  if (pc_ >= prog.insns.size()) {
    rc_.fault(fmt::format("core {} scalar: pc {} runs past the end of the program ({} instructions; missing halt?)",
                          p_.core, pc_, prog.insns.size()));
    return false;
  }
  if (!prog.insns[pc_]) {
    rc_.fault(fmt::format("core {} scalar: illegal instruction {:#018x} at pc {}", p_.core, prog.words[pc_], pc_));
    return false;
  }
  const isa::Instruction& in = *prog.insns[pc_];
  const isa::InsnSpec& s = isa::spec(in.op);
  switch (s.unit) {
    case isa::ExecUnit::Scalar:
      execute_scalar(in, now);
      break;
    case isa::ExecUnit::Sync:
      if (in[0] == 0) {  // the scalar unit itself
        if (in.op == Opcode::WAIT) {
          sems_.request_wait(0, int(in[1]), uint32_t(in[2]));
          waiting_ = true;
          wait_start_ = now;
          ++by_class_[size_t(s.unit)];
          ++stats_.instructions;
          return true;  // busy this cycle; the grant is seen next cycle
        }
        sems_.signal(int(in[1]), uint32_t(in[2]));
        if (trace_) trace_->instruction(track_id(p_.core, 0), pc_, now, now + 1, 0);
        ++pc_;
        break;
      }
      if (!push(in, int(in[0]), now, stall)) return false;
      break;
    case isa::ExecUnit::Dma:
      if (!push(in, 1, now, stall)) return false;
      break;
    case isa::ExecUnit::Vpu:
      if (!push(in, 2, now, stall)) return false;
      break;
    case isa::ExecUnit::Mxu:
      if (!push(in, 8 + int(in[0]), now, stall)) return false;
      break;
  }
  if (rc_.faulted()) return false;
  ++by_class_[size_t(s.unit)];
  ++stats_.instructions;
  return true;
}

bool ScalarUnit::push(const isa::Instruction& in, int unit, uint64_t now, const char*& stall) {
  sc_core::sc_fifo<Issued>* q = nullptr;
  if (unit == 1) q = dma_q_;
  if (unit == 2) q = vpu_q_;
  if (unit >= 8) {
    if (size_t(unit - 8) >= mxu_q_.size()) {
      rc_.fault(fmt::format("core {} scalar: pc {}: {} names mxu{}, but the target has {} MXU(s) per core", p_.core, pc_,
                            isa::spec(in.op).mnemonic, unit - 8, mxu_q_.size()));
      return false;
    }
    q = mxu_q_[size_t(unit - 8)];
  }
  Issued is;
  is.insn = in;
  is.pc = pc_;
  is.issue_cycle = now;
  const auto& ops = isa::format_spec(isa::spec(in.op).format).operands;
  for (size_t i = 0; i < ops.size(); ++i)
    is.v[i] = ops[i].kind == isa::OperandKind::Sreg ? regs_[size_t(in[i])] : uint64_t(in[i]);
  if (!q->nb_write(is)) {
    stall = unit == 1 ? "queue_full.dma" : unit == 2 ? "queue_full.vpu" : "queue_full.mxu";
    return false;
  }
  if (trace_) trace_->instruction(track_id(p_.core, 0), pc_, now, now + 1, 0);
  ++pc_;
  return true;
}

void ScalarUnit::jump(int64_t target, uint64_t now) {
  const auto n = int64_t(p_.program->insns.size());
  if (target < 0 || target > n) {
    rc_.fault(fmt::format("core {} scalar: pc {}: branch target {} is outside the program (0..{})", p_.core, pc_, target, n));
    return;
  }
  pc_ = uint32_t(target);
  next_issue_ = now + 1 + p_.config->core.branch_penalty;
}

void ScalarUnit::execute_scalar(const isa::Instruction& in, uint64_t now) {
  auto r = [&](size_t i) { return regs_[size_t(in[i])]; };
  auto sr = [&](size_t i) { return int64_t(regs_[size_t(in[i])]); };
  const uint64_t imm = uint64_t(in[2]);  // sign-extended for RI formats
  const uint32_t pc = pc_;
  bool taken = false;
  int64_t target = 0;
  switch (in.op) {
    case Opcode::NOP: break;
    case Opcode::HALT: halted_ = true; break;
    case Opcode::ADD: set(int(in[0]), r(1) + r(2)); break;
    case Opcode::SUB: set(int(in[0]), r(1) - r(2)); break;
    case Opcode::MUL: set(int(in[0]), r(1) * r(2)); break;
    case Opcode::AND: set(int(in[0]), r(1) & r(2)); break;
    case Opcode::OR: set(int(in[0]), r(1) | r(2)); break;
    case Opcode::XOR: set(int(in[0]), r(1) ^ r(2)); break;
    case Opcode::SLL: set(int(in[0]), r(1) << (r(2) & 63)); break;
    case Opcode::SRL: set(int(in[0]), r(1) >> (r(2) & 63)); break;
    case Opcode::SRA: set(int(in[0]), uint64_t(sr(1) >> (r(2) & 63))); break;
    case Opcode::SLT: set(int(in[0]), sr(1) < sr(2)); break;
    case Opcode::SLTU: set(int(in[0]), r(1) < r(2)); break;
    case Opcode::SEQ: set(int(in[0]), r(1) == r(2)); break;
    case Opcode::MIN: set(int(in[0]), uint64_t(std::min(sr(1), sr(2)))); break;
    case Opcode::MAX: set(int(in[0]), uint64_t(std::max(sr(1), sr(2)))); break;
    case Opcode::ADDI: set(int(in[0]), r(1) + imm); break;
    case Opcode::MULI: set(int(in[0]), r(1) * imm); break;
    case Opcode::ANDI: set(int(in[0]), r(1) & imm); break;
    case Opcode::ORI: set(int(in[0]), r(1) | (imm & 0xffffffffu)); break;
    case Opcode::XORI: set(int(in[0]), r(1) ^ imm); break;
    case Opcode::SLLI: set(int(in[0]), r(1) << (imm & 63)); break;
    case Opcode::SRLI: set(int(in[0]), r(1) >> (imm & 63)); break;
    case Opcode::SRAI: set(int(in[0]), uint64_t(sr(1) >> (imm & 63))); break;
    case Opcode::SLTI: set(int(in[0]), sr(1) < int64_t(imm)); break;
    case Opcode::LI: set(int(in[0]), uint64_t(in[1])); break;
    case Opcode::LIH: set(int(in[0]), (uint64_t(in[1]) << 32) | (r(0) & 0xffffffffu)); break;
    case Opcode::LDS:
    case Opcode::STS: {
      const uint64_t addr = r(1) + imm;
      if (auto err = smem_.check_range(addr, 8, 8, "SMEM")) {
        rc_.fault(fmt::format("core {} scalar: pc {}: {}", p_.core, pc, *err));
        return;
      }
      if (in.op == Opcode::LDS) {
        uint64_t v;
        smem_.read(addr, &v, 8);
        set(int(in[0]), v);
      } else {
        uint64_t v = r(0);
        smem_.write(addr, &v, 8);
      }
      break;
    }
    case Opcode::BEQ: taken = r(0) == r(1), target = pc + in[2]; break;
    case Opcode::BNE: taken = r(0) != r(1), target = pc + in[2]; break;
    case Opcode::BLT: taken = sr(0) < sr(1), target = pc + in[2]; break;
    case Opcode::BGE: taken = sr(0) >= sr(1), target = pc + in[2]; break;
    case Opcode::BLTU: taken = r(0) < r(1), target = pc + in[2]; break;
    case Opcode::BGEU: taken = r(0) >= r(1), target = pc + in[2]; break;
    case Opcode::JMP: taken = true, target = pc + in[0]; break;
    case Opcode::LOOP:
      set(int(in[0]), r(0) - 1);
      taken = r(0) != 0;
      target = pc + in[1];
      break;
    case Opcode::CSRR: {
      const auto& t = p_.config->target;
      uint64_t v = 0;
      switch (in[1]) {
        case 0: v = 0; break;  // chip: one chip until ICI is modelled
        case 1: v = t.chips; break;
        case 2: v = uint64_t(p_.core); break;
        case 3: v = t.cores; break;
        case 4: v = now; break;
      }
      set(int(in[0]), v);
      break;
    }
    default:
      throw std::logic_error(fmt::format("internal error: {} is not a scalar instruction", isa::spec(in.op).mnemonic));
  }
  if (trace_) trace_->instruction(track_id(p_.core, 0), pc, now, now + 1, 0);
  if (taken)
    jump(target, now);
  else
    ++pc_;
}

}  // namespace tpu::sim
