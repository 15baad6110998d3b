// gather and scatter -> one-hot dots (passes.h, lower-gather-scatter). The
// machine has no data-dependent addressing: an index becomes a one-hot row
// over the positions it can take, and the gather or scatter a dot with it.
#include <fmt/format.h>

#include <algorithm>
#include <optional>

#include "rewrite.h"
#include "tpu/compiler/passes.h"
#include "tpu/ir/interp.h"

namespace tpu::compiler {

using namespace ir;

namespace {

bool has(const std::vector<int64_t>& v, int64_t x) { return std::find(v.begin(), v.end(), x) != v.end(); }

class IndexedLowering {
 public:
  explicit IndexedLowering(Function& f) : f_(f), consts_(f) {}
  int lower(const Op& op) { return op.kind == OpKind::gather ? gather(op) : scatter(op); }

 private:
  [[noreturn]] static void refuse(const Op& op, const std::string& what) {
    throw Error(fmt::format("{}: unsupported {}", op.loc.empty() ? "<ir>" : op.loc, what));
  }
  int emit(OpKind k, std::vector<int> operands, const Type& t, const std::string& loc) {
    return rewrite::append(f_, k, std::move(operands), t, loc);
  }
  int splat(const Type& t, double v, const std::string& loc) { return rewrite::append_splat(f_, t, v, loc); }
  int slice(int x, std::vector<int64_t> lo, std::vector<int64_t> hi, const std::string& loc) {
    return rewrite::append_slice(f_, x, std::move(lo), std::move(hi), loc);
  }

  // The index batch of gather/scatter indices (their shape without the
  // index vector dimension) and, per index, a one-hot row over n positions:
  // hit[G..., v] = (index == v), with the index clamped into range first
  // when `clamp` (gather clamps; scatter drops what is out of range).
  struct OneHot {
    std::vector<int64_t> g, gmap;  // the batch shape; its dims 0..|G|-1
    int idx = -1, hit = -1;        // s32[G], pred[G..., n]
  };
  OneHot one_hot(int ind, int64_t ivd, int64_t n, bool clamp, const std::string& loc) {
    const Type it = f_.ops[size_t(ind)].type;
    OneHot h;
    for (size_t k = 0; k < it.dims.size(); ++k)
      if (int64_t(k) != ivd) h.g.push_back(it.dims[k]);
    for (size_t k = 0; k < h.g.size(); ++k) h.gmap.push_back(int64_t(k));
    const Type gt{DType::s32, h.g};
    h.idx = emit(OpKind::reshape, {ind}, {it.dtype, h.g}, loc);
    if (it.dtype != DType::s32) h.idx = emit(OpKind::convert, {h.idx}, gt, loc);
    if (clamp) h.idx = emit(OpKind::clamp, {splat(gt, 0, loc), h.idx, splat(gt, double(std::max<int64_t>(n - 1, 0)), loc)}, gt, loc);
    std::vector<int64_t> hd = h.g;
    hd.push_back(n);
    Op bi;
    bi.kind = OpKind::broadcast, bi.operands = {h.idx}, bi.dims = h.gmap, bi.type = {DType::s32, hd}, bi.loc = loc;
    Op io;
    io.kind = OpKind::iota, io.index = int64_t(h.g.size()), io.type = {DType::s32, hd}, io.loc = loc;
    Op eq;
    eq.kind = OpKind::compare, eq.direction = Direction::EQ, eq.operands = {f_.add(std::move(bi)), f_.add(std::move(io))};
    eq.type = {DType::pred, hd}, eq.loc = loc;
    h.hit = f_.add(std::move(eq));
    return h;
  }
  // 1/0 in bf16 where `hit` holds.
  int ones_where(int hit, const std::string& loc) {
    const Type ht{DType::bf16, f_.ops[size_t(hit)].type.dims};
    return emit(OpKind::select, {hit, splat(ht, 1, loc), splat(ht, 0, loc)}, ht, loc);
  }
  // A float tensor as bf16 parts that sum to it exactly: itself if bf16,
  // else b0 = bf16(x), b1 = bf16(x - b0), b2 = bf16(x - b0 - b1).
  std::vector<int> bf16_parts(int x, const std::string& loc) {
    const Type t = f_.ops[size_t(x)].type;
    if (t.dtype == DType::bf16) return {x};
    const Type pb{DType::bf16, t.dims}, pf{DType::f32, t.dims};
    std::vector<int> parts;
    int rest = t.dtype == DType::f32 ? x : emit(OpKind::convert, {x}, pf, loc);  // f16 is exact in f32
    for (int k = 0; k < 3; ++k) {
      parts.push_back(emit(OpKind::convert, {rest}, pb, loc));
      if (k < 2) rest = emit(OpKind::subtract, {rest, emit(OpKind::convert, {parts.back()}, pf, loc)}, pf, loc);
    }
    return parts;
  }
  // The sum of `dot` (its dimensions and type set) applied to lhs and each part.
  int dot_sum(const Op& dot, int lhs, const std::vector<int>& parts) {
    int sum = -1;
    for (int part : parts) {
      Op dp = dot;
      dp.operands = {lhs, part};
      const int v = f_.add(std::move(dp));
      sum = sum < 0 ? v : emit(OpKind::add, {sum, v}, dot.type, dot.loc);
    }
    return sum;
  }

