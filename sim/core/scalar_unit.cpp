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
  if (sleep_.woke(now, stats_)) {
    if (waiting_) sems_.withdraw(0);  // woken without a grant: it asks again next edge
    return;
  }
  if (halted_) {
    finish(UnitState::Idle, "");
    if (rc_.units_sleep()) sleep_.until(never_, now, UnitState::Idle, "");
    return;
  }
  if (now < next_issue_) return finish(UnitState::Stalled, "branch");
  if (waiting_) {
    if (!sems_.take_grant(0)) {
      const auto& in = *p_.program->insns[pc_];
      sems_.request_wait(0, int(in[isa::operand::SYNC::sem]), uint32_t(in[isa::operand::SYNC::count]));
      finish(UnitState::Blocked, "semaphore");
      if (rc_.units_sleep()) {
        sems_.stand(0);
        sleep_.until(sems_.grant_event(0), now, UnitState::Blocked, "semaphore");
      }
      return;
    }
    waiting_ = false;
    if (trace_) trace_->instruction(track_id(p_.core, isa::kUnitScalar), pc_, wait_start_, now, 0);
    ++pc_;
  }
  // Up to core.issue_width instructions in order; the group ends at a taken
  // branch, a wait, halt, a full queue, or an instruction naming a scalar
  // register written earlier in the group.
  uint64_t written = 0;
  const char* stall = nullptr;
  full_ = nullptr;
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
  // A full queue stalls the unit until the queue's unit takes an instruction.
  if (full_ && rc_.units_sleep()) sleep_.until(full_->data_read_event(), now, UnitState::Stalled, stall);
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
    default:  // rd
      return in[isa::operand::R3::rd] != 0 ? uint64_t(1) << in[isa::operand::R3::rd] : 0;
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
    case isa::ExecUnit::Sync: {
      using isa::operand::SYNC;
      if (in[SYNC::unit] == isa::kUnitScalar) {  // the scalar unit itself
        if (in.op == Opcode::WAIT) {
          sems_.request_wait(0, int(in[SYNC::sem]), uint32_t(in[SYNC::count]));
          waiting_ = true;
          wait_start_ = now;
          ++by_class_[size_t(s.unit)];
          ++stats_.instructions;
          return true;  // busy this cycle; the grant is seen next cycle
        }
        sems_.signal(int(in[SYNC::sem]), uint32_t(in[SYNC::count]));
        if (trace_) trace_->instruction(track_id(p_.core, isa::kUnitScalar), pc_, now, now + 1, 0);
        ++pc_;
        break;
      }
      if (!push(in, int(in[SYNC::unit]), now, stall)) return false;
      break;
    }
    case isa::ExecUnit::Dma:
      if (!push(in, isa::kUnitDma, now, stall)) return false;
      break;
    case isa::ExecUnit::Vpu:
      if (!push(in, isa::kUnitVpu, now, stall)) return false;
      break;
    case isa::ExecUnit::Mxu:
      static_assert(+isa::operand::M1::mxu == +isa::operand::MLW::mxu && +isa::operand::M1::mxu == +isa::operand::MMM::mxu);
      if (!push(in, isa::kUnitMxu0 + int(in[isa::operand::M1::mxu]), now, stall)) return false;
      break;
  }
  if (rc_.faulted()) return false;
  ++by_class_[size_t(s.unit)];
  ++stats_.instructions;
  return true;
}

