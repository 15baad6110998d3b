// Fused expressions on the VPU: one node, register assignment, evaluation, hoisting and preloads (emitter.h).
#include "emitter.h"

namespace tpu::compiler::backend {

void Emitter::node(const Node& n, int d, const std::vector<int>& a, bool store_rounds) {
  const bool fl = is_float(n.dtype);
  // A bf16 or f16 value that only goes to memory is rounded by its store
  // (vst.bf16 and vst.f16 round as vrnd does).
  auto round = [&] {
    if (n.dtype == DType::bf16 && !store_rounds) ins(ib::VRND_BF16(d, d));
    if (n.dtype == DType::f16 && !store_rounds) ins(ib::VRND_F16(d, d));
    if (n.dtype == DType::s8) {
      ins(ib::VSHL(d, d, vregs_.at(kS8Shift)));
      ins(ib::VSRA(d, d, vregs_.at(kS8Shift)));
    }
  };
  switch (n.kind) {
    case OpKind::bitcast_convert:
      if (d != a[0]) ins(ib::VMOV(d, a[0]));
      return;
    case OpKind::convert: {
      const bool sf = is_float(n.src);
      if (n.dtype == DType::pred) {
        vop(opcode("vcmpne.", aty(n.src)), d, a[0], vregs_.at(0));
      } else if (sf && fl) {
        // Floats are exact in f32: narrowing rounds once, to the target.
        if (!is_move(n, store_rounds)) ins(n.dtype == DType::bf16 ? ib::VRND_BF16(d, a[0]) : ib::VRND_F16(d, a[0]));
        else if (d != a[0]) ins(ib::VMOV(d, a[0]));
      } else if (!sf && fl) {
        ins(ib::VCVT_F32_S32(d, a[0]));
        round();
      } else {
        if (sf) ins(ib::VCVT_S32_F32(d, a[0]));
        else ins(ib::VMOV(d, a[0]));
        round();
      }
      return;
    }
    case OpKind::not_:
      if (n.dtype == DType::pred) {
        ins(ib::VXOR(d, a[0], vregs_.at(1)));
      } else {
        ins(ib::VNOT(d, a[0]));
      }
      return;
    case OpKind::negate: vop(opcode("vneg.", aty(n.dtype)), d, a[0]); return round();
    case OpKind::abs: vop(opcode("vabs.", aty(n.dtype)), d, a[0]); return round();
    case OpKind::sign: vop(opcode("vsign.", aty(n.dtype)), d, a[0]); return;
    case OpKind::compare: {
      static const char* dn[] = {"eq", "ne", "lt", "le", "gt", "ge"};
      vop(opcode("vcmp", dn[int(n.dir)], ".", aty(n.src)), d, a[0], a[1]);
      return;
    }
    case OpKind::select: ins(ib::VSEL(d, a[0], a[1], a[2])); return;
    case OpKind::clamp: vop(opcode("vclamp.", aty(n.dtype)), d, a[0], a[1], a[2]); return;
    case OpKind::and_: ins(ib::VAND(d, a[0], a[1])); return;
    case OpKind::or_: ins(ib::VOR(d, a[0], a[1])); return;
    case OpKind::xor_: ins(ib::VXOR(d, a[0], a[1])); return;
    case OpKind::shift_left: ins(ib::VSHL(d, a[0], a[1])); return round();
    case OpKind::shift_right_arithmetic: ins(ib::VSRA(d, a[0], a[1])); return;
    case OpKind::shift_right_logical:
      if (n.dtype == DType::s8) {
        ins(ib::VAND(d, a[0], vregs_.at(kLowByte)));  // d is none of the arguments (regplan)
        ins(ib::VSHR(d, d, a[1]));
        return round();
      }
      ins(ib::VSHR(d, a[0], a[1]));
      return;
    default: break;
  }
  static const std::map<OpKind, const char*> f1 = {
      {OpKind::exponential, "vexp"}, {OpKind::log, "vlog"},     {OpKind::tanh, "vtanh"},   {OpKind::logistic, "vlogistic"},
      {OpKind::rsqrt, "vrsqrt"},     {OpKind::sqrt, "vsqrt"},   {OpKind::floor, "vfloor"}, {OpKind::ceil, "vceil"},
      {OpKind::round_nearest_even, "vround"}};
  if (auto it = f1.find(n.kind); it != f1.end()) {
    vop(opcode(it->second, ".f32"), d, a[0]);
    return round();
  }
  static const std::map<OpKind, const char*> f2 = {{OpKind::add, "vadd"},     {OpKind::subtract, "vsub"}, {OpKind::multiply, "vmul"},
                                                   {OpKind::divide, "vdiv"},  {OpKind::maximum, "vmax"},  {OpKind::minimum, "vmin"},
                                                   {OpKind::power, "vpow"}};
  if (auto it = f2.find(n.kind); it != f2.end()) {
    if (!fl && n.kind == OpKind::power) throw Error("unsupported integer power (the VPU has vpow.f32 only)");
    vop(opcode(it->second, ".", aty(n.dtype)), d, a[0], a[1]);
    return round();
  }
  throw Error(fmt::format("internal error: no VPU code for {}", op_name(n.kind)));
}

Emitter::RegPlan Emitter::regplan(const Expr& e, int max_unroll) {
  RegPlan rp;
  const size_t n = e.nodes.size();
  for (uint32_t bits : e.constants())
    if (auto [r, fresh] = vregs_.constant(bits); fresh) rp.consts.push_back({r, bits});
  if (e.has(Leaf::col)) rp.lane0 = vregs_.hold();
  rp.hoisted_reg.assign(n, -1);
  for (size_t i = 0; i < n; ++i) {
    const Node& nd = e.nodes[i];
    if (nd.leaf == Leaf::splat) rp.hoisted_reg[i] = vregs_.at(lane_bits(nd.dtype, nd.value));
    if (nd.leaf == Leaf::scalar) rp.hoisted_reg[i] = vregs_.hold();
  }
  std::vector<size_t> last(n, 0);
  for (size_t i = 0; i < n; ++i)
    for (int a : e.nodes[i].args) last[a] = i;
  rp.only_stored = e.only_stored();
  const std::vector<bool>& only_stored = rp.only_stored;
  last[n - 1] = n;
  for (int i : e.stored) last[size_t(i)] = n;  // stored with the root
  // Linear scan over the node order: count registers one vector needs.
  std::vector<int> slot(n, -1);
  std::vector<bool> busy(32, false);
  int width = 0;
  for (size_t i = 0; i < n; ++i) {
    if (rp.hoisted_reg[i] >= 0) continue;
    // A move whose argument dies here takes over its register (no code).
    if (const Node& nd = e.nodes[i]; is_move(nd, only_stored[i]) && last[size_t(nd.args[0])] == i && slot[size_t(nd.args[0])] >= 0) {
      slot[i] = slot[size_t(nd.args[0])];
      continue;
    }
    int s = 0;
    while (busy[s]) ++s;
    busy[s] = true;
    slot[i] = s;
    width = std::max(width, s + 1);
    for (int a : e.nodes[i].args)
      if (last[a] == i && slot[a] >= 0) busy[slot[a]] = false;
  }
  const int avail = vregs_.below_held();
  rp.unroll = std::max(1, std::min(max_unroll, avail / std::max(1, width)));
  vregs_.per_vector(rp.unroll * width);
  rp.reg.assign(rp.unroll, std::vector<int>(n, -1));
  for (int u = 0; u < rp.unroll; ++u)
    for (size_t i = 0; i < n; ++i) rp.reg[u][i] = rp.hoisted_reg[i] >= 0 ? rp.hoisted_reg[i] : u * width + slot[i];
  return rp;
}

void Emitter::eval(const Expr& e, const RegPlan& rp, int U, const std::function<void(int, const Node&, int)>& leaf, int u0) {
  for (size_t i = 0; i < e.nodes.size(); ++i) {
    const Node& nd = e.nodes[i];
    if (nd.hoisted()) continue;
    for (int u = 0; u < U; ++u) {
      const int d = rp.reg[u0 + u][i];
      if (nd.leaf != Leaf::none) {
        leaf(u, nd, d);
      } else {
        std::vector<int> a;
        for (int x : nd.args) a.push_back(rp.reg[u0 + u][x]);
        node(nd, d, a, rp.only_stored[i]);
      }
    }
  }
}

void Emitter::hoist(const Expr& e, const RegPlan& rp, const std::vector<uint64_t>& scalar_vmem) {
  for (const auto& [r, bits] : rp.consts) ins(ib::VLI(r, bits));
  for (size_t i = 0; i < e.nodes.size(); ++i) {
    const Node& nd = e.nodes[i];
    if (nd.leaf == Leaf::scalar) vld(nd.dtype, rp.hoisted_reg[i], scalar_vmem[nd.input]);
  }
  if (rp.lane0 >= 0) {
    ins(ib::VIOTA(rp.lane0));
    ins(ib::VCMPEQ_S32(rp.lane0, rp.lane0, vregs_.at(0)));
  }
}

void Emitter::col_splat(const RegPlan& rp, int d, uint64_t at, DType dt) {
  vld(dt, d, at);
  ins(ib::VSEL(d, rp.lane0, d, vregs_.at(is_float(dt) ? kNegInf : kIntMin)));
  vop(opcode("vredmax.", aty(dt)), d, d);
}

std::vector<uint64_t> Emitter::preload(const Kernel& k, Counter& ld) {
  std::vector<uint64_t> at(k.inputs.size(), 0);
  std::vector<bool> done(k.inputs.size(), false);
  for (const Node& nd : k.expr.nodes) {
    if (nd.leaf != Leaf::scalar && nd.leaf != Leaf::row && nd.leaf != Leaf::col) continue;
    if (done[nd.input]) continue;
    done[nd.input] = true;
    const int v = k.inputs[nd.input];
    const int esz = dtype_bytes(p_.type(v).dtype);
    if (nd.leaf == Leaf::scalar) {
      at[nd.input] = vmem(uint64_t(L_) * esz);
      dma_2d(true, at[nd.input], p_.addr[v], uint64_t(L_), esz, esz, 0, ld);
    } else if (nd.leaf == Leaf::col) {
      const uint64_t bytes = uint64_t(p_.type(v).elements() * esz);
      at[nd.input] = vmem(bytes);
      dma_ld(at[nd.input], p_.addr[v], bytes, ld);
    } else {
      const int64_t len = p_.type(v).elements();
      const int64_t reps = ceil_div(len + L_, len);
      at[nd.input] = vmem(uint64_t(reps * len * esz));
      dma_2d(true, at[nd.input], p_.addr[v], uint64_t(reps), uint64_t(len * esz), uint64_t(len * esz), 0, ld);
    }
  }
  return at;
}

Emitter::Ways Emitter::collective_ways(const Kernel& k, int64_t fit) const {
  const std::vector<Axis> axes = ring_axes(k);
  int64_t widest = 1;
  for (const Axis& x : axes) widest = std::max(widest, x.size());
  int64_t turns = std::max<int64_t>(1, int64_t(axes.size())), dirs = widest > 2 ? 2 : 1;
  if (turns * dirs > fit) turns = 1;
  if (turns * dirs > fit) dirs = 1;
  Ways ws;
  for (int64_t r = 0; r < turns; ++r)
    for (int64_t d = 0; d < dirs; ++d) {
      std::vector<Axis> way;
      for (size_t a = 0; a < axes.size(); ++a) {
        Axis x = axes[(a + size_t(r)) % axes.size()];
        if (d == 1) {  // the other way round
          std::reverse(x.members.begin(), x.members.end());
          x.pos = x.size() - 1 - x.pos;
          x.reversed = true;
        }
        way.push_back(std::move(x));
      }
      ws.rings.push_back(std::move(way));
    }
  return ws;
}

std::vector<Emitter::Axis> Emitter::ring_axes(const Kernel& k) const {
  const auto [grp, n, pos] = group_of(k);
  bool whole = n == nchips_;
  for (int64_t i = 0; whole && i < n; ++i) whole = (*grp)[size_t(i)] == i;
  const auto shape = m_.ici_shape();
  std::vector<Axis> axes;
  if (whole && int64_t(shape[0]) * shape[1] * shape[2] == n && (shape[1] > 1 || shape[2] > 1)) {
    const int64_t stride[3] = {1, int64_t(shape[0]), int64_t(shape[0]) * shape[1]};
    for (int a = 0; a < 3; ++a) {
      if (shape[size_t(a)] < 2) continue;
      Axis x;
      x.stride = stride[a];
      x.pos = chip_ / stride[a] % int64_t(shape[size_t(a)]);
      const int64_t first = chip_ - x.pos * stride[a];
      for (int64_t i = 0; i < int64_t(shape[size_t(a)]); ++i) x.members.push_back(first + i * stride[a]);
      axes.push_back(std::move(x));
    }
  } else if (n > 1) {
    axes.push_back({*grp, pos});
  }
  return axes;
}

Emitter::WayBuffers Emitter::way_buffers(const Ways& all, int64_t mine, int64_t n, int esz) {
  const int64_t V = ceil_div(mine, L_), ways = std::min(all.count(), V);
  WayBuffers b;
  b.ws = all;
  b.ws.rings.resize(size_t(ways));
  b.cut = {0};
  for (int64_t w = 0; w < ways; ++w) {
    b.cut.push_back(std::min(mine, b.cut.back() + L_ * (V / ways + (w < V % ways ? 1 : 0))));
    b.size.push_back(n * ceil_div(b.cut.back() - b.cut.end()[-2], L_) * L_);
    b.base.push_back(vmem(uint64_t(b.size.back() * esz)));
  }
  return b;
}

}  // namespace tpu::compiler::backend