  // Column k of an index tensor's vector dimension ivd (its shape with that
  // dimension 1), looking through concatenations along ivd so that a column
  // built from a constant is seen to be constant.
  int index_column(int v, int64_t ivd, int64_t k, const std::string& loc) {
    for (bool moved = true; moved;) {
      moved = false;
      const Op& o = f_.ops[size_t(v)];
      if (o.kind != OpKind::concatenate || o.index != ivd) break;
      int64_t off = 0;
      for (int a : o.operands) {
        const int64_t w = f_.ops[size_t(a)].type.dims[size_t(ivd)];
        if (k < off + w) {
          v = a, k -= off, moved = true;
          break;
        }
        off += w;
      }
    }
    const Type t = f_.ops[size_t(v)].type;
    if (t.dims[size_t(ivd)] == 1) return v;
    std::vector<int64_t> lo(t.dims.size(), 0), hi = t.dims;
    lo[size_t(ivd)] = k, hi[size_t(ivd)] = k + 1;
    return slice(v, lo, hi, loc);
  }
  // Index components that count along a dimension of the index batch, as in
  // x[jnp.arange(n), labels]: a compile-time constant column whose value is
  // its own coordinate q (0 .. n-1, never out of range) pairs operand
  // dimension map[k] with indices dimension q as batching dimensions, and
  // leaves the window dimensions (`window`: collapsed or inserted). True
  // when one component is left: `ind` becomes its column, `map` that one
  // dimension; `cut` gets (operand dim, n) for each pair.
  bool batch_counting_components(int& ind, int64_t ivd, std::vector<int64_t>& map, std::vector<int64_t>& window, std::vector<int64_t>& obd,
                                 std::vector<int64_t>& ibd, std::vector<std::pair<int64_t, int64_t>>& cut, const std::string& loc) {
    const Type it = f_.ops[size_t(ind)].type;
    if (ivd >= int64_t(it.dims.size()) || it.dims[size_t(ivd)] != int64_t(map.size())) return false;
    int rest = -1;
    int64_t rest_dim = -1;
    std::vector<int64_t> new_obd = obd, new_ibd = ibd, new_window = window;
    std::vector<std::pair<int64_t, int64_t>> new_cut;
    for (size_t k = 0; k < map.size(); ++k) {
      const int col = index_column(ind, ivd, int64_t(k), loc);
      const Tensor* t = consts_.value(col);
      int64_t found = -1;
      for (size_t q = 0; t && q < it.dims.size() && found < 0; ++q) {
        if (int64_t(q) == ivd || std::find(new_ibd.begin(), new_ibd.end(), int64_t(q)) != new_ibd.end()) continue;
        int64_t inner = 1;  // row-major stride of dimension q in the column
        for (size_t e = q + 1; e < it.dims.size(); ++e) inner *= int64_t(e) == ivd ? 1 : it.dims[e];
        bool counts = true;
        for (size_t x = 0; x < t->v.size() && counts; ++x) counts = t->v[x] == double((int64_t(x) / inner) % it.dims[q]);
        if (counts) found = int64_t(q);
      }
      if (found < 0) {
        if (rest >= 0) return false;  // two data-dependent components
        rest = col, rest_dim = map[k];
        continue;
      }
      new_obd.push_back(map[k]);
      new_ibd.push_back(found);
      new_window.erase(std::remove(new_window.begin(), new_window.end(), map[k]), new_window.end());
      new_cut.push_back({map[k], it.dims[size_t(found)]});
    }
    if (rest < 0) return false;
    ind = rest, map = {rest_dim}, obd = new_obd, ibd = new_ibd, window = new_window, cut = new_cut;
    return true;
  }

