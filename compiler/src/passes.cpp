// IR -> IR passes (passes.h). Every pass rebuilds the function: it walks the
// old ops in order, maps their values into a new function and either copies
// an op or expands it into several.
#include <fmt/format.h>

#include <cmath>
#include <map>
#include <numeric>

#include "rewrite.h"
#include "tpu/compiler/passes.h"
#include "tpu/ir/interp.h"

namespace tpu::compiler {

using namespace ir;
using rewrite::Builder;
using rewrite::copy_signature;
using rewrite::rebuild;
using rewrite::window_offsets;

namespace {

Function dead_code(const Function& in) {
  std::vector<bool> live(in.ops.size());
  for (int r : in.results) live[r] = true;
  for (size_t i = in.ops.size(); i-- > 0;) {
    if (in.ops[i].kind == OpKind::parameter) live[i] = true;
    if (live[i])
      for (int o : in.ops[i].operands) live[o] = true;
  }
  Function out;
  copy_signature(in, out);
  std::vector<int> map(in.ops.size(), -1);
  for (size_t i = 0; i < in.ops.size(); ++i) {
    if (!live[i]) continue;
    Op op = in.ops[i];
    for (int& o : op.operands) o = map[o];
    map[i] = out.add(std::move(op));
  }
  for (int r : in.results) out.results.push_back(map[r]);
  return out;
}

// A constant the compiler may look into (opaque ones stand for runtime data).
bool is_constant(const Function& f, int v) { return f.ops[v].kind == OpKind::constant && !f.ops[v].opaque; }

// The constant's single value, if it is a splat.
std::optional<double> splat_value(const Function& f, int v) {
  const Op& op = f.ops[v];
  if (op.kind == OpKind::constant) {
    if (op.literal.size() == 1) return op.literal[0];
    for (double x : op.literal)
      if (!(x == op.literal[0] || (std::isnan(x) && std::isnan(op.literal[0]))) || std::signbit(x) != std::signbit(op.literal[0]))
        return std::nullopt;
    if (!op.literal.empty()) return op.literal[0];
  }
  if (op.kind == OpKind::broadcast || op.kind == OpKind::reshape) return splat_value(f, op.operands[0]);
  return std::nullopt;
}

OpKind combiner_op(Combiner c) {
  switch (c) {
    case Combiner::add: return OpKind::add;
    case Combiner::multiply: return OpKind::multiply;
    case Combiner::maximum: return OpKind::maximum;
    case Combiner::minimum: return OpKind::minimum;
    case Combiner::and_: return OpKind::and_;
    case Combiner::or_: return OpKind::or_;
    case Combiner::replace: break;  // the verifier allows it on scatter alone
  }
  throw std::logic_error("internal error: no op combines by replace");
}

bool is_identity_init(const Function& f, int init, Combiner c) {
  const auto v = splat_value(f, init);
  const double id = combiner_identity(c, f.ops[init].type.dtype);
  return v && *v == id;  // (-0 and +0 both count for add: they differ only in the sign of a zero sum)
}

}  // namespace

// ---------------------------------------------------------------- canonicalize

Function canonicalize(const Function& in) {
  constexpr int64_t kFoldLimit = 1 << 16;
  std::map<std::string, int> seen;  // CSE: printed op -> value
  Function out = rebuild(in, [&](Builder& b, Op& op) -> int {
    Function& f = b.f;
    const Type& rt = op.type;
    auto src = [&](size_t k) -> const Op& { return f.ops[op.operands[k]]; };
    switch (op.kind) {
      case OpKind::reshape:
        if (src(0).type == rt) return op.operands[0];
        if (src(0).kind == OpKind::reshape) op.operands[0] = src(0).operands[0];
        if (f.ops[op.operands[0]].type == rt) return op.operands[0];
        break;
      case OpKind::transpose: {
        bool id = true;
        for (size_t i = 0; i < op.dims.size(); ++i) id &= op.dims[i] == int64_t(i);
        if (id) return op.operands[0];
        if (src(0).kind == OpKind::transpose) {  // transpose(transpose(x, p), q) = transpose(x, p[q])
          std::vector<int64_t> p;
          for (int64_t d : op.dims) p.push_back(src(0).dims[d]);
          op.dims = p;
          op.operands[0] = src(0).operands[0];
          bool id2 = true;
          for (size_t i = 0; i < p.size(); ++i) id2 &= p[i] == int64_t(i);
          if (id2) return op.operands[0];
        }
        break;
      }
      case OpKind::convert:
        if (src(0).type == rt) return op.operands[0];
        // convert(convert(x)) with an exact inner one (a widening that
        // loses nothing) is one convert of x.
        if (src(0).kind == OpKind::convert && rt.dtype != DType::u32) {
          const DType from = f.ops[src(0).operands[0]].type.dtype, mid = src(0).type.dtype;
          const bool exact = from == DType::pred ? mid != DType::u32
                             : from == DType::s8 ? mid == DType::s32 || is_float(mid)
                                                 : (from == DType::bf16 || from == DType::f16) && mid == DType::f32;
          if (exact) {
            op.operands[0] = src(0).operands[0];
            if (f.ops[op.operands[0]].type == rt) return op.operands[0];
          }
        }
        break;
      case OpKind::broadcast:
        if (src(0).type == rt) return op.operands[0];
        if (src(0).kind == OpKind::broadcast) {  // compose the dimension maps
          std::vector<int64_t> d;
          bool ok = true;
          for (size_t i = 0; i < src(0).dims.size(); ++i) {
            const int64_t mid = src(0).dims[i];
            ok &= f.ops[src(0).operands[0]].type.dims[i] == src(0).type.dims[mid];
            d.push_back(op.dims[mid]);
          }
          if (ok) {
            op.dims = d;
            op.operands[0] = src(0).operands[0];
          }
        } else if (src(0).kind == OpKind::reshape && f.ops[src(0).operands[0]].type.elements() == 1 &&
                   f.ops[src(0).operands[0]].type.dims.empty()) {
          op.dims.clear();  // broadcast(reshape(scalar)) = broadcast(scalar)
          op.operands[0] = src(0).operands[0];
        }
        break;
      default: break;
    }
    // Constant folding: every operand a constant, a small result.
    if (op.kind != OpKind::parameter && op.kind != OpKind::constant && !is_collective(op.kind) &&
        (op.kind == OpKind::iota || !op.operands.empty()) &&
        rt.elements() <= (op.kind == OpKind::iota ? int64_t(1) << 22 : kFoldLimit)) {
      bool all = true;
      for (int o : op.operands) all &= is_constant(f, o);
      if (all) {
        std::vector<Tensor> vals;
        for (int o : op.operands) vals.push_back(evaluate(f.ops[o], {}));
        std::vector<const Tensor*> ptrs;
        for (auto& t : vals) ptrs.push_back(&t);
        Tensor r = evaluate(op, ptrs);
        Op c;
        c.kind = OpKind::constant;
        c.type = rt;
        c.loc = op.loc;
        c.literal = r.v;
        if (auto s = [&]() -> std::optional<double> {
              for (double x : r.v)
                if (!(x == r.v[0]) || std::signbit(x) != std::signbit(r.v[0])) return std::nullopt;
              return r.v.empty() ? std::nullopt : std::optional<double>(r.v[0]);
            }())
          c.literal = {*s};
        op = c;
      }
    }
    // CSE: ops are equal when they print the same apart from their loc.
    std::string key;
    {
      Function one;
      one.param_names = f.param_names;
      Op bare = op;
      bare.loc.clear();
      for (int o : bare.operands) key += fmt::format("%{},", o);
      bare.operands.clear();
      one.ops.push_back(std::move(bare));
      key += print(one);
    }
    if (op.kind != OpKind::parameter) {
      if (auto it = seen.find(key); it != seen.end()) return it->second;
    }
    const int v = b.f.add(std::move(op));
    seen[key] = v;
    return v;
  });
  out = dead_code(out);
  return out;
}

// ---------------------------------------------------------------- convolution

namespace {

int conv_one_group(Builder& b, const Op& op, int x, int k) {
  const ConvDims& c = op.conv;
  const size_t ns = c.in_spatial.size();
  const Type xt = b.type(x), kt = b.type(k);
  const DType dt = xt.dtype;
  // x -> [B, S..., C]; k -> [KS..., C, O].
  std::vector<int64_t> xp{c.in_batch}, kp;
  for (int64_t d : c.in_spatial) xp.push_back(d);
  xp.push_back(c.in_feature);
  for (int64_t d : c.k_spatial) kp.push_back(d);
  kp.push_back(c.k_in), kp.push_back(c.k_out);
  int xx = b.transpose(x, xp);
  const int kk = b.transpose(k, kp);
  const int64_t batch = xt.dims[c.in_batch], cin = xt.dims[c.in_feature], cout = kt.dims[c.k_out];
  // Padding and input dilation.
  std::vector<int64_t> lo(ns + 2, 0), hi(ns + 2, 0), interior(ns + 2, 0);
  for (size_t i = 0; i < ns; ++i) lo[i + 1] = op.lo[i], hi[i + 1] = op.hi[i], interior[i + 1] = op.lhs_dilation[i] - 1;
  xx = b.pad(xx, b.scalar(dt, 0), lo, hi, interior);
  std::vector<int64_t> out_sp(ns), win(ns);
  int64_t rows = batch;
  for (size_t i = 0; i < ns; ++i) {
    out_sp[i] = op.type.dims[c.out_spatial[i]];
    win[i] = op.window[i];
    rows *= out_sp[i];
  }
  const auto offsets = window_offsets(win, op.loc, op_name(op.kind));
  const int64_t taps = int64_t(offsets.size());
  // One strided slice per kernel tap, concatenated along features (im2col).
  std::vector<int> cols;
  for (const auto& tap : offsets) {
    std::vector<int64_t> start(ns + 2, 0), limit = b.type(xx).dims, stride(ns + 2, 1);
    bool empty = false;
    for (size_t i = 0; i < ns; ++i) {
      start[i + 1] = tap[i] * op.rhs_dilation[i];
      limit[i + 1] = start[i + 1] + (out_sp[i] - 1) * op.strides[i] + 1;
      stride[i + 1] = op.strides[i];
      empty |= out_sp[i] == 0;
    }
    if (empty) break;
    cols.push_back(b.slice(xx, start, limit, stride));
  }
  std::vector<int64_t> res{batch};
  res.insert(res.end(), out_sp.begin(), out_sp.end());
  res.push_back(cout);
  int y;
  if (cols.empty() || rows == 0) {
    y = b.broadcast(b.scalar(op.type.dtype, 0), res, {});
  } else {
    // With one input channel each tap's patch column would be written one
    // element at a time; then the patches are built transposed ([taps,
    // rows], each tap a contiguous block) and the dot contracts dimension 0.
    const bool narrow = cin == 1;
    int patches;
    if (narrow) {
      std::vector<int64_t> to_front{int64_t(ns + 1)};
      for (size_t i = 0; i <= ns; ++i) to_front.push_back(int64_t(i));
      for (int& col : cols) col = b.transpose(col, to_front);
      patches = b.reshape(b.concat(cols, 0), {taps * cin, rows});
    } else {
      patches = b.reshape(b.concat(cols, int64_t(ns + 1)), {rows, taps * cin});
    }
    const int w = b.reshape(kk, {taps * cin, cout});
    Op d;
    d.kind = OpKind::dot;
    d.operands = {patches, w};
    d.lhs_contract = {narrow ? 0 : 1}, d.rhs_contract = {0};
    d.precision = op.precision;
    d.type = {op.type.dtype, {rows, cout}};
    y = b.reshape(b.add(std::move(d)), res);
  }
  // [B, O..., F] -> the output's dimension order.
  std::vector<int64_t> perm(ns + 2);
  perm[c.out_batch] = 0;
  perm[c.out_feature] = int64_t(ns + 1);
  for (size_t i = 0; i < ns; ++i) perm[c.out_spatial[i]] = int64_t(i + 1);
  return b.transpose(y, perm);
}

}  // namespace

Function lower_convolution(const Function& in) {
  return rebuild(in, [&](Builder& b, Op& op) -> int {
    if (op.kind != OpKind::convolution) return -1;
    const int x = op.operands[0], k = op.operands[1];
    const ConvDims& c = op.conv;
    const Type xt = b.type(x), kt = b.type(k);
    if (op.feature_groups != 1 && op.batch_groups != 1)
      throw Error(fmt::format("{}: unsupported convolution with both feature and batch groups", op.loc));
    // Groups become one convolution each, concatenated along the output
    // features: feature group i reads input features of group i; batch group
    // i (weight gradients of grouped and depthwise convolutions) reads the
    // batch's group i.
    const bool by_batch = op.batch_groups != 1;
    const int64_t g = by_batch ? op.batch_groups : op.feature_groups;
    if (g == 1) return conv_one_group(b, op, x, k);
    const int64_t split = by_batch ? c.in_batch : c.in_feature, per = xt.dims[split] / g, cout = kt.dims[c.k_out] / g;
    std::vector<int> parts;
    for (int64_t i = 0; i < g; ++i) {
      std::vector<int64_t> xs(xt.dims.size(), 0), xl = xt.dims, one(xt.dims.size(), 1);
      xs[split] = i * per, xl[split] = (i + 1) * per;
      std::vector<int64_t> ks(kt.dims.size(), 0), kl = kt.dims;
      ks[c.k_out] = i * cout, kl[c.k_out] = (i + 1) * cout;
      Op sub = op;
      sub.feature_groups = sub.batch_groups = 1;
      sub.type.dims[c.out_feature] = cout;
      parts.push_back(conv_one_group(b, sub, b.slice(x, xs, xl, one), b.slice(k, ks, kl, one)));
    }
    return b.concat(parts, c.out_feature);
  });
}

// ---------------------------------------------------------------- reduce-window

Function lower_reduce_window(const Function& in) {
  return rebuild(in, [&](Builder& b, Op& op) -> int {
    if (op.kind != OpKind::reduce_window) return -1;
    const int x = op.operands[0], init = op.operands[1];
    const size_t n = op.window.size();
    std::vector<int64_t> interior(n);
    for (size_t i = 0; i < n; ++i) interior[i] = op.lhs_dilation[i] - 1;
    const int xp = b.pad(x, init, op.lo, op.hi, interior);
    const OpKind k = combiner_op(op.combiner);
    int acc = -1;
    const auto taps = window_offsets(op.window, op.loc, op_name(op.kind));
    for (size_t t = 0; t < taps.size() && op.type.elements() > 0; ++t) {
      std::vector<int64_t> start(n), limit(n);
      for (size_t i = 0; i < n; ++i) {
        start[i] = taps[t][i] * op.rhs_dilation[i];
        limit[i] = start[i] + (op.type.dims[i] - 1) * op.strides[i] + 1;
      }
      const int s = b.slice(xp, start, limit, op.strides);
      acc = acc < 0 ? s : b.binary(k, acc, s);
    }
    const int initb = b.broadcast(init, op.type.dims, {});
    if (acc < 0) return initb;
    if (is_identity_init(b.f, init, op.combiner)) return acc;
    return b.binary(k, acc, initb);
  });
}

// ---------------------------------------------------------------- select-and-scatter

// The running selection over the window offsets in row-major order (XLA's
// order), with a validity mask so padding is never selected; then, per
// offset, the source values whose window selected it, scattered back by an
// interior-padded pad and combined.
Function lower_select_and_scatter(const Function& in) {
  return rebuild(in, [&](Builder& b, Op& op) -> int {
    if (op.kind != OpKind::select_and_scatter) return -1;
    const int x = op.operands[0], src = op.operands[1], init = op.operands[2];
    const Type xt = b.type(x), st = b.type(src);
    const size_t n = xt.dims.size();
    const DType dt = xt.dtype;
    auto unop = [&](OpKind k, int a) {
      Op o;
      o.kind = k, o.operands = {a};
      return b.add(std::move(o));
    };
    const std::vector<int64_t> none(n, 0), one(n, 1);
    const int xp = b.pad(x, b.scalar(dt, 0), op.lo, op.hi, none);
    const int valid = b.pad(b.splat(DType::s32, 1, xt.dims), b.scalar(DType::s32, 0), op.lo, op.hi, none);
    const std::vector<int64_t> pdims = b.type(xp).dims;
    const std::vector<std::vector<int64_t>> starts = window_offsets(op.window, op.loc, op_name(op.kind));
    const int64_t taps = int64_t(starts.size());
    auto view = [&](int v, const std::vector<int64_t>& start) {
      std::vector<int64_t> limit(n);
      for (size_t i = 0; i < n; ++i) limit[i] = start[i] + (st.dims[i] - 1) * op.strides[i] + 1;
      return b.slice(v, start, limit, op.strides);
    };
    const int zero_i = b.splat(DType::s32, 0, st.dims);
    int best = -1, which = -1, have = -1;
    for (int64_t t = 0; t < taps && st.elements() > 0; ++t) {
      const int v = view(xp, starts[size_t(t)]);
      const int ok = b.compare(Direction::NE, view(valid, starts[size_t(t)]), zero_i);
      if (t == 0) {
        best = v, which = zero_i, have = ok;
        continue;
      }
      // A valid candidate is taken when nothing is selected yet or the
      // selected value does not win against it.
      const int keep = b.compare(op.direction, best, v);
      const int take = b.binary(OpKind::and_, ok, b.binary(OpKind::or_, unop(OpKind::not_, have), unop(OpKind::not_, keep)));
      best = b.select(take, v, best);
      which = b.select(take, b.splat(DType::s32, double(t), st.dims), which);
      have = b.binary(OpKind::or_, have, ok);
    }
    const OpKind k = combiner_op(op.combiner);
    const int ident = b.scalar(dt, combiner_identity(op.combiner, dt));
    int acc = -1;
    for (int64_t t = 0; t < taps && st.elements() > 0; ++t) {
      const int mine = b.binary(OpKind::and_, have, b.compare(Direction::EQ, which, b.splat(DType::s32, double(t), st.dims)));
      const int part = b.select(mine, src, b.broadcast(ident, st.dims, {}));
      std::vector<int64_t> lo(n), hi(n), interior(n);
      for (size_t i = 0; i < n; ++i) {
        lo[i] = starts[size_t(t)][i];
        interior[i] = op.strides[i] - 1;
        hi[i] = pdims[i] - lo[i] - ((st.dims[i] - 1) * op.strides[i] + 1);
      }
      const int back = b.pad(part, ident, lo, hi, interior);
      acc = acc < 0 ? back : b.binary(k, acc, back);
    }
    const int initb = b.broadcast(init, xt.dims, {});
    if (acc < 0) return initb;
    std::vector<int64_t> limit(n);
    for (size_t i = 0; i < n; ++i) limit[i] = op.lo[i] + xt.dims[i];
    return b.binary(k, b.slice(acc, op.lo, limit, one), initb);
  });
}

// ---------------------------------------------------------------- math functions

namespace {

// sin and cos in f32 (bf16 operands are widened and the result rounded):
// q = round(x 2/pi), r = x - q pi/2 in three parts (Cody-Waite; exact
// products for |q| < 2^16), Cephes' sinf/cosf minimax polynomials on
// [-pi/4, pi/4] (about 1e-7 relative), and the quadrant q (+1 for cos)
// mod 4 picks +-sin r or +-cos r.
int sin_cos(Builder& b, int x0, bool cosine) {
  const Type xt = b.type(x0);
  const auto& dims = xt.dims;
  auto c = [&](double v) { return b.splat(DType::f32, v, dims); };
  auto mul = [&](int a, int y) { return b.binary(OpKind::multiply, a, y); };
  auto add = [&](int a, int y) { return b.binary(OpKind::add, a, y); };
  const int x = b.convert(x0, DType::f32);
  const int q = b.unary(OpKind::round_nearest_even, mul(x, c(0.63661977236758134308)));
  int r = x;
  for (double part : {1.5703125, 4.837512969970703125e-4, 7.54978995489188216e-8}) r = b.binary(OpKind::subtract, r, mul(q, c(part)));
  const int z = mul(r, r);
  const int s = add(mul(mul(add(mul(add(mul(c(-1.9515295891e-4), z), c(8.3321608736e-3)), z), c(-1.6666654611e-1)), z), r), r);
  const int cp = add(mul(add(mul(c(2.443315711809948e-5), z), c(-1.388731625493765e-3)), z), c(4.166664568298827e-2));
  const int co = add(b.binary(OpKind::subtract, mul(mul(cp, z), z), mul(c(0.5), z)), c(1));
  int quad = b.convert(q, DType::s32);
  if (cosine) quad = b.binary(OpKind::add, quad, b.splat(DType::s32, 1, dims));
  auto bit = [&](double v) {
    return b.compare(Direction::NE, b.binary(OpKind::and_, quad, b.splat(DType::s32, v, dims)), b.splat(DType::s32, 0, dims));
  };
  const int v = b.select(bit(1), co, s);
  return b.convert(b.select(bit(2), b.unary(OpKind::negate, v), v), xt.dtype);
}

// erf(x) = sign(x) (1 - poly(t) exp(-x^2)), t = 1 / (1 + p |x|): Abramowitz
// & Stegun 7.1.26.
int erf_approx(Builder& b, int x) {
  const Type xt = b.type(x);
  auto c = [&](double v) { return b.splat(xt.dtype, v, xt.dims); };
  auto mul = [&](int a, int y) { return b.binary(OpKind::multiply, a, y); };
  const int t = b.binary(OpKind::divide, c(1), b.binary(OpKind::add, c(1), mul(c(0.3275911), b.unary(OpKind::abs, x))));
  int poly = c(1.061405429);
  for (double a : {-1.453152027, 1.421413741, -0.284496736, 0.254829592}) poly = b.binary(OpKind::add, mul(poly, t), c(a));
  const int e = b.unary(OpKind::exponential, b.unary(OpKind::negate, mul(x, x)));
  return mul(b.unary(OpKind::sign, x), b.binary(OpKind::subtract, c(1), mul(mul(poly, t), e)));
}

// atan2(y, x) in f32: t = min(|y|, |x|) / max(|y|, |x|) in [0, 1] (1 where
// both are infinite, 0 where both are zero), atan t as Cephes' atanf (past
// tan(pi/8), pi/4 + atan((t - 1) / (t + 1)); a minimax polynomial in t^2
// on [0, tan(pi/8)], about 2e-7 relative), then the octant: pi/2 - a where
// |y| > |x|, pi - a where x is negative or -0 (1 / x < 0), and y's sign,
// so atan2(+-0, -0) is +-pi. The multiples of pi are added as two f32
// parts. Within 2 ULP of atan2 in f64 rounded to f32 (numpy, 200,000
// points at three scales; tests/compiler).
int atan2_approx(Builder& b, int y, int x) {
  const Type t = b.type(y);
  auto c = [&](double v) { return b.splat(DType::f32, v, t.dims); };
  auto add = [&](int u, int v) { return b.binary(OpKind::add, u, v); };
  auto sub = [&](int u, int v) { return b.binary(OpKind::subtract, u, v); };
  auto mul = [&](int u, int v) { return b.binary(OpKind::multiply, u, v); };
  auto lt = [&](int u, int v) { return b.compare(Direction::LT, u, v); };
  auto eq = [&](int u, int v) { return b.compare(Direction::EQ, u, v); };
  // k pi / 4 as f32 hi + lo, added to a: (a + lo) + hi, or hi - a as (hi - a) + lo.
  auto plus = [&](double hi, double lo, int a) { return add(add(a, c(lo)), c(hi)); };
  auto minus = [&](double hi, double lo, int a) { return add(sub(c(hi), a), c(lo)); };
  const int ay = b.unary(OpKind::abs, y), ax = b.unary(OpKind::abs, x);
  const int big = b.binary(OpKind::maximum, ay, ax);
  int r = b.binary(OpKind::divide, b.binary(OpKind::minimum, ay, ax), big);
  r = b.select(b.binary(OpKind::and_, eq(ay, c(INFINITY)), eq(ax, c(INFINITY))), c(1), r);
  r = b.select(eq(big, c(0)), c(0), r);
  const int far = b.compare(Direction::GT, r, c(0.41421356237309503));
  const int u = b.select(far, b.binary(OpKind::divide, sub(r, c(1)), add(r, c(1))), r), z = mul(u, u);
  int p = c(8.05374449538e-2);
  for (double k : {-1.38776856032e-1, 1.99777106478e-1, -3.33329491539e-1}) p = add(mul(p, z), c(k));
  p = add(mul(mul(p, z), u), u);
  int a = b.select(far, plus(0.78539818525314331, -2.1855695e-8, p), p);
  a = b.select(b.compare(Direction::GT, ay, ax), minus(1.5707963705062866, -4.37113883e-8, a), a);
  auto negative = [&](int v) { return b.binary(OpKind::or_, lt(v, c(0)), lt(b.binary(OpKind::divide, c(1), v), c(0))); };
  a = b.select(negative(x), minus(3.1415927410125732, -8.74227766e-8, a), a);
  return b.select(negative(y), b.unary(OpKind::negate, a), a);
}

// round-nearest-afz (halves away from zero): t = floor(|x|), plus one when
// |x| - t >= 0.5 (exact for every f32), with the sign of x; -0 and NaN stay.
int round_afz(Builder& b, int x) {
  const Type t = b.type(x);
  if (!is_float(t.dtype)) return x;
  auto c = [&](double v) { return b.splat(t.dtype, v, t.dims); };
  const int a = b.unary(OpKind::abs, x), fl = b.unary(OpKind::floor, a);
  const int r = b.binary(OpKind::add, fl, b.select(b.compare(Direction::GE, b.binary(OpKind::subtract, a, fl), c(0.5)), c(1), c(0)));
  const int signed_r = b.select(b.compare(Direction::LT, x, c(0)), b.unary(OpKind::negate, r), r);
  const int keep = b.binary(OpKind::or_, b.compare(Direction::NE, x, x), b.compare(Direction::EQ, x, c(0)));
  return b.select(keep, x, signed_r);
}

// remainder: x - q y with q = trunc(x / y), as C's fmod. For floats the
// product q y is carried exactly as p + e (Dekker's product of Veltkamp's
// 12-bit halves), so r = (x - p) - e is exact; x / y rounded across an
// integer leaves q one off, which moves r by |y| back to x's side and below
// |y|. A zero r takes x's sign; y = +-inf gives a finite x. Where q is 2^24 or more
// (no longer an integer in f32) or |y| is beyond 2^100 (its halves would
// overflow), r is x - q y rounded. Integers divide as the VPU does.
int remainder(Builder& b, int x, int y) {
  const Type t = b.type(x);
  int q = b.binary(OpKind::divide, x, y);
  if (!is_float(t.dtype)) return b.binary(OpKind::subtract, x, b.binary(OpKind::multiply, q, y));
  if (t.dtype != DType::f32)  // bf16 and f16 through f32, rounded once
    return b.convert(remainder(b, b.convert(x, DType::f32), b.convert(y, DType::f32)), t.dtype);
  auto c = [&](double v) { return b.splat(t.dtype, v, t.dims); };
  auto add = [&](int u, int v) { return b.binary(OpKind::add, u, v); };
  auto sub = [&](int u, int v) { return b.binary(OpKind::subtract, u, v); };
  auto mul = [&](int u, int v) { return b.binary(OpKind::multiply, u, v); };
  auto lt = [&](int u, int v) { return b.compare(Direction::LT, u, v); };
  const int aq = b.unary(OpKind::floor, b.unary(OpKind::abs, q));
  q = mul(b.unary(OpKind::sign, q), aq);
  auto split = [&](int v) {  // v = hi + lo, each of 12 significant bits
    const int k = mul(v, c(4097)), hi = sub(k, sub(k, v));
    return std::pair{hi, sub(v, hi)};
  };
  const auto [qh, ql] = split(q);
  const auto [yh, yl] = split(y);
  const int p = mul(q, y), e = add(add(add(sub(mul(qh, yh), p), mul(qh, yl)), mul(ql, yh)), mul(ql, yl));
  int r = sub(sub(x, p), e);
  const int ay = b.unary(OpKind::abs, y), sy = mul(b.unary(OpKind::sign, x), ay);
  r = b.select(lt(mul(b.unary(OpKind::sign, r), b.unary(OpKind::sign, x)), c(0)), add(r, sy), r);  // q one too large
  r = b.select(lt(b.unary(OpKind::abs, r), ay), r, sub(r, sy));  // q one too small
  r = b.select(b.compare(Direction::EQ, r, c(0)), mul(x, c(0)), r);  // zero: x's sign
  const int exact = b.binary(OpKind::and_, lt(aq, c(16777216)), lt(ay, c(std::ldexp(1.0, 100))));
  r = b.select(exact, r, sub(x, mul(q, y)));
  const int finite_x = lt(b.unary(OpKind::abs, x), c(INFINITY));
  return b.select(b.binary(OpKind::and_, b.compare(Direction::EQ, ay, c(INFINITY)), finite_x), x, r);
}

// log1p(x) = log(u) (x / (u - 1)) with u = 1 + x, and expm1(x) = (u - 1)
// (x / log(u)) with u = exp(x) (Goldberg's and Kahan's forms, the ratio
// first so that large x do not overflow; Higham's "Accuracy
// and Stability of Numerical Algorithms" 1.14.1): the rounding of u cancels,
// so |x| << 1 keeps its digits where log(1 + x) and exp(x) - 1 lose them
// all. Where u rounds to 1 the answer is x; u = inf gives inf, and expm1's
// u - 1 = -1 gives -1.
int log1p_accurate(Builder& b, int x) {
  const Type t = b.type(x);
  auto c = [&](double v) { return b.splat(t.dtype, v, t.dims); };
  const int u = b.binary(OpKind::add, x, c(1)), lu = b.unary(OpKind::log, u);
  const int r = b.binary(OpKind::multiply, lu, b.binary(OpKind::divide, x, b.binary(OpKind::subtract, u, c(1))));
  return b.select(b.compare(Direction::EQ, u, c(1)), x, b.select(b.compare(Direction::EQ, u, c(INFINITY)), u, r));
}
int expm1_accurate(Builder& b, int x) {
  const Type t = b.type(x);
  auto c = [&](double v) { return b.splat(t.dtype, v, t.dims); };
  const int u = b.unary(OpKind::exponential, x), um1 = b.binary(OpKind::subtract, u, c(1));
  const int r = b.binary(OpKind::multiply, um1, b.binary(OpKind::divide, x, b.unary(OpKind::log, u)));
  const int edge = b.select(b.compare(Direction::EQ, um1, c(-1)), um1, b.select(b.compare(Direction::EQ, u, c(INFINITY)), u, r));
  return b.select(b.compare(Direction::EQ, u, c(1)), x, edge);
}

}  // namespace

// The math functions the VPU has no instruction for, in the ones it has:
// expm1 and log1p by the helpers above, is-finite(x) = (x - x == 0), erf by Abramowitz & Stegun
// 7.1.26 (absolute error <= 1.5e-7: jax.nn.gelu's exact form), sine,
// cosine, atan2, round-nearest-afz and remainder by the helpers above.
Function legalize_math(const Function& in) {
  return rebuild(in, [&](Builder& b, Op& op) -> int {
    if (op.kind == OpKind::remainder) return remainder(b, op.operands[0], op.operands[1]);
    if (op.kind == OpKind::atan2) {  // bf16 and f16 through f32, rounded once
      const int y = op.operands[0], x = op.operands[1];
      const DType dt = b.type(y).dtype;
      if (dt == DType::f32) return atan2_approx(b, y, x);
      return b.convert(atan2_approx(b, b.convert(y, DType::f32), b.convert(x, DType::f32)), dt);
    }
    if (op.operands.size() != 1) return -1;
    const int x = op.operands[0];
    const Type xt = b.type(x);
    auto c = [&](double v) { return b.splat(xt.dtype, v, xt.dims); };
    // bf16 and f16 go through f32 and are rounded once at the end, as XLA
    // computes them (each step rounded to 8 bits, erf of bf16 was 12 ULP off).
    const auto in_f32 = [&](int (*f)(Builder&, int)) {
      return xt.dtype == DType::f32 ? f(b, x) : b.convert(f(b, b.convert(x, DType::f32)), xt.dtype);
    };
    switch (op.kind) {
      case OpKind::exponential_minus_one: return in_f32(expm1_accurate);
      case OpKind::log_plus_one: return in_f32(log1p_accurate);
      case OpKind::is_finite: return b.compare(Direction::EQ, b.binary(OpKind::subtract, x, x), c(0));
      case OpKind::erf: return in_f32(erf_approx);
      case OpKind::sine: case OpKind::cosine: return sin_cos(b, x, op.kind == OpKind::cosine);
      case OpKind::round_nearest_afz: return round_afz(b, x);
      default: return -1;
    }
  });
}

// ---------------------------------------------------------------- arg-reduce

// argmax / argmin: m, the extreme (a reduce); the smallest index whose value
// is m, or NaN (more extreme than any number), by a minimum reduce of the
// indices where that holds (INT_MAX elsewhere); and the init pair, which
// takes part like any element. canonicalize merges m with the values' own
// reduce when the program has one (as XLA's variadic reduce does).
Function lower_arg_reduce(const Function& in) {
  return rebuild(in, [&](Builder& b, Op& op) -> int {
    if (op.kind != OpKind::arg_reduce) return -1;
    const int vals = op.operands[0], ids = op.operands[1], init_v = op.operands[2], init_i = op.operands[3];
    const Type vt = b.type(vals), it = b.type(ids);
    std::vector<int64_t> kept;
    for (size_t d = 0; d < vt.dims.size(); ++d)
      if (std::find(op.dims.begin(), op.dims.end(), int64_t(d)) == op.dims.end()) kept.push_back(int64_t(d));
    const std::vector<int64_t> out_dims = op.type.dims;
    auto reduce = [&](int x, int init, Combiner c) {
      Op r;
      r.kind = OpKind::reduce, r.operands = {x, init}, r.dims = op.dims, r.combiner = c;
      return b.add(std::move(r));
    };
    auto extreme = [&](int a, int m) {
      const int eq = b.compare(Direction::EQ, a, m);
      return is_float(vt.dtype) ? b.binary(OpKind::or_, eq, b.compare(Direction::NE, a, a)) : eq;
    };
    constexpr double kIntMax = 2147483647.0;
    const int m = reduce(vals, init_v, op.combiner);
    const int big = b.scalar(DType::s32, kIntMax);
    const int hit = extreme(vals, b.broadcast(m, vt.dims, kept));
    const int cand = b.select(hit, ids, b.splat(DType::s32, kIntMax, it.dims));
    const int idx = reduce(cand, big, Combiner::minimum);
    const int iv = b.broadcast(init_v, out_dims, {}), ii = b.broadcast(init_i, out_dims, {});
    const int with_init = b.binary(OpKind::minimum, idx, ii);
    return b.select(extreme(iv, m), with_init, idx);
  });
}

// ---------------------------------------------------------------- unsigned integers

// u32 values are 32-bit patterns and the VPU's integer instructions are
// signed. What depends only on the bits (add, subtract, multiply, and, or,
// xor, not, shifts, negate, equality, select, layout, sums) stays as it is;
// the rest becomes signed arithmetic: an order comparison compares x ^ 2^31
// as s32, maximum/minimum/clamp select by it, u32 -> float converts the two
// 16-bit halves (exact, one rounding), float -> u32 converts x or x - 2^31
// (toward zero, saturating, NaN -> 0, as XLA), and conversions between u32
// and the signed types reinterpret the bits (XLA wraps), division halves x
// for a signed division and corrects by one, and maximum/minimum reductions
// reduce x ^ 2^31 as s32, and select-and-scatter selects by it. Power and
// dots of u32 values are refused.
Function lower_unsigned(const Function& in) {
  return rebuild(in, [&](Builder& b, Op& op) -> int {
    const bool ures = op.type.dtype == DType::u32;
    auto is_u = [&](int v) { return b.type(v).dtype == DType::u32; };
    auto refuse = [&](const std::string& what) -> int {
      throw Error(fmt::format("{}: unsupported {} of u32 values", op.loc.empty() ? "<ir>" : op.loc, what));
    };
    auto bitcast = [&](int x, DType d) {
      if (b.type(x).dtype == d) return x;
      Op c;
      c.kind = OpKind::bitcast_convert, c.operands = {x}, c.type = {d, b.type(x).dims};
      return b.add(std::move(c));
    };
    auto biased = [&](int x) { return bitcast(b.binary(OpKind::xor_, x, b.splat(DType::u32, 2147483648.0, b.type(x).dims)), DType::s32); };
    auto unbiased = [&](int s) { return b.binary(OpKind::xor_, bitcast(s, DType::u32), b.splat(DType::u32, 2147483648.0, b.type(s).dims)); };
    auto ucompare = [&](int x, int y, Direction d) {
      const int by = biased(y), bx = biased(x);  // y first, as the code generated so far has it
      return b.compare(d, bx, by);
    };
    auto full = [&](int x, const std::vector<int64_t>& dims) { return b.type(x).dims == dims ? x : b.broadcast(x, dims, {}); };
    switch (op.kind) {
      case OpKind::compare:
        if (!is_u(op.operands[0]) || op.direction == Direction::EQ || op.direction == Direction::NE) return -1;
        return ucompare(op.operands[0], op.operands[1], op.direction);
      case OpKind::maximum:
      case OpKind::minimum: {
        if (!ures) return -1;
        const int x = op.operands[0], y = op.operands[1];
        return b.select(ucompare(x, y, op.kind == OpKind::maximum ? Direction::GT : Direction::LT), x, y);
      }
      case OpKind::clamp: {
        if (!ures) return -1;
        const int lo = full(op.operands[0], op.type.dims), x = op.operands[1], hi = full(op.operands[2], op.type.dims);
        const int m = b.select(ucompare(x, lo, Direction::LT), lo, x);
        return b.select(ucompare(m, hi, Direction::GT), hi, m);
      }
      case OpKind::abs: return ures ? op.operands[0] : -1;
      case OpKind::sign: {
        if (!ures) return -1;
        const int x = op.operands[0];
        return b.convert(b.compare(Direction::NE, x, b.splat(DType::u32, 0, op.type.dims)), DType::u32);
      }
      case OpKind::divide: {
        // q = 2 ((x >> 1) / y), a signed division of values below 2^31, and
        // one more where x - q y >= y (x - q y < 2y: one step suffices);
        // where y >= 2^31, q = (x >= y); y = 0 gives all ones, as XLA.
        // remainder (x - (x / y) y, legalize-math) follows from it.
        if (!ures) return -1;
        const int x = op.operands[0], y = op.operands[1];
        auto u = [&](double v) { return b.splat(DType::u32, v, op.type.dims); };
        const int zero = b.compare(Direction::EQ, y, u(0)), big = ucompare(y, u(2147483648.0), Direction::GE);
        const int d = b.select(b.binary(OpKind::or_, zero, big), b.splat(DType::s32, 1, op.type.dims), bitcast(y, DType::s32));
        const int half = bitcast(b.binary(OpKind::shift_right_logical, x, u(1)), DType::s32);
        int q = b.binary(OpKind::shift_left, bitcast(b.binary(OpKind::divide, half, d), DType::u32), u(1));
        const int r = b.binary(OpKind::subtract, x, b.binary(OpKind::multiply, q, y));
        q = b.select(ucompare(r, y, Direction::GE), b.binary(OpKind::add, q, u(1)), q);
        q = b.select(big, b.convert(ucompare(x, y, Direction::GE), DType::u32), q);
        return b.select(zero, u(4294967295.0), q);
      }
      case OpKind::power: return ures ? refuse("power") : -1;
      case OpKind::dot:
      case OpKind::convolution:
        return is_u(op.operands[0]) || is_u(op.operands[1]) ? refuse(op_name(op.kind)) : -1;
      case OpKind::select_and_scatter: {
        // Selected in the order of x ^ 2^31 as s32; the scattered values
        // combine as s32 bits (biased too where the combiner orders them).
        if (!ures && !is_u(op.operands[0])) return -1;
        const bool order = op.combiner == Combiner::maximum || op.combiner == Combiner::minimum;
        auto value = [&](int v) { return order ? biased(v) : bitcast(v, DType::s32); };
        Op s = op;
        s.operands = {is_u(op.operands[0]) ? biased(op.operands[0]) : op.operands[0], ures ? value(op.operands[1]) : op.operands[1],
                      ures ? value(op.operands[2]) : op.operands[2]};
        if (!ures) return b.add(std::move(s));
        const int r = b.add(std::move(s));
        return order ? unbiased(r) : bitcast(r, DType::u32);
      }
      case OpKind::reduce:
      case OpKind::reduce_window: {
        // maximum and minimum in the order of x ^ 2^31 as s32, biased back.
        if (!ures || (op.combiner != Combiner::maximum && op.combiner != Combiner::minimum)) return -1;
        Op r = op;
        r.operands[0] = biased(op.operands[0]), r.operands[1] = biased(op.operands[1]);
        return unbiased(b.add(std::move(r)));
      }
      case OpKind::convert: {
        const int x = op.operands[0];
        const DType from = b.type(x).dtype, to = op.type.dtype;
        if (from == DType::u32) {
          if (to == DType::u32) return x;
          if (to == DType::s32) return bitcast(x, DType::s32);
          if (to == DType::s8) return b.convert(bitcast(x, DType::s32), DType::s8);
          if (!is_float(to)) return -1;  // pred: x != 0, the same on the bits
          const auto& d = op.type.dims;
          const int hi = b.binary(OpKind::shift_right_logical, x, b.splat(DType::u32, 16, d));
          const int lo = b.binary(OpKind::and_, x, b.splat(DType::u32, 65535, d));
          const int fhi = b.convert(bitcast(hi, DType::s32), DType::f32), flo = b.convert(bitcast(lo, DType::s32), DType::f32);
          return b.convert(b.binary(OpKind::add, b.binary(OpKind::multiply, fhi, b.splat(DType::f32, 65536, d)), flo), to);
        }
        if (to != DType::u32) return -1;
        if (from == DType::s32) return bitcast(x, DType::u32);
        if (!is_float(from)) return bitcast(b.convert(x, DType::s32), DType::u32);
        const auto& d = op.type.dims;
        const int t = b.binary(OpKind::maximum, b.convert(x, DType::f32), b.splat(DType::f32, 0, d));  // NaN stays NaN -> 0
        const int two31 = b.splat(DType::f32, 2147483648.0, d);
        const int low = b.convert(t, DType::s32);
        const int high = b.binary(OpKind::xor_, b.convert(b.binary(OpKind::subtract, t, two31), DType::s32), b.splat(DType::s32, -2147483648.0, d));
        return bitcast(b.select(b.compare(Direction::GE, t, two31), high, low), DType::u32);
      }
      default: return -1;
    }
  });
}

// ---------------------------------------------------------------- reduce

Function canonicalize_reduce(const Function& in) {
  return rebuild(in, [&](Builder& b, Op& op) -> int {
    if (op.kind != OpKind::reduce) return -1;
    const int x = op.operands[0];
    int init = op.operands[1];
    const Type xt = b.type(x);
    const DType dt = xt.dtype;
    std::vector<bool> red(xt.dims.size());
    for (int64_t d : op.dims) red[d] = true;
    std::vector<int64_t> kept, reduced;
    int64_t K = 1, R = 1;
    for (size_t d = 0; d < xt.dims.size(); ++d) {
      if (red[d]) reduced.push_back(int64_t(d)), R *= xt.dims[d];
      else kept.push_back(int64_t(d)), K *= xt.dims[d];
    }
    const bool constant_init = splat_value(b.f, init).has_value();
    const int body_init = constant_init ? init : b.scalar(dt, combiner_identity(op.combiner, dt));
    // Across lanes when the last dimension is reduced and a lane reduction exists.
    const bool lanes = !xt.dims.empty() && red.back() && dt != DType::pred &&
                       (op.combiner == Combiner::add || op.combiner == Combiner::maximum || op.combiner == Combiner::minimum);
    std::vector<int64_t> perm = lanes ? kept : reduced;
    perm.insert(perm.end(), (lanes ? reduced : kept).begin(), (lanes ? reduced : kept).end());
    const int t = b.reshape(b.transpose(x, perm), lanes ? std::vector<int64_t>{K, R} : std::vector<int64_t>{R, K});
    Op r = op;
    r.operands = {t, body_init};
    r.dims = {lanes ? 1 : 0};
    r.type = {dt, {K}};
    int v = b.add(std::move(r));
    v = b.reshape(v, op.type.dims);
    if (!constant_init) v = b.binary(combiner_op(op.combiner), v, b.broadcast(init, op.type.dims, {}));
    return v;
  });
}

// ---------------------------------------------------------------- dot

Function canonicalize_dot(const Function& in) {
  return rebuild(in, [&](Builder& b, Op& op) -> int {
    if (op.kind != OpKind::dot) return -1;
    int a = op.operands[0], w = op.operands[1];
    const Type at = b.type(a), wt = b.type(w);
    DType acc;
    const auto int8_or_32 = [](DType d) { return d == DType::s8 || d == DType::s32; };
    // s32 operands (with s32 or s8) as signed base-256 digits (below).
    const bool digits = int8_or_32(at.dtype) && int8_or_32(wt.dtype) && (at.dtype == DType::s32 || wt.dtype == DType::s32);
    if ((at.dtype == DType::s8 && wt.dtype == DType::s8) || digits) {
      acc = DType::s32;
    } else if (is_float(at.dtype) && is_float(wt.dtype)) {
      acc = DType::f32;
      // Mixed operands, and f16 (which the MXU does not take), as f32: the
      // dot is then an f32 dot of the same precision (split-f32-dots), its
      // result rounded to the dot's type. docs/numerics.md, "f16".
      if (at.dtype != wt.dtype || at.dtype == DType::f16) a = b.convert(a, DType::f32), w = b.convert(w, DType::f32);
    } else {
      throw Error(fmt::format("{}: unsupported dot of {} x {}: the MXU multiplies s8 x s8 and float x float (bf16, f16, f32); "
                              "s32 dots are split into s8 ones", op.loc, dtype_name(at.dtype), dtype_name(wt.dtype)));
    }
    if (is_float(op.type.dtype) != (acc == DType::f32))
      throw Error(fmt::format("{}: unsupported dot result {} from {} operands", op.loc, dtype_name(op.type.dtype), dtype_name(at.dtype)));
    auto has = [](const std::vector<int64_t>& v, size_t d) { return std::find(v.begin(), v.end(), int64_t(d)) != v.end(); };
    std::vector<int64_t> ap = op.lhs_batch, wp = op.rhs_batch;
    int64_t B = 1, M = 1, K = 1, N = 1;
    for (int64_t d : op.lhs_batch) B *= at.dims[d];
    for (size_t d = 0; d < at.dims.size(); ++d)
      if (!has(op.lhs_batch, d) && !has(op.lhs_contract, d)) ap.push_back(int64_t(d)), M *= at.dims[d];
    for (int64_t d : op.lhs_contract) ap.push_back(d), K *= at.dims[d];
    for (int64_t d : op.rhs_contract) wp.push_back(d);
    for (size_t d = 0; d < wt.dims.size(); ++d)
      if (!has(op.rhs_batch, d) && !has(op.rhs_contract, d)) wp.push_back(int64_t(d)), N *= wt.dims[d];
    const bool batched = !op.lhs_batch.empty() && B > 1;
    const std::vector<int64_t> ad = batched ? std::vector<int64_t>{B, M, K} : std::vector<int64_t>{M, K};
    const std::vector<int64_t> wd = batched ? std::vector<int64_t>{B, K, N} : std::vector<int64_t>{K, N};
    a = b.reshape(b.transpose(a, ap), ad);
    w = b.reshape(b.transpose(w, wp), wd);
    int y = -1;
    if (!digits) {
      y = b.dot3(a, w, acc, op.precision);
    } else {
      // An s32 operand is four signed base-256 digits, x = d0 + 2^8 d1 +
      // 2^16 d2 + 2^24 d3 (mod 2^32), each in [-128, 127]: d_i is the low
      // byte of what is left, sign-extended, and what is left then shifts
      // down exactly. The dot, as XLA's wraps, is sum_k 2^8k S_k (mod 2^32)
      // with S_k = sum_{i+j=k} A_i . B_j: s8 dots, summed on the MXU.
      const auto split = [&](int x) {
        if (b.type(x).dtype == DType::s8) return std::vector<int>{x};
        const std::vector<int64_t> d = b.type(x).dims;
        std::vector<int> out;
        int rest = x;
        for (int i = 0; i < 4; ++i) {
          const int low = b.binary(OpKind::shift_right_arithmetic, b.binary(OpKind::shift_left, rest, b.splat(DType::s32, 24, d)),
                                   b.splat(DType::s32, 24, d));
          out.push_back(b.convert(low, DType::s8));
          if (i < 3) rest = b.binary(OpKind::shift_right_arithmetic, b.binary(OpKind::subtract, rest, low), b.splat(DType::s32, 8, d));
        }
        return out;
      };
      const std::vector<int> ad8 = split(a), wd8 = split(w);
      for (size_t k = 0; k < 4; ++k) {
        int sum = -1;
        for (size_t i = 0; i <= k; ++i)
          if (i < ad8.size() && k - i < wd8.size()) {
            const int v = b.dot3(ad8[i], wd8[k - i], DType::s32, op.precision);
            sum = sum < 0 ? v : b.binary(OpKind::add, sum, v);
          }
        if (sum < 0) continue;
        if (k > 0) {
          const std::vector<int64_t> d = b.type(sum).dims;
          sum = b.binary(OpKind::shift_left, sum, b.splat(DType::s32, double(8 * k), d));
        }
        y = y < 0 ? sum : b.binary(OpKind::add, y, sum);
      }
    }
    y = b.reshape(y, op.type.dims);
    return b.convert(y, op.type.dtype);
  });
}

Function split_f32_dots(const Function& in, std::optional<Precision> override) {
  return rebuild(in, [&](Builder& b, Op& op) -> int {
    if (op.kind != OpKind::dot || b.type(op.operands[0]).dtype != DType::f32) return -1;
    const Precision p = override ? *override : op.precision;
    const int nparts = p == Precision::default_ ? 1 : p == Precision::high ? 2 : 3;
    const int passes = p == Precision::default_ ? 1 : p == Precision::high ? 3 : 6;
    // The bf16 parts that hold an operand exactly: one for values converted
    // from bf16, s8 or pred, two from f16 (11 significant bits, its range
    // within bf16's); else the precision's.
    auto exact_parts = [&](int x) {
      const Op& o = b.f.ops[size_t(x)];
      const DType from = o.kind == OpKind::convert ? b.type(o.operands[0]).dtype : DType::f32;
      return std::min(nparts, from == DType::bf16 || from == DType::s8 || from == DType::pred ? 1 : from == DType::f16 ? 2 : nparts);
    };
    auto parts = [&](int x, int n) {
      std::vector<int> v;
      int rest = x;
      for (int i = 0; i < n; ++i) {
        const int part = b.convert(rest, DType::bf16);
        v.push_back(part);
        if (i + 1 < n) rest = b.binary(OpKind::subtract, rest, b.convert(part, DType::f32));
      }
      return v;
    };
    const int na = exact_parts(op.operands[0]), nw = exact_parts(op.operands[1]);
    const auto ap = parts(op.operands[0], na), wp = parts(op.operands[1], nw);
    // Smallest terms first: a2b0, a1b1, a0b2, a1b0, a0b1, a0b0 (highest).
    // Where every product of the parts fits in the precision's passes (an
    // operand of one or two parts), all of them: the products are exact,
    // in no more passes (s8 or bf16 x f32 at highest: 3, f16 x f32: 6).
    const bool all = na * nw <= passes;
    std::vector<std::pair<int, int>> terms;
    for (int s = na + nw - 2; s >= 0; --s)
      for (int i = std::min(s, na - 1); i >= 0; --i)
        if (s - i < nw && (all || (s < nparts && (p != Precision::high || s <= 1)))) terms.push_back({i, s - i});
    int acc = -1;
    for (auto [i, j] : terms) {
      Op d = op;
      d.operands = {ap[i], wp[j]};
      d.precision = Precision::default_;
      const int v = b.add(std::move(d));
      acc = acc < 0 ? v : b.binary(OpKind::add, acc, v);
    }
    return acc;
  });
}

Function fold_empty(const Function& in) {
  Function out = rebuild(in, [&](Builder& b, Op& op) -> int {
    if (op.kind == OpKind::parameter) return -1;
    const DType d = op.type.dtype;
    // No elements: nothing to compute (the back end emits no code for it).
    if (op.type.elements() == 0) return b.splat(d, 0, op.type.dims);
    auto empty = [&](int v) { return b.type(v).elements() == 0; };
    switch (op.kind) {
      case OpKind::dot:
      case OpKind::convolution:  // a sum over no products (or over zero padding only)
        if (empty(op.operands[0]) || empty(op.operands[1])) return b.splat(d, 0, op.type.dims);
        return -1;
      case OpKind::reduce:
      case OpKind::reduce_window:  // every window holds only the init (XLA pads with it)
      case OpKind::pad:            // all padding
        if (empty(op.operands[0])) return b.broadcast(op.operands[1], op.type.dims, {});
        return -1;
      case OpKind::concatenate: {
        std::vector<int> parts;
        for (int v : op.operands)
          if (!empty(v)) parts.push_back(v);
        if (parts.size() == op.operands.size()) return -1;
        return b.concat(parts, op.index);
      }
      default: return -1;
    }
  });
  return dead_code(out);
}

// ---------------------------------------------------------------- collectives
// An all-gather, reduce-scatter or all-to-all along a dimension that has
// others of more than one element before it: the back end moves whole
// contiguous pieces, so the dimension goes first (a transpose), the
// collective runs along dimension 0, and the result goes back. Each
// member's value is transposed alone, which commutes with gathering,
// splitting and combining along the moved dimension.
Function leading_collectives(const Function& in) {
  return rebuild(in, [&](Builder& b, const Op& op) {
    if (op.kind != OpKind::all_gather && op.kind != OpKind::reduce_scatter && op.kind != OpKind::all_to_all) return -1;
    const std::vector<int64_t>& dims = b.type(op.operands[0]).dims;
    const int64_t d = op.index;
    bool leading = true;
    for (int64_t i = 0; i < d; ++i) leading &= dims[size_t(i)] == 1;
    if (leading) return -1;
    std::vector<int64_t> perm = {d}, back(dims.size());
    for (int64_t i = 0; i < int64_t(dims.size()); ++i)
      if (i != d) perm.push_back(i);
    for (size_t i = 0; i < perm.size(); ++i) back[size_t(perm[i])] = int64_t(i);
    Op first = op;
    first.operands = {b.transpose(op.operands[0], perm)};
    first.index = 0;
    return b.transpose(b.add(std::move(first)), back);
  });
}

namespace {

class Unroller {
 public:
  explicit Unroller(const Function& in) : in_(in) { copy_signature(in, out_); }

