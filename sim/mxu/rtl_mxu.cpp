// RtlMxu: the Verilated MXU RTL (hw/rtl/mxu_top.v) in the model's place.
// Wait and signal stay in C++ (they are the queue's, not the array's); every
// MXU instruction is offered to the RTL's command port, whose VMEM and
// accumulator ports this module serves combinationally, and the RTL is
// clocked once per simulated cycle.
#include <fmt/format.h>

#include <systemc>

#include "tpu/isa/error.h"

#include "../core/queued_unit.h"
#include "mxu_unit.h"

// Verilator's headers call sc_time_stamp() unqualified when SystemC is present.
using sc_core::sc_time_stamp;
#include "rtl_mxu_sizes.h"  // generated: the Vmxu_top_N headers and TPU_RTL_FOR_EACH_SIZE
#if TPU_RTL_ANY
#include "verilated_vcd_c.h"
#include "rtl_driver.h"
#endif

namespace tpu::sim {
#if TPU_RTL_ANY
namespace {

using namespace isa::operand;

template <typename Rtl>
class RtlMxu : public sc_core::sc_module, public QueuedUnit, public MxuUnit {
 public:
  sc_core::sc_in<bool> clk{"clk"};

  RtlMxu(sc_core::sc_module_name name, int core, int index, const MachineConfig& cfg, RunControl& rc,
         SemaphoreFile& sems, SparseMemory& vmem, Accumulators& acc, const std::string& trace_path)
      : sc_core::sc_module(name),
        QueuedUnit(core, isa::kUnitMxu0 + index, cfg.core.queue_depth, rc, sems),
        n_(uint32_t(cfg.target.mxu_dim)),
        index_(index),
        vmem_(vmem),
        acc_(acc),
        bytes_(2 * size_t(n_)),
        period_ps_((1000000000000ull + cfg.clock_hz / 2) / cfg.clock_hz) {
    if (!trace_path.empty()) {
      Verilated::traceEverOn(true);
      vcd_ = std::make_unique<VerilatedVcdC>();
      rtl_.trace(vcd_.get(), 99);
      vcd_->open(trace_path.c_str());
      if (!vcd_->isOpen()) throw Error(fmt::format("{}: cannot open for writing", trace_path));
    }
    rtl::reset(rtl_);
    SC_HAS_PROCESS(RtlMxu);
    SC_METHOD(tick);
    sensitive << clk.pos();
    dont_initialize();
  }

  ~RtlMxu() override {
    if (vcd_) vcd_->close();
  }

  void bind_clock(sc_core::sc_clock& c) override { clk(c); }
  sc_core::sc_fifo<Issued>& instruction_queue() override { return queue(); }
  void attach_trace(TraceSink* t) override { set_trace(t); }
  bool idle(uint64_t now) const override { return !head_ && queue_.num_available() == 0 && !in_flight(now); }
  bool in_flight(uint64_t) const override { return rtl_.active_o || signals_pending(); }
  uint64_t macs() const override { return macs_; }
  uint32_t rows_in_flight() const override { return 0; }
  bool streaming() const override { return fed_; }
  bool loading() const override { return loading_; }
  int pending_instructions() const override { return queue_depth(); }
  UnitState unit_state() const override { return state(); }
  uint32_t current_pc() const override { return QueuedUnit::current_pc(); }
  const UnitStats& unit_stats() const override { return stats(); }
  std::string blocked_report() const override { return blocked_on(); }

 private:
  void tick() {
    const uint64_t now = rc_.cycle();
    fire_due(now);
    const Issued* h = current(now);
    // As the model counts it: loading, streaming or rows in flight once this
    // cycle's accumulator write is done.
    UnitState state = rtl_.busy_o ? UnitState::Busy : UnitState::Idle;
    const char* cause = "";
    const Issued* offer = nullptr;
    if (h) {
      // done_at_o before this cycle's edge is the model's "every earlier
      // instruction done by then".
      switch (sync_deferred(*h, now, rtl_.done_at_o)) {
        case SyncResult::Done: state = UnitState::Busy; break;
        case SyncResult::Blocked:
          if (state != UnitState::Busy) state = UnitState::Blocked, cause = blocked_cause(*h);
          break;
        case SyncResult::NotSync: offer = h; break;
      }
    }
    if (offer && !check(*offer)) return;
    const bool taken = step(offer, now);
    if (offer) {
      if (taken) {
        const bool mm = offer->insn.op == isa::Opcode::MXU_MM || offer->insn.op == isa::Opcode::MXU_MMA;
        trace_event(offer->pc, now, now + 1, mm ? (*offer)[4] * n_ * n_ : 0);  // MACs of the stream
        retire();
        state = UnitState::Busy;
      } else if (state != UnitState::Busy) {
        state = UnitState::Stalled, cause = offer->insn.op == isa::Opcode::MXU_SWAP ? "weight_load" : "weights_in_use";
      }
    }
    finish(state, cause);
  }