  // Several data-dependent index components (x[i, j], x.at[i, j].add(u)),
  // each into a dimension of one (collapsed or inserted): those dimensions
  // become one, of their product, moved last, and the components one
  // row-major index into it. gather clamps each component into range first;
  // scatter drops an update any of whose components is out of range (its
  // index becomes -1, which no position matches).
  int linearized(const Op& op) {
    const bool gather = op.kind == OpKind::gather;
    const GatherDims& g = op.gather;
    const std::string& l = op.loc;
    const int x = op.operands[0], ind = op.operands[1];
    const Type xt = f_.ops[size_t(x)].type, it = f_.ops[size_t(ind)].type;
    const std::vector<int64_t>& dd = g.start_index_map;
    for (int64_t d : dd)
      if (!has(g.collapsed, d)) refuse(op, fmt::format("{} with a start index over several dimensions, not all of them {}", op_name(op.kind),
                                                   gather ? "collapsed" : "inserted"));
    const size_t r = xt.dims.size(), kept = r - dd.size();
    std::vector<int64_t> perm, where(r, -1), merged_dims, unmerged;
    for (size_t d = 0; d < r; ++d)
      if (!has(dd, int64_t(d))) where[d] = int64_t(perm.size()), perm.push_back(int64_t(d)), merged_dims.push_back(xt.dims[d]);
    int64_t positions = 1;
    for (int64_t d : dd) perm.push_back(d), positions *= xt.dims[size_t(d)];
    merged_dims.push_back(positions);
    for (int64_t d : perm) unmerged.push_back(xt.dims[size_t(d)]);
    auto transpose = [&](int v, const std::vector<int64_t>& p, std::vector<int64_t> dims) {
      Op t;
      t.kind = OpKind::transpose, t.operands = {v}, t.dims = p, t.type = {f_.ops[size_t(v)].type.dtype, std::move(dims)}, t.loc = l;
      return f_.add(std::move(t));
    };
    // The row-major index over the merged dimension, as s32[G..., 1].
    std::vector<int64_t> gdims;
    for (size_t k = 0; k < it.dims.size(); ++k)
      if (int64_t(k) != g.index_vector_dim) gdims.push_back(it.dims[k]);
    const Type gt{DType::s32, gdims}, gp{DType::pred, gdims};
    int lin = -1, fits = -1;
    for (size_t k = 0; k < dd.size(); ++k) {
      const int64_t n = xt.dims[size_t(dd[k])];
      int c = emit(OpKind::reshape, {index_column(ind, g.index_vector_dim, int64_t(k), l)}, {it.dtype, gdims}, l);
      if (it.dtype != DType::s32) c = emit(OpKind::convert, {c}, gt, l);
      if (gather) {
        c = emit(OpKind::clamp, {splat(gt, 0, l), c, splat(gt, double(n - 1), l)}, gt, l);
      } else {
        Op lo, hi;
        lo.kind = hi.kind = OpKind::compare, lo.type = hi.type = gp, lo.loc = hi.loc = l;
        lo.direction = Direction::GE, lo.operands = {c, splat(gt, 0, l)};
        hi.direction = Direction::LT, hi.operands = {c, splat(gt, double(n), l)};
        const int in = emit(OpKind::and_, {f_.add(std::move(lo)), f_.add(std::move(hi))}, gp, l);
        fits = fits < 0 ? in : emit(OpKind::and_, {fits, in}, gp, l);
      }
      lin = lin < 0 ? c : emit(OpKind::add, {emit(OpKind::multiply, {lin, splat(gt, double(n), l)}, gt, l), c}, gt, l);
    }
    if (!gather) lin = emit(OpKind::select, {fits, lin, splat(gt, -1, l)}, gt, l);
    std::vector<int64_t> idims = gdims;
    idims.push_back(1);
    Op one = op;
    one.operands[0] = emit(OpKind::reshape, {transpose(x, perm, unmerged)}, {xt.dtype, merged_dims}, l);
    one.operands[1] = emit(OpKind::reshape, {lin}, {DType::s32, idims}, l);
    GatherDims& ng = one.gather;
    ng.index_vector_dim = int64_t(gdims.size());
    ng.start_index_map = {int64_t(kept)};
    ng.collapsed = {int64_t(kept)};
    for (int64_t d : g.collapsed)
      if (!has(dd, d)) ng.collapsed.push_back(where[size_t(d)]);
    for (int64_t& d : ng.operand_batching) d = where[size_t(d)];
    for (int64_t& k : ng.index_batching) k -= k > g.index_vector_dim;
    if (gather) {
      for (size_t j = 0; j < kept; ++j) ng.slice_sizes[j] = g.slice_sizes[size_t(perm[j])];
      ng.slice_sizes.resize(kept + 1), ng.slice_sizes[kept] = 1;
      return this->gather(one);
    }
    one.type = {xt.dtype, merged_dims};
    std::vector<int64_t> back(r);
    for (size_t j = 0; j < r; ++j) back[size_t(perm[j])] = int64_t(j);
    const int merged = scatter(one);
    return transpose(emit(OpKind::reshape, {merged}, {xt.dtype, unmerged}, l), back, xt.dims);
  }

