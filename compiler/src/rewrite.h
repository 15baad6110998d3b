// What the IR passes share (passes.cpp, lower_indexed.cpp): a Builder that
// appends ops to a new function, inferring their types, and rebuild(), the
// walk every pass is: old ops in order, each copied or expanded; and the
// appenders the importer uses too, which take the type and loc as given.
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "tpu/ir/ir.h"

namespace tpu::compiler::rewrite {

using namespace ir;

// Every offset of a window, in row-major order (the last dimension
// fastest), for lowerings that emit ops per window element: more than
// kMaxTaps is a clear error ("LOC: unsupported OP with a window of ...")
// rather than millions of ops.
constexpr int64_t kMaxTaps = 4096;
inline std::vector<std::vector<int64_t>> window_offsets(const std::vector<int64_t>& window, const std::string& loc, const std::string& op) {
  int64_t taps = 1;
  for (int64_t w : window) {
    if (w > kMaxTaps || taps * w > kMaxTaps)
      throw Error(fmt::format("{}: unsupported {} with a window of more than {} elements", loc.empty() ? "<ir>" : loc, op, kMaxTaps));
    taps *= w;
  }
  std::vector<std::vector<int64_t>> out;
  std::vector<int64_t> tap(window.size(), 0);
  for (int64_t t = 0; t < taps; ++t) {
    out.push_back(tap);
    for (size_t d = tap.size(); d-- > 0;) {
      if (++tap[d] < window[d]) break;
      tap[d] = 0;
    }
  }
  return out;
}

inline int append(Function& f, OpKind k, std::vector<int> operands, const Type& t, const std::string& loc) {
  Op o;
  o.kind = k, o.operands = std::move(operands), o.type = t, o.loc = loc;
  return f.add(std::move(o));
}
// v in every element of t: a scalar constant, broadcast.
inline int append_splat(Function& f, const Type& t, double v, const std::string& loc) {
  Op c;
  c.kind = OpKind::constant, c.type = {t.dtype, {}}, c.literal = {canonicalize_value(t.dtype, v)}, c.loc = loc;
  return append(f, OpKind::broadcast, {f.add(std::move(c))}, t, loc);
}
// x[lo:hi] with unit strides.
inline int append_slice(Function& f, int x, std::vector<int64_t> lo, std::vector<int64_t> hi, const std::string& loc) {
  Op sl;
  sl.kind = OpKind::slice, sl.operands = {x}, sl.strides.assign(lo.size(), 1), sl.loc = loc;
  sl.type = {f.ops[size_t(x)].type.dtype, {}};
  for (size_t k = 0; k < lo.size(); ++k) sl.type.dims.push_back(hi[k] - lo[k]);
  sl.lo = std::move(lo), sl.hi = std::move(hi);
  return f.add(std::move(sl));
}

// dynamic-slice (update < 0) or dynamic-update-slice of x with starts known
// at compile time, each clamped so that the piece of `sizes` fits (XLA): a
// slice, or an update whose starts are constants (the back end writes the
// piece alone, in place where it can).
inline int append_fixed_dynamic_slice(Function& f, int x, int update, const std::vector<int64_t>& sizes, const std::vector<double>& starts,
                                      const std::string& l) {
  const Type xt = f.ops[size_t(x)].type;
  const size_t r = xt.dims.size();
  std::vector<int64_t> lo(r), hi(r);
  for (size_t k = 0; k < r; ++k) {
    lo[k] = std::clamp<int64_t>(int64_t(starts[k]), 0, xt.dims[k] - sizes[k]);
    hi[k] = lo[k] + sizes[k];
  }
  if (update < 0) return append_slice(f, x, lo, hi, l);
  Op u;
  u.kind = OpKind::dynamic_update_slice, u.operands = {x, update}, u.type = xt, u.loc = l;
  for (int64_t s : lo) u.operands.push_back(append_splat(f, {DType::s32, {}}, double(s), l));
  return f.add(std::move(u));
}

// Builds a new function; every helper infers the result type.
struct Builder {
  Function f;
  std::string loc;

  int add(Op op) {
    if (op.loc.empty()) op.loc = loc;
    const bool typed = op.kind == OpKind::parameter || op.kind == OpKind::constant || op.kind == OpKind::iota ||
                       op.kind == OpKind::reshape || op.kind == OpKind::convert || op.kind == OpKind::bitcast_convert ||
                       op.kind == OpKind::broadcast || op.kind == OpKind::dynamic_slice ||
                       op.kind == OpKind::dot || op.kind == OpKind::convolution;
    const Type t = infer_type(f, op);
    if (!typed) op.type = t;
    return f.add(std::move(op));
  }
  const Type& type(int v) const { return f.ops[v].type; }

