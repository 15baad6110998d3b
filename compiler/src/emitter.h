// The emitter (internal to the back end, codegen.h): each kernel of the plan
// as scheduled instructions for one TensorCore, through the unit model
// below. Its kernel kinds are written in emit_*.cpp. docs/compiler.md,
// "Code generation and the schedule".
#pragma once

#include <functional>

#include "loops.h"
#include "plan.h"
#include "tpu/compiler/codegen.h"
#include "tpu/isa/isa.h"
#include "tpu/isa/machine.h"

namespace tpu::compiler::backend {

namespace ib = isa::build;

// The opcode of the mnemonic `parts` spell: instruction selection is a
// lookup in isa.def's table (a name it lacks is a bug here).
template <typename... S>
inline isa::Opcode opcode(const S&... parts) {
  std::string m;
  ((m += parts), ...);
  const isa::InsnSpec* s = isa::find_mnemonic(m);
  if (s == nullptr) throw std::logic_error("internal error: no instruction " + m);
  return s->op;
}

// Instruction `op` with its scalar-register operands left 0 for the values
// push() binds to them, and its other operands `rest`, in format order.
inline isa::Instruction with_regs(isa::Opcode op, std::initializer_list<int64_t> rest) {
  const auto& ops = isa::format_spec(isa::spec(op).format).operands;
  std::vector<int64_t> v;
  auto it = rest.begin();
  for (const auto& o : ops) {
    if (o.kind == isa::OperandKind::Sreg) v.push_back(0);
    else if (it == rest.end()) throw std::logic_error(fmt::format("internal error: {} lacks its {}", isa::spec(op).mnemonic, o.role));
    else v.push_back(*it++);
  }
  return isa::make(op, v.data(), v.size());
}

// A semaphore whose counts arrive in order: consumers wait for running totals.
struct Counter {
  int sem = 0;
  int64_t produced = 0, consumed = 0;
  // when[i]: estimated cycle by which i + 1 counts have arrived (a running
  // maximum, so a wait is placed after every signal it may need).
  std::vector<double> when;
  void produce(double t, int64_t n = 1) {
    produced += n;
    if (!when.empty()) t = std::max(t, when.back());
    when.insert(when.end(), size_t(n), t);
  }
};

// One instruction (or comment) before the schedule orders them.
struct Pending {
  double key = 0;  // its place in the program: its dispatch estimate, unless pinned (Emitter::pin_)
  Scheduled s;
};

// The DMA's bytes per cycle for the cost model: the HBM's peak, or with
// ideal memory (no bandwidth limit) what the engine sends, whole bursts a
// cycle.
inline double dma_bytes_per_cycle(const isa::MachineConfig& m) {
  const double peak = m.hbm_peak_bytes_per_s();
  return peak > 0 ? std::max(1.0, peak / double(m.clock_hz)) : double(m.dma.burst_bytes) * m.dma.bursts_per_cycle;
}

// The vector registers of the kernel being emitted. What the kernel holds
// for its whole length (constants, scalar inputs, a lane mask) is taken
// from v31 down; values computed per vector use v0 up to below those.
class VRegs {
 public:
  void reset() { *this = VRegs(); }
  // A register held for the rest of the kernel.
  int hold() {
    if (top_ <= low_) throw std::logic_error("internal error: out of vector registers");
    return --top_;
  }
  // The register that holds lane pattern `bits`, and whether it is new (its
  // holder loads it).
  std::pair<int, bool> constant(uint32_t bits) {
    if (auto it = consts_.find(bits); it != consts_.end()) return {it->second, false};
    return {consts_[bits] = hold(), true};
  }
  int at(uint32_t bits) const { return consts_.at(bits); }
  // Per-vector values use v0 .. v(n - 1) from now on; returns how many are free for them.
  int below_held() const { return top_; }
  void per_vector(int n) {
    if (n > top_) throw std::logic_error("internal error: out of vector registers");
    low_ = std::max(low_, n);
  }

 private:
  std::map<uint32_t, int> consts_;
  int top_ = isa::kNumVregs, low_ = 0;
};

class MatmulEmitter;

// The units, numbered as `wait` and `signal` name them.
constexpr int kSc = isa::kUnitScalar, kDma = isa::kUnitDma, kVpu = isa::kUnitVpu, kMxu0 = isa::kUnitMxu0;

class Emitter {
 public:
  // The program of core `core` of `ncores` (each runs its share of every
  // kernel; see run()) of chip `chip` of `nchips` (its collectives differ).
  Emitter(const Plan& p, const isa::MachineConfig& m, bool loops, int64_t core = 0, int64_t ncores = 1, int64_t chip = 0,
          int64_t nchips = 1)
      : p_(p),
        core_(core),
        ncores_(ncores),
        chip_(chip),
        nchips_(nchips),
        L_(int64_t(p.t.vpu_lanes)),
        D_(int64_t(p.t.mxu_dim)),
        m_(m),
        loops_(loops),
        kDmaBytesPerCycle(dma_bytes_per_cycle(m)),
        kDmaLatency(m.dma_latency_cycles()),
        kDmaBurst(m.dma.burst_bytes),
        kDmaBurstsPerCycle(m.dma.bursts_per_cycle),
        vgrp_(m.vpu.issue),
        mxu_(m.mxu_timing()) {}

  // The whole program. On a chip of several TensorCores every core runs
  // it: each reads its `core` CSR and branches to its own code, which does
  // its share of every kernel (Emitter::share) and meets the other cores at
  // the end of each kernel (their results are in HBM before any core reads
  // them in the next).
  Generated run();

 private:
  // This core's code: its share of every kernel, each followed (on several
  // cores) by a barrier across the cores.
  LoopCode body();
  // Every core's stores of the kernel have landed (its drain waited for
  // them); each tells the others behind its own transfers and waits for
  // theirs, on a semaphore no kernel uses.
  void core_barrier() {
    for (int64_t o = 0; o < ncores_; ++o)
      if (o != core_) push(kDma, done_[kDma], ib::DMA_CSIG(0, kCoreSem, 1), {uint64_t(o)});
    push(kSc, now(), ib::WAIT(kSc, kCoreSem, ncores_ - 1));
  }
  // [lo, hi) of n items (multiples of `align` but the last) for this core.
  std::pair<int64_t, int64_t> share(int64_t n, int64_t align) const {
    auto cut = [&](int64_t c) { return c == ncores_ ? n : n * c / ncores_ / align * align; };
    return {cut(core_), cut(core_ + 1)};
  }