bool ScalarUnit::push(const isa::Instruction& in, int unit, uint64_t now, const char*& stall) {
  sc_core::sc_fifo<Issued>* q = nullptr;
  if (unit == isa::kUnitDma) q = dma_q_;
  if (unit == isa::kUnitVpu) q = vpu_q_;
  if (unit >= isa::kUnitMxu0) {
    if (size_t(unit - isa::kUnitMxu0) >= mxu_q_.size()) {
      rc_.fault(fmt::format("core {} scalar: pc {}: {} names mxu{}, but the target has {} MXU(s) per core", p_.core, pc_,
                            isa::spec(in.op).mnemonic, unit - isa::kUnitMxu0, mxu_q_.size()));
      return false;
    }
    q = mxu_q_[size_t(unit - isa::kUnitMxu0)];
  }
  Issued is;
  is.insn = in;
  is.pc = pc_;
  is.issue_cycle = now;
  const auto& ops = isa::format_spec(isa::spec(in.op).format).operands;
  for (size_t i = 0; i < ops.size(); ++i)
    is.v[i] = ops[i].kind == isa::OperandKind::Sreg ? regs_[size_t(in[i])] : uint64_t(in[i]);
  if (!q->nb_write(is)) {
    stall = unit == isa::kUnitDma ? "queue_full.dma" : unit == isa::kUnitVpu ? "queue_full.vpu" : "queue_full.mxu";
    full_ = q;
    return false;
  }
  if (trace_) trace_->instruction(track_id(p_.core, isa::kUnitScalar), pc_, now, now + 1, 0);
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
  using namespace isa::operand;
  auto r = [&](int i) { return regs_[size_t(in[size_t(i)])]; };
  auto sr = [&](int i) { return int64_t(regs_[size_t(in[size_t(i)])]); };
  // Register-register and register-immediate forms put rd and rs1 alike.
  static_assert(+R3::rd == +RI::rd && +R3::rs1 == +RI::rs1 && +R3::rd == +I1::rd && +R3::rd == +CSR::rd);
  const int rd = int(in[R3::rd]);
  const uint64_t imm = uint64_t(in[RI::imm]);  // sign-extended
  const uint32_t pc = pc_;
  bool taken = false;
  int64_t target = 0;
  switch (in.op) {
    case Opcode::NOP: break;
    case Opcode::HALT: halted_ = true; break;
    case Opcode::ADD: set(rd, r(R3::rs1) + r(R3::rs2)); break;
    case Opcode::SUB: set(rd, r(R3::rs1) - r(R3::rs2)); break;
    case Opcode::MUL: set(rd, r(R3::rs1) * r(R3::rs2)); break;
    case Opcode::AND: set(rd, r(R3::rs1) & r(R3::rs2)); break;
    case Opcode::OR: set(rd, r(R3::rs1) | r(R3::rs2)); break;
    case Opcode::XOR: set(rd, r(R3::rs1) ^ r(R3::rs2)); break;
    case Opcode::SLL: set(rd, r(R3::rs1) << (r(R3::rs2) & 63)); break;
    case Opcode::SRL: set(rd, r(R3::rs1) >> (r(R3::rs2) & 63)); break;
    case Opcode::SRA: set(rd, uint64_t(sr(R3::rs1) >> (r(R3::rs2) & 63))); break;
    case Opcode::SLT: set(rd, sr(R3::rs1) < sr(R3::rs2)); break;
    case Opcode::SLTU: set(rd, r(R3::rs1) < r(R3::rs2)); break;
    case Opcode::SEQ: set(rd, r(R3::rs1) == r(R3::rs2)); break;
    case Opcode::MIN: set(rd, uint64_t(std::min(sr(R3::rs1), sr(R3::rs2)))); break;
    case Opcode::MAX: set(rd, uint64_t(std::max(sr(R3::rs1), sr(R3::rs2)))); break;
    case Opcode::ADDI: set(rd, r(RI::rs1) + imm); break;
    case Opcode::MULI: set(rd, r(RI::rs1) * imm); break;
    case Opcode::ANDI: set(rd, r(RI::rs1) & imm); break;
    case Opcode::ORI: set(rd, r(RI::rs1) | (imm & 0xffffffffu)); break;
    case Opcode::XORI: set(rd, r(RI::rs1) ^ imm); break;
    case Opcode::SLLI: set(rd, r(RI::rs1) << (imm & 63)); break;
    case Opcode::SRLI: set(rd, r(RI::rs1) >> (imm & 63)); break;
    case Opcode::SRAI: set(rd, uint64_t(sr(RI::rs1) >> (imm & 63))); break;
    case Opcode::SLTI: set(rd, sr(RI::rs1) < int64_t(imm)); break;
    case Opcode::LI: set(rd, uint64_t(in[I1::imm])); break;
    case Opcode::LIH: set(rd, (uint64_t(in[I1::imm]) << 32) | (r(I1::rd) & 0xffffffffu)); break;
    case Opcode::LDS:
    case Opcode::STS: {
      static_assert(+RI::rs1 == +ST::rs1 && +RI::imm == +ST::imm, "lds and sts address SMEM alike");
      const uint64_t addr = r(RI::rs1) + imm;
      if (auto err = smem_.check_range(addr, 8, 8, "SMEM")) {
        rc_.fault(fmt::format("core {} scalar: pc {}: {}", p_.core, pc, *err));
        return;
      }
      if (in.op == Opcode::LDS) {
        uint64_t v;
        smem_.read(addr, &v, 8);
        set(rd, v);
      } else {
        uint64_t v = r(ST::rs2);
        smem_.write(addr, &v, 8);
      }
      break;
    }
    case Opcode::BEQ: taken = r(B::rs1) == r(B::rs2), target = pc + in[B::target]; break;
    case Opcode::BNE: taken = r(B::rs1) != r(B::rs2), target = pc + in[B::target]; break;
    case Opcode::BLT: taken = sr(B::rs1) < sr(B::rs2), target = pc + in[B::target]; break;
    case Opcode::BGE: taken = sr(B::rs1) >= sr(B::rs2), target = pc + in[B::target]; break;
    case Opcode::BLTU: taken = r(B::rs1) < r(B::rs2), target = pc + in[B::target]; break;
    case Opcode::BGEU: taken = r(B::rs1) >= r(B::rs2), target = pc + in[B::target]; break;
    case Opcode::JMP: taken = true, target = pc + in[J::target]; break;
    case Opcode::LOOP:
      set(int(in[LOOP::rc]), r(LOOP::rc) - 1);
      taken = r(LOOP::rc) != 0;
      target = pc + in[LOOP::target];
      break;
    case Opcode::CSRR: {
      const auto& t = p_.config->target;
      uint64_t v = 0;
      switch (int(in[CSR::csr])) {
        case isa::values::Csr_chip: v = uint64_t(p_.chip); break;
        case isa::values::Csr_nchips: v = t.chips; break;
        case isa::values::Csr_core: v = uint64_t(p_.core); break;
        case isa::values::Csr_ncores: v = t.cores; break;
        case isa::values::Csr_cycle: v = now; break;
      }
      set(rd, v);
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