  // gather along one operand dimension d (start_index_map = {d}, one index
  // per slice; embedding lookups, take_along_axis with batching dims): the
  // machine has no data-dependent addressing, so the index becomes a
  // one-hot row (XLA clamps it into range) and the gather a dot with the
  // operand, contracting d. f32 operands go as three exact bf16 parts
  // (b = b0 + b1 + b2), each a bf16 dot whose one-hot products are exact,
  // so the result is the operand's value bit for bit at any --precision.
  // (An inf or NaN anywhere in the operand's gathered dimension spreads
  // through the dot: 0 x inf.)
  int gather(const Op& op) {
    int opnd0 = op.operands.at(0), ind = op.operands.at(1);
    const std::string& loc = op.loc;
    const GatherDims& gd = op.gather;
    auto offset = gd.offset, collapsed = gd.collapsed, sim = gd.start_index_map;
    auto sizes = gd.slice_sizes, obd = gd.operand_batching, sibd = gd.index_batching;
    const int64_t ivd = gd.index_vector_dim;
    if (!is_float(f_.ops[size_t(opnd0)].type.dtype)) refuse(op, "gather of integer values (it is a one-hot dot on this machine)");
    std::vector<std::pair<int64_t, int64_t>> cut;
    if (sim.size() > 1 && !batch_counting_components(ind, ivd, sim, collapsed, obd, sibd, cut, loc)) return linearized(op);
    for (auto [e, n] : cut) {  // the counted operand dimension: its first n rows
      const Type t = f_.ops[opnd0].type;
      if (e < 0 || size_t(e) >= t.dims.size() || t.dims[size_t(e)] < n || sizes[size_t(e)] != 1) refuse(op, "gather index out of its dimension");
      if (t.dims[size_t(e)] == n) continue;
      std::vector<int64_t> hi = t.dims;
      hi[size_t(e)] = n;
      opnd0 = slice(opnd0, std::vector<int64_t>(t.dims.size(), 0), hi, loc);
    }
    const Type ot0 = f_.ops[opnd0].type, it = f_.ops[ind].type;
    const size_t r = ot0.dims.size();
    if (sim.size() != 1) refuse(op, "gather with a start index over several dimensions");
    if (sizes.size() != r || obd.size() != sibd.size() || ivd < 0 || ivd > int64_t(it.dims.size()) ||
        (ivd < int64_t(it.dims.size()) && it.dims[size_t(ivd)] != 1))
      refuse(op, "inconsistent gather dimensions");
    const int64_t d = sim[0];
    if (d < 0 || d >= int64_t(r) || sizes[size_t(d)] != 1 || has(obd, d)) refuse(op, "gather of slices longer than 1 along the indexed dimension");
    // Dimensions not indexed start at 0: a smaller slice is a plain slice.
    std::vector<int64_t> lim = ot0.dims;
    for (size_t e = 0; e < r; ++e) {
      if (int64_t(e) == d) continue;
      if (sizes[e] < 0 || sizes[e] > ot0.dims[e] || (has(obd, int64_t(e)) && sizes[e] != 1)) refuse(op, "gather slice sizes out of range");
      if (!has(obd, int64_t(e))) lim[e] = sizes[e];
    }
    const int opnd = lim != ot0.dims ? slice(opnd0, std::vector<int64_t>(r, 0), lim, loc) : opnd0;
    const Type ot = f_.ops[opnd].type;
    // The indices without their vector dimension: the batch shape G.
    const int64_t n = ot.dims[size_t(d)];
    const OneHot oh = one_hot(ind, ivd, n, true, loc);
    const std::vector<int64_t>& g = oh.g;
    auto gpos = [&](int64_t k) { return k < ivd ? k : k - 1; };  // an indices dimension's place in G
    const int hot = ones_where(oh.hit, loc);
    // dot(one-hot [G..., n], operand): batch = the batching dims, then the
    // free dims of G, then the operand's free dims in order.
    Op dot;
    dot.kind = OpKind::dot, dot.loc = loc, dot.precision = Precision::highest;
    for (int64_t k : sibd) dot.lhs_batch.push_back(gpos(k));
    dot.rhs_batch = obd;
    dot.lhs_contract = {int64_t(g.size())}, dot.rhs_contract = {d};
    std::vector<std::pair<char, int64_t>> label;  // ('G', place in G) or ('O', operand dim)
    std::vector<int64_t> rdims;
    for (size_t k = 0; k < sibd.size(); ++k) label.push_back({'G', gpos(sibd[k])}), rdims.push_back(g[size_t(gpos(sibd[k]))]);
    for (size_t k = 0; k < g.size(); ++k)
      if (!has(dot.lhs_batch, int64_t(k))) label.push_back({'G', int64_t(k)}), rdims.push_back(g[k]);
    for (size_t e = 0; e < r; ++e)
      if (int64_t(e) != d && !has(obd, int64_t(e))) label.push_back({'O', int64_t(e)}), rdims.push_back(ot.dims[e]);
    dot.type = {DType::f32, rdims};
    const int sum = dot_sum(dot, hot, bf16_parts(opnd, loc));
    // Into the output's order: offset dims take the operand's kept
    // dimensions in order (d itself, when kept, is a dimension of 1).
    std::vector<int64_t> kept;
    for (size_t e = 0; e < r; ++e)
      if (!has(collapsed, int64_t(e)) && !has(obd, int64_t(e))) kept.push_back(int64_t(e));
    if (kept.size() != offset.size() || g.size() + offset.size() != op.type.dims.size()) refuse(op, "gather offset_dims do not match");
    std::vector<int64_t> perm;
    size_t next_g = 0, next_o = 0;
    for (size_t p = 0; p < op.type.dims.size(); ++p) {
      std::pair<char, int64_t> want = has(offset, int64_t(p)) ? std::pair<char, int64_t>{'O', kept[next_o++]} : std::pair<char, int64_t>{'G', int64_t(next_g++)};
      if (want == std::pair<char, int64_t>{'O', d}) continue;  // the kept indexed dimension: added by the reshape
      const auto at = std::find(label.begin(), label.end(), want);
      if (at == label.end()) refuse(op, "gather dimensions do not match");
      perm.push_back(int64_t(at - label.begin()));
    }
    if (perm.size() != label.size()) refuse(op, "gather dimensions do not match");
    std::vector<int64_t> tdims;
    for (int64_t p : perm) tdims.push_back(rdims[size_t(p)]);
    Op tr;
    tr.kind = OpKind::transpose, tr.operands = {sum}, tr.dims = perm, tr.type = {DType::f32, tdims}, tr.loc = loc;
    int res = f_.add(std::move(tr));
    if (op.type.dtype != DType::f32) res = emit(OpKind::convert, {res}, {op.type.dtype, tdims}, loc);
    return emit(OpKind::reshape, {res}, op.type, loc);
  }