  // The model's faults, checked when an instruction is offered (the RTL has
  // no way to report them).
  bool check(const Issued& is) {
    const char* mnem = isa::spec(is.insn.op).mnemonic;
    auto fail = [&](const std::string& msg) {
      rc_.fault(fmt::format("core {} mxu{}: pc {}: {}", core_, index_, is.pc, msg));
      return false;
    };
    const bool lw = is.insn.op == isa::Opcode::MXU_LW || is.insn.op == isa::Opcode::MXU_LWT;
    const bool mm = is.insn.op == isa::Opcode::MXU_MM || is.insn.op == isa::Opcode::MXU_MMA;
    if (!lw && !mm) return true;
    const bool int8 = (lw ? is.insn[MLW::dtype] : is.insn[MMM::dtype]) == isa::values::MxuDtype_s8;
    const uint64_t rows = lw ? n_ : is[MMM::rrows], src = lw ? is[MLW::rsrc] : is[MMM::rsrc];
    const uint64_t stride = lw ? is[MLW::rstride] : is[MMM::rstride], racc = lw ? 0 : is[MMM::racc];
    if (mm && !have_active_) return fail(fmt::format("{} before any weights were loaded and swapped in", mnem));
    if (mm && int8 != int8_of_active_)
      return fail(fmt::format("{} streams {} inputs through {} weights", mnem, int8 ? "s8" : "bf16", int8_of_active_ ? "s8" : "bf16"));
    if (mm && (racc > acc_.rows() || rows > acc_.rows() - racc))
      return fail(fmt::format("{} writes accumulator rows {}..{}, outside 0..{}", mnem, int64_t(racc), int64_t(racc + rows) - 1,
                              acc_.rows() - 1));
    for (uint64_t r : {uint64_t(0), rows - 1}) {
      if (rows == 0) break;
      if (auto err = vmem_.check_range(src + r * stride, uint64_t(n_) * (int8 ? 1 : 2), int8 ? 1 : 2, "VMEM"))
        return fail(fmt::format("{} row {}: {}", mnem, r, *err));
    }
    return true;
  }

  // One clock cycle of the RTL with `is` (or nothing) on its command port;
  // true when the RTL took the instruction.
  bool step(const Issued* is, uint64_t now) {
    rtl::Command cmd;
    if (is) {
      const bool lw = is->insn.op == isa::Opcode::MXU_LW || is->insn.op == isa::Opcode::MXU_LWT;
      cmd.op = uint8_t(is->insn.op);
      cmd.src = uint32_t(lw ? (*is)[MLW::rsrc] : (*is)[MMM::rsrc]);
      cmd.stride = uint32_t(lw ? (*is)[MLW::rstride] : (*is)[MMM::rstride]);
      cmd.acc = lw ? 0 : uint32_t((*is)[MMM::racc]);
      cmd.rows = lw ? 0 : uint32_t((*is)[MMM::rrows]);
      cmd.int8 = (lw ? is->insn[MLW::dtype] : is->insn[MMM::dtype]) == isa::values::MxuDtype_s8;
    }
    const rtl::CycleResult r = rtl::step(rtl_, is ? &cmd : nullptr, vmem_, acc_, bytes_, vcd_.get(), now, period_ps_);
    fed_ = r.fed;
    loading_ = r.loading;
    if (fed_) macs_ += uint64_t(n_) * n_;
    track_dtypes(is, r.taken);
    return r.taken;
  }

  void track_dtypes(const Issued* is, bool taken) {
    if (!is || !taken) return;
    if (is->insn.op == isa::Opcode::MXU_LW || is->insn.op == isa::Opcode::MXU_LWT) shadow_int8_ = is->insn[MLW::dtype] == isa::values::MxuDtype_s8;
    if (is->insn.op == isa::Opcode::MXU_SWAP) int8_of_active_ = shadow_int8_, have_active_ = true;
  }

  const uint32_t n_;
  const int index_;
  SparseMemory& vmem_;
  Accumulators& acc_;
  Rtl rtl_;
  std::vector<uint8_t> bytes_;
  const uint64_t period_ps_;
  std::unique_ptr<VerilatedVcdC> vcd_;
  uint64_t macs_ = 0;
  bool fed_ = false, loading_ = false;
  bool shadow_int8_ = false, int8_of_active_ = false, have_active_ = false;
};

}  // namespace
#endif  // TPU_RTL_ANY

bool rtl_mxu_available(uint32_t n) {
#define TPU_RTL_AVAILABLE(N) \
  if (n == N) return true;
  TPU_RTL_FOR_EACH_SIZE(TPU_RTL_AVAILABLE)
#undef TPU_RTL_AVAILABLE
  (void)n;
  return false;
}

std::string rtl_mxu_sizes() { return TPU_RTL_SIZES_TEXT; }

std::unique_ptr<MxuUnit> make_rtl_mxu(const char* name, int core, int index, const MachineConfig& cfg, RunControl& rc,
                                      SemaphoreFile& sems, SparseMemory& vmem, Accumulators& acc,
                                      const std::string& trace_path) {
#define TPU_RTL_MAKE(N)         \
  if (cfg.target.mxu_dim == N) \
    return std::make_unique<RtlMxu<Vmxu_top_##N>>(name, core, index, cfg, rc, sems, vmem, acc, trace_path);
  TPU_RTL_FOR_EACH_SIZE(TPU_RTL_MAKE)
#undef TPU_RTL_MAKE
  (void)name, (void)core, (void)index, (void)cfg, (void)rc, (void)sems, (void)vmem, (void)acc, (void)trace_path;
  throw std::logic_error("internal error: no RTL MXU of this size was built");
}

}  // namespace tpu::sim