  int reshape(int x, std::vector<int64_t> dims) {
    if (type(x).dims == dims) return x;
    Op op;
    op.kind = OpKind::reshape;
    op.operands = {x};
    op.type = {type(x).dtype, std::move(dims)};
    return add(std::move(op));
  }
  int transpose(int x, std::vector<int64_t> perm) {
    bool identity = true;
    for (size_t i = 0; i < perm.size(); ++i) identity &= perm[i] == int64_t(i);
    if (identity) return x;
    Op op;
    op.kind = OpKind::transpose;
    op.operands = {x};
    op.dims = std::move(perm);
    return add(std::move(op));
  }
  int convert(int x, DType d) {
    if (type(x).dtype == d) return x;
    Op op;
    op.kind = OpKind::convert;
    op.operands = {x};
    op.type = {d, type(x).dims};
    return add(std::move(op));
  }
  int scalar(DType d, double v) {
    Op op;
    op.kind = OpKind::constant;
    op.type = {d, {}};
    op.literal = {canonicalize_value(d, v)};
    return add(std::move(op));
  }
  int broadcast(int x, std::vector<int64_t> dims, std::vector<int64_t> map) {
    Op op;
    op.kind = OpKind::broadcast;
    op.operands = {x};
    op.type = {type(x).dtype, std::move(dims)};
    op.dims = std::move(map);
    return add(std::move(op));
  }
  int unary(OpKind k, int a) {
    Op op;
    op.kind = k;
    op.operands = {a};
    return add(std::move(op));
  }
  int binary(OpKind k, int a, int b) {
    Op op;
    op.kind = k;
    op.operands = {a, b};
    return add(std::move(op));
  }
  int compare(Direction d, int a, int b) {
    Op op;
    op.kind = OpKind::compare, op.operands = {a, b}, op.direction = d;
    return add(std::move(op));
  }
  int select(int p, int a, int b) {
    Op op;
    op.kind = OpKind::select, op.operands = {p, a, b};
    return add(std::move(op));
  }
  int splat(DType d, double v, std::vector<int64_t> dims) { return broadcast(scalar(d, v), std::move(dims), {}); }
  int pad(int x, int value, std::vector<int64_t> lo, std::vector<int64_t> hi, std::vector<int64_t> interior) {
    bool none = true;
    for (size_t i = 0; i < lo.size(); ++i) none &= lo[i] == 0 && hi[i] == 0 && interior[i] == 0;
    if (none) return x;
    Op op;
    op.kind = OpKind::pad;
    op.operands = {x, value};
    op.lo = std::move(lo), op.hi = std::move(hi), op.interior = std::move(interior);
    return add(std::move(op));
  }
  int slice(int x, std::vector<int64_t> start, std::vector<int64_t> limit, std::vector<int64_t> stride) {
    const Type& t = type(x);
    bool identity = true;
    for (size_t i = 0; i < start.size(); ++i) identity &= start[i] == 0 && limit[i] == t.dims[i] && (stride[i] == 1 || t.dims[i] <= 1);
    if (identity) return x;
    Op op;
    op.kind = OpKind::slice;
    op.operands = {x};
    op.lo = std::move(start), op.hi = std::move(limit), op.strides = std::move(stride);
    return add(std::move(op));
  }
  int concat(const std::vector<int>& xs, int64_t dim) {
    if (xs.size() == 1) return xs[0];
    Op op;
    op.kind = OpKind::concatenate;
    op.operands = xs;
    op.index = dim;
    return add(std::move(op));
  }
  int dot3(int a, int b, DType out, Precision p) {  // [B,M,K] x [B,K,N] or [M,K] x [K,N]
    Op op;
    op.kind = OpKind::dot;
    op.operands = {a, b};
    if (type(a).dims.size() == 3) op.lhs_batch = {0}, op.rhs_batch = {0}, op.lhs_contract = {2}, op.rhs_contract = {1};
    else op.lhs_contract = {1}, op.rhs_contract = {0};
    op.precision = p;
    op.type.dtype = out;
    op.type.dims = infer_type(f, op).dims;
    return add(std::move(op));
  }
};

// A new function with `in`'s name and interface (parameter names, devices,
// tiles): a pass keeps the parameters and the results' order.
inline void copy_signature(const Function& in, Function& out) {
  out.name = in.name;
  out.param_names = in.param_names;
  out.devices = in.devices;
  out.param_tiles = in.param_tiles;
  out.result_tiles = in.result_tiles;
  out.param_tile_of = in.param_tile_of;
  out.result_tile_of = in.result_tile_of;
}

// Runs `expand` on every op; it returns the new value or -1 to copy the op.
template <typename Expand>
Function rebuild(const Function& in, Expand expand) {
  Builder b;
  copy_signature(in, b.f);
  std::vector<int> map(in.ops.size(), -1);
  for (size_t i = 0; i < in.ops.size(); ++i) {
    Op op = in.ops[i];
    for (int& o : op.operands) o = map[o];
    b.loc = op.loc;
    int v = expand(b, op);
    if (v < 0) v = b.f.add(std::move(op));
    map[i] = v;
  }
  for (int r : in.results) b.f.results.push_back(map[r]);
  return std::move(b.f);
}

}  // namespace tpu::compiler::rewrite
