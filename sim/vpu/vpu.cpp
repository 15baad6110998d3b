#include "vpu.h"

#include <fmt/format.h>

#include <unordered_map>

#include "tpu/isa/half.h"
#include "vector_ops.h"

namespace tpu::sim {
namespace {

using namespace lanes;
using isa::Opcode;

// ---- Semantics, one handler per VPU instruction of isa.def -----------------
// Operands by name (isa::operand): V1..V4 = vd, va, vb, vc; VLD/VST = vd or
// vs, rs1 (its value), imm; VS = vd, rs1; VI = vd, bits; VX = rdst, rsrc.
using namespace isa::operand;
static_assert(+VLD::rs1 == +VST::rs1 && +VLD::imm == +VST::imm, "loads and stores address VMEM alike");

template <typename F>
void map1(VpuContext& c, const Issued& i, F fn) {
  uint32_t* d = c.reg(i[V2::vd]);
  const uint32_t* a = c.reg(i[V2::va]);
  for (uint32_t l = 0; l < c.lanes; ++l) d[l] = fn(a[l]);
}
template <typename F>
void map2(VpuContext& c, const Issued& i, F fn) {
  uint32_t* d = c.reg(i[V3::vd]);
  const uint32_t* a = c.reg(i[V3::va]);
  const uint32_t* b = c.reg(i[V3::vb]);
  for (uint32_t l = 0; l < c.lanes; ++l) d[l] = fn(a[l], b[l]);
}
template <typename F>
void map3(VpuContext& c, const Issued& i, F fn) {
  uint32_t* d = c.reg(i[V4::vd]);
  const uint32_t* a = c.reg(i[V4::va]);
  const uint32_t* b = c.reg(i[V4::vb]);
  const uint32_t* e = c.reg(i[V4::vc]);
  for (uint32_t l = 0; l < c.lanes; ++l) d[l] = fn(a[l], b[l], e[l]);
}

#define DEF(ID) \
  void exec_##ID([[maybe_unused]] VpuContext& c, [[maybe_unused]] const Issued& i)
#define BIN_F32(ID, EXPR) \
  DEF(ID) { map2(c, i, [](uint32_t x, uint32_t y) { float a = f(x), b = f(y); return bits(EXPR); }); }
#define BIN_S32(ID, EXPR) \
  DEF(ID) { map2(c, i, [](uint32_t x, uint32_t y) { int32_t a = s(x), b = s(y); (void)a, (void)b; return uint32_t(EXPR); }); }
#define BIN_U32(ID, EXPR) \
  DEF(ID) { map2(c, i, [](uint32_t a, uint32_t b) { return uint32_t(EXPR); }); }
#define UN_F32(ID, EXPR) \
  DEF(ID) { map1(c, i, [](uint32_t x) { float a = f(x); return bits(EXPR); }); }
#define UN_S32(ID, EXPR) \
  DEF(ID) { map1(c, i, [](uint32_t x) { int32_t a = s(x); return uint32_t(EXPR); }); }
#define CMP_F32(ID, OP) BIN_U32(ID, f(a) OP f(b) ? 1u : 0u)
#define CMP_S32(ID, OP) BIN_U32(ID, s(a) OP s(b) ? 1u : 0u)

// Wrapping s32 arithmetic goes through uint32_t.
BIN_F32(VADD_F32, a + b)
BIN_F32(VSUB_F32, a - b)
BIN_F32(VMUL_F32, a * b)
BIN_F32(VDIV_F32, a / b)
BIN_F32(VMAX_F32, fmax_nan(a, b))
BIN_F32(VMIN_F32, fmin_nan(a, b))
BIN_F32(VPOW_F32, std::pow(a, b))
BIN_U32(VADD_S32, a + b)
BIN_U32(VSUB_S32, a - b)
BIN_U32(VMUL_S32, a * b)
BIN_S32(VDIV_S32, sdiv(a, b))
BIN_S32(VMAX_S32, std::max(a, b))
BIN_S32(VMIN_S32, std::min(a, b))
BIN_U32(VAND, a & b)
BIN_U32(VOR, a | b)
BIN_U32(VXOR, a ^ b)
BIN_U32(VSHL, shl(a, b))
BIN_U32(VSHR, shr(a, b))
BIN_U32(VSRA, sra(a, b))
DEF(VNOT) { map1(c, i, [](uint32_t a) { return ~a; }); }

UN_F32(VNEG_F32, -a)
UN_F32(VABS_F32, std::fabs(a))
UN_F32(VEXP_F32, std::exp(a))
UN_F32(VLOG_F32, std::log(a))
UN_F32(VTANH_F32, std::tanh(a))
UN_F32(VLOGISTIC_F32, 1.0f / (1.0f + std::exp(-a)))
UN_F32(VRSQRT_F32, 1.0f / std::sqrt(a))
UN_F32(VSQRT_F32, std::sqrt(a))
UN_F32(VFLOOR_F32, std::floor(a))
UN_F32(VCEIL_F32, std::ceil(a))
UN_F32(VROUND_F32, std::nearbyint(a))
UN_F32(VSIGN_F32, fsign(a))
UN_S32(VNEG_S32, 0u - uint32_t(a))
UN_S32(VABS_S32, a < 0 ? 0u - uint32_t(a) : uint32_t(a))
UN_S32(VSIGN_S32, a > 0 ? 1 : a < 0 ? -1 : 0)

CMP_F32(VCMPEQ_F32, ==)
CMP_F32(VCMPNE_F32, !=)
CMP_F32(VCMPLT_F32, <)
CMP_F32(VCMPLE_F32, <=)
CMP_F32(VCMPGT_F32, >)
CMP_F32(VCMPGE_F32, >=)
CMP_S32(VCMPEQ_S32, ==)
CMP_S32(VCMPNE_S32, !=)
CMP_S32(VCMPLT_S32, <)
CMP_S32(VCMPLE_S32, <=)
CMP_S32(VCMPGT_S32, >)
CMP_S32(VCMPGE_S32, >=)
DEF(VSEL) { map3(c, i, [](uint32_t m, uint32_t a, uint32_t b) { return m != 0 ? a : b; }); }

UN_S32(VCVT_F32_S32, bits(float(a)))
UN_F32(VCVT_S32_F32, f(uint32_t(f32_to_s32(a))))
DEF(VRND_BF16) { map1(c, i, [](uint32_t a) { return isa::round_f32_bits_to_bf16(a); }); }
DEF(VRND_F16) { map1(c, i, [](uint32_t a) { return isa::round_f32_bits_to_f16(a); }); }
DEF(VCLAMP_F32) {
  map3(c, i, [](uint32_t lo, uint32_t x, uint32_t hi) { return bits(fmin_nan(fmax_nan(f(x), f(lo)), f(hi))); });
}
DEF(VCLAMP_S32) {
  map3(c, i, [](uint32_t lo, uint32_t x, uint32_t hi) { return uint32_t(std::min(std::max(s(x), s(lo)), s(hi))); });
}

// Reductions: f32 sums add neighbours pairwise, level by level (an odd last
// element moves up unchanged), so the order is fixed for every lane count.
template <typename T, typename Op>
void reduce(VpuContext& c, const Issued& i, Op op) {
  std::vector<T> v(c.lanes);
  const uint32_t* a = c.reg(i[V2::va]);
  for (uint32_t l = 0; l < c.lanes; ++l) std::memcpy(&v[l], &a[l], 4);
  for (size_t n = v.size(); n > 1; n = (n + 1) / 2)
    for (size_t k = 0; k < n / 2 + n % 2; ++k) v[k] = 2 * k + 1 < n ? op(v[2 * k], v[2 * k + 1]) : v[2 * k];
  uint32_t r;
  std::memcpy(&r, &v[0], 4);
  uint32_t* d = c.reg(i[V2::vd]);
  for (uint32_t l = 0; l < c.lanes; ++l) d[l] = r;
}
DEF(VREDSUM_F32) { reduce<float>(c, i, [](float a, float b) { return a + b; }); }
DEF(VREDMAX_F32) { reduce<float>(c, i, fmax_nan); }
DEF(VREDMIN_F32) { reduce<float>(c, i, fmin_nan); }
DEF(VREDSUM_S32) { reduce<uint32_t>(c, i, [](uint32_t a, uint32_t b) { return a + b; }); }
DEF(VREDMAX_S32) { reduce<int32_t>(c, i, [](int32_t a, int32_t b) { return std::max(a, b); }); }
DEF(VREDMIN_S32) { reduce<int32_t>(c, i, [](int32_t a, int32_t b) { return std::min(a, b); }); }

// Memory access: element size, and widening/narrowing between VMEM and lanes.
bool vmem_access(VpuContext& c, const Issued& i, uint32_t esize, const char* what) {
  const uint64_t addr = i[VLD::rs1] + i[VLD::imm];
  if (auto err = c.vmem.check_range(addr, uint64_t(c.lanes) * esize, esize, "VMEM")) {
    c.error = fmt::format("{}: {}", what, *err);
    return false;
  }
  return true;
}
template <typename Elem, typename Widen>
void load(VpuContext& c, const Issued& i, const char* what, Widen widen) {
  if (!vmem_access(c, i, sizeof(Elem), what)) return;
  std::vector<Elem> tmp(c.lanes);
  c.vmem.read(i[VLD::rs1] + i[VLD::imm], tmp.data(), tmp.size() * sizeof(Elem));
  uint32_t* d = c.reg(i[VLD::vd]);
  for (uint32_t l = 0; l < c.lanes; ++l) d[l] = widen(tmp[l]);
}
template <typename Elem, typename Narrow>
void store(VpuContext& c, const Issued& i, const char* what, Narrow narrow) {
  if (!vmem_access(c, i, sizeof(Elem), what)) return;
  std::vector<Elem> tmp(c.lanes);
  const uint32_t* a = c.reg(i[VST::vs]);
  for (uint32_t l = 0; l < c.lanes; ++l) tmp[l] = narrow(a[l]);
  c.vmem.write(i[VST::rs1] + i[VST::imm], tmp.data(), tmp.size() * sizeof(Elem));
}
DEF(VLD_F32) { load<uint32_t>(c, i, "vld.f32", [](uint32_t x) { return x; }); }
DEF(VLD_S32) { load<uint32_t>(c, i, "vld.s32", [](uint32_t x) { return x; }); }
DEF(VLD_BF16) { load<uint16_t>(c, i, "vld.bf16", [](uint16_t x) { return uint32_t(x) << 16; }); }
DEF(VLD_S8) { load<int8_t>(c, i, "vld.s8", [](int8_t x) { return uint32_t(int32_t(x)); }); }
DEF(VST_F32) { store<uint32_t>(c, i, "vst.f32", [](uint32_t x) { return x; }); }
DEF(VST_S32) { store<uint32_t>(c, i, "vst.s32", [](uint32_t x) { return x; }); }
DEF(VST_BF16) { store<uint16_t>(c, i, "vst.bf16", [](uint32_t x) { return isa::f32_bits_to_bf16(x); }); }
DEF(VST_S8) { store<int8_t>(c, i, "vst.s8", [](uint32_t x) { return int8_t(uint8_t(x)); }); }
DEF(VLD_F16) { load<uint16_t>(c, i, "vld.f16", [](uint16_t x) { return isa::f16_to_f32_bits(x); }); }
DEF(VST_F16) { store<uint16_t>(c, i, "vst.f16", [](uint32_t x) { return isa::f32_bits_to_f16(x); }); }

// Accumulator rows are mxu_dim words wide: lanes beyond it read as zero and
// are not written.
bool acc_row(VpuContext& c, const Issued& i, const char* what, uint64_t& row) {
  row = i[VLD::rs1] + i[VLD::imm];
  if (row >= c.acc.rows()) {
    c.error = fmt::format("{}: accumulator row {} is outside 0..{}", what, int64_t(row), c.acc.rows() - 1);
    return false;
  }
  return true;
}
DEF(VLDA) {
  uint64_t row;
  if (!acc_row(c, i, "vlda", row)) return;
  uint32_t* d = c.reg(i[VLD::vd]);
  const uint32_t n = std::min(c.lanes, c.acc.width());
  std::fill(d, d + c.lanes, 0u);
  std::copy(c.acc.row(row), c.acc.row(row) + n, d);
}
DEF(VSTA) {
  uint64_t row;
  if (!acc_row(c, i, "vsta", row)) return;
  const uint32_t* a = c.reg(i[VST::vs]);
  std::copy(a, a + std::min(c.lanes, c.acc.width()), c.acc.row(row));
}

DEF(VMOV) { map1(c, i, [](uint32_t a) { return a; }); }
DEF(VBCAST) { std::fill(c.reg(i[VS::vd]), c.reg(i[VS::vd]) + c.lanes, uint32_t(i[VS::rs1])); }
DEF(VLI) { std::fill(c.reg(i[VI::vd]), c.reg(i[VI::vd]) + c.lanes, uint32_t(i[VI::bits])); }
DEF(VIOTA) {
  uint32_t* d = c.reg(i[V1::vd]);
  for (uint32_t l = 0; l < c.lanes; ++l) d[l] = l;
}
DEF(VXPOSE) {
  const uint64_t bytes = uint64_t(c.lanes) * c.lanes * 4;
  for (uint64_t addr : {i[VX::rdst], i[VX::rsrc]})
    if (auto err = c.vmem.check_range(addr, bytes, 4, "VMEM")) {
      c.error = fmt::format("vxpose: {}", *err);
      return;
    }
  std::vector<uint32_t> in(size_t(c.lanes) * c.lanes), out(in.size());
  c.vmem.read(i[VX::rsrc], in.data(), bytes);
  for (uint32_t r = 0; r < c.lanes; ++r)
    for (uint32_t k = 0; k < c.lanes; ++k) out[size_t(k) * c.lanes + r] = in[size_t(r) * c.lanes + k];
  c.vmem.write(i[VX::rdst], out.data(), bytes);
}

// ---- The handler table: an instruction without a handler fails to compile.
struct Handler {
  void (*exec)(VpuContext&, const Issued&);
};
#define VPU_ENTRY_Vpu(id) {Opcode::id, Handler{&exec_##id}},
#define VPU_ENTRY_Scalar(id)
#define VPU_ENTRY_Sync(id)
#define VPU_ENTRY_Dma(id)
#define VPU_ENTRY_Mxu(id)
#define ISA_INSN(id, mnemonic, opcode, format, unit, cls, doc) VPU_ENTRY_##unit(id)
const std::unordered_map<Opcode, Handler> kHandlers = {
#include "tpu/isa/isa.def"
};

const Handler& handler(Opcode op) {
  auto it = kHandlers.find(op);
  if (it == kHandlers.end())
    throw std::logic_error(fmt::format("internal error: {} is not a VPU instruction", isa::spec(op).mnemonic));
  return it->second;
}

}  // namespace

bool vpu_execute(VpuContext& ctx, const Issued& is) {
  ctx.error.clear();
  handler(is.insn.op).exec(ctx, is);
  return ctx.error.empty();
}


Vpu::Vpu(sc_core::sc_module_name name, int core, const MachineConfig& cfg, RunControl& rc, SemaphoreFile& sems,
         SparseMemory& vmem, Accumulators& acc)
    : sc_core::sc_module(name),
      QueuedUnit(core, isa::kUnitVpu, cfg.core.queue_depth, rc, sems),
      cfg_(cfg),
      regs_(size_t(isa::kNumVregs) * cfg.target.vpu_lanes, 0),
      ctx_{uint32_t(cfg.target.vpu_lanes), regs_, vmem, acc, {}} {
  SC_HAS_PROCESS(Vpu);
  SC_METHOD(tick);
  sensitive << clk.pos();
  dont_initialize();
}

void Vpu::tick() {
  const uint64_t now = rc_.cycle();
  if (woke(now)) return;
  step(now);
  rest(now, now + 1 >= last_complete_ && now >= busy_until_);
}

void Vpu::step(uint64_t now) {
  fire_due(now);
  const Issued* h = current(now);
  const UnitState busy_or_idle = now + 1 < last_complete_ ? UnitState::Busy : UnitState::Idle;
  if (!h) return finish(busy_or_idle, "");
  if (now < busy_until_) return finish(UnitState::Busy, "");  // transposing: work, not a stall
  // A signal's count arrives once the last result is being computed in its
  // final cycle: at last_complete_ - 1.
  switch (sync_deferred(*h, now, last_complete_ > 0 ? last_complete_ - 1 : 0)) {
    case SyncResult::Done: return finish(UnitState::Busy, "");
    case SyncResult::Blocked:
      if (busy_or_idle == UnitState::Busy) return finish(UnitState::Busy, "");
      return finish(UnitState::Blocked, blocked_cause(*h));
    case SyncResult::NotSync: break;
  }
  // Dispatch in queue order while the cycle's slots allow; the first
  // instruction that cannot go ends the group.
  isa::VpuIssueGroup group(cfg_.vpu.issue);
  for (uint32_t n = 0;; ++n) {
    if (n > 0 && !(h = head())) break;
    const isa::Opcode op = h->insn.op;
    if (op == isa::Opcode::WAIT || op == isa::Opcode::SIGNAL || !group.admits(op)) break;
    const VpuClass cls = isa::spec(op).vpu_class;
    // Scoreboard: every vector register the instruction names must be ready.
    const auto& ops = isa::format_spec(isa::spec(op).format).operands;
    bool ready = true;
    for (size_t k = 0; k < ops.size() && ready; ++k)
      if (ops[k].kind == isa::OperandKind::Vreg && now < ready_at_[size_t(h->insn[k])]) ready = false;
    if (!ready) {
      if (n == 0) return finish(UnitState::Stalled, "dependency");
      break;
    }
    const Issued is = *h;
    if (!vpu_execute(ctx_, is)) {
      rc_.fault(fmt::format("core {} vpu: pc {}: {}", core_, is.pc, ctx_.error));
      return;
    }
    const uint64_t done = now + cfg_.vpu_latency(cls);
    if (cls == VpuClass::Transpose) busy_until_ = done;
    {  // the result register: every VPU format that writes one names it vd, first
      using namespace isa::operand;
      static_assert(+V1::vd == 0 && +V2::vd == 0 && +V3::vd == 0 && +V4::vd == 0 && +VLD::vd == 0 && +VS::vd == 0 && +VI::vd == 0);
      if (ops[0].kind == isa::OperandKind::Vreg && cls != VpuClass::Store) ready_at_[size_t(is.insn[V1::vd])] = done;
    }
    last_complete_ = std::max(last_complete_, done);
    trace_event(is.pc, now, done);
    retire();
    group.add(op);
  }
  finish(UnitState::Busy, "");
}

}  // namespace tpu::sim