  Function run() {
    out_.results = inline_function(in_, {});
    return std::move(out_);
  }

 private:
  // g's ops appended to out_, its parameters taken from `args` (none: g is
  // the function itself, whose parameters are copied); returns its results.
  std::vector<int> inline_function(const Function& g, const std::vector<int>& args) {
    std::vector<int> map(g.ops.size(), -1);
    std::map<int, std::vector<int>> loops;  // unrolled loops' final states
    for (size_t i = 0; i < g.ops.size(); ++i) {
      const Op& src = g.ops[i];
      if (src.kind == OpKind::parameter && &g != &in_) {
        map[i] = args.at(size_t(src.index));
        continue;
      }
      if (src.kind == OpKind::get_tuple_element && loops.count(src.operands[0])) {
        map[i] = loops.at(src.operands[0]).at(size_t(src.index));
        continue;
      }
      std::vector<int> operands;
      for (int o : src.operands) operands.push_back(map[size_t(o)]);
      if (src.kind == OpKind::while_) {
        if (auto state = unroll(src, operands)) {
          loops[int(i)] = *state;
          continue;
        }
      }
      Op op = src;
      op.operands = std::move(operands);
      for (Function& r : op.regions) r = unroll_loops(r);  // a loop kept: the loops inside it
      // A dynamic slice whose starts became constants is a slice (an
      // update: at constant starts); one with a start computed at run
      // time stays (the back end reads its starts when it runs).
      std::vector<double> starts;
      const bool upd = op.kind == OpKind::dynamic_update_slice;
      if (op.kind == OpKind::dynamic_slice || upd)
        for (size_t k = upd ? 2 : 1; k < op.operands.size(); ++k)
          if (const auto v = consts_->scalar(op.operands[k])) starts.push_back(*v);
      if ((op.kind == OpKind::dynamic_slice || upd) && starts.size() + (upd ? 2 : 1) == op.operands.size()) {
        const std::vector<int64_t> sizes = (upd ? out_.ops[size_t(op.operands[1])].type : op.type).dims;
        map[i] = rewrite::append_fixed_dynamic_slice(out_, op.operands[0], upd ? op.operands[1] : -1, sizes, starts, op.loc);
      } else {
        map[i] = out_.add(std::move(op));
      }
      if (out_.ops.size() > kMaxOps)
        throw Error(fmt::format("{}: unsupported: while loops unrolled to more than {} operations", g.ops[i].loc, kMaxOps));
    }
    std::vector<int> res;
    for (int r : g.results) res.push_back(map[size_t(r)]);
    return res;
  }

