// Layout copies (emitter.h).
#include "emitter.h"

#include <functional>

namespace tpu::compiler::backend {

Emitter::Run Emitter::decompose(const std::vector<int64_t>& dims, const std::vector<int64_t>& strides) {
  Run r;
  int d = int(dims.size());
  int64_t expect = 1;
  while (d > 0 && strides[d - 1] == expect) {
    expect *= dims[d - 1];
    --d;
  }
  r.first_run_dim = d;
  r.run = expect;
  if (d > 0 && strides[d - 1] >= 0) r.row_dim = d - 1;
  return r;
}

void Emitter::view_dma(bool load, const View& v, uint64_t vmem_base, int esz, Counter& c) {
  const Run r = decompose(v.dims, v.strides);
  const auto lstr = row_major(v.dims);  // logical (VMEM) strides
  std::vector<int64_t> loop_dims;
  for (int d = 0; d < r.first_run_dim; ++d)
    if (d != r.row_dim) loop_dims.push_back(d);
  const uint64_t rows = r.row_dim >= 0 ? uint64_t(v.dims[r.row_dim]) : 1;
  const uint64_t rowbytes = uint64_t(r.run * esz);
  const uint64_t hs = r.row_dim >= 0 ? uint64_t(v.strides[r.row_dim] * esz) : rowbytes;
  const uint64_t vs = r.row_dim >= 0 ? uint64_t(lstr[r.row_dim] * esz) : rowbytes;
  // One 2-D transfer for each index of the other dims: a loop nest, each
  // level a stated loop (repeat) whose addresses step by its strides.
  const std::function<void(size_t, int64_t, int64_t)> level = [&](size_t i, int64_t hoff, int64_t voff) {
    if (i == loop_dims.size()) {
      const uint64_t h = v.base + uint64_t(hoff * esz), m = vmem_base + uint64_t(voff * esz);
      if (load) dma_2d(true, m, h, rows, rowbytes, vs, hs, c);
      else dma_2d(false, h, m, rows, rowbytes, hs, vs, c);
      return;
    }
    const int64_t d = loop_dims[i];
    repeat(v.dims[d], [&](int64_t x) { level(i + 1, hoff + x * v.strides[d], voff + x * lstr[d]); });
  };
  level(0, 0, 0);
}

View Emitter::view_of(int v) const {
  if (p_.view[v]) return view_through(v);
  return View{p_.addr[p_.base[v]], p_.type(v).dims, row_major(p_.type(v).dims)};
}

View Emitter::view_through(int v) const {
  const Op& o = p_.op(v);
  const View s = view_of(o.operands[0]);
  const int esz = dtype_bytes(o.type.dtype);
  View r{s.base, o.type.dims, {}};
  switch (o.kind) {
    case OpKind::broadcast:
      r.strides.assign(o.type.dims.size(), 0);
      for (size_t i = 0; i < o.dims.size(); ++i)
        if (s.dims[i] != 1) r.strides[o.dims[i]] = s.strides[i];
      break;
    case OpKind::transpose:
      for (int64_t d : o.dims) r.strides.push_back(s.strides[d]);
      break;
    case OpKind::slice: {
      int64_t off = 0;
      for (size_t d = 0; d < o.type.dims.size(); ++d) off += o.lo[d] * s.strides[d], r.strides.push_back(s.strides[d] * o.strides[d]);
      r.base += uint64_t(off * esz);
      break;
    }
    case OpKind::reverse: {
      r.strides = s.strides;
      int64_t off = 0;
      for (int64_t d : o.dims) off += (s.dims[d] - 1) * s.strides[d], r.strides[d] = -s.strides[d];
      r.base += uint64_t(off * esz);
      break;
    }
    default: throw std::logic_error("internal error: not a layout op");
  }
  return r;
}

std::vector<std::pair<View, View>> Emitter::copy_views(const Kernel& k, bool& fill, double& fill_value) {
  const Op& o = p_.op(k.out);
  const Type& rt = o.type;
  View dst{p_.addr[k.out], rt.dims, row_major(rt.dims)};
  std::vector<std::pair<View, View>> cp;
  fill = false;
  switch (o.kind) {
    case OpKind::broadcast:
    case OpKind::transpose:
    case OpKind::slice:
    case OpKind::reverse:
      cp.push_back({dst, view_through(k.out)});
      break;
    case OpKind::concatenate: {
      int64_t pos = 0;
      for (int a : o.operands) {
        View s = view_of(a);
        View d = dst;
        d.dims = s.dims;
        d.base += uint64_t(pos * dst.strides[o.index] * dtype_bytes(rt.dtype));
        pos += s.dims[o.index];
        cp.push_back({d, s});
      }
      break;
    }
    case OpKind::pad: {
      View s = view_of(o.operands[0]);
      const auto pv = p_.splat(o.operands[1]);
      if (!pv) throw Error(fmt::format("{}: unsupported pad with a computed padding value", o.loc));
      fill = *pv != 0 || std::signbit(*pv) || !p_.zeroed[size_t(k.out)];  // zeros need no fill in a fresh buffer
      fill_value = *pv;
      View sv{s.base, {}, {}}, dv{dst.base, {}, {}};
      int64_t soff = 0, doff = 0;
      for (size_t d = 0; d < rt.dims.size(); ++d) {
        const int64_t step = o.interior[d] + 1;
        // in index i lands at lo + i*step; keep 0 <= that < out dim.
        int64_t i0 = 0;
        if (o.lo[d] < 0) i0 = ceil_div(-o.lo[d], step);
        int64_t i1 = s.dims[d];  // exclusive
        const int64_t max_i = o.lo[d] >= rt.dims[d] ? -1 : (rt.dims[d] - 1 - o.lo[d]) / step;  // last index that fits
        i1 = std::min(i1, max_i + 1);
        if (i1 <= i0) return cp;  // nothing of the operand shows
        sv.dims.push_back(i1 - i0), dv.dims.push_back(i1 - i0);
        sv.strides.push_back(s.strides[d]), dv.strides.push_back(dst.strides[d] * step);
        soff += i0 * s.strides[d];
        doff += (o.lo[d] + i0 * step) * dst.strides[d];
      }
      sv.base += uint64_t(soff * dtype_bytes(rt.dtype));
      dv.base += uint64_t(doff * dtype_bytes(rt.dtype));
      cp.push_back({dv, sv});
      break;
    }
    default: throw Error(fmt::format("{}: internal error: no copy rule for {}", o.loc, op_name(o.kind)));
  }
  return cp;
}

void Emitter::fill_region(uint64_t hbm, int64_t elements, DType dt, double value) {
  // VPU writes one buffer of splats; DMA stores it over the region.
  Counter vd = counter(), st = counter();
  const int esz = dtype_bytes(dt);
  const int64_t nv = std::min<int64_t>(ceil_div(elements, L_), 256);
  const uint64_t buf = vmem(uint64_t(nv * L_ * esz));
  ins(ib::VLI(0, lane_bits(dt, value)));
  for (int64_t q = 0; q < nv; ++q) vst(dt, 0, buf + uint64_t(q * L_ * esz));
  signal(kVpu, vd);
  wait(kDma, vd, 1);
  for (int64_t done = 0; done < elements; done += nv * L_) {
    const int64_t n = std::min(nv * L_, elements - done);
    dma_st(hbm + uint64_t(done * esz), buf, uint64_t(n * esz), st);
  }
  drain({&vd, &st});
  vmem_top_ = 0;
}

std::optional<std::array<int64_t, 3>> Emitter::swap_transpose(const Op& o) const {
  const auto& in = p_.type(o.operands[0]).dims;
  const size_t n = o.dims.size();
  size_t b = 0;
  while (b < n && o.dims[b] == int64_t(b)) ++b;
  if (b == n) return std::nullopt;
  // After the batch dims: Y (starting at dims[b]) then X (b .. dims[b]-1), each in order.
  const int64_t y0 = o.dims[b];
  const size_t nx = size_t(y0) - b, ny = n - b - nx;
  for (size_t i = 0; i < ny; ++i)
    if (o.dims[b + i] != y0 + int64_t(i)) return std::nullopt;
  for (size_t i = 0; i < nx; ++i)
    if (o.dims[b + ny + i] != int64_t(b + i)) return std::nullopt;
  std::array<int64_t, 3> r{1, 1, 1};
  for (size_t i = 0; i < b; ++i) r[0] *= in[i];
  for (size_t i = b; i < b + nx; ++i) r[1] *= in[i];
  for (size_t i = b + nx; i < n; ++i) r[2] *= in[i];
  return r;
}

void Emitter::transpose_tiles(const Kernel& k, std::array<int64_t, 3> shape) {
  const int64_t B = shape[0], R = shape[1], C = shape[2];
  const uint64_t src = view_of(p_.op(k.out).operands[0]).base, dst = p_.addr[k.out];
  const int64_t tr = ceil_div(R, L_), tc = ceil_div(C, L_), tiles = B * tr * tc;
  Counter ld = counter(), vd = counter(), st = counter();
  const uint64_t tile_bytes = uint64_t(L_ * L_ * 4);
  uint64_t in_buf[2], out_buf[2];
  for (int s = 0; s < 2; ++s) in_buf[s] = vmem(tile_bytes), out_buf[s] = vmem(tile_bytes);
  std::vector<int64_t> stores_through(size_t(tiles), 0);
  auto tile_of = [&](int64_t t) {
    const int64_t b = t / (tr * tc), i = (t / tc) % tr, j = t % tc;
    return std::array<int64_t, 5>{b, i * L_, j * L_, std::min(L_, R - i * L_), std::min(L_, C - j * L_)};
  };
  auto load = [&](int64_t t) {
    const auto [b, r0, c0, nr, nc] = tile_of(t);
    dma_2d(true, in_buf[t % 2], src + uint64_t((b * R * C + r0 * C + c0) * 4), uint64_t(nr), uint64_t(nc * 4), uint64_t(L_ * 4),
           uint64_t(C * 4), ld);
  };
  load(0);
  if (tiles > 1) load(1);
  for (int64_t t = 0; t < tiles; ++t) {
    const auto [b, r0, c0, nr, nc] = tile_of(t);
    const int s = int(t % 2);
    wait(kVpu, ld, t + 1);
    if (t >= 2) wait(kVpu, st, stores_through[size_t(t - 2)]);
    push(kVpu, 0, ib::VXPOSE(0, 0), {out_buf[s], in_buf[s]}, double(L_), double(L_));
    signal(kVpu, vd);
    wait(kDma, vd, t + 1);
    // Row c of the transposed tile holds source column c0 + c.
    dma_2d(false, dst + uint64_t((b * R * C + c0 * R + r0) * 4), out_buf[s], uint64_t(nc), uint64_t(nr * 4), uint64_t(R * 4),
           uint64_t(L_ * 4), st);
    stores_through[size_t(t)] = st.produced;
    if (t + 2 < tiles) load(t + 2);
  }
  drain({&ld, &vd, &st});
}

void Emitter::slice_offset(const Op& o, const std::vector<int64_t>& sizes) {
  offset_ = true;
  const int x = o.operands[0];
  const Type& xt = p_.type(x);
  const auto strides = row_major(xt.dims);
  const int64_t esz = dtype_bytes(xt.dtype);
  const size_t first = o.kind == OpKind::dynamic_update_slice ? 2 : 1;
  constexpr int acc = kOffsetReg, v = kOffsetReg - 1, t = kOffsetReg - 2;
  const auto li = [&](int r, int64_t value) {
    std::vector<isa::Instruction> code;
    load_constant(code, r, uint64_t(value));
    for (const isa::Instruction& i : code) push(kSc, now(), i);
  };
  // Starts that are constants add up here; the others are read into SMEM
  // words at its top (the loops' counters are at its bottom), zeroed first
  // since a start has fewer bytes than a word.
  int64_t fixed = 0;
  std::vector<std::pair<size_t, uint64_t>> read;  // (dimension, SMEM address)
  Counter c = counter();
  for (size_t d = 0; d < xt.dims.size(); ++d) {
    const int64_t hi = xt.dims[d] - sizes[d];  // the largest start that fits
    const int s = o.operands[first + d];
    if (const auto k = p_.splat(s); k || hi == 0) {
      fixed += std::clamp<int64_t>(k ? int64_t(*k) : 0, 0, hi) * strides[d] * esz;
      continue;
    }
    const uint64_t smem = p_.t.smem_bytes - 8 * (read.size() + 1);
    const auto bytes = uint64_t(dtype_bytes(p_.type(s).dtype));
    push(kSc, now(), ib::STS(0, 0, int64_t(smem)));
    dma(isa::Opcode::DMA_LDS, {smem, p_.addr[size_t(p_.base[size_t(s)])], bytes}, 1, bytes, c);
    read.push_back({d, smem});
  }
  wait(kSc, c, c.produced);
  li(acc, fixed);
  for (const auto& [d, smem] : read) {
    const DType dt = p_.type(o.operands[first + d]).dtype;
    push(kSc, now(), ib::LDS(v, 0, int64_t(smem)));
    if (dt != DType::u32) {  // sign-extended
      const int64_t shift = 64 - 8 * dtype_bytes(dt);
      push(kSc, now(), ib::SLLI(v, v, shift));
      push(kSc, now(), ib::SRAI(v, v, shift));
    }
    push(kSc, now(), ib::MAX(v, v, 0));
    li(t, xt.dims[d] - sizes[d]);
    push(kSc, now(), ib::MIN(v, v, t));
    const int64_t stride = strides[d] * esz;
    if (stride <= std::numeric_limits<int32_t>::max()) {
      push(kSc, now(), ib::MULI(v, v, stride));
    } else {
      li(t, stride);
      push(kSc, now(), ib::MUL(v, v, t));
    }
    push(kSc, now(), ib::ADD(acc, acc, v));
  }
}

void Emitter::dynamic_copy(const Kernel& k) {
  const Op& o = p_.op(k.out);
  const bool update = o.kind == OpKind::dynamic_update_slice;
  const Type& xt = p_.type(o.operands[0]);
  const Type& piece = update ? p_.type(o.operands[1]) : o.type;
  const uint64_t x = p_.addr[size_t(p_.base[size_t(o.operands[0])])];
  const auto strides = row_major(xt.dims);
  // An update written out of place: the operand first, then its piece.
  if (update && p_.addr[size_t(k.out)] != x) {
    const uint64_t top = vmem_top_;
    copy_pairs({{View{p_.addr[size_t(k.out)], xt.dims, strides}, View{x, xt.dims, strides}}}, xt.dtype, ncores_);
    vmem_top_ = top;  // drained
    if (ncores_ > 1) core_barrier();
  }
  if (piece.elements() == 0) return;
  slice_offset(o, piece.dims);
  const View in_x{kOffset + (update ? p_.addr[size_t(k.out)] : x), piece.dims, strides};
  const View alone{update ? p_.addr[size_t(p_.base[size_t(o.operands[1])])] : p_.addr[size_t(k.out)], piece.dims, row_major(piece.dims)};
  copy_pairs({update ? std::pair{in_x, alone} : std::pair{alone, in_x}}, xt.dtype, ncores_);
}

void Emitter::copy(const Kernel& k) {
  const Op& o = p_.op(k.out);
  if (o.kind == OpKind::dynamic_slice || o.kind == OpKind::dynamic_update_slice) return dynamic_copy(k);
  if (o.kind == OpKind::transpose && dtype_bytes(o.type.dtype) == 4 && !p_.view[o.operands[0]])
    if (auto shape = swap_transpose(o); shape && (*shape)[1] > 1 && (*shape)[2] > 1)
      return core_ == 0 ? transpose_tiles(k, *shape) : void();  // on core 0
  bool fill = false;
  double fv = 0;
  const auto pairs = copy_views(k, fill, fv);
  // On several cores each copies every ncores-th box, unless the copy
  // writes over a fill (core 0 then does it all, in order).
  if (fill && core_ > 0) return;
  const DType dt = p_.type(k.out).dtype;
  if (fill) fill_region(p_.addr[k.out], p_.type(k.out).elements(), dt, fv);
  copy_pairs(pairs, dt, fill ? 1 : ncores_);
}

void Emitter::copy_pairs(const std::vector<std::pair<View, View>>& pairs, DType dt, int64_t ways) {
  int64_t nth = 0;  // boxes so far, on every core
  const int esz = dtype_bytes(dt);
  Counter ld = counter(), st = counter();
  const int64_t budget = std::max<int64_t>((int64_t(vmem_budget() / 2) - 8 * L_ - 128) / esz, L_);
  const uint64_t stage[2] = {vmem(uint64_t(budget * esz)), vmem(uint64_t(budget * esz))};
  int64_t box_no = 0;
  std::vector<int64_t> stores_through;
  for (const auto& [dst, src] : pairs) {
    const size_t r = dst.dims.size();
    // Box: the innermost dims whole while they fit, then a slab of the next.
    std::vector<int64_t> box(r, 1);
    int64_t inner = 1;
    int d = int(r) - 1;
    for (; d >= 0 && inner * dst.dims[d] <= budget; --d) box[d] = dst.dims[d], inner *= dst.dims[d];
    if (d >= 0) box[d] = std::max<int64_t>(1, budget / inner);
    std::vector<int64_t> at(r, 0);
    bool empty = false;
    for (int64_t x : dst.dims) empty |= x == 0;
    while (!empty) {
      View bs = src, bd = dst;
      int64_t so = 0, dof = 0;
      for (size_t i = 0; i < r; ++i) {
        bs.dims[i] = bd.dims[i] = std::min(box[i], dst.dims[i] - at[i]);
        so += at[i] * src.strides[i], dof += at[i] * dst.strides[i];
      }
      bs.base = uint64_t(int64_t(src.base) + so * esz);
      bd.base = uint64_t(int64_t(dst.base) + dof * esz);
      if (nth++ % ways == core_ % ways) {
        const int s = int(box_no % 2);
        if (box_no >= 2) wait(kDma, st, stores_through[box_no - 2]);
        view_dma(true, bs, stage[s], esz, ld);
        wait(kDma, ld, ld.produced);
        view_dma(false, bd, stage[s], esz, st);
        stores_through.push_back(st.produced);
        ++box_no;
      }
      int i = int(r) - 1;
      for (; i >= 0; --i) {
        at[i] += box[i];
        if (at[i] < dst.dims[i]) break;
        at[i] = 0;
      }
      if (i < 0) break;
    }
  }
  drain({&ld, &st});
}

}  // namespace tpu::compiler::backend
