// The back end (codegen.h): plan kernels over the canonical IR (plan.h),
// emit each core's instructions for them (emitter.h; one emit_*.cpp per
// kernel kind), fold them into loops (loops.h) and encode the program.
// docs/compiler.md explains the kernels and their synchronisation; in short:
//
// - Every materialised tensor lives in HBM, row-major; reshape is free.
// - Element-wise ops fuse into one VPU loop over the flat tensor, with
//   scalars, splat constants and row vectors (bias) broadcast inside it.
// - A matmul (a dot, or a sum of dots such as the bf16 passes of an f32 dot)
//   runs on every MXU, with its element-wise consumer fused as the epilogue
//   the VPU applies while it drains the accumulators.
// - Reductions and layout changes (transpose, slice, pad, concatenate,
//   broadcast) have their own kernels.
// - Every kernel double-buffers its VMEM tiles: DMA, MXU and VPU work
//   overlap, ordered by counting semaphores; kernels follow each other.
#include "tpu/compiler/codegen.h"

#include "emitter.h"

namespace tpu::compiler {

using namespace backend;

namespace backend {

Generated Emitter::run() {
  Generated g;
  isa::Program& prog = g.program;
  prog.target = p_.t;
  prog.symbols = p_.symbols;
  prog.data = p_.data;
  prog.checks = p_.f.checks;
  prog.hbm_peak = p_.hbm_used;
  for (size_t i = 0; i < p_.kernels.size(); ++i) {
    kernel_ops_.push_back(p_.profile_ops(p_.kernels[i]));
    isa::KernelInfo info{debug_text(kernel_name(i, p_.kernels[i])), {}};
    for (const auto& [loc, work] : kernel_ops_.back()) info.ops.push_back({debug_text(loc), work});
    prog.kernels.push_back(std::move(info));
  }
  // Each (chip, core) runs its own code: the cores split the work, and a
  // system's chips (an SPMD program) differ in their collectives.
  std::vector<isa::Instruction> code;
  const int64_t programs = nchips_ * ncores_;
  std::vector<size_t> branch;  // per program after the first: the beq to its code
  if (programs > 1) {
    constexpr int id = 29, tmp = 30;
    if (nchips_ > 1) {
      code.push_back(ib::CSRR(id, isa::values::Csr_chip));
      code.push_back(ib::MULI(id, id, ncores_));
      code.push_back(ib::CSRR(tmp, isa::values::Csr_core));
      code.push_back(ib::ADD(id, id, tmp));
    } else {
      code.push_back(ib::CSRR(id, isa::values::Csr_core));
    }
    for (int64_t c = 1; c < programs; ++c) {
      code.push_back(ib::LI(tmp, c));
      branch.push_back(code.size());
      code.push_back(ib::BEQ(id, tmp, 0));
    }
  }
  std::vector<std::pair<size_t, int>> marks;
  for (int64_t c = 0; c < programs; ++c) {
    Emitter e(p_, m_, loops_, c % ncores_, ncores_, c / ncores_, nchips_);
    e.kernel_ops_ = kernel_ops_;
    const size_t start = code.size();
    if (c > 0) code[branch[size_t(c - 1)]][isa::operand::B::target] = int64_t(start - branch[size_t(c - 1)]);
    LoopCode body = e.body();
    if (start + body.code.size() > isa::kMaxInstructions)
      throw Error(fmt::format("the program needs more than {} instructions, the most a .tpu holds", isa::kMaxInstructions));
    code.insert(code.end(), body.code.begin(), body.code.end());
    for (const auto& [pc, k] : body.kernel_marks) marks.push_back({start + pc, k});
    for (auto& [pc, text] : body.notes) g.notes.push_back({start + pc, std::move(text)});
  }
  prog.code.reserve(code.size());
  for (const isa::Instruction& i : code) prog.code.push_back(isa::encode(i));
  if (!prog.kernels.empty()) {
    prog.kernel_of.assign(code.size(), isa::kNoKernel);
    for (size_t i = 0; i < marks.size(); ++i) {
      const size_t end = i + 1 < marks.size() ? marks[i + 1].first : code.size();
      std::fill(prog.kernel_of.begin() + long(marks[i].first), prog.kernel_of.begin() + long(end), uint32_t(marks[i].second));
    }
  }
  isa::validate(prog);
  return g;
}

namespace {

// Appends a segment of code.
void append(LoopCode& out, LoopCode&& seg) {
  const size_t at = out.code.size();
  out.code.insert(out.code.end(), seg.code.begin(), seg.code.end());
  for (auto& [pc, k] : seg.kernel_marks) out.kernel_marks.push_back({at + pc, k});
  for (auto& [pc, text] : seg.notes) out.notes.push_back({at + pc, std::move(text)});
  out.loops += seg.loops;
}

}  // namespace

LoopCode Emitter::body() {
  LoopCode out;
  kernels(out, false);
  cur_kernel_ = -1;
  push(kSc, now(), ib::HALT());
  append(out, schedule());
  return out;
}

void Emitter::kernels(LoopCode& out, bool barrier_after) {
  for (size_t i = 0; i < p_.kernels.size(); ++i) {
    if (p_.kernels[i].kind == KKind::loop) loop(i, p_.kernels[i], out);
    else kernel(i, p_.kernels[i]);
    if (ncores_ > 1 && (barrier_after || i + 1 < p_.kernels.size())) core_barrier();
    append(out, schedule());
  }
}

LoopCode Emitter::region(const LoopPlan* moves) {
  for (const Kernel& k : p_.kernels) kernel_ops_.push_back(p_.profile_ops(k));
  LoopCode out;
  kernels(out, true);
  if (moves) {
    // The results into the state buffers; those that are other state
    // elements first out of the way.
    std::vector<std::array<uint64_t, 3>> first, then;
    for (size_t j = 0; j < moves->state.size(); ++j) {
      uint64_t src = p_.addr[size_t(p_.base[size_t(p_.f.results[j])])];
      if (src == moves->state[j] || moves->bytes[j] == 0) continue;
      if (moves->temps[j] != 0) first.push_back({moves->temps[j], src, moves->bytes[j]}), src = moves->temps[j];
      then.push_back({moves->state[j], src, moves->bytes[j]});
    }
    for (const auto* m : {&first, &then}) {
      if (m->empty()) continue;
      vmem_top_ = 0;
      vregs_.reset();
      note("");
      note(m == &first ? "the body's results that are its state, aside" : "the body's results into the loop's state");
      move_bytes(*m);
      if (ncores_ > 1) core_barrier();
    }
  }
  append(out, schedule());
  return out;
}

void Emitter::move_bytes(const std::vector<std::array<uint64_t, 3>>& moves) {
  std::vector<std::pair<View, View>> pairs;
  for (const auto& [dst, src, bytes] : moves)
    if (bytes > 0) pairs.push_back({View{dst, {int64_t(bytes)}, {1}}, View{src, {int64_t(bytes)}, {1}}});
  copy_pairs(pairs, DType::s8, ncores_);
}

void Emitter::loop(size_t idx, const Kernel& k, LoopCode& out) {
  begin_kernel(idx, k);
  const LoopPlan& l = p_.loops[size_t(k.loop)];
  std::vector<std::array<uint64_t, 3>> init;
  for (size_t j = 0; j < l.state.size(); ++j)
    if (l.state[j] != p_.addr[size_t(k.inputs[j])]) init.push_back({l.state[j], p_.addr[size_t(k.inputs[j])], l.bytes[j]});
  move_bytes(init);
  if (ncores_ > 1) core_barrier();
  append(out, schedule());
  auto part = [&](const Plan& p, const LoopPlan* moves) {
    Emitter e(p, m_, loops_, core_, ncores_, chip_, nchips_);
    e.mark_ = mark(idx);
    e.prefix_ = fmt::format("{}loop %{} {}, ", prefix_, k.out, moves ? "body" : "condition");
    e.loop_depth_ = loop_depth_ + 1;
    return e.region(moves);
  };
  auto& code = out.code;
  // A counted loop keeps the trips left in an SMEM word of its own (one per
  // level of nesting, after word 0) and runs no condition.
  const int64_t counter = 8 * (1 + loop_depth_);
  size_t top = code.size();
  if (l.trips >= 0) {
    load_constant(code, 1, uint64_t(l.trips));
    code.push_back(ib::STS(1, 0, counter));
    top = code.size();
    code.push_back(ib::LDS(1, 0, counter));
  } else {
    append(out, part(*l.cond, nullptr));
    // The condition's pred[] (one byte in HBM) into SMEM word 0, zeroed
    // first, and from there into s1; every unit is idle here and every
    // semaphore 0 (the kernels before drained).
    const Plan& c = *l.cond;
    const uint64_t pred = c.addr[size_t(c.base[size_t(c.f.results[0])])];
    code.push_back(ib::STS(0, 0, 0));
    load_constant(code, 2, pred);
    load_constant(code, 3, 1);
    code.push_back(ib::DMA_LDS(0, 2, 3, 0));
    code.push_back(ib::WAIT(kSc, 0, 1));
    code.push_back(ib::LDS(1, 0, 0));
  }
  const size_t exit = code.size();
  code.push_back(ib::BEQ(1, 0, 0));
  if (l.trips >= 0) {
    code.push_back(ib::ADDI(1, 1, -1));
    code.push_back(ib::STS(1, 0, counter));
  }
  append(out, part(*l.body, &l));
  code.push_back(ib::JMP(int64_t(top) - int64_t(code.size())));
  code[exit][isa::operand::B::target] = int64_t(code.size() - exit);
  carry_ = WriterState();  // the loop's code left its own values in the registers
}

void Emitter::begin_kernel(size_t idx, const Kernel& k) {
  kernel_loc_ = k.from.empty() ? fmt::format("kernel {}", idx) : k.from.back();
  vmem_top_ = 0;
  next_sem_ = 0;
  vregs_.reset();
  note("");
  note(prefix_ + kernel_name(idx, k));
  cur_kernel_ = mark(idx);
  for (const auto& [loc, work] : kernel_ops_[idx]) note("  from " + loc);
}

void Emitter::kernel(size_t idx, const Kernel& k) {
  begin_kernel(idx, k);
  if (p_.type(k.out).elements() == 0) return;
  if (const std::vector<int> s = p_.slices_read(k); !s.empty()) slice_offset(p_.op(s[0]), p_.type(s[0]).dims);
  switch (k.kind) {
    case KKind::elementwise: elementwise(k); break;
    case KKind::copy: copy(k); break;
    case KKind::reduce_lanes: reduce_lanes(k); break;
    case KKind::reduce_columns: reduce_columns(k); break;
    case KKind::matmul: matmul(k); break;
    case KKind::all_reduce: all_reduce(k); break;
    case KKind::all_gather: all_gather(k); break;
    case KKind::reduce_scatter: reduce_scatter(k); break;
    case KKind::all_to_all: all_to_all(k); break;
    case KKind::permute: permute(k); break;
    case KKind::loop: throw std::logic_error("internal error: a loop is not a kernel");
  }
}

}  // namespace backend

// ---------------------------------------------------------------- Backend

Backend::Backend(const Function& f, const isa::MachineConfig& m, bool loops) : plan_(new Plan(f, m.target)), machine_(m), loops_(loops) {}
Backend::~Backend() { delete plan_; }

std::string Backend::describe() const {
  const Plan& p = *plan_;
  std::string s = fmt::format("# kernel plan: {} kernels, {} bytes of HBM\n", p.kernels.size(), p.hbm_used);
  for (size_t i = 0; i < p.kernels.size(); ++i) {
    const Kernel& k = p.kernels[i];
    std::vector<std::string> in;
    for (int v : k.inputs) in.push_back(fmt::format("%{}", v));
    if (k.kind == KKind::loop) {
      const LoopPlan& l = p.loops[size_t(k.loop)];
      std::vector<std::string> st;
      for (uint64_t a : l.state) st.push_back(fmt::format("{:#x}", a));
      const std::string cond = l.trips >= 0 ? fmt::format("{} trips (counted: no condition)", l.trips)
                                             : fmt::format("condition {} kernels", l.cond->kernels.size());
      s += fmt::format("kernel {}: loop %{} state @ [{}], {} bytes of scratch @ {:#x}; {}, body {} kernels\n", i, k.out,
                       fmt::join(st, ", "), l.scratch_bytes, l.scratch, cond, l.body->kernels.size());
      continue;
    }
    s += fmt::format("kernel {}: {} -> %{} {} @ {:#x}", i, kind_name(k.kind), k.out, p.type(k.out).str(), p.addr[k.out]);
    for (int v : k.expr.stored_values()) s += fmt::format(", %{} {} @ {:#x}", v, p.type(v).str(), p.addr[v]);
    if (!in.empty()) s += fmt::format(" reads {}", fmt::join(in, ", "));
    if (k.kind == KKind::matmul) {
      std::vector<std::string> ps;
      for (auto [a, w] : k.passes) ps.push_back(fmt::format("%{}x%{}", a, w));
      s += fmt::format(" passes {} [B={} M={} K={} N={}]", fmt::join(ps, " + "), k.B, k.M, k.K, k.N);
    }
    if (k.kind == KKind::elementwise || (k.kind == KKind::matmul && k.expr.nodes.size() > 1)) {
      std::vector<std::string> ops;
      for (const Node& nd : k.expr.nodes)
        if (nd.leaf == Leaf::none) ops.push_back(op_name(nd.kind));
      s += fmt::format(" ops [{}]", fmt::join(ops, " "));
    }
    s += "\n";
  }
  return s;
}

Generated Backend::generate() const {
  return Emitter(*plan_, machine_, loops_, 0, int64_t(plan_->t.cores), 0, plan_->f.devices).run();
}

}  // namespace tpu::compiler