  // The state after the loop's trips, inlined, if it is unrolled: a counted
  // loop of at most kUnrollTrips trips. Others stay loops (nullopt).
  std::optional<std::vector<int>> unroll(const Op& w, std::vector<int> state) {
    const size_t mark = out_.ops.size();
    auto keep = [&]() -> std::optional<std::vector<int>> {
      out_.ops.resize(mark);
      consts_ = std::make_unique<ConstantFolder>(out_);
      return std::nullopt;
    };
    for (int64_t n = 0;; ++n) {
      const int c = inline_function(w.regions[0], state)[0];
      const std::optional<double> go = consts_->scalar(c);
      if (!go) return keep();
      if (*go == 0) return state;
      if (n == kUnrollTrips) return keep();
      state = inline_function(w.regions[1], state);
    }
  }

  static constexpr int64_t kUnrollTrips = 8;
  static constexpr size_t kMaxOps = 1000000;
  const Function& in_;
  Function out_;
  std::unique_ptr<ConstantFolder> consts_ = std::make_unique<ConstantFolder>(out_);
};

}  // namespace

Function unroll_loops(const Function& in) {
  for (const Op& op : in.ops)
    if (op.kind == OpKind::while_ || op.kind == OpKind::dynamic_slice || op.kind == OpKind::dynamic_update_slice) return Unroller(in).run();
  return in;
}

namespace {

// `in` with each of its while ops rewritten by `loop`, which may add ops
// before it through `b` (in unchanged if it has no loop).
Function rewrite_loops(const Function& in, const std::function<void(Builder& b, Op& w)>& loop) {
  bool any = false;
  for (const Op& op : in.ops) any |= op.kind == OpKind::while_;
  if (!any) return in;
  return rebuild(in, [&](Builder& b, const Op& op) {
    if (op.kind != OpKind::while_) return -1;
    Op w = op;
    loop(b, w);
    return b.f.add(std::move(w));
  });
}

// Op i of loop w's region r becomes a new state element, `init` before the
// loop, that the body passes through: its uses read that element.
void to_state(Op& w, size_t r, size_t i, int init) {
  Function& g = w.regions[r];
  w.operands.push_back(init);
  Op param;
  param.kind = OpKind::parameter, param.type = g.ops[i].type, param.index = int64_t(w.operands.size()) - 1, param.loc = g.ops[i].loc;
  g.ops[i] = param;
  const int in_other = w.regions[1 - r].add(param);
  w.regions[1].results.push_back(r == 1 ? int(i) : in_other);
}

}  // namespace

// A constant inside a loop's condition or body that is not a splat has its
// bytes in HBM for the whole run: it becomes a state element the loop
// passes through, its op outside the loop.
Function hoist_loop_constants(const Function& in) {
  return rewrite_loops(in, [](Builder& b, Op& w) {
    for (size_t r = 0; r < 2; ++r)
      for (size_t i = 0; i < w.regions[r].ops.size(); ++i) {
        const Op& c = w.regions[r].ops[i];
        if (c.kind == OpKind::constant && c.literal.size() > 1) to_state(w, r, i, b.f.add(Op(c)));
      }
  });
}

Function hoist_loop_invariants(const Function& in) {
  return rewrite_loops(in, [](Builder& b, Op& w) {
    Function& body = w.regions[1];
    const size_t nops = body.ops.size();
    // State elements the body passes through unchanged.
    std::vector<bool> kept(w.operands.size(), false);
    for (size_t k = 0; k < kept.size(); ++k) {
      const Op& r = body.ops[size_t(body.results[k])];
      kept[k] = r.kind == OpKind::parameter && r.index == int64_t(k);
    }
    enum Class { variant, free_, hoisted };  // free_: invariant, but not worth a state element of its own
    std::vector<Class> cls(nops, variant);
    std::vector<bool> grows(nops, false);  // larger than its operands
    for (size_t i = 0; i < nops; ++i) {
      const Op& c = body.ops[i];
      int64_t in_bytes = 0;
      for (int o : c.operands) in_bytes += body.ops[size_t(o)].type.bytes();
      grows[i] = c.type.bytes() > in_bytes;
      if (c.kind == OpKind::parameter) {
        cls[i] = kept[size_t(c.index)] ? free_ : variant;
        continue;
      }
      if (!c.regions.empty() || is_collective(c.kind)) continue;
      bool invariant = true;
      for (int o : c.operands) invariant &= cls[size_t(o)] != variant;
      if (!invariant) continue;
      const bool costs_nothing = c.kind == OpKind::constant || c.kind == OpKind::iota || c.kind == OpKind::broadcast ||
                                 c.kind == OpKind::reshape;
      cls[i] = costs_nothing ? free_ : hoisted;
    }
    // The hoisted values the loop still reads (those that ops left in the
    // body, or the body's results, use) become state elements; one larger
    // than its operands is computed in the body after all (from theirs).
    std::vector<bool> read(nops, false);
    for (bool again = true; again;) {
      again = false;
      std::fill(read.begin(), read.end(), false);
      for (size_t i = 0; i < nops; ++i)
        if (cls[i] != hoisted)
          for (int o : body.ops[i].operands) read[size_t(o)] = read[size_t(o)] || cls[size_t(o)] == hoisted;
      for (int r : body.results) read[size_t(r)] = read[size_t(r)] || cls[size_t(r)] == hoisted;
      for (size_t i = 0; i < nops; ++i)
        if (read[i] && grows[i]) cls[i] = variant, again = true;
    }
    // Their computations outside, on the loop's initial state.
    std::vector<int> outside(nops, -1);
    std::function<int(size_t)> copy = [&](size_t i) {
      if (outside[i] >= 0) return outside[i];
      Op c = body.ops[i];
      if (c.kind == OpKind::parameter) return outside[i] = w.operands[size_t(c.index)];
      for (int& o : c.operands) o = copy(size_t(o));
      return outside[i] = b.add(std::move(c));
    };
    for (size_t i = 0; i < nops; ++i)
      if (read[i]) to_state(w, 1, i, copy(i));  // the ops it took become dead
  });
}

namespace {

// The pass over a function and, first, over its loops' conditions and bodies.
Function everywhere(const Function& f, const std::function<Function(const Function&)>& run) {
  bool nested = false;
  for (const Op& op : f.ops) nested |= !op.regions.empty();
  if (!nested) return run(f);
  Function g = f;
  for (Op& op : g.ops)
    for (Function& r : op.regions) r = everywhere(r, run);
  return run(g);
}

}  // namespace

Function run_pipeline(const Function& f, const std::vector<Pass>& passes, const PassObserver& after) {
  Function cur = f;
  for (const Pass& p : passes) {
    cur = p.regions ? everywhere(cur, p.run) : p.run(cur);
    try {
      verify(cur);
    } catch (const Error& e) {
      throw std::logic_error(fmt::format("internal error: pass {} left an invalid function: {}", p.name, e.what()));
    }
    if (after) after(p.name, cur);
  }
  return cur;
}

void check_backend_form(const Function& f) {
  for (size_t i = 0; i < f.ops.size(); ++i) {
    const Op& op = f.ops[i];
    auto refuse = [&](const std::string& why) {
      throw std::logic_error(fmt::format("{}: internal error: %{} {} reaches the back end {}", op.loc.empty() ? "<ir>" : op.loc, i,
                                         op_name(op.kind), why));
    };
    auto dtype = [&](size_t k) { return f.ops[size_t(op.operands[k])].type.dtype; };
    switch (op.kind) {
      case OpKind::convolution: case OpKind::reduce_window: case OpKind::select_and_scatter: case OpKind::erf:
      case OpKind::sine: case OpKind::cosine: case OpKind::exponential_minus_one: case OpKind::log_plus_one:
      case OpKind::is_finite: case OpKind::round_nearest_afz: case OpKind::remainder: case OpKind::atan2: case OpKind::arg_reduce:
      case OpKind::gather: case OpKind::scatter:
        refuse("(a pass lowers it)");
        break;
      case OpKind::dynamic_slice: case OpKind::dynamic_update_slice:
        for (size_t k = op.kind == OpKind::dynamic_slice ? 1 : 2; k < op.operands.size(); ++k)
          if (dtype(k) != DType::s32 && dtype(k) != DType::u32 && dtype(k) != DType::s8) refuse("with a start that is not s8, s32 or u32");
        break;
      case OpKind::dot: {
        const size_t rank = op.type.dims.size();
        const bool batch = rank == 3 && op.lhs_batch == std::vector<int64_t>{0} && op.rhs_batch == std::vector<int64_t>{0} &&
                           op.lhs_contract == std::vector<int64_t>{2} && op.rhs_contract == std::vector<int64_t>{1};
        const bool plain = rank == 2 && op.lhs_batch.empty() && op.rhs_batch.empty() && op.lhs_contract == std::vector<int64_t>{1} &&
                           op.rhs_contract == std::vector<int64_t>{0};
        if (!batch && !plain) refuse("not as [B,M,K] x [B,K,N] or [M,K] x [K,N]");
        const bool mxu = (dtype(0) == DType::bf16 && dtype(1) == DType::bf16 && op.type.dtype == DType::f32) ||
                         (dtype(0) == DType::s8 && dtype(1) == DType::s8 && op.type.dtype == DType::s32);
        if (!mxu) refuse(fmt::format("of {} x {} -> {} (the MXU takes bf16 -> f32 and s8 -> s32)", dtype_name(dtype(0)),
                                     dtype_name(dtype(1)), dtype_name(op.type.dtype)));
        break;
      }
      case OpKind::reduce:
        if (f.ops[size_t(op.operands[0])].type.dims.size() != 2 || op.dims.size() != 1) refuse("not as a 2-D reduce of one dimension");
        if (!splat_value(f, op.operands[1])) refuse("with an init that is not a constant");
        break;
      case OpKind::while_:
        for (const Function& r : op.regions) check_backend_form(r);
        for (const Function& r : op.regions)
          for (const Op& c : r.ops)
            if (c.kind == OpKind::constant && c.literal.size() > 1) refuse("with a constant of many values inside (hoist-loop-constants)");
        break;
      case OpKind::compare:
        if (dtype(0) == DType::u32 && op.direction != Direction::EQ && op.direction != Direction::NE) refuse("ordering u32 values");
        break;
      case OpKind::maximum: case OpKind::minimum: case OpKind::clamp: case OpKind::divide: case OpKind::power:
        if (op.type.dtype == DType::u32) refuse("on u32 values");
        break;
      default: break;
    }
  }
}

std::vector<Pass> ir_pipeline(std::optional<Precision> precision) {
  return {
      {"spmd-partition", spmd_partition, false},
      {"unroll-loops", unroll_loops, false},
      {"lower-gather-scatter", lower_gather_scatter},
      {"fold-empty", fold_empty},
      {"legalize-math", legalize_math},
      {"lower-arg-reduce", lower_arg_reduce},
      {"canonicalize", canonicalize},
      {"lower-unsigned", lower_unsigned},
      {"lower-convolution", lower_convolution},
      {"lower-reduce-window", lower_reduce_window},
      {"lower-select-and-scatter", lower_select_and_scatter},
      {"canonicalize-reduce", canonicalize_reduce},
      {"canonicalize-dot", canonicalize_dot},
      {"split-f32-dots", [precision](const Function& f) { return split_f32_dots(f, precision); }},
      {"leading-collectives", leading_collectives},
      {"hoist-loop-invariants", hoist_loop_invariants},
      {"canonicalize", canonicalize},
      {"hoist-loop-constants", hoist_loop_constants},
  };
}

}  // namespace tpu::compiler
