// Element-wise kernels (emitter.h).
#include <numeric>

#include "emitter.h"

namespace tpu::compiler::backend {

void Emitter::elementwise(const Kernel& k) {
  const Expr& e = k.expr;
  // What it stores: the root, then the values it computes for later kernels too.
  struct Out {
    int value, node;
    DType dt;
  };
  std::vector<Out> outs = {{k.out, int(e.nodes.size()) - 1, p_.type(k.out).dtype}};
  for (int s : e.stored) {
    const int v = e.nodes[size_t(s)].value_id;
    outs.push_back({v, s, p_.type(v).dtype});
  }
  const int64_t E = p_.type(k.out).elements();
  const int64_t nvec = ceil_div(E, L_);
  Counter ld = counter(), vd = counter(), st = counter();
  std::vector<uint64_t> pre = preload(k, ld);
  std::vector<int> tensor_inputs;
  for (const Node& nd : e.nodes)
    if (nd.leaf == Leaf::input && std::find(tensor_inputs.begin(), tensor_inputs.end(), nd.input) == tensor_inputs.end())
      tensor_inputs.push_back(nd.input);
  int64_t per_vec = 0;
  for (const Out& o : outs) per_vec += L_ * dtype_bytes(o.dt);
  for (int i : tensor_inputs) per_vec += L_ * dtype_bytes(p_.type(k.inputs[i]).dtype);
  // Two register banks of up to 4 vectors each: a group's loads overlap
  // the previous group's arithmetic and stores (Pipeliner).
  const RegPlan rp = regplan(e, 8);
  const int group = std::max(1, rp.unroll / 2);
  int64_t cv = std::min<int64_t>(nvec, std::max<int64_t>(1, int64_t(vmem_budget() / 2 / uint64_t(per_vec + 64)) - 2));
  cv = std::min<int64_t>({cv, 128, ceil_div(nvec, ncores_)});
  // Chunks of whole rows of the row and column leaves where they hold
  // some, so that the chunks' offsets into those step by a constant and
  // their code is alike (a loop, below).
  int64_t rows_unit = 1;
  if (e.row_len > 0) rows_unit = std::lcm(rows_unit, e.row_len / std::gcd<int64_t>(e.row_len, L_));
  for (const Node& nd : e.nodes)
    if (nd.leaf == Leaf::col) rows_unit = std::lcm(rows_unit, int64_t(nd.value) / std::gcd(int64_t(nd.value), L_));
  if (cv > rows_unit && cv < nvec) cv = cv / rows_unit * rows_unit;
  const auto mine = share(ceil_div(nvec, cv), 1);  // this core's chunks
  const int64_t c_lo = mine.first, chunks = mine.second - mine.first;
  if (chunks == 0) return drain({&ld, &vd, &st});
  std::vector<std::vector<uint64_t>> in_buf(2, std::vector<uint64_t>(k.inputs.size(), 0)), out_buf(2, std::vector<uint64_t>(outs.size(), 0));
  for (int s = 0; s < 2 && s < chunks; ++s) {
    for (int i : tensor_inputs) in_buf[s][i] = vmem(uint64_t(cv * L_ * dtype_bytes(p_.type(k.inputs[i]).dtype)));
    for (size_t o = 0; o < outs.size(); ++o) out_buf[s][o] = vmem(uint64_t(cv * L_ * dtype_bytes(outs[o].dt)));
  }
  auto range = [&](int64_t c) { return std::make_pair((c_lo + c) * cv * L_, std::min(E, (c_lo + c + 1) * cv * L_)); };
  std::vector<int64_t> loads_through(chunks);
  auto loads = [&](int64_t c) {
    const auto [b, end] = range(c);
    for (int i : tensor_inputs) {
      const int esz = dtype_bytes(p_.type(k.inputs[i]).dtype);
      dma_ld(in_buf[c % 2][i], p_.addr[k.inputs[i]] + uint64_t(b * esz), uint64_t((end - b) * esz), ld);
    }
    loads_through[c] = ld.produced;
  };
  std::vector<int64_t> stores_through(chunks, 0);
  auto chunk = [&](int64_t c) {
    const int64_t b = range(c).first, end = range(c).second;
    const int s = int(c % 2);
    wait(kVpu, ld, loads_through[c]);
    if (c >= 2) wait(kVpu, st, stores_through[c - 2]);
    if (c == 0) hoist(e, rp, pre);
    const int64_t nv = ceil_div(end - b, L_);
    Pipeliner pipe{*this, {}, {}};
    auto vectors = [&](int64_t g) {
      const int64_t q = g * group;
      const int U = int(std::min<int64_t>(group, nv - q));
      const int u0 = rp.unroll >= 2 ? int(g % 2) * group : 0;
      pipe.group([&] {
      eval(e, rp, U, [&](int u, const Node& nd, int r) {
        const int64_t vec = q + u;
        if (nd.leaf == Leaf::input) {
          const DType dt = p_.type(k.inputs[nd.input]).dtype;
          vld(dt, r, in_buf[s][nd.input] + uint64_t(vec * L_ * dtype_bytes(dt)));
        } else if (nd.leaf == Leaf::row) {
          const DType dt = p_.type(k.inputs[nd.input]).dtype;
          const int64_t off = (b + vec * L_) % e.row_len;
          vld(dt, r, pre[nd.input] + uint64_t(off * dtype_bytes(dt)));
        } else if (nd.leaf == Leaf::col) {
          const DType dt = p_.type(k.inputs[nd.input]).dtype;
          const int64_t index = (b + vec * L_) / int64_t(nd.value);
          col_splat(rp, r, pre[nd.input] + uint64_t(index * dtype_bytes(dt)), dt);
        }
      }, u0);
      for (size_t o = 0; o < outs.size(); ++o)
        for (int u = 0; u < U; ++u)
          vst(outs[o].dt, rp.reg[u0 + u][size_t(outs[o].node)], out_buf[s][o] + uint64_t((q + u) * L_ * dtype_bytes(outs[o].dt)));
      });
    };
    // The groups: the first (nothing before it to overlap; its
    // instructions tell what a group costs), then a loop whose trips take
    // enough groups for the scalar unit to keep ahead of the VPU, an
    // even number where the register banks alternate and whole rows of a
    // row or column leaf (whose offsets then step by a constant), then
    // those left (and a short last group).
    vectors(0);
    const int64_t ng = ceil_div(nv, group);
    int64_t per = trip_items(double(pipe.last.size()), vpu_cycles(pipe.last), int(tensor_inputs.size() + outs.size()));
    if (rp.unroll >= 2) per += per % 2;
    const auto whole = [&](int64_t row) { per = std::lcm(per, row / std::gcd(row, group * L_)); };
    if (e.row_len > 0) whole(e.row_len);
    for (const Node& nd : e.nodes)
      if (nd.leaf == Leaf::col) whole(int64_t(nd.value));
    // Straight code ahead of the loop fills the VPU's queue, so the
    // loop's set-up does not hold up the VPU.
    const int64_t lead = int64_t(m_.core.queue_depth) / int64_t(pipe.last.size());
    if (per > 0) items(ng - 1, lead, per, nv % group != 0, [&](int64_t g) { vectors(g + 1); });
    else for (int64_t g = 1; g < ng; ++g) vectors(g);
    pipe.flush();
    signal(kVpu, vd);
    wait(kDma, vd, c + 1);
    for (size_t o = 0; o < outs.size(); ++o) {
      const int esz = dtype_bytes(outs[o].dt);
      dma_st(p_.addr[outs[o].value] + uint64_t(b * esz), out_buf[s][o], uint64_t((end - b) * esz), st);
    }
    stores_through[c] = st.produced;
    if (c + 2 < chunks) loads(c + 2);
  };
  loads(0);
  if (chunks > 1) loads(1);
  // Neither of the first two chunks waits for a store; pairs of chunks
  // take the double buffers in turn; the last two load nothing ahead.
  items(chunks, 2, 2, 2, chunk);
  drain({&ld, &vd, &st});
}

}  // namespace tpu::compiler::backend
