// Collectives across chips: all-reduce, reduce-scatter, all-gather, all-to-all, collective-permute (emitter.h).
#include "emitter.h"

namespace tpu::compiler::backend {

void Emitter::all_reduce(const Kernel& k) {
  const DType dt = check_combinable(k);
  const int esz = dtype_bytes(dt);
  const int64_t n = std::get<1>(group_of(k));
  const auto [e0, e1] = share(p_.type(k.out).elements(), L_);
  const Ways ws = collective_ways(k, (e1 - e0) / (L_ * n));  // each way at least a vector a chunk
  const int64_t W = ws.count();
  in_blocks(e0, e1, 2 * uint64_t(esz), 2 * n * W, esz, [&](int64_t b0, int64_t b1) {
    Counter first_ld = counter(), ld = counter(), st = counter();  // the first chunks' loads; the rest's
    const int64_t mine = b1 - b0, H = ceil_div(mine, L_ * n * W) * L_ * n;  // each way's elements: whole vectors in every chunk
    const uint64_t buf = vmem(uint64_t(W * H * esz)), bytes = uint64_t(mine * esz);
    const uint64_t src = p_.addr[k.inputs[0]] + uint64_t(b0 * esz), dst = p_.addr[k.out] + uint64_t(b0 * esz);
    // Bytes [from, to) of the block (those that are not padding) loaded
    // (counted on c) or stored.
    auto move = [&](bool load, uint64_t from, uint64_t to, Counter& c) {
      to = std::min(to, bytes);
      if (from < to) load ? dma_ld(buf + from, src + from, to - from, c) : dma_st(dst + from, buf + from, to - from, c);
    };
    std::vector<uint64_t> base;
    for (int64_t w = 0; w < W; ++w) base.push_back(buf + uint64_t(w * H * esz));
    auto lanes = phase_lanes(ws, base, std::vector<int64_t>(size_t(W), H), dt, true);
    chip_barrier();
    if (lanes.empty()) {
      move(true, 0, bytes, ld);
      wait(kDma, ld, ld.produced);
      move(false, 0, bytes, st);
    } else {
      load_first(lanes[0], first_ld, [&](uint64_t at, uint64_t n_bytes) { move(true, at - buf, at - buf + n_bytes, first_ld); });
      uint64_t from = 0;  // the rest (the VPU waits for it; it never combines into the first chunks)
      for (const Lane& l : lanes[0]) move(true, from, l.ch.at(0) - buf, ld), from = l.ch.at(0) - buf + l.ch.cb;
      move(true, from, bytes, ld);
      reduce_phases(lanes, dt, k.combiner, &ld);
      // On the first phase's ring each chunk goes to HBM once it is
      // whole here; the last piece by piece, as they arrive.
      gather_phases(lanes, true, [&](int64_t, uint64_t at, uint64_t n_bytes) { move(false, at - buf, at - buf + n_bytes, st); });
    }
    drain(with_lanes({&first_ld, &ld, &st}, lanes));
  });
}

void Emitter::reduce_scatter(const Kernel& k) {
  const int64_t n = std::get<1>(group_of(k));
  const DType dt = check_combinable(k);
  const int esz = dtype_bytes(dt);
  const int64_t E = p_.type(k.out).elements();  // elements per piece
  require_contiguous(k, p_.type(k.out));  // the dimensions before the split are the result's (the input may be a reshape's source)
  const auto [e0, e1] = share(E, L_);
  const Ways all_ways = collective_ways(k, (e1 - e0) / L_);
  in_blocks(e0, e1, uint64_t(2 * n * esz), 2 * n * all_ways.count(), esz, [&, n = n](int64_t b0, int64_t b1) {
    Counter first_ld = counter(), ld = counter(), in = counter(), st = counter();  // loads; all landed, for the VPU
    const WayBuffers wb = way_buffers(all_ways, b1 - b0, n, esz);
    const Ways& ws = wb.ws;
    const auto &cut = wb.cut, &size = wb.size;
    const auto& base = wb.base;
    const int64_t W = ws.count();
    auto lanes = phase_lanes(ws, base, size, dt, true);
    chip_barrier();
    const uint64_t src = p_.addr[k.inputs[0]] + uint64_t(b0 * esz);
    // Piece p to slot(w, p). The chunks the first rings send first come
    // first, slot by slot (the ways in turn, counted on first_ld), and
    // each of their pieces is sent once its slots are in; then the rest.
    auto slot_bytes = [&](int64_t w) { return uint64_t(size[size_t(w)] / n * esz); };
    auto load = [&](int64_t w, int64_t s0, int64_t s1, Counter& c) {  // slots [s0, s1)
      const uint64_t C = slot_bytes(w), bytes = uint64_t((cut[size_t(w + 1)] - cut[size_t(w)]) * esz);
      const uint64_t from = src + uint64_t(cut[size_t(w)] * esz);
      ws.runs(w, n, s0, s1, [&](int64_t sl, int64_t p, int64_t count, int64_t step) {
        dma_2d(true, base[size_t(w)] + uint64_t(sl) * C, from + uint64_t(p * E * esz), uint64_t(count), bytes, C, uint64_t(step * E * esz), c);
      });
    };
    std::vector<int64_t> f0(size_t(W), 0), f1(size_t(W), n);  // the first chunk's slots, per way
    if (!lanes.empty()) {
      std::vector<std::vector<int64_t>> landed(static_cast<size_t>(W));  // first_ld's count once slot f0 + j is in
      for (int64_t w = 0; w < W; ++w) {
        const Chunks& ch = lanes[0][size_t(w)].ch;
        f0[size_t(w)] = int64_t((ch.at(0) - base[size_t(w)]) / slot_bytes(w));
        f1[size_t(w)] = f0[size_t(w)] + int64_t(ch.cb / slot_bytes(w));
      }
      for (int64_t j = 0; j < n; ++j)
        for (int64_t w = 0; w < W; ++w)
          if (f0[size_t(w)] + j < f1[size_t(w)]) {
            load(w, f0[size_t(w)] + j, f0[size_t(w)] + j + 1, first_ld);
            landed[size_t(w)].push_back(first_ld.produced);
          }
      for (int64_t w = 0; w < W; ++w) {
        Lane& l = lanes[0][size_t(w)];
        l.first = &first_ld;
        for (int64_t p = 0; p < l.ch.P; ++p) l.first_at.push_back(landed[size_t(w)][size_t((l.ch.lo(p + 1) - 1) / slot_bytes(w))]);
      }
    }
    for (int64_t w = 0; w < W; ++w) load(w, 0, f0[size_t(w)], ld), load(w, f1[size_t(w)], n, ld);
    signal(kDma, in);  // counts once every load has landed, for the VPU
    if (lanes.empty()) {
      wait(kDma, ld, ld.produced);
    } else {
      reduce_phases(lanes, dt, k.combiner, &in);
      for (Lane& l : lanes.back()) wait(kDma, l.added, l.added.produced);
    }
    for (int64_t w = 0; w < W; ++w) {
      const uint64_t mine = lanes.empty() ? base[size_t(w)] : lanes.back()[size_t(w)].ch.at(lanes.back()[size_t(w)].ch.n - 1);
      dma_st(p_.addr[k.out] + uint64_t((b0 + cut[size_t(w)]) * esz), mine, uint64_t((cut[size_t(w + 1)] - cut[size_t(w)]) * esz), st);
    }
    drain(with_lanes({&first_ld, &ld, &in, &st}, lanes));
  });
}

DType Emitter::check_combinable(const Kernel& k) const {
  const DType dt = p_.type(k.out).dtype;
  if (!(dt == DType::f32 || dt == DType::s32 || dt == DType::bf16 || dt == DType::f16) || k.combiner == Combiner::and_ || k.combiner == Combiner::or_)
    throw Error(fmt::format("{}: unsupported {} ({} of {}): tpuc combines f32, bf16, f16 and s32 by add, multiply, maximum or minimum",
                            kernel_loc_, kind_name(k.kind), combiner_name(k.combiner), dtype_name(dt)));
  return dt;
}

void Emitter::require_contiguous(const Kernel& k, const Type& t) const {
  for (int64_t d = 0; d < k.dimension; ++d)
    if (t.dims[size_t(d)] != 1)
      throw Error(fmt::format("{}: unsupported {} along dimension {} of {} (tpuc splits and joins where the dimensions before it are 1)",
                              kernel_loc_, kind_name(k.kind), k.dimension, t.str()));
}

Emitter::Chunks Emitter::chunks(uint64_t buf, int64_t C, DType dt, int64_t n, int64_t pos) const {
  Chunks c;
  c.buf = buf, c.n = n, c.pos = pos;
  c.vb = uint64_t(L_ * dtype_bytes(dt));
  c.V = uint64_t(C / L_);
  c.cb = c.V * c.vb;
  c.P = std::clamp<int64_t>(int64_t(c.cb / 32768), 1, std::min<int64_t>(8, int64_t(c.V)));
  return c;
}

void Emitter::ring_reduce(std::vector<Lane>& lanes, DType dt, Combiner c, Counter* loaded) {
  const int esz = dtype_bytes(dt);
  const char* op = c == Combiner::add ? "vadd" : c == Combiner::multiply ? "vmul" : c == Combiner::maximum ? "vmax" : "vmin";
  int64_t steps = 0, P = 0;
  for (const Lane& l : lanes) steps = std::max(steps, l.ch.n - 1), P = std::max(P, l.ch.P);
  for (int64_t s = 0; s < steps; ++s) {
    for (int64_t p = 0; p < P; ++p)
      for (Lane& l : lanes) {
        if (s + 1 >= l.ch.n || p >= l.ch.P) continue;
        if (s > 0) wait(kDma, l.added, (s - 1) * l.ch.P + p + 1);  // the piece's combination is in
        else if (l.first) wait(kDma, *l.first, l.first_at[size_t(p)]);  // the piece has landed
        l.ring.send(*this, l.ch.piece(l.recv + uint64_t(s) * l.ch.cb, p), l.ch.piece(l.ch.at(s), p), l.ch.piece_bytes(p), l.rs);
      }
    for (int64_t p = 0; p < P; ++p)
      for (Lane& l : lanes) {
        if (s + 1 >= l.ch.n || p >= l.ch.P) continue;
        if (loaded && s == 0 && p == 0 && &l == &lanes[0]) wait(kVpu, *loaded, loaded->produced);
        wait(kVpu, l.rs, s * l.ch.P + p + 1);
        const uint64_t in = l.recv + uint64_t(s) * l.ch.cb, got = l.ch.at(s + 1);
        const int64_t lo = int64_t(l.ch.lo(p)) / esz, hi = int64_t(l.ch.lo(p + 1)) / esz;
        constexpr int64_t U = 4;  // vectors at once: v0..v3 and v4..v7
        for (int64_t v = lo; v < hi; v += U * L_) {
          const int64_t u = std::min<int64_t>(U, (hi - v) / L_);
          for (int64_t j = 0; j < u; ++j) vld(dt, j, got + uint64_t((v + j * L_) * esz));
          for (int64_t j = 0; j < u; ++j) vld(dt, U + j, in + uint64_t((v + j * L_) * esz));
          for (int64_t j = 0; j < u; ++j) {
            vop(opcode(op, ".", aty(dt)), j, j, U + j);
            if (dt == DType::bf16) ins(ib::VRND_BF16(j, j));
            if (dt == DType::f16) ins(ib::VRND_F16(j, j));
          }
          for (int64_t j = 0; j < u; ++j) vst(dt, j, got + uint64_t((v + j * L_) * esz));
        }
        signal(kVpu, l.added);
      }
  }
}

std::vector<std::vector<Emitter::Lane>> Emitter::phase_lanes(const Ways& ws, std::vector<uint64_t> base, std::vector<int64_t> size, DType dt, bool recv) {
  std::vector<std::vector<Lane>> lanes(static_cast<size_t>(ws.phases()));
  for (int64_t a = 0; a < ws.phases(); ++a)
    for (int64_t w = 0; w < ws.count(); ++w) {
      const Axis& x = ws.rings[size_t(w)][size_t(a)];
      Chunks ch = chunks(base[size_t(w)], size[size_t(w)] / x.size(), dt, x.size(), x.pos);
      ch.rev = x.reversed;
      const uint64_t r = recv ? vmem(uint64_t(x.size() - 1) * ch.cb) : 0;
      lanes[size_t(a)].push_back({Ring(*this, &x.members, x.pos, int(ws.count())), ch, r, counter(), counter(), counter()});
      base[size_t(w)] = ch.at(x.size() - 1);
      size[size_t(w)] /= x.size();
    }
  return lanes;
}

std::vector<Counter*> Emitter::with_lanes(std::vector<Counter*> counters, std::vector<std::vector<Lane>>& lanes) {
  for (auto& phase : lanes)
    for (Lane& l : phase) counters.insert(counters.end(), {&l.rs, &l.added, &l.ag});
  return counters;
}

void Emitter::reduce_phases(std::vector<std::vector<Lane>>& lanes, DType dt, Combiner c, Counter* loaded) {
  for (size_t a = 0; a < lanes.size(); ++a) {
    if (a > 0)
      for (Lane& l : lanes[a - 1]) wait(kDma, l.added, l.added.produced);  // the region is combined over the phase before
    ring_reduce(lanes[a], dt, c, a == 0 ? loaded : nullptr);
  }
}

void Emitter::all_gather(const Kernel& k) {
  const auto [grp, n, pos] = group_of(k);
  const Type& it = p_.type(k.inputs[0]);
  require_contiguous(k, p_.type(k.out));  // the dimensions before the gathered one are the result's (the input may be a reshape's source)
  const int esz = dtype_bytes(it.dtype);
  const int64_t E = it.elements();
  const auto [e0, e1] = share(E, L_);
  const Ways all_ways = collective_ways(k, (e1 - e0) / L_);
  in_blocks(e0, e1, uint64_t(n * esz), n * all_ways.count(), esz, [&, n = n, pos = pos](int64_t b0, int64_t b1) {
    Counter ld = counter(), st = counter();
    const WayBuffers wb = way_buffers(all_ways, b1 - b0, n, esz);
    const Ways& ws = wb.ws;
    const auto &cut = wb.cut, &size = wb.size;
    const auto& base = wb.base;
    const int64_t W = ws.count();
    auto lanes = phase_lanes(ws, base, size, it.dtype, false);
    chip_barrier();
    auto part = [&](int64_t w) { return uint64_t((cut[size_t(w + 1)] - cut[size_t(w)]) * esz); };
    auto slot_bytes = [&](int64_t w) { return uint64_t(size[size_t(w)] / n * esz); };
    std::vector<std::vector<int64_t>> piece_at(static_cast<size_t>(W), std::vector<int64_t>(size_t(n)));  // slot -> member
    for (int64_t w = 0; w < W; ++w)
      for (int64_t p = 0; p < n; ++p) piece_at[size_t(w)][size_t(ws.slot(w, p))] = p;
    const uint64_t dst = p_.addr[k.out] + uint64_t(b0 * esz);
    // Bytes [at, at + bytes) of way w's buffer to HBM: each slot's part
    // (not its padding) to its member's piece.
    auto store = [&](int64_t w, uint64_t at, uint64_t bytes) {
      const uint64_t C = slot_bytes(w), lo = at - base[size_t(w)], hi = lo + bytes;
      const uint64_t to = dst + uint64_t(cut[size_t(w)] * esz);
      auto partial = [&](uint64_t sl) {  // the part of slot sl in [lo, hi)
        const uint64_t a = std::max(lo, sl * C) - sl * C, b = std::min({hi - sl * C, C, part(w)});
        if (a < b) dma_st(to + uint64_t(piece_at[size_t(w)][size_t(sl)] * E * esz) + a, base[size_t(w)] + sl * C + a, b - a, st);
      };
      const uint64_t s0 = (lo + C - 1) / C, s1 = hi / C;  // whole slots
      if (s0 >= s1) {
        for (uint64_t sl = lo / C; sl * C < hi; ++sl) partial(sl);
        return;
      }
      if (lo < s0 * C) partial(lo / C);
      ws.runs(w, n, int64_t(s0), int64_t(s1), [&](int64_t sl, int64_t p, int64_t count, int64_t step) {
        dma_2d(false, to + uint64_t(p * E * esz), base[size_t(w)] + uint64_t(sl) * C, uint64_t(count), part(w), uint64_t(step * E * esz), C, st);
      });
      if (s1 * C < hi) partial(s1);
    };
    for (int64_t w = 0; w < W; ++w) dma_ld(base[size_t(w)] + uint64_t(ws.slot(w, pos)) * slot_bytes(w),
                                           p_.addr[k.inputs[0]] + uint64_t((b0 + cut[size_t(w)]) * esz), part(w), ld);
    wait(kDma, ld, ld.produced);
    if (lanes.empty())
      for (int64_t w = 0; w < W; ++w) store(w, base[size_t(w)], slot_bytes(w));
    gather_phases(lanes, false, store);
    drain(with_lanes({&ld, &st}, lanes));
  });
}

void Emitter::all_to_all(const Kernel& k) {
  const auto [grp, n, pos] = group_of(k);
  const Type& t = p_.type(k.out);
  require_contiguous(k, t);
  const int esz = dtype_bytes(t.dtype);
  const int64_t E = t.elements() / n;  // elements per piece
  const auto [e0, e1] = share(E, L_);
  const double link = double(m_.ici.link_bandwidth_bytes_per_s) / double(m_.clock_hz), hop = double(m_.ici_hop_cycles());
  in_blocks(e0, e1, uint64_t(2 * n * esz), 0, esz, [&, grp = grp, n = n, pos = pos](int64_t b0, int64_t b1) {
    Counter ld = counter(), got = counter(), st = counter();
    const uint64_t pb = uint64_t((b1 - b0) * esz);
    const uint64_t in = vmem(uint64_t(n) * pb), out = vmem(uint64_t(n) * pb);
    const uint64_t src = p_.addr[k.inputs[0]] + uint64_t(b0 * esz);
    chip_barrier();
    dma_2d(true, in, src, uint64_t(n), pb, pb, uint64_t(E * esz), ld);
    dma_ld(out + uint64_t(pos) * pb, src + uint64_t(pos * E * esz), pb, ld);  // its own piece stays
    wait(kDma, ld, ld.produced);
    for (int64_t j = 1; j < n; ++j) {
      const int64_t q = (pos + j) % n;
      const double sent = push(kDma, 0, with_regs(isa::Opcode::DMA_RCP, {got.sem}),
                               {uint64_t((*grp)[size_t(q)]), out + uint64_t(pos) * pb, in + uint64_t(q) * pb, pb}, double(pb) / link,
                               double(pb) / link + hop);
      got.produce(sent + double(pb) / link + hop);
    }
    if (n > 1) wait(kDma, got, n - 1);
    dma_2d(false, p_.addr[k.out] + uint64_t(b0 * esz), out, uint64_t(n), pb, uint64_t(E * esz), pb, st);
    drain({&ld, &got, &st});
  });
}

void Emitter::permute(const Kernel& k) {
  int64_t to = -1, from = -1;
  for (const auto& pr : k.groups) {
    if (pr[0] == chip_) to = pr[1];
    if (pr[1] == chip_) from = pr[0];
  }
  const DType dt = p_.type(k.out).dtype;
  const int esz = dtype_bytes(dt);
  const auto [e0, e1] = share(p_.type(k.out).elements(), L_);
  const double link = double(m_.ici.link_bandwidth_bytes_per_s) / double(m_.clock_hz), hop = double(m_.ici_hop_cycles());
  in_blocks(e0, e1, uint64_t(2 * esz), 0, esz, [&](int64_t b0, int64_t b1) {
    Counter ld = counter(), got = counter(), st = counter();
    const int64_t mine = b1 - b0;
    const uint64_t bytes = uint64_t(mine * esz);
    const uint64_t in = vmem(bytes), out = vmem(bytes);
    chip_barrier();
    if (from >= 0) got.produce(done_[kDma] + hop + double(bytes) / link);
    if (to >= 0) {
      dma_ld(in, p_.addr[k.inputs[0]] + uint64_t(b0 * esz), bytes, ld);
      wait(kDma, ld, ld.produced);
      push(kDma, 0, with_regs(isa::Opcode::DMA_RCP, {got.sem}), {uint64_t(to), out, in, bytes}, double(bytes) / link,
           double(bytes) / link + hop);
    }
    if (from < 0) {  // zeros
      ins(ib::VLI(0, 0));
      for (int64_t v = 0; v < mine; v += L_) vst(dt, 0, out + uint64_t(v * esz));
      signal(kVpu, got);
    }
    wait(kDma, got, 1);
    dma_st(p_.addr[k.out] + uint64_t(b0 * esz), out, bytes, st);
    drain({&ld, &got, &st});
  });
}

std::tuple<const std::vector<int64_t>*, int64_t, int64_t> Emitter::group_of(const Kernel& k) const {
  for (const auto& g : k.groups)
    if (auto it = std::find(g.begin(), g.end(), chip_); it != g.end()) return {&g, int64_t(g.size()), int64_t(it - g.begin())};
  throw Error(fmt::format("{}: internal error: chip {} is in no group of the collective", kernel_loc_, chip_));
}

void Emitter::chip_barrier() {
  if (nchips_ < 2) return;
  Counter c;
  c.sem = kChipSem;
  for (int64_t o = 0; o < nchips_; ++o)
    if (o != chip_) push(kDma, 0, ib::DMA_RSIG(0, kChipSem, 1), {uint64_t(o)});
  c.produce(done_[kDma] + double(m_.ici_hop_cycles()), nchips_ - 1);
  wait(kDma, c, nchips_ - 1);
}

}  // namespace tpu::compiler::backend