  // ---- scheduling. Kernels are generated unit by unit in dependency order;
  // every instruction gets an estimated dispatch cycle from a simple model
  // of its unit (below). The program is then those instructions sorted by
  // that cycle (stable, so each unit keeps its order and every signal
  // precedes the waits it satisfies): the scalar unit pushes work to each
  // queue shortly before the queue can take it, so no queue fills up with
  // blocked work while another unit starves.
  static constexpr int kBarrierSem = isa::kNumSems - 1;  // every queue signals it at the end of a kernel
  static constexpr int kCoreSem = isa::kNumSems - 2;     // the other cores signal it at the end of a kernel
  static constexpr int kChipSem = isa::kNumSems - 3;     // the other chips signal it entering a collective
  double now() const {
    double t = floor_;
    for (double c : clk_) t = std::max(t, c);
    return t;
  }
  // Records an instruction of `unit` that may not dispatch before `ready`,
  // keeps the unit busy `occupancy` cycles and completes `latency` after it
  // dispatches. Returns the dispatch estimate.
  // `vals` are the values of its scalar-register operands, in order; the
  // loop writer puts each in a register (loops.h).
  double push(int unit, double ready, const isa::Instruction& insn, std::vector<uint64_t> vals = {}, double occupancy = 1,
              double latency = 1) {
    if (unit == kVpu) return push_vpu(ready, insn, std::move(vals), occupancy, latency);
    const double t = std::max({clk_[unit], ready, floor_, pin_});
    record(t, unit, insn, std::move(vals));
    clk_[unit] = t + std::max(1.0, occupancy);
    done_[unit] = std::max(done_[unit], t + latency);
    if (unit == kSc) floor_ = t;  // the scalar unit stalls: nothing after it issues earlier
    return t;
  }
  // The VPU dispatches in order, in issue groups by the simulator's rule
  // (isa::VpuIssueGroup); `wait` takes no slot, `signal` and `vxpose` go alone.
  // An instruction waits for the vector registers it names to be ready (the
  // VPU's dependency stall; isa::register_use says which). Its slot and
  // latency come from its class (isa.def) and the config.
  double push_vpu(double ready, const isa::Instruction& insn, std::vector<uint64_t> vals, double occupancy, double latency) {
    const isa::InsnSpec* spec = &isa::spec(insn.op);
    const bool wait = spec->op == isa::Opcode::WAIT, sync = spec->unit == isa::ExecUnit::Sync;
    const bool alone = sync || isa::vpu_slot(spec->vpu_class) == isa::VpuSlot::Whole;
    if (!sync) latency = m_.vpu_latency(spec->vpu_class);
    auto next_group = [&](double t) { vgroup_ = t, vgrp_ = isa::VpuIssueGroup(m_.vpu.issue); };
    const isa::RegisterUse regs = sync ? isa::RegisterUse{} : isa::register_use(insn);
    for (uint32_t r = regs.vread | regs.vwrite; r != 0; r &= r - 1) ready = std::max(ready, vready_[__builtin_ctz(r)]);
    double t = std::max({ready, vgroup_, floor_, pin_});
    if (t > vgroup_) next_group(t);
    if (!wait) {
      if (vgrp_.size() > 0 && (sync || !vgrp_.admits(insn.op))) next_group(vgroup_ + 1);
      t = vgroup_;
      if (alone) {
        next_group(t + std::max(1.0, occupancy));
      } else {
        vgrp_.add(insn.op);
      }
    }
    for (uint32_t r = regs.vwrite; r != 0; r &= r - 1) vready_[__builtin_ctz(r)] = t + latency;
    record(t, kVpu, insn, std::move(vals));
    clk_[kVpu] = vgrp_.size() > 0 ? vgroup_ + 1 : vgroup_;
    done_[kVpu] = std::max(done_[kVpu], t + latency);
    return t;
  }
  // Adds an instruction at its place; `vals` bind its scalar-register
  // operands, in order. A VPU load or store from `s0 + imm` has its
  // address bound instead, so a loop can step it.
  void record(double t, int unit, const isa::Instruction& insn, std::vector<uint64_t> vals) {
    Scheduled s;
    s.unit = unit, s.insn = insn, s.kernel = cur_kernel_, s.t = t;
    const auto& ops = isa::format_spec(isa::spec(insn.op).format).operands;
    const isa::Format f = isa::spec(insn.op).format;
    if (vals.empty() && (f == isa::Format::VLD || f == isa::Format::VST) && insn[isa::operand::VLD::rs1] == 0) {
      static_assert(int(isa::operand::VLD::rs1) == int(isa::operand::VST::rs1) && int(isa::operand::VLD::imm) == int(isa::operand::VST::imm) &&
                    isa::operand::VLD::imm == isa::operand::VLD::rs1 + 1);
      s.vals = {uint64_t(insn[isa::operand::VLD::imm])};
      s.at[0] = isa::operand::VLD::rs1, s.addr = 0;
      s.insn[isa::operand::VLD::imm] = 0;
    } else if (!vals.empty()) {
      size_t v = 0;
      for (size_t o = 0; o < ops.size(); ++o)
        if (ops[o].kind == isa::OperandKind::Sreg) {
          if (v == vals.size() || v == Scheduled::kMaxBound) throw std::logic_error("internal error: operands do not match");
          s.at[v++] = int8_t(o);
        }
      if (v != vals.size()) throw std::logic_error("internal error: operands do not match");
      s.vals = std::move(vals);
    }
    add(place(t, unit), std::move(s));
  }
  // Appends to the program, unless a loop's later iterations are being run
  // through the model alone (repeat()).
  void add(double key, Scheduled s) {
    max_key_ = std::max(max_key_, key);
    if (!ghost_) prog_.push_back({key, std::move(s)});
  }
  std::string kernel_name(size_t idx, const Kernel& k) const {
    std::string also;
    for (int v : k.expr.stored_values()) also += fmt::format(", %{}", v);
    return fmt::format("kernel {}: {} -> %{} {}{}", idx, kind_name(k.kind), k.out, p_.type(k.out).str(), also);
  }
  // Text for a .kernel string: no quote, backslash or control character.
  static std::string debug_text(std::string t) {
    if (t.size() > isa::kMaxDebugText) t.resize(isa::kMaxDebugText);
    for (char& c : t)
      if (uint8_t(c) < 0x20 || c == '"' || c == '\\' || uint8_t(c) == 0x7f) c = '?';
    return t;
  }
  // Where something estimated to dispatch at t goes in the program.
  // Pinned work of a unit goes after the unit's work pushed before it, so
  // every queue receives its work in the order the cost model assumed.
  double place(double t, int unit = -1) {
    double key = std::max(pin_ >= 0 ? pin_ : t, key_floor_);
    if (unit >= 0) key = std::max(key, last_key_[unit]), last_key_[unit] = key;
    return key;
  }
  void note(const std::string& text, int unit = -1) {
    const double t = unit >= 0 ? clk_[unit] : floor_;
    Scheduled s;
    s.unit = -1, s.comment = text, s.t = t;
    add(place(t), std::move(s));
  }
  // VPU instructions and mxu.swap (no scalar register operands).
  void ins(const isa::Instruction& i) {
    if (i.op == isa::Opcode::MXU_SWAP) {
      const int m = int(i[isa::operand::M1::mxu]);
      push(kMxu0 + m, weights_ready_[m], i);
    } else if (isa::spec(i.op).unit != isa::ExecUnit::Vpu) {
      throw std::logic_error(fmt::format("internal error: unscheduled instruction {}", isa::spec(i.op).mnemonic));
    } else if (capture_) {
      capture_->push_back(i);
    } else {
      push(kVpu, 0, i);  // latency: its class's
    }
  }
  template <typename... A>
  void vop(isa::Opcode op, A... a) {
    ins(isa::make(op, {int64_t(a)...}));
  }
  // A vector load or store of VMEM at `at`.
  void vld(DType dt, int vd, uint64_t at) { vop(opcode("vld.", vty(dt)), vd, 0, at); }
  void vst(DType dt, int vs, uint64_t at) { vop(opcode("vst.", vty(dt)), vs, 0, at); }
  // The MXU's timing (isa::MxuTiming, docs/timing.md): a weight load
  // commits N - 1 cycles after it starts, once the last stream through the
  // weights it replaces has reached the accumulators; a stream feeds a row
  // a cycle and its last result lands 2N - 1 cycles after its last row.
  void mxu_lw(int m, uint64_t src, uint64_t stride, int dt) {
    const double load = double(mxu_.load_cycles());
    const double t = push(kMxu0 + m, landed_[m][1] - (load - 1), with_regs(isa::Opcode::MXU_LW, {m, dt}), {src, stride}, 1, load);
    weights_ready_[m] = t + load;
  }
  // `more` continues the previous stream's rows through the same weights.
  // Returns its dispatch estimate. The stream's work counts as done
  // kStreamSlack cycles after its last result lands, so what waits for it
  // (the VPU's drain) goes that much later in the program: placed at the
  // exact cycle, the drains come ahead of MXU work the queues could have
  // taken, and the v5e budget's 256x4096x4096 GEMM takes 1.3% longer.
  static constexpr double kStreamSlack = 2;
  double mxu_mm(bool acc, int m, uint64_t racc, uint64_t src, uint64_t stride, uint64_t rows, int dt, bool more = false) {
    const double last = double(mxu_.last_result(0, rows));
    const double t = push(kMxu0 + m, feed_free_[m], with_regs(acc ? isa::Opcode::MXU_MMA : isa::Opcode::MXU_MM, {m, dt}),
                          {racc, src, stride, rows}, 1, last + kStreamSlack);
    feed_free_[m] = t + double(rows);
    if (!more) landed_[m][1] = landed_[m][0];
    landed_[m][0] = t + last;
    return t;
  }