  // scatter into one operand dimension d (the gradient of a gather:
  // embedding gradients, take_along_axis's): the updates, weighted by a
  // one-hot row per index, summed by a dot contracting the index batch, then
  // added to the operand (to_apply add) or put in place of the rows they
  // hit (to_apply returning the update). An index outside the dimension
  // matches no row, so its update is dropped, as XLA drops it. f32 updates
  // go as three bf16 parts (one-hot products are exact; the sums round in
  // f32 as any f32 sum does).
  int scatter(const Op& op) {
    int ind = op.operands[1];
    const int opnd = op.operands[0], upd = op.operands[2];
    const std::string& l = op.loc;
    const GatherDims& gd = op.gather;
    auto uwd = gd.offset, iwd = gd.collapsed, sdod = gd.start_index_map, ibd = gd.operand_batching, sibd = gd.index_batching;
    const int64_t ivd = gd.index_vector_dim;
    std::vector<std::pair<int64_t, int64_t>> cut;
    if (sdod.size() > 1 && !batch_counting_components(ind, ivd, sdod, iwd, ibd, sibd, cut, l)) return linearized(op);
    for (auto [e, n] : cut)
      if (e < 0 || size_t(e) >= f_.ops[size_t(opnd)].type.dims.size() || f_.ops[size_t(opnd)].type.dims[size_t(e)] != n)
        refuse(op, "scatter whose counting index covers part of its dimension");
    const Type ot = f_.ops[size_t(opnd)].type, it = f_.ops[size_t(ind)].type, ut = f_.ops[size_t(upd)].type;
    const size_t r = ot.dims.size();
    if (!is_float(ot.dtype) || ut.dtype != ot.dtype || op.type != ot) refuse(op, "scatter of integer values (it is a one-hot dot on this machine)");
    if (sdod.size() != 1) refuse(op, "scatter with an index over several dimensions");
    if (ibd.size() != sibd.size() || ivd < 0 || ivd > int64_t(it.dims.size()) || (ivd < int64_t(it.dims.size()) && it.dims[size_t(ivd)] != 1))
      refuse(op, "inconsistent scatter dimensions");
    // The combiner: add, or assign (replace).
    const bool assign = op.combiner == Combiner::replace;
    if (!assign && op.combiner != Combiner::add)
      refuse(op, fmt::format("scatter combining by {} (tpuc scatters by add or replace)", combiner_name(op.combiner)));
    const int64_t d = sdod[0];
    // Index batch shape G (indices without the vector dimension), and the
    // updates' dimensions: scatter dims (G, in order) and window dims.
    const int64_t n = ot.dims[size_t(d)];
    const OneHot oh = one_hot(ind, ivd, n, false, l);
    const std::vector<int64_t>& g = oh.g;
    auto gpos = [&](int64_t k) { return k < ivd ? k : k - 1; };
    std::vector<int64_t> uscatter;  // update dims of G, in order
    for (size_t k = 0; k < ut.dims.size(); ++k)
      if (!has(uwd, int64_t(k))) uscatter.push_back(int64_t(k));
    std::vector<int64_t> window_operand;  // operand dims the window dims cover, in order
    for (size_t e = 0; e < r; ++e)
      if (!has(iwd, int64_t(e)) && !has(ibd, int64_t(e))) window_operand.push_back(int64_t(e));
    if (d < 0 || d >= int64_t(r) || has(ibd, d) || uscatter.size() != g.size() || window_operand.size() != uwd.size())
      refuse(op, "inconsistent scatter dimensions");
    for (size_t k = 0; k < g.size(); ++k)
      if (ut.dims[size_t(uscatter[k])] != g[k]) refuse(op, "updates do not match the indices");
    for (size_t k = 0; k < uwd.size(); ++k) {
      const int64_t e = window_operand[k], w = ut.dims[size_t(uwd[k])];
      if (e == d ? w != 1 : w != ot.dims[size_t(e)])
        refuse(op, "scatter whose update windows do not cover the operand's other dimensions");
    }
    const Type gt{DType::s32, g};
    const std::vector<int64_t>& gmap = oh.gmap;
    std::vector<int64_t> hd = g;
    hd.push_back(n);
    int hit = oh.hit;
    if (assign) {
      // Duplicate indices: the last update in index order wins (XLA leaves
      // the order open). An update is dropped when a later one has the same
      // index: a [G, G] comparison over the flattened index batch.
      if (!ibd.empty()) refuse(op, "assigning scatter with batching dimensions");
      int64_t gn = 1;
      for (int64_t x : g) gn *= x;
      if (gn > 4096) refuse(op, "assigning scatter of more than 4096 updates");
      const Type flat{DType::s32, {gn}}, sq{DType::s32, {gn, gn}}, sqp{DType::pred, {gn, gn}};
      const int fi = emit(OpKind::reshape, {oh.idx}, flat, l);
      auto bc = [&](int x, int64_t dim) {
        Op b;
        b.kind = OpKind::broadcast, b.operands = {x}, b.dims = {dim}, b.type = sq, b.loc = l;
        return f_.add(std::move(b));
      };
      auto cmp2 = [&](Direction dir, int a, int b) {
        Op c;
        c.kind = OpKind::compare, c.direction = dir, c.operands = {a, b}, c.type = sqp, c.loc = l;
        return f_.add(std::move(c));
      };
      auto iota2 = [&](int64_t dim) {
        Op o;
        o.kind = OpKind::iota, o.index = dim, o.type = sq, o.loc = l;
        return f_.add(std::move(o));
      };
      const int same_later = emit(OpKind::and_, {cmp2(Direction::EQ, bc(fi, 0), bc(fi, 1)), cmp2(Direction::GT, iota2(1), iota2(0))}, sqp, l);
      const int as_int = emit(OpKind::select, {same_later, splat(sq, 1, l), splat(sq, 0, l)}, sq, l);
      Op red;
      red.kind = OpKind::reduce, red.operands = {as_int, splat({DType::s32, {}}, 0, l)}, red.dims = {1}, red.combiner = Combiner::maximum;
      red.type = flat, red.loc = l;
      const int overwritten = emit(OpKind::reshape, {f_.add(std::move(red))}, gt, l);
      Op keep;
      keep.kind = OpKind::compare, keep.direction = Direction::EQ, keep.operands = {overwritten, splat(gt, 0, l)};
      keep.type = {DType::pred, g}, keep.loc = l;
      Op kb;
      kb.kind = OpKind::broadcast, kb.operands = {f_.add(std::move(keep))}, kb.dims = gmap, kb.type = {DType::pred, hd}, kb.loc = l;
      hit = emit(OpKind::and_, {hit, f_.add(std::move(kb))}, {DType::pred, hd}, l);
    }
    const int hot = ones_where(hit, l);
    // dot(one-hot, updates): batch = batching dims; contract the other
    // index dims; result [batch..., n, window dims in update order].
    Op dot;
    dot.kind = OpKind::dot, dot.loc = l, dot.precision = Precision::highest;
    std::vector<std::pair<char, int64_t>> label;  // ('B', operand dim) / ('D', d) / ('W', operand dim)
    std::vector<int64_t> rdims;
    for (size_t k = 0; k < sibd.size(); ++k) {
      const int64_t gp = gpos(sibd[k]);
      dot.lhs_batch.push_back(gp), dot.rhs_batch.push_back(uscatter[size_t(gp)]);
      label.push_back({'B', ibd[k]}), rdims.push_back(g[size_t(gp)]);
    }
    for (size_t k = 0; k < g.size(); ++k)
      if (!has(dot.lhs_batch, int64_t(k))) dot.lhs_contract.push_back(int64_t(k)), dot.rhs_contract.push_back(uscatter[k]);
    label.push_back({'D', d}), rdims.push_back(n);
    for (size_t k = 0; k < uwd.size(); ++k)
      if (window_operand[k] != d) label.push_back({'W', window_operand[k]}), rdims.push_back(ut.dims[size_t(uwd[k])]);
    dot.type = {DType::f32, rdims};
    // Into the operand's dimension order (a window dim of d, if any, is 1).
    std::vector<int64_t> perm;
    for (size_t e = 0; e < r; ++e) {
      const char want = has(ibd, int64_t(e)) ? 'B' : int64_t(e) == d ? 'D' : 'W';
      const auto at = std::find(label.begin(), label.end(), std::pair<char, int64_t>{want, int64_t(e)});
      if (at == label.end()) refuse(op, "scatter dimensions do not match");
      perm.push_back(int64_t(at - label.begin()));
    }
    auto to_operand = [&](int v, DType dt) {
      std::vector<int64_t> tdims;
      for (int64_t p : perm) tdims.push_back(rdims[size_t(p)]);
      Op tr;
      tr.kind = OpKind::transpose, tr.operands = {v}, tr.dims = perm, tr.type = {f_.ops[size_t(v)].type.dtype, tdims}, tr.loc = l;
      int x = f_.add(std::move(tr));
      if (f_.ops[size_t(x)].type.dtype != dt) x = emit(OpKind::convert, {x}, {dt, tdims}, l);
      return x;
    };
    const int sum = to_operand(dot_sum(dot, hot, bf16_parts(upd, l)), ot.dtype);
    if (!assign) return emit(OpKind::add, {opnd, sum}, ot, l);
    // Assignment: rows hit by an update take it.
    const int ones = splat({DType::bf16, ut.dims}, 1, l);
    const int hits = to_operand(dot_sum(dot, hot, {ones}), DType::f32);
    Op any;
    any.kind = OpKind::compare, any.direction = Direction::NE, any.operands = {hits, splat({DType::f32, ot.dims}, 0, l)};
    any.type = {DType::pred, ot.dims}, any.loc = l;
    return emit(OpKind::select, {f_.add(std::move(any)), sum, opnd}, ot, l);
  }


  Function& f_;
  ConstantFolder consts_;  // finds index columns that count (as jnp.arange(n) does)
};

}  // namespace

Function lower_gather_scatter(const Function& in) {
  std::optional<IndexedLowering> lowering;  // on the function rebuild makes
  return rewrite::rebuild(in, [&](rewrite::Builder& b, const Op& op) -> int {
    if (op.kind != OpKind::gather && op.kind != OpKind::scatter) return -1;
    if (!lowering) lowering.emplace(b.f);
    return lowering->lower(op);
  });
}

}  // namespace tpu::compiler
