// Reductions (emitter.h).
#include "emitter.h"

namespace tpu::compiler::backend {

isa::Opcode Emitter::combine_op(Combiner c, DType d) {
  switch (c) {
    case Combiner::add: return opcode("vadd.", aty(d));
    case Combiner::multiply: return opcode("vmul.", aty(d));
    case Combiner::maximum: return opcode("vmax.", aty(d));
    case Combiner::minimum: return opcode("vmin.", aty(d));
    case Combiner::and_: return isa::Opcode::VAND;
    case Combiner::or_: return isa::Opcode::VOR;
    case Combiner::replace: break;  // scatter's alone; lowered before the back end
  }
  throw std::logic_error("internal error: unknown combiner");
}

void Emitter::reduce_lanes(const Kernel& k) {
  const DType dt = k.dtype;
  const int esz = dtype_bytes(dt);
  const int64_t K = k.rows, R = k.cols;
  const int64_t lr = ceil_div(R, L_);
  const int64_t row_bytes = lr * L_ * esz;
  const int64_t budget = int64_t(vmem_budget() / 2) - 4 * L_ * 4;
  int64_t rc = std::min<int64_t>(K, std::max<int64_t>(1, budget / (row_bytes + esz)));
  if (row_bytes > budget)
    throw Error(fmt::format("{}: unsupported reduction: a row of {} elements does not fit in VMEM", k.from.front(), R));
  rc = std::min<int64_t>({rc, 256, ceil_div(K, ncores_)});
  const auto mine = share(ceil_div(K, rc), 1);  // this core's chunks of rows
  const int64_t c_lo = mine.first, chunks = mine.second - mine.first;
  if (chunks == 0) return;
  Counter ld = counter(), vd = counter(), st = counter(), z = counter();
  uint64_t in_buf[2], out_buf[2];
  for (int s = 0; s < 2; ++s) in_buf[s] = vmem(uint64_t(rc * row_bytes)), out_buf[s] = vmem(uint64_t(rc * esz));
  const double id = combiner_identity(k.combiner, dt);
  if (R % L_) {  // the lanes past R in each row's last vector hold the identity
    ins(ib::VLI(0, lane_bits(dt, id)));
    for (int s = 0; s < std::min<int64_t>(2, chunks); ++s)
      for (int64_t r = 0; r < rc; ++r) vst(dt, 0, in_buf[s] + uint64_t(r * row_bytes + (lr - 1) * L_ * esz));
    signal(kVpu, z);
    wait(kDma, z, 1);
  }
  std::vector<int64_t> lt(chunks), stt(chunks);
  auto loads = [&](int64_t c) {
    const int64_t r0 = (c_lo + c) * rc, n = std::min(rc, K - r0);
    dma_2d(true, in_buf[c % 2], p_.addr[k.inputs[0]] + uint64_t(r0 * R * esz), uint64_t(n), uint64_t(R * esz), uint64_t(row_bytes),
           uint64_t(R * esz), ld);
    lt[c] = ld.produced;
  };
  const bool with_init = !(k.init == id && !std::isnan(k.init));
  const isa::Opcode op = combine_op(k.combiner, dt);
  const char* red = k.combiner == Combiner::add ? "vredsum" : k.combiner == Combiner::maximum ? "vredmax" : "vredmin";
  loads(0);
  if (chunks > 1) loads(1);
  constexpr int U = 8;  // rows at once, in v0 .. v(2U - 1)
  vregs_.per_vector(2 * U);
  const int init = with_init ? vregs_.hold() : -1;
  if (with_init) ins(ib::VLI(init, lane_bits(dt, k.init)));
  auto chunk = [&](int64_t c) {
    const int64_t r0 = (c_lo + c) * rc, n = std::min(rc, K - r0);
    const int s = int(c % 2);
    wait(kVpu, ld, lt[c]);
    if (c >= 2) wait(kVpu, st, stt[c - 2]);
    for (int64_t r = 0; r < n; r += U) {
      const int u_n = int(std::min<int64_t>(U, n - r));
      for (int u = 0; u < u_n; ++u) vld(dt, 2 * u, in_buf[s] + uint64_t((r + u) * row_bytes));
      for (int64_t q = 1; q < lr; ++q) {
        for (int u = 0; u < u_n; ++u)
          vld(dt, 2 * u + 1, in_buf[s] + uint64_t((r + u) * row_bytes + q * L_ * esz));
        for (int u = 0; u < u_n; ++u) vop(op, 2 * u, 2 * u, 2 * u + 1);
      }
      for (int u = 0; u < u_n; ++u) vop(opcode(red, ".", aty(dt)), 2 * u, 2 * u);
      if (with_init)
        for (int u = 0; u < u_n; ++u) vop(op, 2 * u, 2 * u, init);
      for (int u = 0; u < u_n; ++u) vst(dt, 2 * u, out_buf[s] + uint64_t((r + u) * esz));
    }
    signal(kVpu, vd);
    wait(kDma, vd, c + 1);
    dma_st(p_.addr[k.out] + uint64_t(r0 * esz), out_buf[s], uint64_t(n * esz), st);
    stt[c] = st.produced;
    if (c + 2 < chunks) loads(c + 2);
  };
  items(chunks, 2, 2, 2, chunk);  // as an element-wise kernel's chunks
  drain({&ld, &vd, &st, &z});
}

void Emitter::reduce_columns(const Kernel& k) {
  const DType dt = k.dtype;
  const int esz = dtype_bytes(dt);
  const int64_t R = k.rows, K = k.cols;
  constexpr int64_t UV = 8;  // vectors per column group
  const int64_t gw = std::min<int64_t>({ceil_div(K, L_), UV, ceil_div(ceil_div(K, L_), ncores_)});  // vectors per group
  const int64_t groups = ceil_div(ceil_div(K, L_), gw);
  const auto [g_lo, g_hi] = share(groups, 1);  // this core's groups of columns
  if (g_lo == g_hi) return;
  const int64_t row_bytes = gw * L_ * esz;
  // Two input buffers of rc rows, beside two output rows and each buffer's slack (Emitter::vmem).
  const int64_t budget = (int64_t(vmem_budget()) - 2 * row_bytes) / 2 - 4 * (L_ * 4 + 64);
  const int64_t rc = std::min<int64_t>(R, std::min<int64_t>(512, std::max<int64_t>(1, budget / row_bytes)));
  const int64_t rchunks = ceil_div(R, rc);
  Counter ld = counter(), vd = counter(), st = counter();
  uint64_t in_buf[2], out_buf[2];
  for (int s = 0; s < 2; ++s) in_buf[s] = vmem(uint64_t(rc * row_bytes)), out_buf[s] = vmem(uint64_t(row_bytes));
  struct Step {
    int64_t g, rchunk;
  };
  std::vector<Step> steps;
  for (int64_t g = g_lo; g < g_hi; ++g)
    for (int64_t c = 0; c < rchunks; ++c) steps.push_back({g, c});
  std::vector<int64_t> lt(steps.size()), stt;
  auto cols_of = [&](int64_t g) { return std::min(gw * L_, K - g * gw * L_); };
  auto loads = [&](size_t i) {
    const auto [g, c] = steps[i];
    const int64_t r0 = c * rc, n = std::min(rc, R - r0);
    dma_2d(true, in_buf[i % 2], p_.addr[k.inputs[0]] + uint64_t((r0 * K + g * gw * L_) * esz), uint64_t(n), uint64_t(cols_of(g) * esz),
           uint64_t(row_bytes), uint64_t(K * esz), ld);
    lt[i] = ld.produced;
  };
  const isa::Opcode op = combine_op(k.combiner, dt);
  loads(0);
  if (steps.size() > 1) loads(1);
  int64_t stores_for_out[2] = {0, 0};
  int out_set = 0;
  auto step = [&](size_t i) {
    const auto [g, c] = steps[i];
    const int64_t r0 = c * rc, n = std::min(rc, R - r0);
    const int s = int(i % 2);
    wait(kVpu, ld, lt[i]);
    if (c == 0)
      for (int64_t q = 0; q < gw; ++q) ins(ib::VLI(q, lane_bits(dt, k.init)));
    auto row = [&](int64_t r) {
      for (int64_t q = 0; q < gw; ++q) vld(dt, 16 + q, in_buf[s] + uint64_t(r * row_bytes + q * L_ * esz));
      for (int64_t q = 0; q < gw; ++q) vop(op, q, q, 16 + q);
    };
    // Rows four at a time in a loop (the scalar unit's steps and back edge
    // then cost little beside the VPU's work), the rest after it.
    items(n, 0, 4, 0, row);
    const bool last = c + 1 == rchunks;
    if (last) {
      wait(kVpu, st, stores_for_out[out_set]);
      for (int64_t q = 0; q < gw; ++q) vst(dt, q, out_buf[out_set] + uint64_t(q * L_ * esz));
    }
    signal(kVpu, vd);
    if (last) {
      wait(kDma, vd, int64_t(i) + 1);
      dma_st(p_.addr[k.out] + uint64_t(g * gw * L_ * esz), out_buf[out_set], uint64_t(cols_of(g) * esz), st);
      stores_for_out[out_set] = st.produced;
      out_set ^= 1;
    }
    if (i + 2 < steps.size()) {
      wait(kDma, vd, int64_t(i) + 1);
      loads(i + 2);
    }
  };
  // Group by group, in pairs (buffers and output sets alternate).
  items(g_hi - g_lo, 2, 2, 2, [&](int64_t x) {
    for (int64_t c = 0; c < rchunks; ++c) step(size_t(x * rchunks + c));
  });
  drain({&ld, &vd, &st});
}

}  // namespace tpu::compiler::backend
