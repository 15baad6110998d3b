// The IR reference interpreter (interp.h). Written for clarity, not speed:
// every op walks its result's index space.
#include <fmt/format.h>

#include <cmath>
#include <algorithm>
#include <cstring>

#include "tpu/ir/interp.h"
#include "tpu/isa/half.h"

namespace tpu::ir {
namespace {

std::vector<int64_t> strides_of(const std::vector<int64_t>& dims) {
  std::vector<int64_t> s(dims.size(), 1);
  for (int i = int(dims.size()) - 2; i >= 0; --i) s[i] = s[i + 1] * dims[i + 1];
  return s;
}

// Calls fn(index) for every index of dims in row-major order.
template <typename Fn>
void for_each_index(const std::vector<int64_t>& dims, Fn fn) {
  for (int64_t d : dims)
    if (d == 0) return;
  std::vector<int64_t> idx(dims.size(), 0);
  for (;;) {
    fn(idx);
    int d = int(dims.size()) - 1;
    while (d >= 0 && ++idx[d] == dims[d]) idx[d--] = 0;
    if (d < 0) return;
  }
}

// For each element of a tensor of `dims` (row-major, i = 0, 1, ...), the
// offset of its place in the result of reducing `reduced` away (result
// strides `rs`): fn(i, o).
template <typename Fn>
void for_each_reduced(const std::vector<int64_t>& dims, const std::vector<int64_t>& reduced, const std::vector<int64_t>& rs, Fn fn) {
  std::vector<bool> red(dims.size());
  for (int64_t d : reduced) red[size_t(d)] = true;
  size_t i = 0;
  for_each_index(dims, [&](const auto& idx) {
    int64_t o = 0, p = 0;
    for (size_t d = 0; d < idx.size(); ++d)
      if (!red[d]) o += idx[d] * rs[size_t(p++)];
    fn(i++, size_t(o));
  });
}

int64_t offset(const std::vector<int64_t>& idx, const std::vector<int64_t>& strides) {
  int64_t o = 0;
  for (size_t i = 0; i < idx.size(); ++i) o += idx[i] * strides[i];
  return o;
}

int32_t i32(double v) { return int32_t(int64_t(v)); }

double unary(OpKind k, DType from, DType to, double x) {
  const bool fl = is_float(from);
  const float f = float(x);
  switch (k) {
    case OpKind::convert:
      if (is_float(to)) return x;  // canonicalize_value rounds to bf16/f32
      if (to == DType::pred) return x != 0;
      if (fl) {  // float -> integer: toward zero, saturating, NaN -> 0 (as vcvt.s32.f32)
        if (std::isnan(f)) return 0;
        const double t = std::trunc(double(f));
        if (to == DType::u32) return t >= 4294967295.0 ? 4294967295.0 : t <= 0 ? 0.0 : t;
        const double r = t >= 2147483647.0 ? 2147483647.0 : t <= -2147483648.0 ? -2147483648.0 : t;
        return to == DType::s8 ? double(int8_t(int32_t(r))) : r;
      }
      return x;  // integer -> integer wraps in canonicalize_value
    case OpKind::bitcast_convert: {  // the same 32 bits, read as the other type
      uint32_t bits = uint32_t(int64_t(x));
      if (from == DType::f32) std::memcpy(&bits, &f, 4);
      if (to == DType::f32) {
        float r;
        std::memcpy(&r, &bits, 4);
        return r;
      }
      return to == DType::s32 ? double(int32_t(bits)) : double(bits);
    }
    case OpKind::negate: return fl ? double(-f) : double(int32_t(0u - uint32_t(i32(x))));
    case OpKind::abs:
      if (from == DType::u32) return x;
      return fl ? double(std::fabs(f)) : double(int32_t(i32(x) < 0 ? 0u - uint32_t(i32(x)) : uint32_t(i32(x))));
    case OpKind::exponential: return std::exp(f);
    case OpKind::log: return std::log(f);
    case OpKind::tanh: return std::tanh(f);
    case OpKind::logistic: return 1.0f / (1.0f + std::exp(-f));
    case OpKind::rsqrt: return 1.0f / std::sqrt(f);
    case OpKind::sqrt: return std::sqrt(f);
    case OpKind::floor: return std::floor(f);
    case OpKind::ceil: return std::ceil(f);
    case OpKind::round_nearest_even: return std::nearbyint(f);
    case OpKind::round_nearest_afz: return fl ? double(std::round(f)) : x;
    case OpKind::sign:
      if (fl) return std::isnan(f) ? double(f) : f > 0 ? 1.0 : f < 0 ? -1.0 : double(f);
      return x > 0 ? 1 : x < 0 ? -1 : 0;
    case OpKind::erf: return std::erf(f);
    case OpKind::sine: return std::sin(f);
    case OpKind::cosine: return std::cos(f);
    case OpKind::exponential_minus_one: return std::expm1(f);
    case OpKind::log_plus_one: return std::log1p(f);
    case OpKind::is_finite: return std::isfinite(f);
    case OpKind::not_: return from == DType::pred ? double(x == 0) : double(~i32(x));
    default: break;
  }
  throw std::logic_error("internal error: not a unary op");
}

double compare(Direction d, double a, double b) {
  switch (d) {
    case Direction::EQ: return a == b;
    case Direction::NE: return a != b;
    case Direction::LT: return a < b;
    case Direction::LE: return a <= b;
    case Direction::GT: return a > b;
    case Direction::GE: return a >= b;
  }
  return 0;
}

double binary(const Op& op, DType t, double a, double b) {
  if (op.kind == OpKind::compare) return compare(op.direction, a, b);
  if (is_float(t)) {
    const float x = float(a), y = float(b);
    switch (op.kind) {
      case OpKind::add: return x + y;
      case OpKind::subtract: return x - y;
      case OpKind::multiply: return x * y;
      case OpKind::divide: return x / y;
      case OpKind::remainder: return std::fmod(x, y);
      case OpKind::atan2: return std::atan2(x, y);
      case OpKind::maximum: return std::isnan(x) || std::isnan(y) ? NAN : std::fmax(x, y);
      case OpKind::minimum: return std::isnan(x) || std::isnan(y) ? NAN : std::fmin(x, y);
      case OpKind::power: return std::pow(x, y);
      default: break;
    }
    throw std::logic_error("internal error: integer op on floats");
  }
  const int32_t x = i32(a), y = i32(b);
  const uint32_t ux = uint32_t(x), uy = uint32_t(y);
  if (t == DType::u32) {  // unsigned: the ops whose result depends on the sign
    switch (op.kind) {
      case OpKind::divide: return uy == 0 ? 4294967295.0 : double(ux / uy);
      case OpKind::remainder: return uy == 0 ? double(ux) : double(ux % uy);
      case OpKind::maximum: return double(std::max(ux, uy));
      case OpKind::minimum: return double(std::min(ux, uy));
      case OpKind::power: {
        uint32_t r = 1, base = ux;
        for (uint32_t e = uy; e; e >>= 1, base *= base)
          if (e & 1) r *= base;
        return double(r);
      }
      default: break;
    }
  }
  switch (op.kind) {
    case OpKind::add: return int32_t(ux + uy);
    case OpKind::subtract: return int32_t(ux - uy);
    case OpKind::multiply: return int32_t(ux * uy);
    case OpKind::divide:
      if (y == 0) return -1;
      if (x == INT32_MIN && y == -1) return x;
      return x / y;
    case OpKind::remainder:  // x - (x / y) y with the division above
      if (y == 0) return x;
      if (x == INT32_MIN && y == -1) return 0;
      return x % y;
    case OpKind::maximum: return std::max(x, y);
    case OpKind::minimum: return std::min(x, y);
    case OpKind::power: {
      if (y < 0) return x == 1 ? 1 : x == -1 ? (y % 2 ? -1 : 1) : 0;
      uint32_t r = 1, base = ux;
      for (uint32_t e = uint32_t(y); e; e >>= 1, base *= base)
        if (e & 1) r *= base;
      return int32_t(r);
    }
    case OpKind::and_: return x & y;
    case OpKind::or_: return x | y;
    case OpKind::xor_: return x ^ y;
    case OpKind::shift_left: return uy >= 32 ? 0 : int32_t(ux << uy);
    case OpKind::shift_right_logical:  // of the type's bits: an s8 shifts in zeros from bit 7
      if (t == DType::s8) return uy >= 8 ? 0 : int32_t((ux & 0xffu) >> uy);
      return uy >= 32 ? 0 : int32_t(ux >> uy);
    case OpKind::shift_right_arithmetic: return x >> (uy >= 32 ? 31 : uy);
    default: break;
  }
  throw std::logic_error("internal error: float op on integers");
}

double combine(Combiner c, DType t, double a, double b) {
  const bool fl = is_float(t);
  switch (c) {
    case Combiner::add: return fl ? a + b : double(int32_t(uint32_t(i32(a)) + uint32_t(i32(b))));
    case Combiner::multiply: return fl ? a * b : double(int32_t(uint32_t(i32(a)) * uint32_t(i32(b))));
    case Combiner::maximum: return std::isnan(a) || std::isnan(b) ? NAN : std::max(a, b);
    case Combiner::minimum: return std::isnan(a) || std::isnan(b) ? NAN : std::min(a, b);
    case Combiner::and_: return t == DType::pred ? double(a != 0 && b != 0) : canonicalize_value(t, double(i32(a) & i32(b)));
    case Combiner::or_: return t == DType::pred ? double(a != 0 || b != 0) : canonicalize_value(t, double(i32(a) | i32(b)));
    case Combiner::replace: return b;
  }
  return 0;
}

// XLA's gather and scatter. An element of the result (gather) or of the
// updates (scatter): its batch coordinates (those not at the offset places)
// pick an index vector, whose components start the slice in the
// start_index_map dimensions (gather clamps the start so that the slice
// fits; scatter drops an update whose window does not fit); a batching
// dimension starts at its paired batch coordinate; the window coordinates
// add on. Scatter applies the updates in row-major order.
void indexed(const Op& op, const std::vector<const Tensor*>& in, Tensor& r) {
  const GatherDims& g = op.gather;
  const bool gather = op.kind == OpKind::gather;
  const Tensor& a = *in[0];
  const Tensor& ix = *in[1];
  const std::vector<int64_t>& ad = a.type.dims;
  const size_t rank = ad.size(), ir = ix.type.dims.size(), ivd = size_t(g.index_vector_dim);
  const Type& space = gather ? op.type : in[2]->type;
  auto has = [](const std::vector<int64_t>& v, int64_t x) { return std::find(v.begin(), v.end(), x) != v.end(); };
  std::vector<int64_t> window, size(rank, 1);
  for (size_t d = 0; d < rank; ++d)
    if (!has(g.collapsed, int64_t(d)) && !has(g.operand_batching, int64_t(d))) window.push_back(int64_t(d));
  for (size_t k = 0; k < window.size(); ++k)
    size[size_t(window[k])] = gather ? g.slice_sizes[size_t(window[k])] : space.dims[size_t(g.offset[k])];
  const auto as = strides_of(ad), xs = strides_of(ix.type.dims);
  if (!gather) r.v = a.v;
  size_t e = 0;
  std::vector<int64_t> batch, win, ipos(ir), start(rank);
  for_each_index(space.dims, [&](const auto& idx) {
    batch.clear(), win.clear();
    for (size_t p = 0; p < idx.size(); ++p) (has(g.offset, int64_t(p)) ? win : batch).push_back(idx[p]);
    for (size_t d = 0, b = 0; d < ir; ++d) ipos[d] = d == ivd ? 0 : batch[b++];
    std::fill(start.begin(), start.end(), 0);
    bool fits = true;
    for (size_t k = 0; k < g.start_index_map.size(); ++k) {
      if (ivd < ir) ipos[ivd] = int64_t(k);
      const size_t d = size_t(g.start_index_map[k]);
      const int64_t v = int64_t(ix.v[size_t(offset(ipos, xs))]), last = ad[d] - size[d];
      start[d] = gather ? std::clamp<int64_t>(v, 0, std::max<int64_t>(last, 0)) : v;
      fits &= start[d] >= 0;
    }
    for (size_t k = 0; k < g.operand_batching.size(); ++k) start[size_t(g.operand_batching[k])] = ipos[size_t(g.index_batching[k])];
    for (size_t d = 0; d < rank; ++d) fits &= start[d] + size[d] <= ad[d];  // an inserted dimension of 0 fits nothing
    for (size_t k = 0; k < window.size(); ++k) start[size_t(window[k])] += win[k];
    const size_t at = size_t(offset(start, as));
    if (gather) {
      r.v[e] = a.v[at];
    } else if (fits) {
      r.v[at] = combine(op.combiner, op.type.dtype, r.v[at], in[2]->v[e]);
    }
    ++e;
  });
}

}  // namespace

Tensor evaluate(const Op& op, const std::vector<const Tensor*>& in) {
  Tensor r{op.type, std::vector<double>(size_t(op.type.elements()))};
  const auto rs = strides_of(op.type.dims);
  auto at = [&](const Tensor& t, const std::vector<int64_t>& idx) { return t.v[offset(idx, strides_of(t.type.dims))]; };
  switch (op.kind) {
    case OpKind::parameter:
    case OpKind::while_:
    case OpKind::get_tuple_element: throw std::logic_error(fmt::format("internal error: evaluate({})", op_name(op.kind)));
    case OpKind::constant:
      for (size_t i = 0; i < r.v.size(); ++i) r.v[i] = op.literal.size() == 1 ? op.literal[0] : op.literal[i];
      break;
    case OpKind::iota:
      for_each_index(op.type.dims, [&](const auto& idx) { r.v[offset(idx, rs)] = double(idx[op.index]); });
      break;
    case OpKind::broadcast: {
      const Tensor& a = *in[0];
      const auto as = strides_of(a.type.dims);
      for_each_index(op.type.dims, [&](const auto& idx) {
        int64_t o = 0;
        for (size_t i = 0; i < op.dims.size(); ++i) o += (a.type.dims[i] == 1 ? 0 : idx[op.dims[i]]) * as[i];
        r.v[offset(idx, rs)] = a.v[o];
      });
      break;
    }
    case OpKind::reshape: r.v = in[0]->v; break;
    case OpKind::transpose: {
      const Tensor& a = *in[0];
      const auto as = strides_of(a.type.dims);
      for_each_index(op.type.dims, [&](const auto& idx) {
        int64_t o = 0;
        for (size_t i = 0; i < idx.size(); ++i) o += idx[i] * as[op.dims[i]];
        r.v[offset(idx, rs)] = a.v[o];
      });
      break;
    }
    case OpKind::slice: {
      const Tensor& a = *in[0];
      const auto as = strides_of(a.type.dims);
      for_each_index(op.type.dims, [&](const auto& idx) {
        int64_t o = 0;
        for (size_t i = 0; i < idx.size(); ++i) o += (op.lo[i] + idx[i] * op.strides[i]) * as[i];
        r.v[offset(idx, rs)] = a.v[o];
      });
      break;
    }
    case OpKind::pad: {
      const Tensor& a = *in[0];
      std::fill(r.v.begin(), r.v.end(), in[1]->v[0]);
      for_each_index(a.type.dims, [&](const auto& idx) {
        int64_t o = 0;
        for (size_t i = 0; i < idx.size(); ++i) {
          const int64_t p = op.lo[i] + idx[i] * (op.interior[i] + 1);
          if (p < 0 || p >= op.type.dims[i]) return;
          o += p * rs[i];
        }
        r.v[o] = at(a, idx);
      });
      break;
    }
    case OpKind::concatenate: {
      int64_t base = 0;
      for (const Tensor* t : in) {
        for_each_index(t->type.dims, [&](const auto& idx) {
          auto j = idx;
          j[op.index] += base;
          r.v[offset(j, rs)] = at(*t, idx);
        });
        base += t->type.dims[op.index];
      }
      break;
    }
    case OpKind::reverse:
      for_each_index(op.type.dims, [&](const auto& idx) {
        auto j = idx;
        for (int64_t d : op.dims) j[d] = op.type.dims[d] - 1 - j[d];
        r.v[offset(idx, rs)] = at(*in[0], j);
      });
      break;
    case OpKind::select:
      for (size_t i = 0; i < r.v.size(); ++i) r.v[i] = in[0]->v[i] != 0 ? in[1]->v[i] : in[2]->v[i];
      break;
    case OpKind::clamp:
      for (size_t i = 0; i < r.v.size(); ++i) {
        const double lo = in[0]->v.size() == 1 ? in[0]->v[0] : in[0]->v[i];
        const double hi = in[2]->v.size() == 1 ? in[2]->v[0] : in[2]->v[i];
        const double x = in[1]->v[i];
        r.v[i] = std::isnan(x) || std::isnan(lo) || std::isnan(hi) ? NAN : std::min(std::max(x, lo), hi);
      }
      break;
    case OpKind::dot: {
      const Tensor& a = *in[0];
      const Tensor& b = *in[1];
      const auto as = strides_of(a.type.dims), bs = strides_of(b.type.dims);
      std::vector<int64_t> afree, bfree, kdims;
      auto has = [](const std::vector<int64_t>& v, int64_t x) { return std::find(v.begin(), v.end(), x) != v.end(); };
      for (size_t d = 0; d < a.type.dims.size(); ++d)
        if (!has(op.lhs_batch, d) && !has(op.lhs_contract, d)) afree.push_back(d);
      for (size_t d = 0; d < b.type.dims.size(); ++d)
        if (!has(op.rhs_batch, d) && !has(op.rhs_contract, d)) bfree.push_back(d);
      for (int64_t d : op.lhs_contract) kdims.push_back(a.type.dims[d]);
      const bool fl = is_float(op.type.dtype);
      for_each_index(op.type.dims, [&](const auto& idx) {
        int64_t ao = 0, bo = 0;
        size_t p = 0;
        for (size_t i = 0; i < op.lhs_batch.size(); ++i, ++p) ao += idx[p] * as[op.lhs_batch[i]], bo += idx[p] * bs[op.rhs_batch[i]];
        for (int64_t d : afree) ao += idx[p++] * as[d];
        for (int64_t d : bfree) bo += idx[p++] * bs[d];
        double sum = 0;
        uint64_t isum = 0;  // integer dots wrap, as XLA's do: exact modulo 2^64, then the result type's width
        for_each_index(kdims, [&](const auto& k) {
          int64_t ak = ao, bk = bo;
          for (size_t i = 0; i < k.size(); ++i) ak += k[i] * as[op.lhs_contract[i]], bk += k[i] * bs[op.rhs_contract[i]];
          if (fl)
            sum += a.v[ak] * b.v[bk];
          else
            isum += uint64_t(int64_t(a.v[ak])) * uint64_t(int64_t(b.v[bk]));
        });
        double v = sum;
        if (!fl) {
          switch (op.type.dtype) {
            case DType::s32: v = double(int32_t(uint32_t(isum))); break;
            case DType::u32: v = double(uint32_t(isum)); break;
            case DType::s8: v = double(int8_t(uint8_t(isum))); break;
            default: v = double(int64_t(isum)); break;
          }
        }
        r.v[offset(idx, rs)] = v;
      });
      break;
    }
    case OpKind::convolution: {
      const Tensor& x = *in[0];
      const Tensor& k = *in[1];
      const ConvDims& c = op.conv;
      const auto xs = strides_of(x.type.dims), ks = strides_of(k.type.dims);
      const size_t ns = c.in_spatial.size();
      const int64_t cout = k.type.dims[c.k_out], cin_g = k.type.dims[c.k_in];
      const int64_t fg_out = cout / op.feature_groups, bg_out = cout / op.batch_groups;
      const int64_t batch_per_group = x.type.dims[c.in_batch] / op.batch_groups;
      std::vector<int64_t> kwin;
      for (size_t i = 0; i < ns; ++i) kwin.push_back(op.window[i]);
      const bool fl = is_float(op.type.dtype);
      for_each_index(op.type.dims, [&](const auto& idx) {
        const int64_t b = idx[c.out_batch], of = idx[c.out_feature];
        const int64_t g = of / fg_out, gb = of / bg_out;
        const int64_t xb = gb * batch_per_group + b;
        double sum = 0;
        int64_t isum = 0;
        for_each_index(kwin, [&](const auto& kk) {
          int64_t xo = xb * xs[c.in_batch], ko = of * ks[c.k_out];
          for (size_t i = 0; i < ns; ++i) {
            const int64_t pos = idx[c.out_spatial[i]] * op.strides[i] - op.lo[i] + kk[i] * op.rhs_dilation[i];
            if (pos < 0 || pos % op.lhs_dilation[i]) return;
            const int64_t xi = pos / op.lhs_dilation[i];
            if (xi >= x.type.dims[c.in_spatial[i]]) return;
            xo += xi * xs[c.in_spatial[i]];
            ko += kk[i] * ks[c.k_spatial[i]];
          }
          for (int64_t ci = 0; ci < cin_g; ++ci) {
            const double xv = x.v[xo + (g * cin_g + ci) * xs[c.in_feature]], kv = k.v[ko + ci * ks[c.k_in]];
            if (fl)
              sum += xv * kv;
            else
              isum += int64_t(xv) * int64_t(kv);
          }
        });
        r.v[offset(idx, rs)] = fl ? sum : double(isum);
      });
      break;
    }
    case OpKind::all_reduce:  // on one device: every group is that device alone
    case OpKind::all_gather:
    case OpKind::reduce_scatter:
    case OpKind::all_to_all:
      r.v = in[0]->v;
      break;
    case OpKind::collective_permute:  // on one device: itself, or nothing (zeros)
      if (!op.groups.empty()) r.v = in[0]->v;
      break;
    case OpKind::reduce: {
      const Tensor& a = *in[0];
      std::fill(r.v.begin(), r.v.end(), in[1]->v[0]);
      for_each_reduced(a.type.dims, op.dims, rs, [&](size_t i, size_t o) { r.v[o] = combine(op.combiner, op.type.dtype, r.v[o], a.v[i]); });
      break;
    }
    case OpKind::arg_reduce: {
      // XLA's argmax/argmin comparator: a candidate wins if it is more
      // extreme, or NaN against a number, or ties (both NaN) with a smaller
      // index. The init pair takes part like any element.
      const Tensor &a = *in[0], &ix = *in[1];
      const bool max = op.combiner == Combiner::maximum;
      std::vector<double> best(r.v.size(), in[2]->v[0]);
      std::fill(r.v.begin(), r.v.end(), in[3]->v[0]);
      for_each_reduced(a.type.dims, op.dims, rs, [&](size_t i, size_t o) {
        const double c = a.v[i], b = best[o], ci = ix.v[i];
        const bool wins = std::isnan(b) ? std::isnan(c) && ci < r.v[o]
                          : std::isnan(c) ? true
                                          : (max ? c > b : c < b) || (c == b && ci < r.v[o]);
        if (wins) best[o] = c, r.v[o] = ci;
      });
      break;
    }
    case OpKind::reduce_window: {
      const Tensor& a = *in[0];
      for_each_index(op.type.dims, [&](const auto& idx) {
        double acc = in[1]->v[0];
        for_each_index(op.window, [&](const auto& w) {
          std::vector<int64_t> j(idx.size());
          for (size_t d = 0; d < idx.size(); ++d) {
            const int64_t pos = idx[d] * op.strides[d] - op.lo[d] + w[d] * op.rhs_dilation[d];
            if (pos < 0 || pos % op.lhs_dilation[d]) return;
            j[d] = pos / op.lhs_dilation[d];
            if (j[d] >= a.type.dims[d]) return;
          }
          acc = combine(op.combiner, op.type.dtype, acc, at(a, j));
        });
        r.v[offset(idx, rs)] = acc;
      });
      break;
    }
    case OpKind::gather:
    case OpKind::scatter:
      indexed(op, in, r);
      break;
    case OpKind::dynamic_slice:
    case OpKind::dynamic_update_slice: {  // each start clamped so that the piece fits (XLA)
      const bool upd = op.kind == OpKind::dynamic_update_slice;
      const Tensor& x = *in[0];
      const Type& piece = upd ? in[1]->type : op.type;
      std::vector<int64_t> lo;
      for (size_t k = 0; k < x.type.dims.size(); ++k)
        lo.push_back(std::clamp<int64_t>(int64_t(in[(upd ? 2 : 1) + k]->v[0]), 0, x.type.dims[k] - piece.dims[k]));
      if (upd) r.v = x.v;
      const auto xs = strides_of(x.type.dims), ps = strides_of(piece.dims);
      for_each_index(piece.dims, [&](const std::vector<int64_t>& idx) {
        std::vector<int64_t> j = idx;
        for (size_t k = 0; k < j.size(); ++k) j[k] += lo[k];
        if (upd) r.v[size_t(offset(j, xs))] = in[1]->v[size_t(offset(idx, ps))];
        else r.v[size_t(offset(idx, ps))] = x.v[size_t(offset(j, xs))];
      });
      break;
    }
    case OpKind::select_and_scatter: {
      // XLA's semantics: in each window, the in-bounds elements in row-major
      // order; a candidate replaces the selected one unless
      // compare(selected, candidate) holds; the selected position combines
      // the window's source value into the result (init everywhere first).
      const Tensor& a = *in[0];
      const Tensor& src = *in[1];
      std::fill(r.v.begin(), r.v.end(), in[2]->v[0]);
      size_t s = 0;
      for_each_index(src.type.dims, [&](const auto& widx) {
        bool have = false;
        double best = 0;
        std::vector<int64_t> sel(widx.size()), j(widx.size());
        for_each_index(op.window, [&](const auto& w) {
          for (size_t d = 0; d < widx.size(); ++d) {
            j[d] = widx[d] * op.strides[d] - op.lo[d] + w[d];
            if (j[d] < 0 || j[d] >= a.type.dims[d]) return;
          }
          const double v = at(a, j);
          if (!have || compare(op.direction, best, v) == 0) have = true, best = v, sel = j;
        });
        if (have) {
          double& o = r.v[offset(sel, rs)];
          o = combine(op.combiner, op.type.dtype, o, src.v[s]);
        }
        ++s;
      });
      break;
    }
    default:
      if (is_unary(op.kind)) {
        for (size_t i = 0; i < r.v.size(); ++i) r.v[i] = unary(op.kind, in[0]->type.dtype, op.type.dtype, in[0]->v[i]);
      } else if (is_binary(op.kind)) {
        for (size_t i = 0; i < r.v.size(); ++i) r.v[i] = binary(op, in[0]->type.dtype, in[0]->v[i], in[1]->v[i]);
      } else {
        throw std::logic_error(fmt::format("internal error: no interpreter rule for {}", op_name(op.kind)));
      }
  }
  for (double& v : r.v) v = canonicalize_value(op.type.dtype, v);
  return r;
}

const Tensor* ConstantFolder::value(int v) {
  std::vector<int> pending = {v};
  while (!pending.empty()) {
    const int x = pending.back();
    if (known_.count(x)) {
      pending.pop_back();
      continue;
    }
    const Op& op = f_.ops[size_t(x)];
    if (op.kind == OpKind::parameter || is_collective(op.kind) || op.kind == OpKind::while_ || op.kind == OpKind::get_tuple_element ||
        op.type.elements() > limit_) {
      known_[x] = std::nullopt;
      pending.pop_back();
      continue;
    }
    bool ready = true, known = true;
    std::vector<const Tensor*> in;
    for (int a : op.operands) {
      auto it = known_.find(a);
      if (it == known_.end()) ready = false, pending.push_back(a);
      else if (!it->second) known = false;
      else in.push_back(&*it->second);
    }
    if (!ready) continue;
    pending.pop_back();
    known_[x] = known ? std::optional<Tensor>(evaluate(op, in)) : std::nullopt;
  }
  return known_[v] ? &*known_[v] : nullptr;
}

std::optional<double> ConstantFolder::scalar(int v) {
  const Tensor* t = value(v);
  if (!t || t->v.size() != 1) return std::nullopt;
  return t->v[0];
}

namespace {

// Device `dev`'s tile of a global tensor (to_local), or the tile written
// back into it.
void move_tile(Tensor& global, Tensor& local, const std::vector<int64_t>& tiles, int64_t dev, bool to_local) {
  const size_t rank = local.type.dims.size();
  std::vector<int64_t> at(rank, 0);
  for (size_t d = rank; d-- > 0;) {
    at[d] = dev % tiles[d] * local.type.dims[d];
    dev /= tiles[d];
  }
  const auto gs = strides_of(global.type.dims), ls = strides_of(local.type.dims);
  for_each_index(local.type.dims, [&](const std::vector<int64_t>& idx) {
    std::vector<int64_t> g = idx;
    for (size_t d = 0; d < rank; ++d) g[d] += at[d];
    double& gv = global.v[size_t(offset(g, gs))];
    double& lv = local.v[size_t(offset(idx, ls))];
    if (to_local) lv = gv;
    else gv = lv;
  });
}

bool has_collective(const Function& f) {
  for (const Op& op : f.ops) {
    if (is_collective(op.kind)) return true;
    for (const Function& g : op.regions)
      if (has_collective(g)) return true;
  }
  return false;
}

using PerDevice = std::vector<std::vector<Tensor>>;  // [device][value]
PerDevice run_devices(const Function& f, const PerDevice& local);

// A while loop on every device at once: each leaves it when its condition
// is false. Devices may leave at different trips only if the body has no
// collective (one that some devices skip would never complete).
PerDevice run_while(const Op& op, PerDevice state) {
  constexpr int64_t kMaxTrips = 1000000;  // an endless loop ends with an error, not a hang
  const size_t n = state.size();
  for (int64_t trip = 0;; ++trip) {
    if (trip == kMaxTrips) throw Error(fmt::format("{}: the while loop runs more than {} trips (the interpreter's limit)", op.loc, kMaxTrips));
    const PerDevice go = run_devices(op.regions[0], state);
    size_t active = 0;
    for (size_t d = 0; d < n; ++d) active += go[d][0].v[0] != 0;
    if (active == 0) return state;
    if (active != n && has_collective(op.regions[1]))
      throw Error(fmt::format("{}: devices leave the while loop at different trips, and its body has collectives", op.loc));
    PerDevice next = run_devices(op.regions[1], state);
    for (size_t d = 0; d < n; ++d)
      if (go[d][0].v[0] != 0) state[d] = std::move(next[d]);
  }
}

// Runs f on every device from each device's own parameter values; returns
// each device's results.
PerDevice run_devices(const Function& f, const PerDevice& local) {
  const int64_t n = int64_t(local.size());
  PerDevice vals(size_t(n), std::vector<Tensor>(f.ops.size()));
  std::map<int, PerDevice> loops;  // a while op's final state: [device][element]
  for (size_t i = 0; i < f.ops.size(); ++i) {
    const Op& op = f.ops[i];
    if (op.kind == OpKind::while_) {
      PerDevice init = PerDevice(size_t(n));
      for (int64_t d = 0; d < n; ++d)
        for (int o : op.operands) init[size_t(d)].push_back(vals[size_t(d)][size_t(o)]);
      loops[int(i)] = run_while(op, std::move(init));
      continue;
    }
    for (int64_t d = 0; d < n; ++d) {
      Tensor& out = vals[size_t(d)][i];
      if (op.kind == OpKind::parameter) {
        out = local[size_t(d)][size_t(op.index)];
      } else if (op.kind == OpKind::get_tuple_element) {
        out = loops.at(op.operands[0])[size_t(d)][size_t(op.index)];
      } else if (!is_collective(op.kind)) {
        std::vector<const Tensor*> in;
        for (int o : op.operands) in.push_back(&vals[size_t(d)][size_t(o)]);
        out = evaluate(op, in);
      }
    }
    if (op.kind == OpKind::collective_permute) {  // a device no pair targets gets zeros
      for (int64_t d = 0; d < n; ++d) vals[size_t(d)][i] = Tensor{op.type, std::vector<double>(size_t(op.type.elements()), 0.0)};
      for (const auto& pr : op.groups) vals[size_t(pr[1])][i] = vals[size_t(pr[0])][size_t(op.operands[0])];
      continue;
    }
    if (!is_collective(op.kind)) continue;
    const Type& it = f.ops[size_t(op.operands[0])].type;
    const size_t dim = size_t(op.index);
    // Piece k of a tensor split along the dimension into n (reduce-scatter, all-to-all).
    auto piece = [&](const Tensor& x, size_t k, size_t n) {
      Type pt = it;
      pt.dims[dim] /= int64_t(n);
      Tensor p{pt, std::vector<double>(size_t(pt.elements()))};
      const auto xs = strides_of(it.dims), ps = strides_of(pt.dims);
      for_each_index(pt.dims, [&](const std::vector<int64_t>& idx) {
        std::vector<int64_t> o = idx;
        o[dim] += int64_t(k) * pt.dims[dim];
        p.v[size_t(offset(idx, ps))] = x.v[size_t(offset(o, xs))];
      });
      return p;
    };
    // The pieces side by side along the dimension, in order (all-gather, all-to-all).
    auto concat = [&](const std::vector<Tensor>& ps) {
      Tensor cat{op.type, std::vector<double>(size_t(op.type.elements()))};
      const auto cs = strides_of(op.type.dims);
      for (size_t k = 0; k < ps.size(); ++k) {
        const auto ks = strides_of(ps[k].type.dims);
        for_each_index(ps[k].type.dims, [&](const std::vector<int64_t>& idx) {
          std::vector<int64_t> o = idx;
          o[dim] += int64_t(k) * ps[k].type.dims[dim];
          cat.v[size_t(offset(o, cs))] = ps[k].v[size_t(offset(idx, ks))];
        });
      }
      return cat;
    };
    for (const auto& g : op.groups) {
      auto x = [&](size_t k) -> const Tensor& { return vals[size_t(g[k])][size_t(op.operands[0])]; };
      if (op.kind == OpKind::all_gather) {  // the members' values concatenated, in group order
        std::vector<Tensor> ps;
        for (size_t k = 0; k < g.size(); ++k) ps.push_back(x(k));
        const Tensor cat = concat(ps);
        for (int64_t d : g) vals[size_t(d)][i] = cat;
      } else if (op.kind == OpKind::all_to_all) {  // member p gets piece p of every member's value, in group order
        for (size_t p = 0; p < g.size(); ++p) {
          std::vector<Tensor> ps;
          for (size_t k = 0; k < g.size(); ++k) ps.push_back(piece(x(k), p, g.size()));
          vals[size_t(g[p])][i] = concat(ps);
        }
      } else {  // all-reduce; reduce-scatter keeps member p's piece p of the combination
        Tensor sum = x(0);
        for (size_t k = 1; k < g.size(); ++k)
          for (size_t e = 0; e < sum.v.size(); ++e)
            sum.v[e] = canonicalize_value(op.type.dtype, combine(op.combiner, op.type.dtype, sum.v[e], x(k).v[e]));
        for (size_t p = 0; p < g.size(); ++p)
          vals[size_t(g[p])][i] = op.kind == OpKind::reduce_scatter ? piece(sum, p, g.size()) : sum;
      }
    }
  }
  PerDevice out = PerDevice(size_t(n));
  for (int64_t d = 0; d < n; ++d)
    for (int r : f.results) out[size_t(d)].push_back(vals[size_t(d)][size_t(r)]);
  return out;
}

std::vector<Tensor> interpret_spmd(const Function& f, const std::vector<Tensor>& inputs) {
  const auto params = f.params();
  const int64_t n = f.devices;
  PerDevice local = PerDevice(size_t(n));
  for (size_t k = 0; k < params.size(); ++k) {
    Tensor g = inputs[k];
    if (g.type != f.param_global_type(k))
      throw Error(fmt::format("input {} is {}, the program wants {}", k, g.type.str(), f.param_global_type(k).str()));
    const auto& tiles = k < f.param_tiles.size() ? f.param_tiles[k] : std::vector<int64_t>{};
    for (int64_t d = 0; d < n; ++d) {
      if (tiles.empty()) {
        local[size_t(d)].push_back(g);
      } else {
        const Type& lt = f.ops[size_t(params[k])].type;
        local[size_t(d)].push_back(Tensor{lt, std::vector<double>(size_t(lt.elements()))});
        move_tile(g, local[size_t(d)].back(), tiles, tile_index(f.param_tile_of, k, d), true);
      }
    }
  }
  PerDevice res = run_devices(f, local);
  std::vector<Tensor> out;
  for (size_t r = 0; r < f.results.size(); ++r) {
    const auto& tiles = r < f.result_tiles.size() ? f.result_tiles[r] : std::vector<int64_t>{};
    if (tiles.empty()) {
      out.push_back(res[0][r]);
      continue;
    }
    const Type gt = f.result_global_type(r);
    Tensor g{gt, std::vector<double>(size_t(gt.elements()))};
    for (int64_t d = 0; d < n; ++d) move_tile(g, res[size_t(d)][r], tiles, tile_index(f.result_tile_of, r, d), false);
    out.push_back(std::move(g));
  }
  return out;
}

}  // namespace

std::vector<Tensor> interpret(const Function& f, const std::vector<Tensor>& inputs) {
  const auto params = f.params();
  if (f.devices > 1) {
    if (inputs.size() != params.size())
      throw Error(fmt::format("the program takes {} inputs, {} given", params.size(), inputs.size()));
    return interpret_spmd(f, inputs);
  }
  if (inputs.size() != params.size())
    throw Error(fmt::format("the program takes {} inputs, {} given", params.size(), inputs.size()));
  std::vector<Tensor> vals(f.ops.size());
  // Free each value after its last use: big programs stay small in memory.
  std::vector<size_t> last(f.ops.size(), 0);
  for (size_t i = 0; i < f.ops.size(); ++i)
    for (int o : f.ops[i].operands) last[o] = i;
  for (int r : f.results) last[r] = f.ops.size();
  std::map<int, std::vector<Tensor>> loops;  // a while op's final state
  for (size_t i = 0; i < f.ops.size(); ++i) {
    const Op& op = f.ops[i];
    if (op.kind == OpKind::parameter) {
      const Tensor& t = inputs[op.index];
      if (t.type != op.type)
        throw Error(fmt::format("input {} is {}, the program wants {}", op.index, t.type.str(), op.type.str()));
      vals[i] = t;
    } else if (op.kind == OpKind::while_) {
      PerDevice init(1);
      for (int o : op.operands) init[0].push_back(vals[size_t(o)]);
      loops[int(i)] = std::move(run_while(op, std::move(init))[0]);
    } else if (op.kind == OpKind::get_tuple_element) {
      vals[i] = loops.at(op.operands[0])[size_t(op.index)];
    } else {
      std::vector<const Tensor*> in;
      for (int o : op.operands) in.push_back(&vals[o]);
      vals[i] = evaluate(op, in);
    }
    for (int o : op.operands)
      if (last[o] == i) vals[o] = Tensor{}, loops.erase(o);
  }
  std::vector<Tensor> out;
  for (int r : f.results) out.push_back(vals[r]);
  return out;
}

Difference compare(const Tensor& got, const Tensor& ref) {
  if (got.v.size() != ref.v.size()) throw std::logic_error("internal error: compare() of different sizes");
  Difference d;
  double num = 0, den = 0;
  bool unmatched = false;
  for (size_t i = 0; i < ref.v.size(); ++i) {
    const double r = ref.v[i], g = got.v[i];
    if (!std::isfinite(r) || !std::isfinite(g)) {
      const bool same = (std::isnan(r) && std::isnan(g)) || r == g;
      unmatched |= !same;
      d.differing += !same;
      if (!same) d.max_abs = INFINITY;  // inf against a number, or a NaN against anything else
      continue;
    }
    num += (g - r) * (g - r), den += r * r;
    d.max_abs = std::max(d.max_abs, std::fabs(g - r));
    d.differing += g != r;
  }
  d.relative = unmatched ? INFINITY : den > 0 ? std::sqrt(num / den) : std::sqrt(num);
  return d;
}

// ---------------------------------------------------------------- npy and bytes

std::vector<uint8_t> to_bytes(const Tensor& t) {
  const int sz = dtype_bytes(t.type.dtype);
  std::vector<uint8_t> b(t.v.size() * sz);
  for (size_t i = 0; i < t.v.size(); ++i) {
    const double v = t.v[i];
    uint8_t* p = b.data() + i * sz;
    switch (t.type.dtype) {
      case DType::pred: p[0] = v != 0; break;
      case DType::s8: p[0] = uint8_t(int8_t(v)); break;
      case DType::s32: {
        const int32_t x = int32_t(v);
        std::memcpy(p, &x, 4);
        break;
      }
      case DType::u32: {
        const uint32_t x = uint32_t(int64_t(v));
        std::memcpy(p, &x, 4);
        break;
      }
      case DType::f32: {
        const float x = float(v);
        std::memcpy(p, &x, 4);
        break;
      }
      case DType::bf16: {
        const float x = float(canonicalize_value(DType::bf16, v));
        uint32_t u;
        std::memcpy(&u, &x, 4);
        const uint16_t h = uint16_t(u >> 16);
        std::memcpy(p, &h, 2);
        break;
      }
      case DType::f16: {
        const float x = float(v);
        uint32_t u;
        std::memcpy(&u, &x, 4);
        const uint16_t h = isa::f32_bits_to_f16(u);
        std::memcpy(p, &h, 2);
        break;
      }
    }
  }
  return b;
}

Tensor from_bytes(const Type& type, const std::vector<uint8_t>& b) {
  const int sz = dtype_bytes(type.dtype);
  if (int64_t(b.size()) != type.elements() * sz) throw Error("internal error: from_bytes size");
  Tensor t{type, std::vector<double>(size_t(type.elements()))};
  for (size_t i = 0; i < t.v.size(); ++i) {
    const uint8_t* p = b.data() + i * sz;
    switch (type.dtype) {
      case DType::pred: t.v[i] = p[0] != 0; break;
      case DType::s8: t.v[i] = int8_t(p[0]); break;
      case DType::s32: {
        int32_t x;
        std::memcpy(&x, p, 4);
        t.v[i] = x;
        break;
      }
      case DType::u32: {
        uint32_t x;
        std::memcpy(&x, p, 4);
        t.v[i] = x;
        break;
      }
      case DType::f32: {
        float x;
        std::memcpy(&x, p, 4);
        t.v[i] = x;
        break;
      }
      case DType::bf16: {
        uint16_t h;
        std::memcpy(&h, p, 2);
        const uint32_t u = uint32_t(h) << 16;
        float x;
        std::memcpy(&x, &u, 4);
        t.v[i] = x;
        break;
      }
      case DType::f16: {
        uint16_t h;
        std::memcpy(&h, p, 2);
        const uint32_t u = isa::f16_to_f32_bits(h);
        float x;
        std::memcpy(&x, &u, 4);
        t.v[i] = x;
        break;
      }
    }
  }
  return t;
}

Tensor from_npy(const isa::NpyArray& a, const Type& expected, const std::string& where) {
  isa::TensorSymbol sym;
  sym.name = where;
  sym.dtype = isa_dtype(expected.dtype);
  for (int64_t d : expected.dims) sym.dims.push_back(uint64_t(d));
  return from_bytes(expected, isa::npy_to_tensor(a, sym, where));
}

isa::NpyArray to_npy(const Tensor& t) {
  isa::TensorSymbol sym;
  sym.dtype = isa_dtype(t.type.dtype);
  for (int64_t d : t.type.dims) sym.dims.push_back(uint64_t(d));
  return isa::tensor_to_npy(sym, to_bytes(t));
}

}  // namespace tpu::ir