  // What items() tells repeat() of a loop whose iterations are two items:
  // where each recorded item starts, and the item after the last iteration
  // if the loop may take it (where it goes item by item).
  struct Halves {
    std::vector<size_t> starts;
    std::function<void()> odd;
    bool took_odd = false;
  };
  // ---- loops the kernel states. repeat(n, body): body(i) emits iteration
  // i of a loop whose iterations the kernel knows to be alike: the same
  // instructions, with operands that step by constants. The first three
  // are recorded and compared (the second repeats the first with steps,
  // the third the second with the same steps), the fourth recorded for its
  // places; the others only advance the unit model, so the program's size
  // and the compiler's memory do not grow with n. Loops nest: a body may
  // state loops of its own. Iterations that are not alike (a row or column leaf whose
  // offset wraps, say) are all recorded, as straight code for the loop
  // writer.
  //
  // The loop is software-pipelined as the model schedules it (a modulo
  // schedule): in steady state iteration i + 1 starts a period P after
  // iteration i, and an instruction that the model places at or past the
  // next iteration's start (stage 1: the drains of the group before, say)
  // runs in the next period. So the loop's n trips interleave stage 0 of
  // iteration j with stage 1 of iteration j - 1, in the model's order, and
  // the last iteration's stage 1 follows the loop: the order straight-line
  // code would have, written once. The first trip has no stage 1 to run: it
  // enters the body after the last stage-1 part (Scheduled::entry), and the
  // stage-0 parts ahead of that point (few: stage 1 finishes what the
  // iteration before left, early in the period) are written before the
  // loop for iteration 0. It goes after everything before the loop and
  // before everything after it (where iterations are not alike, nothing
  // changes). Where the model's places are not periodic (or an
  // instruction lies two periods on), the body is one iteration in its own
  // order. With `halves`, an iteration of two items that repeat each other
  // (halve()) becomes two trips of a loop over items.
  static constexpr int64_t kMinTrips = 3;  // fewer iterations are written out
  template <typename F>
  void repeat(int64_t n, F body, Halves* halves = nullptr) {
    if (!loops_ || n < kMinTrips || ghost_) {
      for (int64_t i = 0; i < n; ++i) body(i);
      return;
    }
    const double before = max_key_;  // the loop goes after everything before it
    std::vector<size_t> at = {prog_.size()};  // where each recorded iteration starts
    for (int64_t i = 0; i < 3; ++i) body(i), at.push_back(prog_.size());
    std::vector<int64_t> steps;  // per bound value of the body, in order
    // The first iteration may differ (it follows code that is not the
    // loop's): then the loop starts at the second.
    int64_t first = 0;
    if (!alike_iterations(at[0], at[1], at[2], at[3], steps)) {
      if (n == 3) return;
      body(3), at.push_back(prog_.size());
      if (!alike_iterations(at[1], at[2], at[3], at[4], steps)) {
        for (int64_t i = 4; i < n; ++i) body(i);
        return;
      }
      first = 1;
    }
    size_t s0 = at[size_t(first)], s2 = at[size_t(first) + 2], len = at[size_t(first) + 1] - s0;
    // The model's places of the next iteration too, for the period (as
    // recorded: a loop inside has one place); the rest through the model only.
    std::vector<double> key3;
    if (first + 3 < n) {
      const size_t s3 = prog_.size();
      body(first + 3);
      for (size_t k = s3; k < prog_.size(); ++k) key3.push_back(prog_[k].key);
      // Its values as the steps say (three iterations do not tell a value
      // that toggles from one with a longer period), else no loop.
      if (!steps_hold(s0, s3, len, steps, 3)) {
        for (int64_t i = first + 4; i < n; ++i) body(i);
        return;
      }
    }
    int64_t count = n - first;
    // An iteration of two items alike but for values that toggle between
    // two buffers: the loop goes item by item, twice the trips (and the
    // item after them, if any).
    bool halved = false;
    if (halves && halves->starts.size() >= size_t(2 * (first + 3))) {
      const auto mid = [&](int64_t i) { return halves->starts[size_t(2 * i + 1)]; };
      std::vector<int64_t> half_steps;
      if (halve(s0, mid(first), len, steps, half_steps) && mid(first + 1) - at[size_t(first) + 1] == mid(first) - s0 &&
          mid(first + 2) - s2 == mid(first) - s0) {
        halved = true;
        len = mid(first) - s0, steps = std::move(half_steps), count *= 2;
        key3.clear();
        for (size_t k = 0; k < len; ++k) key3.push_back(prog_[mid(first + 2) + k].key);
      }
    }
    ghost_ = true;
    for (int64_t i = first + 4; i < n; ++i) body(i);
    if (halved && halves->odd) halves->odd(), halves->took_odd = true, ++count;
    ghost_ = false;
    // The places of the iteration after `ref` give the period: the fourth
    // iteration's after the third's, or where there are three trips, the
    // third's after the second's.
    size_t ref = s2;
    if (key3.empty() && !halved) {
      ref = at[size_t(first) + 1];
      for (size_t k = 0; k < len; ++k) key3.push_back(prog_[s2 + k].key);
    }
    const auto key2 = [&](size_t k) { return prog_[ref + k].key; };
    double k2 = key2(0), k3 = key3.empty() ? 0 : key3[0];
    for (size_t k = 0; k < len; ++k) k2 = std::min(k2, key2(k));
    for (double x : key3) k3 = std::min(k3, x);
    const double period = k3 - k2;
    bool staged = key3.size() == len && period > 0;
    std::vector<int> stage(len, 0);
    for (size_t k = 0; staged && k < len; ++k) {
      staged = std::abs(key3[k] - key2(k) - period) <= 1e-6 * std::max(1.0, period) && key2(k) < k3 + period;
      stage[k] = key2(k) >= k3;
    }
    if (!staged) stage.assign(len, 0);
    // Each part in the model's order: stage-1 instructions a period back,
    // ahead of stage-0 ones at the same place.
    std::vector<size_t> order(len);
    for (size_t k = 0; k < len; ++k) order[k] = k;
    const auto place_in_body = [&](size_t k) { return key2(k) - (stage[k] ? period : 0); };
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      if (place_in_body(a) != place_in_body(b)) return place_in_body(a) < place_in_body(b);
      return stage[a] > stage[b];
    });
    std::vector<size_t> first_step(len + 1, 0);
    for (size_t k = 0; k < len; ++k) first_step[k + 1] = first_step[k] + prog_[s0 + k].s.vals.size();
    // The loop's iteration i's copy of instruction k (its values stepped i times).
    const auto at_iteration = [&](size_t k, int64_t i) {
      Scheduled c = prog_[s0 + k].s;
      for (size_t v = 0; v < c.vals.size(); ++v) c.vals[v] += uint64_t(after_trips(steps[first_step[k] + v], i));
      return c;
    };
    // A loop of one unit's work pinned at one place (Emitter::pin_) that
    // neither waits nor signals (a part of a drain's rows) goes at that
    // place: its unit keeps its order, and the other units' work passes
    // it as it would pass the straight code. Any other loop goes after
    // everything before it, and nothing after it goes before its end.
    const bool solo = solo_unit(s0, prog_.size());
    double key = solo ? prog_[s0].key : before;
    for (size_t k = at[0]; k < s0; ++k) key = std::max(key, prog_[k].key);  // and after a first iteration left out
    const bool any_staged = std::find(stage.begin(), stage.end(), 1) != stage.end();
    // Where the first trip enters: past the last stage-1 part, and not
    // inside a loop of the body.
    size_t entry = 0;
    for (size_t j = 0; j < len; ++j)
      if (stage[order[j]]) entry = j + 1;
    const auto nesting = [&](size_t j) { return prog_[s0 + order[j]].s.loop > 0 ? 1 : prog_[s0 + order[j]].s.loop < 0 ? -1 : 0; };
    int depth = 0;
    for (size_t j = 0; j < entry; ++j) depth += nesting(j);
    while (depth != 0) depth += nesting(entry++);
    std::vector<Pending> out;
    out.reserve(len + entry + 3);
    for (size_t j = 0; j < entry; ++j)
      if (!stage[order[j]]) out.push_back({key, at_iteration(order[j], 0)});
    Scheduled open;
    open.unit = -1, open.loop = count, open.kernel = cur_kernel_, open.t = key2(order[0]);
    out.push_back({key, std::move(open)});
    for (size_t j = 0; j <= len; ++j) {
      if (j == entry && any_staged) {
        Scheduled e;
        e.unit = -1, e.entry = true, e.kernel = cur_kernel_, e.t = out.back().s.t;
        e.steps.emplace_back();
        out.push_back({key, std::move(e)});
      }
      if (j == len) break;
      const size_t k = order[j];
      Scheduled b = at_iteration(k, stage[k] ? -1 : 0);
      if (b.comment != prog_[ref + k].s.comment) b.comment += " (the first trip)";
      auto& level = b.steps.emplace_back(steps.begin() + long(first_step[k]), steps.begin() + long(first_step[k + 1]));  // outermost last
      if (stage[k])
        for (int64_t& st : level) st = step_after(st, -1);
      b.t = prog_[ref + k].s.t - (stage[k] ? period : 0);  // the model's times, for the loop writer's folds inside the body
      out.push_back({key, std::move(b)});
    }
    Scheduled close;
    close.unit = -1, close.loop = -1, close.kernel = cur_kernel_;
    out.push_back({key, std::move(close)});
    for (size_t k : order)
      if (stage[k]) out.push_back({key, at_iteration(k, count - 1)});
    prog_.resize(s0);
    prog_.insert(prog_.end(), std::make_move_iterator(out.begin()), std::make_move_iterator(out.end()));
    if (!solo) key_floor_ = max_key_;
  }
  // Whether the recorded lines [a, b) are one unit's work, in one place,
  // with no wait or signal.
  bool solo_unit(size_t a, size_t b) const {
    int unit = -1;
    for (size_t k = a; k < b; ++k) {
      const Scheduled& s = prog_[k].s;
      if (s.unit < 0) {
        if (s.loop != 0 || s.entry) return false;
        continue;
      }
      if (unit >= 0 && s.unit != unit) return false;
      if (prog_[k].key != prog_[a].key || isa::spec(s.insn.op).unit == isa::ExecUnit::Sync) return false;
      unit = s.unit;
    }
    return unit >= 0;
  }
  // How many items a loop's trip takes so that the scalar unit, with the
  // loop's steps, back edge and branch bubble, still issues a trip in
  // kLoopPace of the time the VPU takes for it (an item: `issue` issue
  // slots, `vpu` VPU cycles), and so keeps ahead of the VPU; 0 where it
  // cannot (it issues no faster than the VPU runs: straight code then).
  static constexpr double kLoopPace = 0.75;
  int64_t trip_items(double issue, double vpu, int stepping) const {
    const double width = m_.core.issue_width, gain = kLoopPace * vpu - issue / width;
    const double loop = (stepping + 1) / width + m_.core.branch_penalty;
    return gain <= 0 ? 0 : int64_t(std::ceil(loop / gain));
  }
  // The VPU cycles a run of instructions takes at least, interleaved as
  // the issue groups allow (isa::VpuIssueGroup): its busiest slot's.
  double vpu_cycles(const std::vector<isa::Instruction>& run) const {
    const auto& is = m_.vpu.issue;
    double n = 0, whole = 0, slot[3] = {0, 0, 0};
    for (const auto& i : run) {
      const isa::VpuSlot s = isa::vpu_slot(isa::spec(i.op).vpu_class);
      if (s == isa::VpuSlot::Whole) ++whole;
      else ++n, ++slot[int(s)];
    }
    return whole + std::max({n / is.width, slot[0] / is.alu, slot[1] / is.load, slot[2] / is.store});
  }
  // Items 0 .. n - 1 of a kernel (chunks, groups, rows): the first `head`
  // (they differ: the first loads constants, nothing is there to wait for
  // yet), a loop over the others in runs of `period` (the double buffers,
  // slots and panels they take in turn come back after a run) while at
  // least `tail` are left, then those (no loads ahead, a short last one).
  template <typename F>
  void items(int64_t n, int64_t head, int64_t period, int64_t tail, F item) {
    head = std::min(head, n);
    const int64_t left = std::max<int64_t>(0, n - head - tail), trips = left / period;
    for (int64_t i = 0; i < head; ++i) item(i);
    Halves hv;
    if (period == 2 && left % 2) hv.odd = [&] { item(head + trips * 2); };
    repeat(trips, [&](int64_t t) {
      for (int64_t j = 0; j < period; ++j) {
        if (!ghost_) hv.starts.push_back(prog_.size());
        item(head + t * period + j);
      }
    }, period == 2 ? &hv : nullptr);
    for (int64_t i = head + trips * period + hv.took_odd; i < n; ++i) item(i);
  }
  // Whether the recorded instructions from b are those from a, their
  // values `trips` iterations on (as far as b's record goes: a loop's
  // instruction may differ in length, its model places then say no more).
  bool steps_hold(size_t a, size_t b, size_t len, const std::vector<int64_t>& steps, int64_t trips) const {
    size_t i = 0;
    for (size_t k = 0; k < len && b + k < prog_.size(); ++k) {
      const Scheduled &x = prog_[a + k].s, &y = prog_[b + k].s;
      if (!same_insn(x, y)) return false;
      for (size_t v = 0; v < x.vals.size(); ++v, ++i)
        if (y.vals[v] != x.vals[v] + uint64_t(after_trips(steps[i], trips))) return false;
    }
    return true;
  }
  // Whether two recorded instructions are the same but for their values.
  static bool same_insn(const Scheduled& x, const Scheduled& y) {
    const bool note = x.unit < 0 && x.loop == 0;  // a comment may name what each iteration does
    return x.unit == y.unit && x.insn == y.insn && (note || x.comment == y.comment) && x.vals.size() == y.vals.size() && x.at == y.at &&
           x.addr == y.addr && x.loop == y.loop && x.entry == y.entry && x.steps == y.steps;
  }
  // Whether the recorded iterations [a, b), [b, c), [c, d) of a loop are
  // alike: the same instructions, each value stepping by the same constant
  // (an addi's immediate) from one to the next, or toggling (going back
  // by it); `steps` gets those.
  bool alike_iterations(size_t a, size_t b, size_t c, size_t d, std::vector<int64_t>& steps) const {
    steps.clear();
    const size_t len = b - a;
    if (c - b != len || d - c != len) return false;
    for (size_t k = 0; k < len; ++k) {
      const Scheduled &x = prog_[a + k].s, &y = prog_[b + k].s, &z = prog_[c + k].s;
      if (!same_insn(x, y) || !same_insn(y, z)) return false;
      for (size_t v = 0; v < x.vals.size(); ++v) {
        const int64_t step = int64_t(y.vals[v] - x.vals[v]), next = int64_t(z.vals[v] - y.vals[v]);
        if (step < INT32_MIN || step > INT32_MAX) return false;
        if (next == step) steps.push_back(step);
        else if (next == -step) steps.push_back(toggle_step(step));  // two buffers in turn
        else return false;
      }
    }
    return true;
  }

  // Whether a loop's iteration [a, a + len) of two items, the second from
  // `mid`, is the first item twice, its values stepping by `steps` per
  // iteration: then `half` gets each value's step per item, half the
  // iteration's, or a toggle where the value comes back every iteration.
  bool halve(size_t a, size_t mid, size_t len, const std::vector<int64_t>& steps, std::vector<int64_t>& half) const {
    half.clear();
    const size_t h = mid - a;
    if (mid <= a || 2 * h != len) return false;
    size_t i = 0;
    for (size_t k = 0; k < h; ++k) {
      const Scheduled &x = prog_[a + k].s, &y = prog_[mid + k].s;
      if (!same_insn(x, y)) return false;
      for (size_t v = 0; v < x.vals.size(); ++v, ++i) {
        const int64_t d = int64_t(y.vals[v] - x.vals[v]);
        if (2 * d == steps[i]) half.push_back(d);
        else if (steps[i] == 0 && d >= INT32_MIN && d <= INT32_MAX) half.push_back(toggle_step(d));
        else return false;
      }
    }
    // The second item steps as the first.
    for (size_t v = 0; v < i; ++v)
      if (steps[i + v] != steps[v]) return false;
    return true;
  }

  // The scheduled program, its repeats folded into loops (loops.h).
  LoopCode schedule() {
    std::stable_sort(prog_.begin(), prog_.end(), [](const Pending& a, const Pending& b) { return a.key < b.key; });
    std::vector<Scheduled> code;
    code.reserve(prog_.size());
    for (Pending& p : prog_) code.push_back(std::move(p.s));
    prog_.clear();
    LoopOptions o;
    o.enabled = loops_;
    o.kernels = !p_.kernels.empty();
    o.issue_width = m_.core.issue_width;
    o.branch_penalty = m_.core.branch_penalty;
    if (!offset_) return write_loops(code, o, carry_);
    // A kernel that reads a dynamic slice computes its offset into
    // kOffsetReg (slice_offset); what the writer keeps in registers after
    // it may not depend on it.
    o.registers = kOffsetReg - 1;
    LoopCode c = write_loops(code, o, carry_);
    for (int r = 1; r < 32; ++r)
      if (r > o.registers || is_offset(carry_.val[r])) carry_.valid[r] = false;
    offset_ = false;
    return c;
  }

  // ---- synchronisation
  Counter counter() {
    if (next_sem_ >= kChipSem) throw Error("internal error: out of semaphores");
    Counter c;
    c.sem = next_sem_++;
    return c;
  }
  void wait(int unit, Counter& c, int64_t total) {
    while (c.consumed < total) {
      const int64_t n = std::min<int64_t>(total - c.consumed, 65535);
      const double ready = c.when.at(size_t(c.consumed + n - 1));
      push(unit, ready, ib::WAIT(unit, c.sem, n));
      c.consumed += n;
    }
  }
  // A queued unit's signal leaves its queue at once and adds the count when
  // the unit's earlier work is done (docs/timing.md).
  void signal(int u, Counter& c, int64_t n = 1) {
    const bool deferred = u != kSc;
    for (int64_t left = n; left > 0;) {
      const int64_t k = std::min<int64_t>(left, 65535);
      const double done = done_[u];
      const double t = push(u, deferred ? 0 : done, ib::SIGNAL(u, c.sem, k));
      c.produce(std::max(t, done) + 1, k);
      left -= k;
    }
  }
  // The end of a kernel: every queue has finished (each signals the barrier
  // semaphore once its earlier instructions are done), then the scalar unit
  // takes what is left on each counter, so every semaphore is back at 0.
  void drain(const std::vector<Counter*>& cs, int mxus = 0) {
    Counter barrier;
    barrier.sem = kBarrierSem;
    signal(kDma, barrier);
    signal(kVpu, barrier);
    for (int m = 0; m < mxus; ++m) signal(kMxu0 + m, barrier);
    wait(kSc, barrier, barrier.produced);
    for (Counter* c : cs) wait(kSc, *c, c->produced);
    next_sem_ = 0;
  }

  // ---- DMA (byte addresses); each transfer counts once on its counter
  // A transfer of `rows` rows of `rowbytes` costs the larger of its bytes at
  // HBM bandwidth and its bursts at one per cycle.
  void dma(isa::Opcode op, std::vector<uint64_t> regs, uint64_t rows, uint64_t rowbytes, Counter& c) {
    const double bursts = double(rows) * std::ceil(double(rowbytes) / kDmaBurst) / kDmaBurstsPerCycle;
    const double cost = std::max(double(rows * rowbytes) / kDmaBytesPerCycle, bursts);
    const double t = push(kDma, 0, with_regs(op, {c.sem}), std::move(regs), cost, cost + kDmaLatency);
    c.produce(t + cost + kDmaLatency);
  }
  void dma_ld(uint64_t vmem, uint64_t hbm, uint64_t bytes, Counter& c) { dma(isa::Opcode::DMA_LD, {vmem, hbm, bytes}, 1, bytes, c); }
  void dma_st(uint64_t hbm, uint64_t vmem, uint64_t bytes, Counter& c) { dma(isa::Opcode::DMA_ST, {hbm, vmem, bytes}, 1, bytes, c); }
  void dma_2d(bool load, uint64_t dst, uint64_t src, uint64_t rows, uint64_t rowbytes, uint64_t dstride, uint64_t sstride,
              Counter& c) {
    if (rows == 1 || (dstride == rowbytes && sstride == rowbytes)) {
      load ? dma_ld(dst, src, rows * rowbytes, c) : dma_st(dst, src, rows * rowbytes, c);
      return;
    }
    dma(load ? isa::Opcode::DMA_LD2D : isa::Opcode::DMA_ST2D, {dst, src, rows, rowbytes, dstride, sstride}, rows, rowbytes, c);
  }

  // ---- VMEM: a bump allocator per kernel
  uint64_t vmem(uint64_t bytes) {
    const uint64_t a = vmem_top_;
    vmem_top_ = align_up(vmem_top_ + bytes + uint64_t(L_) * 4, 64);  // a vector of slack
    if (vmem_top_ > p_.t.vmem_bytes)
      throw Error(fmt::format("{}: the kernel computing it does not fit in target.vmem_bytes = {} (it needs more than {} bytes)",
                              kernel_loc_, p_.t.vmem_bytes, vmem_top_));
    return a;
  }
  uint64_t vmem_budget() const { return p_.t.vmem_bytes - vmem_top_; }

  void kernel(size_t idx, const Kernel& k);
  void begin_kernel(size_t idx, const Kernel& k);
  // The plan's kernels in order; on several cores a barrier after each but
  // the last (after every one with `barrier_after`). Each kernel is
  // scheduled and written as a segment of its own: kernels end with every
  // unit drained, so nothing of one goes before the end of the one before,
  // and the compiler holds one kernel's schedule at a time. (Where a loop
  // kernel goes, a branch goes between segments.)
  void kernels(LoopCode& out, bool barrier_after);
  // A while loop (Plan::loops): the initial state copied into the state
  // buffers; top: the condition's kernels, its pred[] through SMEM to a
  // scalar register, a branch out when it is false, the body's kernels,
  // the results moved into the state buffers, a jump to top.
  void loop(size_t idx, const Kernel& k, LoopCode& out);
  // The code of a loop's condition (moves: none) or body (the loop's plan).
  LoopCode region(const LoopPlan* moves);
  // Copies of `bytes` bytes from src to dst (dst, src, bytes), as one kernel.
  void move_bytes(const std::vector<std::array<uint64_t, 3>>& moves);
  // The kernels of this emitter's plan count as kernel mark_ of the
  // program's table (a loop's condition and body: the loop's kernel).
  int mark(size_t idx) const { return mark_ >= 0 ? mark_ : int(idx); }
  int mark_ = -1;
  std::string prefix_;  // the listing's name of a loop's condition or body
  int64_t loop_depth_ = 0;  // how many while loops this code is inside

  // ---- one expression node, vector registers assigned (emit_expr.cpp)
  // `store_rounds`: the value only goes to memory, whose store rounds it.
  void node(const Node& n, int d, const std::vector<int>& a, bool store_rounds = false);
  // Whether node() gives `n` its argument's value unchanged: a bitcast, a
  // float convert to the same or a wider type (exact in the f32 lanes), or
  // one that only its store rounds.
  static bool is_move(const Node& n, bool store_rounds) {
    if (n.leaf != Leaf::none) return false;
    if (n.kind == OpKind::bitcast_convert) return true;
    return n.kind == OpKind::convert && is_float(n.src) && is_float(n.dtype) &&
           (n.dtype == n.src || n.dtype == DType::f32 || store_rounds);
  }

  // Register assignment for an expression: what it holds for the whole
  // kernel (hoisted leaves, the constants its code needs, the col leaves'
  // lane-0 mask) is taken from vregs_; the rest is linearly scanned per
  // vector into the registers below, U vectors at once.
  struct RegPlan {
    std::vector<int> hoisted_reg;                  // per node (-1 if not hoisted)
    std::vector<std::vector<int>> reg;             // [u][node]
    std::vector<std::pair<int, uint32_t>> consts;  // registers hoist() loads with a lane pattern
    int lane0 = -1;                                // the col leaves' mask: lane 0 set
    int unroll = 1;
    std::vector<bool> only_stored;                 // per node: Expr::only_stored()
  };
  RegPlan regplan(const Expr& e, int max_unroll);

  // Emits U vectors of an expression in the registers of rp's vectors
  // u0 .. u0 + U - 1. leaf(u, node, reg) loads non-hoisted leaves.
  void eval(const Expr& e, const RegPlan& rp, int U, const std::function<void(int, const Node&, int)>& leaf, int u0 = 0);
  // Software pipelining of groups of vectors that use alternate register
  // banks: each group's leading loads go out paired with the previous
  // group's remaining instructions (its arithmetic and stores), so a VPU
  // with separate load and store slots overlaps them. Only loads of one
  // bank meet other instructions of the other, so the interleaving keeps
  // every group's meaning. An expression too wide for two banks (every
  // group in the same registers) has its groups one after the other.
  struct Pipeliner {
    Emitter& em;
    std::vector<isa::Instruction> rest;  // the previous group's instructions after its loads
    std::vector<isa::Instruction> last;  // the last group's instructions
    // Runs gen() (which emits one group's VPU instructions) and interleaves them.
    template <typename G>
    void group(G gen) {
      std::vector<isa::Instruction> cur;
      em.capture_ = &cur;
      gen();
      em.capture_ = nullptr;
      size_t h = 0;
      while (h < cur.size() && isa::spec(cur[h].op).vpu_class == isa::VpuClass::Load) ++h;
      if (!independent(cur, h)) flush();
      for (size_t i = 0; i < std::max(rest.size(), h); ++i) {
        if (i < rest.size()) em.ins(rest[i]);
        if (i < h) em.ins(cur[i]);
      }
      rest.assign(cur.begin() + long(h), cur.end());
      last = std::move(cur);
    }
    void flush() {
      for (const auto& i : rest) em.ins(i);
      rest.clear();
    }
    // Load i of this group goes ahead of the previous group's instructions
    // from i + 1 on: whether it is independent of each of them.
    bool independent(const std::vector<isa::Instruction>& cur, size_t h) const {
      std::vector<isa::RegisterUse> after(rest.size() + 1);  // after[j]: rest[j..] together
      for (size_t j = rest.size(); j-- > 0;) {
        const isa::RegisterUse u = isa::register_use(rest[j]);
        after[j] = {u.sread | after[j + 1].sread, u.swrite | after[j + 1].swrite, u.vread | after[j + 1].vread,
                    u.vwrite | after[j + 1].vwrite};
      }
      for (size_t i = 0; i < h && i + 1 < after.size(); ++i)
        if (!isa::independent(isa::register_use(cur[i]), after[i + 1])) return false;
      return true;
    }
  };
  void hoist(const Expr& e, const RegPlan& rp, const std::vector<uint64_t>& scalar_vmem);
  // A col leaf: source element `index` in every lane. The vector loaded from
  // there has it in lane 0; the other lanes become the identity of max.
  void col_splat(const RegPlan& rp, int d, uint64_t at, DType dt);
  // Loads scalar inputs (L copies each), row inputs (repeated to cover any
  // L-lane window) and col inputs (whole) once per kernel. Returns the VMEM
  // address per input.
  std::vector<uint64_t> preload(const Kernel& k, Counter& ld);

  // A ring's sends: each send of `bytes` to the next member counts on
  // `arrivals` there, and the previous member's send to this chip is
  // expected alike. With `ways` rings sending at once (each its own link),
  // a send holds the DMA engine for 1/ways of its time on the link.
  struct Ring {
    uint64_t next = 0;
    double bytes_per_cycle = 0, hop = 0;
    int ways = 1;
    Ring(const Emitter& em, const std::vector<int64_t>* grp, int64_t pos, int ways)
        : next(uint64_t((*grp)[size_t((pos + 1) % int64_t(grp->size()))])),
          bytes_per_cycle(double(em.m_.ici.link_bandwidth_bytes_per_s) / double(em.m_.clock_hz)),
          hop(double(em.m_.ici_hop_cycles())),
          ways(ways) {}
    void send(Emitter& em, uint64_t dst, uint64_t src, uint64_t bytes, Counter& arrivals) const {
      const double cost = double(bytes) / bytes_per_cycle;
      const double t = em.push(kDma, 0, with_regs(isa::Opcode::DMA_RCP, {arrivals.sem}), {next, dst, src, bytes}, cost / ways, cost + hop);
      arrivals.produce(t + cost + hop);
    }
  };
  // A ring of a collective: its members in ring order and this chip's
  // place. Group member p sits at coord(p) along it: its place in the
  // group for a ring over the group, its coordinate for a ring along an
  // axis of the ICI grid (p / stride, modulo the ring's size). A reversed
  // ring runs through its members backwards.
  struct Axis {
    std::vector<int64_t> members;
    int64_t pos = 0, stride = 1;
    bool reversed = false;
    int64_t size() const { return int64_t(members.size()); }
    int64_t coord(int64_t p) const { return p / stride % size(); }
  };
  // The ways of a collective: its data is cut into ways, each a collective
  // of its own (its buffers, counters and rings) that runs at the same time
  // as the others.
  // - Where a ring has more than two members, half the ways go each way
  //   round it (bidirectional rings), so both links to each neighbour
  //   carry data.
  // - Over D axes of the grid, way r takes them in the order r, r + 1, ...
  //   (mod D), so in every phase each axis carries some way's data.
  // Each way's buffer holds a chunk per member. Its reduce-scatter cuts it
  // phase by phase, by each ring's coordinate, and leaves member p with the
  // chunk at slot(w, p): the coordinates as digits, the first phase's the
  // most significant (with a reversed ring's chunks counted from the end of
  // the buffer, the same slots).
  struct Ways {
    std::vector<std::vector<Axis>> rings;  // per way, its rings phase by phase
    int64_t count() const { return int64_t(rings.size()); }
    int64_t phases() const { return int64_t(rings[0].size()); }
    int64_t slot(int64_t w, int64_t p) const {
      int64_t s = 0;
      for (const Axis& x : rings[size_t(w)]) s = s * x.size() + x.coord(p);
      return s;
    }
    // Calls f(slot, member, count, step) for runs of slots [s0, s1): slots
    // slot .. slot + count - 1 hold members member, member + step, ... (the
    // last ring's coordinates are the least significant digit).
    template <typename F>
    void runs(int64_t w, int64_t n, int64_t s0, int64_t s1, F f) const {
      if (rings[size_t(w)].empty()) {
        if (s0 < s1) f(s0, s0, s1 - s0, 1);
        return;
      }
      const Axis& last = rings[size_t(w)].back();
      for (int64_t p = 0; p < n; ++p) {
        if (last.coord(p) != 0) continue;
        const int64_t first = slot(w, p), lo = std::max(s0, first), hi = std::min(s1, first + last.size());
        if (lo < hi) f(lo, p + (lo - first) * last.stride, hi - lo, last.stride);
      }
    }
  };
  // The ways of k's collective: up to `fit` of them (so each gets enough
  // data), dropping the axis orders first, then the directions.
  Ways collective_ways(const Kernel& k, int64_t fit) const;
  // The rings of this chip's collective: one per axis of the ICI grid when
  // the group is the whole system in chip order and the grid has several
  // axes; otherwise the group itself. Rings of one member are left out.
  std::vector<Axis> ring_axes(const Kernel& k) const;
  // A block's buffers for a reduce-scatter or all-gather: its `mine`
  // elements of each of n pieces cut among up to all.count() ways, each at
  // least one element: [cut[w], cut[w + 1]) is way w's, whole vectors but
  // the last. Way w's buffer is at base[w], with a slot of size[w] / n
  // elements (whole vectors) per member.
  struct WayBuffers {
    Ways ws;  // the ways used
    std::vector<int64_t> cut, size;
    std::vector<uint64_t> base;
  };
  WayBuffers way_buffers(const Ways& all, int64_t mine, int64_t n, int esz);

  // ---- all-reduce across chips. Each core of the chip reduces its share
  // of the elements with the same core of the other chips, in ways (above)
  // of rings. Each way:
  // - Reduce-scatter, phase by phase: the ring of the phase cuts what the
  //   earlier phases left this chip into one chunk per member, and n_a - 1
  //   steps (ring_reduce) leave each member its own chunk combined over
  //   the ring. After the last phase, each chip holds 1/n of the way's
  //   share combined over the group.
  // - All-gather, phase by phase in reverse: n_a - 1 steps pass the
  //   combined chunks on round the same ring.
  // The chips meet first (chip_barrier), so the VMEM a chip sends to
  // belongs to this kernel. No more handshakes are needed: a member's
  // reduce-scatter on a ring ends only after the next member's first send
  // on it, which follows that member's work on every earlier phase; and its
  // all-gather step s follows (through the ring's data) the next member's
  // combining at step s - 1, the last use of the chunk it overwrites.
  void all_reduce(const Kernel& k);

  // ---- reduce-scatter across chips: member p keeps piece p of the
  // combination along the dimension. Only where every dimension before it
  // is 1, so the pieces are contiguous. The all-reduce's first half in
  // ways (above): way w takes its part of this core's share of every
  // piece, and puts piece p at slot(w, p) of its buffer, where member p
  // ends.
  void reduce_scatter(const Kernel& k);

  // Runs body(b0, b1) over blocks of this core's share [e0, e1) of a
  // collective's elements, each block a whole collective (its own barrier,
  // VMEM and counters), small enough that VMEM holds `per` bytes per
  // element of it and `chunks` chunks rounded up to whole vectors of esz.
  // Every chip cuts the same blocks, so they meet block by block.
  template <typename F>
  void in_blocks(int64_t e0, int64_t e1, uint64_t per, int64_t nchunks, int esz, F body) {
    if (e1 == e0) return drain({});
    const uint64_t top = vmem_top_, slack = 4 * (uint64_t(L_) * 4 + 64) + uint64_t(nchunks * L_ * esz);  // up to 4 buffers
    const uint64_t room = vmem_budget() > slack ? vmem_budget() - slack : 0;
    const int64_t most = std::max<int64_t>(L_, int64_t(room / per) / L_ * L_);
    for (int64_t b0 = e0; b0 < e1; b0 += most) {
      vmem_top_ = top;
      body(b0, std::min(e1, b0 + most));
    }
  }

  // The element type of an all-reduce or reduce-scatter, if tpuc combines it.
  DType check_combinable(const Kernel& k) const;
  // A collective that splits or joins along a dimension moves contiguous
  // pieces only: every dimension before it is 1.
  void require_contiguous(const Kernel& k, const Type& t) const;

  // A member's n chunks of cb bytes in VMEM, as a ring sees them: chunk
  // at(s) is the one this member sends at step s, from chunk pos - 1 at
  // step 0, so that it ends with chunk pos (at(n - 1)) combined over the
  // ring (counted from the end of the buffer with rev, for
  // a ring that runs through the group backwards). A chunk goes in P
  // pieces of whole vectors, each sent on as soon as it is ready, so the
  // VPU's work overlaps the links.
  struct Chunks {
    uint64_t buf = 0, cb = 0;
    int64_t n = 1, pos = 0;
    bool rev = false;
    int64_t P = 1;        // pieces a chunk
    uint64_t V = 1, vb = 0;  // vectors a chunk, bytes a vector
    uint64_t at(int64_t s) const {
      const int64_t c = (((pos - 1 - s) % n) + n) % n;
      return buf + uint64_t(rev ? n - 1 - c : c) * cb;
    }
    uint64_t lo(int64_t p) const { return uint64_t(p) * V / uint64_t(P) * vb; }  // piece p's offset in a chunk
    uint64_t piece(uint64_t chunk, int64_t p) const { return chunk + lo(p); }
    uint64_t piece_bytes(int64_t p) const { return lo(p + 1) - lo(p); }
  };
  // Chunks of C elements (whole vectors) of dt at buf; pieces of at least
  // 32 KiB, at most 8 a chunk.
  Chunks chunks(uint64_t buf, int64_t C, DType dt, int64_t n, int64_t pos) const;

  // One ring's part in a step of several rings at once: its chunks, where
  // it receives, and its counters (rs: pieces arrived, added: combined,
  // ag: gathered).
  struct Lane {
    Ring ring;
    Chunks ch;
    uint64_t recv = 0;
    Counter rs, added, ag;
    // With `first`: step 0 sends piece p once first has counted first_at[p]
    // (the piece's own load).
    Counter* first = nullptr;
    std::vector<int64_t> first_at = {};
  };

  // n - 1 reduce-scatter steps of rings that run at once (lanes, each of
  // its own n): at step s each member sends chunk at(s) to the next
  // and combines the previous member's into chunk at(s + 1), so after the
  // last step chunk at(n - 1) = pos is the group's
  // combination. A lane's `rs` counts pieces arriving, `added` pieces
  // combined; the rings take turns piece by piece. The VPU first waits for
  // `loaded`, if given (the chunks it combines into).
  void ring_reduce(std::vector<Lane>& lanes, DType dt, Combiner c, Counter* loaded = nullptr);

  // Lanes for every phase of the ways: way w's buffer at base[w], of
  // size[w] elements (whole vectors in every chunk of every phase), cut
  // phase by phase; with `recv`, each lane has its own receive buffer (a
  // neighbour may send before this chip is done with the phase before).
  std::vector<std::vector<Lane>> phase_lanes(const Ways& ws, std::vector<uint64_t> base, std::vector<int64_t> size, DType dt, bool recv);
  // `counters` and every lane's, for drain.
  static std::vector<Counter*> with_lanes(std::vector<Counter*> counters, std::vector<std::vector<Lane>>& lanes);
  // The chunks the first rings send first, loaded (load(at, bytes), each
  // counting once on `first`) piece by piece, each piece sent as soon as
  // it has landed.
  template <typename F>
  void load_first(std::vector<Lane>& first_phase, Counter& first, F load) {
    int64_t P = 0;
    for (const Lane& l : first_phase) P = std::max(P, l.ch.P);
    for (int64_t p = 0; p < P; ++p)
      for (Lane& l : first_phase) {
        if (p >= l.ch.P) continue;
        load(l.ch.piece(l.ch.at(0), p), l.ch.piece_bytes(p));
        l.first = &first;
        l.first_at.push_back(first.produced);
      }
  }
  // The reduce-scatter phases of the ways, one after another: each ring
  // cuts what the phase before left combined. The VPU first waits for
  // `loaded` (the chunks it combines into).
  void reduce_phases(std::vector<std::vector<Lane>>& lanes, DType dt, Combiner c, Counter* loaded);
  // The all-gather phases of the ways, the last first: n_a - 1 steps pass
  // each member's chunks on round the phase's ring, its own first. With
  // `combined`, the first steps wait for the combination (an all-reduce's);
  // otherwise what they send is in already. In the first phase, each chunk
  // that is whole here is handed to store(w, at, bytes), w its way: a chunk
  // once sent, the last piece by piece as they arrive.
  template <typename F>
  void gather_phases(std::vector<std::vector<Lane>>& lanes, bool combined, F store) {
    for (size_t a = lanes.size(); a-- > 0;) {
      const bool last = a + 1 == lanes.size();
      if (!last)
        for (Lane& l : lanes[a + 1]) wait(kDma, l.ag, l.ag.produced);  // its own chunks are whole again
      int64_t steps = 0, P = 0;
      for (const Lane& l : lanes[a]) steps = std::max(steps, l.ch.n - 1), P = std::max(P, l.ch.P);
      for (int64_t s = 0; s < steps; ++s) {
        for (int64_t p = 0; p < P; ++p)
          for (Lane& l : lanes[a]) {
            if (s + 1 >= l.ch.n || p >= l.ch.P) continue;
            const uint64_t at = l.ch.at(s - 1);  // its own chunk first
            if (s > 0) wait(kDma, l.ag, (s - 1) * l.ch.P + p + 1);
            else if (last && combined) wait(kDma, l.added, (l.ch.n - 2) * l.ch.P + p + 1);  // the piece is combined
            l.ring.send(*this, l.ch.piece(at, p), l.ch.piece(at, p), l.ch.piece_bytes(p), l.ag);
          }
        if (a == 0)
          for (size_t w = 0; w < lanes[a].size(); ++w)
            if (s + 1 < lanes[a][w].ch.n) store(int64_t(w), lanes[a][w].ch.at(s - 1), lanes[a][w].ch.cb);
      }
      for (int64_t p = 0; p < P; ++p)
        for (size_t w = 0; w < lanes[a].size(); ++w) {
          Lane& l = lanes[a][w];
          if (p >= l.ch.P) continue;
          wait(kDma, l.ag, (l.ch.n - 2) * l.ch.P + p + 1);
          if (a == 0) store(int64_t(w), l.ch.piece(l.ch.at(l.ch.n - 2), p), l.ch.piece_bytes(p));
        }
    }
  }

  // ---- all-gather across chips: the group's values side by side along
  // the dimension, in group order. Only where every dimension before it is
  // 1, so each member's value is one contiguous piece of the result. The
  // all-reduce's second half in ways: way w takes its part of this core's
  // share of every piece; each chip starts with its own at slot(w, chip),
  // and the phases fill the other slots.
  void all_gather(const Kernel& k);

  // ---- all-to-all across chips: member p's value is cut along the
  // dimension into n pieces, and piece q goes to member q, which puts it in
  // place p of its result. Only where every dimension before it is 1, so
  // pieces are contiguous. Each core sends its share of every piece
  // straight to its member (the network routes it), nearest first.
  void all_to_all(const Kernel& k);

  // ---- collective-permute: each source's value goes to its target, after
  // the chips meet (chip_barrier); a chip no pair targets gets zeros.
  void permute(const Kernel& k);

  // This chip's group of a collective, its size and the chip's place in it.
  std::tuple<const std::vector<int64_t>*, int64_t, int64_t> group_of(const Kernel& k) const;
  // The chips meet at the start of a collective: each tells every other
  // chip (the same core) that it has entered the kernel, on a semaphore no
  // kernel uses, and the DMA waits for all of them before it sends. Every
  // chip runs every collective, so a count that comes early (a chip already
  // in the next collective) only arrives once every chip has entered this
  // one: the total is right whichever chips it comes from.
  void chip_barrier();

  // ---- element-wise kernels: chunks of the flat tensor, double-buffered (emit_elementwise.cpp)
  void elementwise(const Kernel& k);

  // ---- layout copies: HBM -> VMEM (logical order) -> HBM, box by box (emit_copy.cpp)
  struct Run {  // one view decomposed for 2-D DMAs
    int64_t run = 1;     // contiguous elements per row
    int row_dim = -1;    // the DMA's row dimension (-1: one row)
    int first_run_dim;   // dims >= this form the run
  };
  static Run decompose(const std::vector<int64_t>& dims, const std::vector<int64_t>& strides);
  void view_dma(bool load, const View& v, uint64_t vmem_base, int esz, Counter& c);
  // The strided view of value v in HBM: its buffer, or a layout op's view of its operand.
  View view_of(int v) const;
  View view_through(int v) const;

  std::vector<std::pair<View, View>> copy_views(const Kernel& k, bool& fill, double& fill_value);
  void fill_region(uint64_t hbm, int64_t elements, DType dt, double value);
  // A transpose that swaps two groups of dimensions behind optional batch
  // dimensions, [B, X, Y] -> [B, Y, X] after merging each group, as
  // (batch, rows, cols); nullopt otherwise.
  std::optional<std::array<int64_t, 3>> swap_transpose(const Op& o) const;
  // 32-bit transposes through the VPU's vxpose: L x L tiles loaded with 2-D
  // DMAs, transposed in VMEM, stored with 2-D DMAs; double-buffered.
  void transpose_tiles(const Kernel& k, std::array<int64_t, 3> shape);

  void copy(const Kernel& k);
  // dynamic-slice and dynamic-update-slice: the piece's place in the
  // operand read when the kernel runs.
  void dynamic_copy(const Kernel& k);
  // Scalar-unit code that leaves in kOffsetReg the byte offset of dynamic
  // slice o's piece (of `sizes`) in its operand: each start read from HBM,
  // clamped so that the piece fits, times its dimension's stride.
  void slice_offset(const Op& o, const std::vector<int64_t>& sizes);
  // Copies box by box through two VMEM stages, every `ways`-th box on this core.
  void copy_pairs(const std::vector<std::pair<View, View>>& pairs, DType dt, int64_t ways);

  // ---- reductions (emit_reduce.cpp)
  static isa::Opcode combine_op(Combiner c, DType d);
  void reduce_lanes(const Kernel& k);
  void reduce_columns(const Kernel& k);

  // ---- matmul: C[b] = sum_p A_p[b] x W_p[b] on every MXU, epilogue on the VPU (emit_matmul.cpp)
  friend class MatmulEmitter;
  void matmul(const Kernel& k);

  const Plan& p_;
  const int64_t core_, ncores_, chip_, nchips_;
  const int64_t L_, D_;
  const isa::MachineConfig& m_;
  const bool loops_;
  const double kDmaBytesPerCycle, kDmaLatency, kDmaBurst, kDmaBurstsPerCycle;
  std::vector<Pending> prog_;     // scheduled since the last schedule()
  WriterState carry_;             // the scalar registers as the code so far leaves them
  bool offset_ = false;           // the kernel being emitted uses kOffsetReg (slice_offset)
  bool ghost_ = false;         // running a loop's later iterations through the model only (repeat())
  double max_key_ = 0;         // the latest place in the program so far
  double key_floor_ = 0;       // nothing goes before this place (the end of the last loop)
  double clk_[isa::kUnitSlots] = {}, done_[isa::kUnitSlots] = {}, floor_ = 0;
  // When >= 0, what is pushed goes at this place in the program (and
  // dispatches no earlier): a kernel lays work out at fixed points of its
  // loop (MatmulEmitter's drain) rather than where the estimates fall.
  double pin_ = -1;
  double last_key_[isa::kUnitSlots] = {};  // per unit: the place of its last instruction
  std::vector<isa::Instruction>* capture_ = nullptr;  // VPU instructions go here instead when set
  double vready_[isa::kNumVregs] = {};  // when each vector register's value is ready
  double vgroup_ = 0;  // the VPU's current issue group: its cycle, what is in it
  isa::VpuIssueGroup vgrp_{isa::VpuIssue{}};
  const isa::MxuTiming mxu_;
  // Per MXU: when the shadow weights are loaded, when the next stream may
  // start, and the cycles in which the last results of its last stream and
  // of the stream before land.
  double weights_ready_[isa::kMaxMxus] = {}, feed_free_[isa::kMaxMxus] = {}, landed_[isa::kMaxMxus][2] = {};
  uint64_t vmem_top_ = 0;
  VRegs vregs_;  // the kernel's vector registers
  std::string kernel_loc_;  // the HLO op of the kernel being emitted, for errors
  int cur_kernel_ = -1;     // the kernel being emitted (-1: none)
  std::vector<std::vector<std::pair<std::string, uint64_t>>> kernel_ops_;  // Plan::profile_ops of each kernel
  int next_sem_ = 0;
};

}  // namespace tpu::compiler::backend
