// The IR's types, names, shape rules (infer_type), verifier, printer and parser.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>

#include "tpu/ir/ir.h"
#include "tpu/isa/half.h"

namespace tpu::ir {

const char* dtype_name(DType d) {
  switch (d) {
    case DType::pred: return "pred";
    case DType::s8: return "s8";
    case DType::s32: return "s32";
    case DType::bf16: return "bf16";
    case DType::f32: return "f32";
    case DType::u32: return "u32";
    case DType::f16: return "f16";
  }
  return "?";
}
bool is_float(DType d) { return d == DType::bf16 || d == DType::f16 || d == DType::f32; }
bool is_32bit(DType d) { return d == DType::s32 || d == DType::u32 || d == DType::f32; }
isa::Dtype isa_dtype(DType d) {
  switch (d) {
    case DType::pred: return isa::Dtype::pred;
    case DType::s8: return isa::Dtype::s8;
    case DType::s32: return isa::Dtype::s32;
    case DType::bf16: return isa::Dtype::bf16;
    case DType::f32: return isa::Dtype::f32;
    case DType::u32: return isa::Dtype::u32;
    case DType::f16: return isa::Dtype::f16;
  }
  return isa::Dtype::f32;
}

int dtype_bytes(DType d) {
  switch (d) {
    case DType::pred:
    case DType::s8: return 1;
    case DType::bf16:
    case DType::f16: return 2;
    default: return 4;
  }
}

int64_t Type::elements() const {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}
std::string Type::str() const { return fmt::format("{}[{}]", dtype_name(dtype), fmt::join(dims, ",")); }

const char* op_name(OpKind k) {
  static const char* const names[] = {
#define X(n) #n,
      TPU_IR_OPS(X)
#undef X
  };
  switch (k) {
    case OpKind::round_nearest_even: return "round-nearest-even";
    case OpKind::round_nearest_afz: return "round-nearest-afz";
    case OpKind::bitcast_convert: return "bitcast-convert";
    case OpKind::exponential_minus_one: return "exponential-minus-one";
    case OpKind::log_plus_one: return "log-plus-one";
    case OpKind::is_finite: return "is-finite";
    case OpKind::not_: return "not";
    case OpKind::and_: return "and";
    case OpKind::or_: return "or";
    case OpKind::xor_: return "xor";
    case OpKind::shift_left: return "shift-left";
    case OpKind::shift_right_arithmetic: return "shift-right-arithmetic";
    case OpKind::shift_right_logical: return "shift-right-logical";
    case OpKind::arg_reduce: return "arg-reduce";
    case OpKind::reduce_window: return "reduce-window";
    case OpKind::select_and_scatter: return "select-and-scatter";
    case OpKind::all_reduce: return "all-reduce";
    case OpKind::all_gather: return "all-gather";
    case OpKind::reduce_scatter: return "reduce-scatter";
    case OpKind::all_to_all: return "all-to-all";
    case OpKind::collective_permute: return "collective-permute";
    case OpKind::while_: return "while";
    case OpKind::dynamic_slice: return "dynamic-slice";
    case OpKind::dynamic_update_slice: return "dynamic-update-slice";
    case OpKind::get_tuple_element: return "get-tuple-element";
    default: return names[int(k)];
  }
}

bool is_unary(OpKind k) { return k >= OpKind::convert && k <= OpKind::not_; }
bool is_binary(OpKind k) { return k >= OpKind::add && k <= OpKind::compare; }
bool is_collective(OpKind k) { return k >= OpKind::all_reduce && k <= OpKind::collective_permute; }
bool is_elementwise(OpKind k) { return is_unary(k) || is_binary(k) || k == OpKind::select || k == OpKind::clamp; }

const char* combiner_name(Combiner c) {
  static const char* n[] = {"add", "multiply", "maximum", "minimum", "and", "or", "replace"};
  return n[int(c)];
}
double combiner_identity(Combiner c, DType d) {
  switch (c) {
    case Combiner::add: return 0;
    case Combiner::multiply: return 1;
    case Combiner::maximum: return is_float(d) ? -INFINITY : d == DType::s8 ? -128 : d == DType::pred || d == DType::u32 ? 0 : -2147483648.0;
    case Combiner::minimum: return is_float(d) ? INFINITY : d == DType::s8 ? 127 : d == DType::pred ? 1 : d == DType::u32 ? 4294967295.0 : 2147483647.0;
    case Combiner::and_: return d == DType::pred ? 1 : d == DType::u32 ? 4294967295.0 : -1;
    case Combiner::or_: return 0;
    case Combiner::replace: return 0;  // none: scatter needs none
  }
  return 0;
}
const char* direction_name(Direction d) {
  static const char* n[] = {"EQ", "NE", "LT", "LE", "GT", "GE"};
  return n[int(d)];
}
const char* precision_name(Precision p) {
  static const char* n[] = {"default", "high", "highest"};
  return n[int(p)];
}

bool GatherDims::operator==(const GatherDims& o) const {
  return offset == o.offset && collapsed == o.collapsed && start_index_map == o.start_index_map &&
         operand_batching == o.operand_batching && index_batching == o.index_batching && slice_sizes == o.slice_sizes &&
         index_vector_dim == o.index_vector_dim;
}

bool ConvDims::operator==(const ConvDims& o) const {
  return in_batch == o.in_batch && in_feature == o.in_feature && k_in == o.k_in && k_out == o.k_out &&
         out_batch == o.out_batch && out_feature == o.out_feature && in_spatial == o.in_spatial &&
         k_spatial == o.k_spatial && out_spatial == o.out_spatial;
}

std::vector<int> Function::params() const {
  std::vector<int> p;
  for (size_t i = 0; i < ops.size(); ++i)
    if (ops[i].kind == OpKind::parameter) {
      if (size_t(ops[i].index) >= p.size()) p.resize(ops[i].index + 1, -1);
      p[ops[i].index] = int(i);
    }
  return p;
}

double canonicalize_value(DType d, double v) {
  switch (d) {
    case DType::pred: return v != 0 ? 1 : 0;
    case DType::s8: return double(int8_t(uint8_t(int64_t(v) & 0xff)));
    case DType::s32: return double(int32_t(uint32_t(int64_t(v) & 0xffffffff)));
    case DType::u32: return double(uint32_t(int64_t(v) & 0xffffffff));
    case DType::f32: return double(float(v));
    case DType::bf16: {
      float f = float(v);
      uint32_t b;
      std::memcpy(&b, &f, 4);
      b = isa::round_f32_bits_to_bf16(b);
      std::memcpy(&f, &b, 4);
      return f;
    }
    case DType::f16: {
      float f = float(v);
      uint32_t b;
      std::memcpy(&b, &f, 4);
      b = std::isnan(f) ? 0x7fc00000u : isa::round_f32_bits_to_f16(b);
      std::memcpy(&f, &b, 4);
      return f;
    }
  }
  return v;
}

// ---------------------------------------------------------------- shape rules

namespace {

[[noreturn]] void bad(const Op& op, const std::string& msg) {
  throw Error(fmt::format("{}: {} {}", op.loc.empty() ? "<ir>" : op.loc, op_name(op.kind), msg));
}

bool is_permutation(const std::vector<int64_t>& p, size_t n) {
  if (p.size() != n) return false;
  std::vector<bool> seen(n);
  for (int64_t x : p) {
    if (x < 0 || size_t(x) >= n || seen[x]) return false;
    seen[x] = true;
  }
  return true;
}

bool distinct_in_range(const std::vector<int64_t>& p, size_t n) {
  std::vector<bool> seen(n);
  for (int64_t x : p) {
    if (x < 0 || size_t(x) >= n || seen[x]) return false;
    seen[x] = true;
  }
  return true;
}

bool disjoint(const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  for (int64_t x : a)
    if (std::find(b.begin(), b.end(), x) != b.end()) return false;
  return true;
}

// gather (operand, indices) and scatter (operand, indices, updates), with
// XLA's dimension rules: the operand's dimensions are indexed ones
// (start_index_map), batching ones (paired with index dimensions), and the
// rest; the indices' dimensions other than index_vector_dim form the batch.
Type indexed_type(const Function& f, const Op& op) {
  const bool gather = op.kind == OpKind::gather;
  if (op.operands.size() != (gather ? 2u : 3u)) bad(op, fmt::format("takes {} operands, has {}", gather ? 2 : 3, op.operands.size()));
  const Type& a = f.ops[size_t(op.operands[0])].type;
  const Type& ix = f.ops[size_t(op.operands[1])].type;
  const GatherDims& g = op.gather;
  const size_t r = a.dims.size(), ir = ix.dims.size();
  if (ix.dtype != DType::s32 && ix.dtype != DType::s8 && ix.dtype != DType::u32) bad(op, "indices must be s32, s8 or u32");
  if (g.index_vector_dim < 0 || size_t(g.index_vector_dim) > ir) bad(op, "index_vector_dim out of range");
  const size_t ivd = size_t(g.index_vector_dim);
  const int64_t components = ivd == ir ? 1 : ix.dims[ivd];
  if (int64_t(g.start_index_map.size()) != components) bad(op, "start_index_map does not match the index vector");
  if (!distinct_in_range(g.start_index_map, r) || !distinct_in_range(g.collapsed, r) || !distinct_in_range(g.operand_batching, r))
    bad(op, "operand dimensions out of range or repeated");
  if (!disjoint(g.collapsed, g.operand_batching) || !disjoint(g.start_index_map, g.operand_batching))
    bad(op, "a batching dimension is also collapsed or indexed");
  if (g.index_batching.size() != g.operand_batching.size() || !distinct_in_range(g.index_batching, ir) ||
      std::find(g.index_batching.begin(), g.index_batching.end(), int64_t(ivd)) != g.index_batching.end())
    bad(op, "batching dimensions do not pair operand and index dimensions");
  for (size_t k = 0; k < g.operand_batching.size(); ++k)
    if (a.dims[size_t(g.operand_batching[k])] != ix.dims[size_t(g.index_batching[k])]) bad(op, "batching dimensions differ in size");
  std::vector<int64_t> batch;  // the indices' dimensions without the vector one
  for (size_t d = 0; d < ir; ++d)
    if (d != ivd) batch.push_back(ix.dims[d]);
  std::vector<int64_t> window;  // operand dimensions a slice or an update window spans
  for (size_t d = 0; d < r; ++d)
    if (std::find(g.collapsed.begin(), g.collapsed.end(), int64_t(d)) == g.collapsed.end() &&
        std::find(g.operand_batching.begin(), g.operand_batching.end(), int64_t(d)) == g.operand_batching.end())
      window.push_back(int64_t(d));
  const size_t rank = batch.size() + window.size();  // of the result (gather) or the updates (scatter)
  if (g.offset.size() != window.size() || !distinct_in_range(g.offset, rank) || !std::is_sorted(g.offset.begin(), g.offset.end()))
    bad(op, fmt::format("{} must be {} sorted dimensions", gather ? "offset_dims" : "update_window_dims", window.size()));
  // The result's (updates') dimensions: window sizes at the offset places, the batch elsewhere.
  auto shape = [&](const std::vector<int64_t>& sizes) {
    std::vector<int64_t> dims;
    size_t b = 0, w = 0;
    for (size_t p = 0; p < rank; ++p)
      dims.push_back(std::find(g.offset.begin(), g.offset.end(), int64_t(p)) != g.offset.end() ? sizes[w++] : batch[b++]);
    return dims;
  };
  if (gather) {
    if (g.slice_sizes.size() != r) bad(op, "slice_sizes does not match the operand's rank");
    for (size_t d = 0; d < r; ++d) {
      const bool one = std::find(window.begin(), window.end(), int64_t(d)) == window.end();
      if (g.slice_sizes[d] < 0 || g.slice_sizes[d] > a.dims[d] || (one && g.slice_sizes[d] != 1))
        bad(op, "slice sizes out of range (collapsed and batching dimensions take 1)");
    }
    std::vector<int64_t> sizes;
    for (int64_t d : window) sizes.push_back(g.slice_sizes[size_t(d)]);
    return {a.dtype, shape(sizes)};
  }
  const Type& u = f.ops[size_t(op.operands[2])].type;
  if (u.dtype != a.dtype) bad(op, "updates and operand differ in element type");
  if ((op.combiner == Combiner::and_ || op.combiner == Combiner::or_) && is_float(a.dtype)) bad(op, "combines floats by a bit operation");
  if (u.dims.size() != rank) bad(op, fmt::format("updates {} must have rank {}", u.str(), rank));
  std::vector<int64_t> sizes;
  for (size_t k = 0; k < window.size(); ++k) {
    sizes.push_back(u.dims[size_t(g.offset[k])]);
    if (sizes.back() > a.dims[size_t(window[k])]) bad(op, "an update window is larger than the operand");
  }
  if (shape(sizes) != u.dims) bad(op, fmt::format("updates {} do not match the indices {}", u.str(), ix.str()));
  return a;
}

}  // namespace

int64_t window_out(int64_t in, int64_t lo, int64_t hi, int64_t base_dil, int64_t size, int64_t stride,
                   int64_t win_dil) {
  const int64_t padded = (in == 0 ? 0 : (in - 1) * base_dil + 1) + lo + hi;
  const int64_t eff = (size - 1) * win_dil + 1;
  if (padded < eff) return 0;
  return (padded - eff) / stride + 1;
}

Type infer_type(const Function& f, const Op& op) {
  auto operand = [&](size_t i) -> const Type& {
    if (i >= op.operands.size()) bad(op, "is missing an operand");
    return f.ops[op.operands[i]].type;
  };
  auto need = [&](size_t n) {
    if (op.operands.size() != n) bad(op, fmt::format("takes {} operands, has {}", n, op.operands.size()));
  };
  const DType rd = op.type.dtype;
  switch (op.kind) {
    case OpKind::parameter:
      need(0);
      if (op.index < 0) bad(op, "has a negative index");
      return op.type;
    case OpKind::collective_permute: {
      need(1);
      std::vector<bool> src(size_t(f.devices), false), dst(size_t(f.devices), false);
      for (const auto& pr : op.groups) {
        if (pr.size() != 2 || pr[0] < 0 || pr[1] < 0 || pr[0] >= f.devices || pr[1] >= f.devices)
          bad(op, fmt::format("pairs must be [source, target] of the {} devices", f.devices));
        if (src[size_t(pr[0])] || dst[size_t(pr[1])]) bad(op, "names a source or a target twice");
        src[size_t(pr[0])] = dst[size_t(pr[1])] = true;
      }
      return operand(0);
    }
    case OpKind::all_reduce:
    case OpKind::all_gather:
    case OpKind::reduce_scatter:
    case OpKind::all_to_all: {
      need(1);
      std::vector<int64_t> seen;
      for (const auto& g : op.groups) {
        if (g.empty()) bad(op, "has an empty group");
        seen.insert(seen.end(), g.begin(), g.end());
      }
      std::sort(seen.begin(), seen.end());
      for (size_t d = 0; d < seen.size(); ++d)
        if (seen[d] != int64_t(d)) bad(op, fmt::format("groups must hold each of the {} devices once", f.devices));
      if (int64_t(seen.size()) != f.devices) bad(op, fmt::format("groups must hold each of the {} devices once", f.devices));
      if (op.kind == OpKind::all_reduce) return operand(0);
      for (const auto& g : op.groups)
        if (g.size() != op.groups[0].size()) bad(op, "groups of different sizes");
      Type t = operand(0);
      if (op.index < 0 || size_t(op.index) >= t.dims.size()) bad(op, "dimension out of range");
      int64_t& d = t.dims[size_t(op.index)];
      const int64_t n = int64_t(op.groups[0].size());
      if (op.kind == OpKind::all_gather) {
        d *= n;
      } else {  // reduce-scatter and all-to-all split the dimension into one piece per member
        if (d % n != 0) bad(op, fmt::format("dimension {} of size {} does not split into {} pieces", op.index, d, n));
        if (op.kind == OpKind::reduce_scatter) d /= n;
      }
      return t;
    }
    case OpKind::constant: {
      need(0);
      const int64_t n = op.type.elements();
      if (op.literal.size() != 1 && int64_t(op.literal.size()) != n)
        bad(op, fmt::format("has {} values for {} elements", op.literal.size(), n));
      return op.type;
    }
    case OpKind::iota:
      need(0);
      if (op.index < 0 || size_t(op.index) >= op.type.dims.size()) bad(op, "dimension out of range");
      return op.type;
    case OpKind::broadcast: {
      need(1);
      const Type& a = operand(0);
      if (op.dims.size() != a.dims.size()) bad(op, "needs one dimension per operand dimension");
      for (size_t i = 0; i < op.dims.size(); ++i) {
        if (op.dims[i] < 0 || size_t(op.dims[i]) >= op.type.dims.size()) bad(op, "dimension out of range");
        if (i && op.dims[i] <= op.dims[i - 1]) bad(op, "dimensions must increase");
        if (a.dims[i] != 1 && a.dims[i] != op.type.dims[op.dims[i]]) bad(op, "operand dimension does not match");
      }
      return {a.dtype, op.type.dims};
    }
    case OpKind::reshape: {
      need(1);
      if (operand(0).elements() != op.type.elements()) bad(op, "changes the number of elements");
      return {operand(0).dtype, op.type.dims};
    }
    case OpKind::transpose: {
      need(1);
      const Type& a = operand(0);
      if (!is_permutation(op.dims, a.dims.size())) bad(op, "dimensions are not a permutation");
      Type t{a.dtype, {}};
      for (int64_t d : op.dims) t.dims.push_back(a.dims[d]);
      return t;
    }
    case OpKind::slice: {
      need(1);
      const Type& a = operand(0);
      if (op.lo.size() != a.dims.size() || op.hi.size() != a.dims.size() || op.strides.size() != a.dims.size())
        bad(op, "needs start, limit and stride per dimension");
      Type t{a.dtype, {}};
      for (size_t i = 0; i < a.dims.size(); ++i) {
        if (op.lo[i] < 0 || op.hi[i] < op.lo[i] || op.hi[i] > a.dims[i] || op.strides[i] < 1) bad(op, "bounds out of range");
        t.dims.push_back((op.hi[i] - op.lo[i] + op.strides[i] - 1) / op.strides[i]);
      }
      return t;
    }
    case OpKind::pad: {
      need(2);
      const Type& a = operand(0);
      if (!operand(1).dims.empty() || operand(1).dtype != a.dtype) bad(op, "padding value must be a scalar of the operand's type");
      if (op.lo.size() != a.dims.size() || op.hi.size() != a.dims.size() || op.interior.size() != a.dims.size())
        bad(op, "needs low, high and interior padding per dimension");
      Type t{a.dtype, {}};
      for (size_t i = 0; i < a.dims.size(); ++i) {
        if (op.interior[i] < 0) bad(op, "interior padding is negative");
        const int64_t d = (a.dims[i] == 0 ? 0 : a.dims[i] + (a.dims[i] - 1) * op.interior[i]) + op.lo[i] + op.hi[i];
        if (d < 0) bad(op, "result dimension is negative");
        t.dims.push_back(d);
      }
      return t;
    }
    case OpKind::concatenate: {
      if (op.operands.empty()) bad(op, "needs operands");
      Type t = operand(0);
      if (op.index < 0 || size_t(op.index) >= t.dims.size()) bad(op, "dimension out of range");
      for (size_t i = 1; i < op.operands.size(); ++i) {
        const Type& b = operand(i);
        if (b.dtype != t.dtype || b.dims.size() != t.dims.size()) bad(op, "operands differ in type or rank");
        for (size_t d = 0; d < t.dims.size(); ++d)
          if (int64_t(d) != op.index && b.dims[d] != t.dims[d]) bad(op, "operands differ outside the dimension");
        t.dims[op.index] += b.dims[op.index];
      }
      return t;
    }
    case OpKind::reverse:
      need(1);
      if (!distinct_in_range(op.dims, operand(0).dims.size())) bad(op, "dimensions out of range");
      return operand(0);
    case OpKind::convert:
      need(1);
      return {rd, operand(0).dims};
    case OpKind::bitcast_convert:
      need(1);
      if (!is_32bit(rd) || !is_32bit(operand(0).dtype)) bad(op, "reinterprets 32-bit types only (s32, u32, f32)");
      return {rd, operand(0).dims};
    case OpKind::is_finite:
      need(1);
      if (!is_float(operand(0).dtype)) bad(op, "needs a float operand");
      return {DType::pred, operand(0).dims};
    case OpKind::compare: {
      need(2);
      if (operand(0) != operand(1)) bad(op, "operands differ in type");
      return {DType::pred, operand(0).dims};
    }
    case OpKind::select: {
      need(3);
      if (operand(0).dtype != DType::pred || operand(0).dims != operand(1).dims) bad(op, "needs a pred of the result's shape");
      if (operand(1) != operand(2)) bad(op, "operands differ in type");
      return operand(1);
    }
    case OpKind::clamp: {
      need(3);
      const Type& x = operand(1);
      for (int i : {0, 2})
        if (operand(i).dtype != x.dtype || (!operand(i).dims.empty() && operand(i).dims != x.dims))
          bad(op, "bounds must be scalars or match the operand");
      return x;
    }
    case OpKind::dot: {
      need(2);
      const Type& a = operand(0);
      const Type& b = operand(1);
      if (op.lhs_batch.size() != op.rhs_batch.size() || op.lhs_contract.size() != op.rhs_contract.size())
        bad(op, "batch or contracting dimension lists differ in length");
      std::vector<int64_t> la = op.lhs_batch, rb = op.rhs_batch;
      la.insert(la.end(), op.lhs_contract.begin(), op.lhs_contract.end());
      rb.insert(rb.end(), op.rhs_contract.begin(), op.rhs_contract.end());
      if (!distinct_in_range(la, a.dims.size()) || !distinct_in_range(rb, b.dims.size())) bad(op, "dimension out of range");
      Type t{rd, {}};
      for (size_t i = 0; i < op.lhs_batch.size(); ++i) {
        if (a.dims[op.lhs_batch[i]] != b.dims[op.rhs_batch[i]]) bad(op, "batch dimensions differ");
        t.dims.push_back(a.dims[op.lhs_batch[i]]);
      }
      for (size_t i = 0; i < op.lhs_contract.size(); ++i)
        if (a.dims[op.lhs_contract[i]] != b.dims[op.rhs_contract[i]]) bad(op, "contracting dimensions differ");
      for (size_t d = 0; d < a.dims.size(); ++d)
        if (std::find(la.begin(), la.end(), int64_t(d)) == la.end()) t.dims.push_back(a.dims[d]);
      for (size_t d = 0; d < b.dims.size(); ++d)
        if (std::find(rb.begin(), rb.end(), int64_t(d)) == rb.end()) t.dims.push_back(b.dims[d]);
      if (a.dtype != b.dtype && !(is_float(a.dtype) && is_float(b.dtype))) bad(op, "mixes integer and float operands");
      return t;
    }
    case OpKind::convolution: {
      need(2);
      const Type& x = operand(0);
      const Type& k = operand(1);
      const ConvDims& c = op.conv;
      const size_t ns = c.in_spatial.size();
      const size_t rank = ns + 2;
      if (x.dims.size() != rank || k.dims.size() != rank || op.type.dims.size() != rank || c.k_spatial.size() != ns ||
          c.out_spatial.size() != ns)
        bad(op, "dimension numbers do not match the ranks");
      if (op.window.size() != ns || op.strides.size() != ns || op.lo.size() != ns || op.hi.size() != ns ||
          op.lhs_dilation.size() != ns || op.rhs_dilation.size() != ns)
        bad(op, "window does not match the spatial rank");
      if (op.feature_groups < 1 || op.batch_groups < 1) bad(op, "group counts must be positive");
      std::vector<int64_t> xi = c.in_spatial, ki = c.k_spatial, oi = c.out_spatial;
      xi.push_back(c.in_batch), xi.push_back(c.in_feature);
      ki.push_back(c.k_in), ki.push_back(c.k_out);
      oi.push_back(c.out_batch), oi.push_back(c.out_feature);
      if (!is_permutation(xi, rank) || !is_permutation(ki, rank) || !is_permutation(oi, rank)) bad(op, "dimension numbers are not permutations");
      if (x.dims[c.in_feature] != k.dims[c.k_in] * op.feature_groups) bad(op, "input features do not match the kernel");
      if (k.dims[c.k_out] % (op.feature_groups * op.batch_groups) != 0) bad(op, "output features not divisible by the groups");
      if (x.dims[c.in_batch] % op.batch_groups != 0) bad(op, "batch not divisible by batch_group_count");
      Type t{rd, std::vector<int64_t>(rank)};
      t.dims[c.out_batch] = x.dims[c.in_batch] / op.batch_groups;
      t.dims[c.out_feature] = k.dims[c.k_out];
      for (size_t i = 0; i < ns; ++i) {
        if (op.window[i] != k.dims[c.k_spatial[i]]) bad(op, "window size does not match the kernel");
        if (op.strides[i] < 1 || op.lhs_dilation[i] < 1 || op.rhs_dilation[i] < 1) bad(op, "strides and dilations must be positive");
        t.dims[c.out_spatial[i]] = window_out(x.dims[c.in_spatial[i]], op.lo[i], op.hi[i], op.lhs_dilation[i],
                                              op.window[i], op.strides[i], op.rhs_dilation[i]);
      }
      if (x.dtype != k.dtype && !(is_float(x.dtype) && is_float(k.dtype))) bad(op, "mixes integer and float operands");
      return t;
    }
    case OpKind::reduce: {
      need(2);
      const Type& a = operand(0);
      if (operand(1).dtype != a.dtype || !operand(1).dims.empty()) bad(op, "init must be a scalar of the operand's type");
      if (!distinct_in_range(op.dims, a.dims.size())) bad(op, "dimensions out of range");
      Type t{a.dtype, {}};
      for (size_t d = 0; d < a.dims.size(); ++d)
        if (std::find(op.dims.begin(), op.dims.end(), int64_t(d)) == op.dims.end()) t.dims.push_back(a.dims[d]);
      return t;
    }
    case OpKind::arg_reduce: {  // (values, indices, init value, init index) -> the index of the extreme
      need(4);
      const Type& a = operand(0);
      if (operand(1).dtype != DType::s32 || operand(1).dims != a.dims) bad(op, "indices must be s32 of the values' shape");
      if (operand(2).dtype != a.dtype || !operand(2).dims.empty()) bad(op, "init value must be a scalar of the values' type");
      if (operand(3) != Type{DType::s32, {}}) bad(op, "init index must be an s32 scalar");
      if (a.dtype == DType::pred || a.dtype == DType::u32) bad(op, "values must be f32, bf16, s32 or s8");
      if (op.combiner != Combiner::maximum && op.combiner != Combiner::minimum) bad(op, "combiner must be maximum or minimum");
      if (!distinct_in_range(op.dims, a.dims.size())) bad(op, "dimensions out of range");
      Type t{DType::s32, {}};
      for (size_t d = 0; d < a.dims.size(); ++d)
        if (std::find(op.dims.begin(), op.dims.end(), int64_t(d)) == op.dims.end()) t.dims.push_back(a.dims[d]);
      return t;
    }
    case OpKind::reduce_window: {
      need(2);
      const Type& a = operand(0);
      const size_t n = a.dims.size();
      if (operand(1).dtype != a.dtype || !operand(1).dims.empty()) bad(op, "init must be a scalar of the operand's type");
      if (op.window.size() != n || op.strides.size() != n || op.lo.size() != n || op.hi.size() != n ||
          op.lhs_dilation.size() != n || op.rhs_dilation.size() != n)
        bad(op, "window does not match the operand's rank");
      Type t{a.dtype, {}};
      for (size_t i = 0; i < n; ++i) {
        if (op.window[i] < 1 || op.strides[i] < 1 || op.lhs_dilation[i] < 1 || op.rhs_dilation[i] < 1)
          bad(op, "window sizes, strides and dilations must be positive");
        t.dims.push_back(window_out(a.dims[i], op.lo[i], op.hi[i], op.lhs_dilation[i], op.window[i], op.strides[i],
                                    op.rhs_dilation[i]));
      }
      return t;
    }
    case OpKind::gather:
    case OpKind::scatter:
      return indexed_type(f, op);
    case OpKind::select_and_scatter: {
      need(3);
      const Type& a = operand(0);
      const size_t n = a.dims.size();
      if (operand(1).dtype != a.dtype) bad(op, "source and operand differ in element type");
      if (operand(2).dtype != a.dtype || !operand(2).dims.empty()) bad(op, "init must be a scalar of the operand's type");
      if (op.window.size() != n || op.strides.size() != n || op.lo.size() != n || op.hi.size() != n)
        bad(op, "window does not match the operand's rank");
      std::vector<int64_t> windows;
      for (size_t i = 0; i < n; ++i) {
        if (op.window[i] < 1 || op.strides[i] < 1) bad(op, "window sizes and strides must be positive");
        if (op.lo[i] < 0 || op.hi[i] < 0) bad(op, "negative padding");
        windows.push_back(window_out(a.dims[i], op.lo[i], op.hi[i], 1, op.window[i], op.strides[i], 1));
      }
      if (operand(1).dims != windows)
        bad(op, fmt::format("source {} does not have one element per window ({} windows)", operand(1).str(), Type{a.dtype, windows}.str()));
      return a;
    }
    case OpKind::dynamic_slice:
    case OpKind::dynamic_update_slice: {
      // x (update) start...: one integer scalar start per dimension; the
      // slice (dynamic-slice's type, or the update) fits in x.
      const bool upd = op.kind == OpKind::dynamic_update_slice;
      const Type& x = operand(0);
      const size_t first = upd ? 2 : 1;
      need(first + x.dims.size());
      const Type& piece = upd ? operand(1) : op.type;
      if (piece.dtype != x.dtype || piece.dims.size() != x.dims.size()) bad(op, fmt::format("{} does not match {}", piece.str(), x.str()));
      for (size_t k = 0; k < x.dims.size(); ++k) {
        if (piece.dims[k] > x.dims[k]) bad(op, fmt::format("{} does not fit in {}", piece.str(), x.str()));
        const Type& st = operand(first + k);
        if (!st.dims.empty() || is_float(st.dtype) || st.dtype == DType::pred) bad(op, "starts must be integer scalars");
      }
      return upd ? x : op.type;
    }
    case OpKind::while_:
      // The regions' signatures are verify()'s (they need the whole region).
      if (op.regions.size() != 2) bad(op, "needs a condition and a body");
      return {DType::pred, {}};
    case OpKind::get_tuple_element: {
      need(1);
      const Op& w = f.ops[size_t(op.operands[0])];
      if (w.kind != OpKind::while_) bad(op, "reads a value that is not a while loop's");
      if (op.index < 0 || size_t(op.index) >= w.operands.size()) bad(op, "index out of range");
      return f.ops[size_t(w.operands[size_t(op.index)])].type;
    }
    default:
      break;
  }
  // Remaining unary and binary element-wise ops keep their operand's type.
  if (is_unary(op.kind)) {
    need(1);
    return operand(0);
  }
  if (is_binary(op.kind)) {
    need(2);
    if (operand(0) != operand(1)) bad(op, fmt::format("operands differ: {} and {}", operand(0).str(), operand(1).str()));
    return operand(0);
  }
  bad(op, "is not a known operation");
}

int64_t Mesh::count(int64_t mask) const {
  int64_t n = 1;
  for (size_t a = 0; a < sizes.size(); ++a)
    if (mask >> a & 1) n *= sizes[a];
  return n;
}

int64_t Mesh::coord(int64_t d, size_t a) const { return d / count(all() & ~((int64_t(2) << a) - 1)) % sizes[a]; }

int64_t Mesh::index(int64_t d, int64_t mask) const {
  int64_t i = 0;
  for (size_t a = 0; a < sizes.size(); ++a)
    if (mask >> a & 1) i = i * sizes[a] + coord(d, a);
  return i;
}

std::vector<std::vector<int64_t>> Mesh::groups(int64_t mask) const {
  const int64_t rest = all() & ~mask;
  std::vector<std::vector<int64_t>> g(size_t(count(rest)), std::vector<int64_t>(size_t(count(mask))));
  for (int64_t d = 0; d < count(all()); ++d) g[size_t(index(d, rest))][size_t(index(d, mask))] = d;
  return g;
}

std::vector<int64_t> Mesh::tiles(const std::vector<int64_t>& masks) const {
  std::vector<int64_t> t;
  for (int64_t m : masks) t.push_back(count(m));
  return t;
}

std::vector<int64_t> Mesh::tile_of(const std::vector<int64_t>& masks) const {
  std::vector<int64_t> of;
  bool identity = true;
  for (int64_t d = 0; d < count(all()); ++d) {
    int64_t t = 0;
    for (int64_t m : masks) t = t * count(m) + index(d, m);
    of.push_back(t);
    identity &= t == d;
  }
  return identity ? std::vector<int64_t>{} : of;
}

Type tiled_type(const Type& local, const std::vector<int64_t>& tiles) {
  Type t = local;
  for (size_t d = 0; d < tiles.size() && d < t.dims.size(); ++d) t.dims[d] *= tiles[d];
  return t;
}

Type Function::param_global_type(size_t i) const {
  return tiled_type(ops[size_t(params().at(i))].type, i < param_tiles.size() ? param_tiles[i] : std::vector<int64_t>{});
}

Type Function::result_global_type(size_t i) const {
  return tiled_type(ops[size_t(results.at(i))].type, i < result_tiles.size() ? result_tiles[i] : std::vector<int64_t>{});
}

namespace {

// A while loop's regions: the condition takes the state and gives pred[],
// the body takes the state and gives the next one (same types, in order).
void verify_loop(const Function& f, const Op& op, size_t i) {
  std::vector<Type> state;
  for (int o : op.operands) state.push_back(f.ops[size_t(o)].type);
  for (size_t r = 0; r < 2; ++r) {
    const Function& g = op.regions[r];
    const char* what = r == 0 ? "condition" : "body";
    try {
      verify(g);
    } catch (const Error& e) {
      bad(op, fmt::format("(%{}) {}: {}", i, what, e.what()));
    }
    const auto params = g.params();
    if (params.size() != state.size()) bad(op, fmt::format("(%{}) {} takes {} values, the state has {}", i, what, params.size(), state.size()));
    for (size_t k = 0; k < params.size(); ++k)
      if (g.ops[size_t(params[k])].type != state[k])
        bad(op, fmt::format("(%{}) {} parameter {} is {}, the state's value is {}", i, what, k, g.ops[size_t(params[k])].type.str(), state[k].str()));
    if (g.devices != f.devices || !g.param_tiles.empty() || !g.result_tiles.empty() || !g.param_tile_of.empty() || !g.result_tile_of.empty())
      bad(op, fmt::format("(%{}) {} must run on the loop's {} device(s), untiled", i, what, f.devices));
    std::vector<Type> out;
    for (int v : g.results) out.push_back(g.ops[size_t(v)].type);
    if (r == 0 && (out.size() != 1 || out[0] != Type{DType::pred, {}}))
      bad(op, fmt::format("(%{}) condition must return one pred[]", i));
    if (r == 1 && out != state) bad(op, fmt::format("(%{}) body must return the state's types in order", i));
  }
}

}  // namespace

void verify(const Function& f) {
  for (size_t i = 0; i < f.ops.size(); ++i) {
    const Op& op = f.ops[i];
    for (int o : op.operands)
      if (o < 0 || size_t(o) >= i) bad(op, fmt::format("(%{}) uses %{} before it is defined", i, o));
    int64_t elements = 1;
    for (int64_t d : op.type.dims) {
      if (d < 0) bad(op, fmt::format("(%{}) has a negative dimension", i));
      if (d > (int64_t(1) << 40) || (d && elements > (int64_t(1) << 40) / d))
        bad(op, fmt::format("(%{}) {} has more than 2^40 elements", i, op.type.str()));
      elements *= d;
    }
    const Type t = infer_type(f, op);
    if (t != op.type) bad(op, fmt::format("(%{}) has type {}, its operands give {}", i, op.type.str(), t.str()));
    // Ops whose dtype rules infer_type does not fix.
    const bool fl = is_float(t.dtype);
    if (op.combiner == Combiner::replace && op.kind != OpKind::scatter) bad(op, fmt::format("(%{}) cannot take the combiner replace", i));
    switch (op.kind) {
      case OpKind::exponential: case OpKind::log: case OpKind::tanh: case OpKind::logistic: case OpKind::rsqrt:
      case OpKind::sqrt: case OpKind::floor: case OpKind::ceil: case OpKind::round_nearest_even: case OpKind::power:
      case OpKind::erf: case OpKind::sine: case OpKind::cosine: case OpKind::exponential_minus_one: case OpKind::log_plus_one:
      case OpKind::divide: case OpKind::atan2:
        if (!fl && op.kind != OpKind::divide) bad(op, fmt::format("(%{}) needs a float type", i));
        break;
      case OpKind::and_: case OpKind::or_: case OpKind::xor_: case OpKind::not_: case OpKind::shift_left:
      case OpKind::shift_right_arithmetic: case OpKind::shift_right_logical:
        if (fl) bad(op, fmt::format("(%{}) needs an integer or pred type", i));
        break;
      case OpKind::negate: case OpKind::abs: case OpKind::sign: case OpKind::round_nearest_afz: case OpKind::remainder:
        if (t.dtype == DType::pred) bad(op, fmt::format("(%{}) needs a numeric type, not pred", i));
        break;
      case OpKind::while_: verify_loop(f, op, i); break;
      default: break;
    }
    if (op.kind != OpKind::while_ && !op.regions.empty()) bad(op, fmt::format("(%{}) cannot have regions", i));
  }
  if (f.results.empty()) throw Error("<ir>: function returns nothing");
  for (int r : f.results)
    if (r < 0 || size_t(r) >= f.ops.size()) throw Error(fmt::format("<ir>: return of undefined %{}", r));
  const auto p = f.params();
  for (size_t i = 0; i < p.size(); ++i)
    if (p[i] < 0) throw Error(fmt::format("<ir>: parameter {} is missing", i));
  if (f.devices < 1 || f.devices > 4096) throw Error(fmt::format("<ir>: {} devices (1 to 4096)", f.devices));
  auto check_tiles = [&](const std::vector<std::vector<int64_t>>& tiles, const std::vector<std::vector<int64_t>>& tile_of,
                         const std::vector<int>& values, const char* what) {
    if (tiles.size() > values.size()) throw Error(fmt::format("<ir>: tiles for {} {}s, the function has {}", tiles.size(), what, values.size()));
    if (tile_of.size() > tiles.size()) throw Error(fmt::format("<ir>: tile_of for {} {}s, tiles for {}", tile_of.size(), what, tiles.size()));
    for (size_t i = 0; i < tiles.size(); ++i) {
      const bool mapped = i < tile_of.size() && !tile_of[i].empty();
      if (tiles[i].empty()) {
        if (mapped) throw Error(fmt::format("<ir>: {} {} has tile_of without tiles", what, i));
        continue;
      }
      const Type& t = f.ops[size_t(values[i])].type;
      int64_t n = 1;
      for (int64_t x : tiles[i]) n *= std::max<int64_t>(x, 1);
      if (tiles[i].size() != t.dims.size() || (mapped ? n > f.devices : n != f.devices) ||
          std::any_of(tiles[i].begin(), tiles[i].end(), [](int64_t x) { return x < 1; }))
        throw Error(fmt::format("<ir>: {} {} ({}) has tiles [{}]: one per dimension, {} in all", what, i, t.str(), fmt::join(tiles[i], ","),
                                f.devices));
      if (!mapped) continue;
      std::vector<bool> held(size_t(n), false);
      for (int64_t x : tile_of[i]) {
        if (x < 0 || x >= n) throw Error(fmt::format("<ir>: {} {} has tile {} of {}", what, i, x, n));
        held[size_t(x)] = true;
      }
      if (int64_t(tile_of[i].size()) != f.devices || std::find(held.begin(), held.end(), false) != held.end())
        throw Error(fmt::format("<ir>: {} {}'s tile_of must give each of the {} devices a tile and each tile a device", what, i, f.devices));
    }
  };
  check_tiles(f.param_tiles, f.param_tile_of, p, "parameter");
  check_tiles(f.result_tiles, f.result_tile_of, f.results, "result");
  if (f.mesh.size() > 16 || std::any_of(f.mesh.begin(), f.mesh.end(), [](int64_t x) { return x < 1 || x > 4096; }) ||
      f.partitions() > 4096)
    throw Error(fmt::format("<ir>: mesh [{}]: at most 16 axes and 4096 devices", fmt::join(f.mesh, ",")));
  if (!f.mesh.empty() && f.devices > 1) throw Error("<ir>: a function is either partitioned (devices) or to be partitioned (mesh)");
  for (size_t i = 0; i < f.ops.size(); ++i) {
    const auto& masks = f.ops[i].sharding;
    if (masks.empty()) continue;
    const Type& t = f.ops[i].type;
    bool ok = !f.mesh.empty() && masks.size() == t.dims.size();
    int64_t used = 0;
    for (size_t d = 0; ok && d < t.dims.size(); ++d) {
      int64_t n = 1;
      for (size_t x = 0; x < f.mesh.size(); ++x)
        if (masks[d] >> x & 1) n *= f.mesh[x];
      ok = masks[d] >= 0 && masks[d] < (int64_t(1) << f.mesh.size()) && !(used & masks[d]) && t.dims[d] % n == 0;
      used |= masks[d];
    }
    if (!ok)
      throw Error(fmt::format("<ir>: %{} ({}) has sharding [{}]: a mask of the mesh's axes per dimension, each axis once, dividing it",
                              i, t.str(), fmt::join(masks, ",")));
  }
}

// ---------------------------------------------------------------- printer

namespace {

std::string num(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  if (v == std::floor(v) && std::fabs(v) < 1e15) return fmt::format("{}", int64_t(v)) + (std::signbit(v) && v == 0 ? ".0" : "");
  return fmt::format("{:.9g}", v);
}

std::string list(const std::vector<int64_t>& v) { return fmt::format("[{}]", fmt::join(v, ",")); }

}  // namespace

std::string print(const Function& f) {
  std::string s = f.devices > 1      ? fmt::format("func @{} {{devices={}}} {{\n", f.name, f.devices)
                  : !f.mesh.empty() ? fmt::format("func @{} {{mesh={}}} {{\n", f.name, list(f.mesh))
                                     : fmt::format("func @{} {{\n", f.name);
  for (size_t i = 0; i < f.ops.size(); ++i) {
    const Op& op = f.ops[i];
    std::vector<std::string> operands, attrs;
    for (int o : op.operands) operands.push_back(fmt::format("%{}", o));
    auto a = [&](const char* k, const std::string& v) { attrs.push_back(fmt::format("{}={}", k, v)); };
    switch (op.kind) {
      case OpKind::parameter:
        a("index", std::to_string(op.index));
        if (size_t(op.index) < f.param_names.size() && !f.param_names[op.index].empty())
          a("name", "\"" + f.param_names[op.index] + "\"");
        if (size_t(op.index) < f.param_tiles.size() && !f.param_tiles[op.index].empty()) a("tiles", list(f.param_tiles[op.index]));
        if (size_t(op.index) < f.param_tile_of.size() && !f.param_tile_of[op.index].empty())
          a("tile_of", list(f.param_tile_of[op.index]));
        break;
      case OpKind::all_reduce:
      case OpKind::all_gather:
      case OpKind::reduce_scatter:
      case OpKind::all_to_all:
      case OpKind::collective_permute: {
        std::vector<std::string> gs;
        for (const auto& g : op.groups) gs.push_back(list(g));
        if (op.kind != OpKind::all_reduce && op.kind != OpKind::collective_permute) a("dimension", std::to_string(op.index));
        a(op.kind == OpKind::collective_permute ? "pairs" : "groups", fmt::format("[{}]", fmt::join(gs, ",")));
        break;
      }
      case OpKind::constant: {
        std::vector<std::string> vs;
        for (double v : op.literal) vs.push_back(num(v));
        a("value", fmt::format("[{}]", fmt::join(vs, ",")));
        if (op.opaque) a("opaque", "true");
        break;
      }
      case OpKind::iota: case OpKind::concatenate: a("dimension", std::to_string(op.index)); break;
      case OpKind::broadcast: case OpKind::transpose: case OpKind::reverse: case OpKind::reduce: case OpKind::arg_reduce:
        a("dims", list(op.dims));
        break;
      case OpKind::slice: a("start", list(op.lo)), a("limit", list(op.hi)), a("stride", list(op.strides)); break;
      case OpKind::pad: a("low", list(op.lo)), a("high", list(op.hi)), a("interior", list(op.interior)); break;
      case OpKind::compare: a("direction", direction_name(op.direction)); break;
      case OpKind::dot:
        a("lhs_batch", list(op.lhs_batch)), a("rhs_batch", list(op.rhs_batch));
        a("lhs_contract", list(op.lhs_contract)), a("rhs_contract", list(op.rhs_contract));
        a("precision", precision_name(op.precision));
        break;
      case OpKind::convolution: {
        const ConvDims& c = op.conv;
        auto with = [](int64_t x, int64_t y, std::vector<int64_t> s) {
          s.insert(s.begin(), {x, y});
          return list(s);
        };
        a("input_dims", with(c.in_batch, c.in_feature, c.in_spatial));
        a("kernel_dims", with(c.k_in, c.k_out, c.k_spatial));
        a("output_dims", with(c.out_batch, c.out_feature, c.out_spatial));
        a("window", list(op.window)), a("stride", list(op.strides)), a("low", list(op.lo)), a("high", list(op.hi));
        a("lhs_dilation", list(op.lhs_dilation)), a("rhs_dilation", list(op.rhs_dilation));
        a("feature_groups", std::to_string(op.feature_groups)), a("batch_groups", std::to_string(op.batch_groups));
        a("precision", precision_name(op.precision));
        break;
      }
      case OpKind::reduce_window:
        a("window", list(op.window)), a("stride", list(op.strides)), a("low", list(op.lo)), a("high", list(op.hi));
        a("lhs_dilation", list(op.lhs_dilation)), a("rhs_dilation", list(op.rhs_dilation));
        break;
      case OpKind::select_and_scatter:
        a("window", list(op.window)), a("stride", list(op.strides)), a("low", list(op.lo)), a("high", list(op.hi));
        a("direction", direction_name(op.direction));
        break;
      case OpKind::gather:
      case OpKind::scatter: {
        const GatherDims& g = op.gather;
        const bool gather = op.kind == OpKind::gather;
        a(gather ? "offset_dims" : "update_window_dims", list(g.offset));
        a(gather ? "collapsed_slice_dims" : "inserted_window_dims", list(g.collapsed));
        a(gather ? "start_index_map" : "scatter_dims_to_operand_dims", list(g.start_index_map));
        a(gather ? "operand_batching_dims" : "input_batching_dims", list(g.operand_batching));
        a(gather ? "start_indices_batching_dims" : "scatter_indices_batching_dims", list(g.index_batching));
        a("index_vector_dim", std::to_string(g.index_vector_dim));
        if (gather) a("slice_sizes", list(g.slice_sizes));
        break;
      }
      default: break;
    }
    if (op.kind == OpKind::reduce || op.kind == OpKind::arg_reduce || op.kind == OpKind::reduce_window || op.kind == OpKind::select_and_scatter ||
        op.kind == OpKind::all_reduce || op.kind == OpKind::reduce_scatter || op.kind == OpKind::scatter)
      a("combiner", combiner_name(op.combiner));
    if (op.kind == OpKind::get_tuple_element) a("index", std::to_string(op.index));
    if (!op.sharding.empty()) a("sharding", list(op.sharding));
    if (op.kind == OpKind::while_)
      for (size_t r = 0; r < op.regions.size(); ++r) {
        std::string text = print(op.regions[r]);  // nested two deeper
        text.pop_back();
        for (size_t at = 0; (at = text.find('\n', at)) != std::string::npos; at += 5) text.replace(at, 1, "\n    ");
        a(r == 0 ? "condition" : "body", text);
      }
    s += fmt::format("  %{} = {}({})", i, op_name(op.kind), fmt::join(operands, ", "));
    if (!attrs.empty()) s += fmt::format(" {{{}}}", fmt::join(attrs, ", "));
    if (op.kind == OpKind::while_) {
      std::vector<std::string> ts;
      for (int o : op.operands) ts.push_back(f.ops[size_t(o)].type.str());
      s += fmt::format(" : ({})", fmt::join(ts, ", "));
    } else {
      s += " : " + op.type.str();
    }
    if (!op.loc.empty()) s += fmt::format(" loc(\"{}\")", op.loc);
    s += "\n";
  }
  std::vector<std::string> rs;
  for (size_t i = 0; i < f.results.size(); ++i) {
    const bool tiled = i < f.result_tiles.size() && !f.result_tiles[i].empty();
    const bool mapped = i < f.result_tile_of.size() && !f.result_tile_of[i].empty();
    rs.push_back(fmt::format("%{}", f.results[i]) + (!tiled ? ""
                                                     : mapped ? fmt::format(" {{tiles={}, tile_of={}}}", list(f.result_tiles[i]), list(f.result_tile_of[i]))
                                                              : fmt::format(" {{tiles={}}}", list(f.result_tiles[i]))));
  }
  s += fmt::format("  return {}\n}}\n", fmt::join(rs, ", "));
  return s;
}

// ---------------------------------------------------------------- parser

namespace {

class Parser {
 public:
  Parser(std::string_view s, std::string_view file) : s_(s), file_(file) {}

  Function function() {
    Function f = function_text();
    skip();
    if (pos_ != s_.size()) fail("text after the function");
    verify_or_locate(f);
    return f;
  }

 private:
  // `func @name {...} { ops; return ... }`, up to its closing brace.
  Function function_text() {
    if (++depth_ > 64) fail("regions nested deeper than 64");
    Function f;
    word("func");
    expect('@');
    f.name = ident();
    expect('{');
    if (peek_word("devices")) {  // {devices=N} {
      word("devices");
      expect('=');
      f.devices = integer();
      if (f.devices < 1 || f.devices > 4096) fail("devices out of range");
      expect('}');
      expect('{');
    } else if (peek_word("mesh")) {  // {mesh=[2,4]} {
      word("mesh");
      expect('=');
      f.mesh = int_list();
      expect('}');
      expect('{');
    }
    for (;;) {
      skip();
      if (peek_word("return")) {
        word("return");
        do {
          f.results.push_back(value(f));
          if (accept('{')) {
            word("tiles");
            expect('=');
            f.result_tiles.resize(f.results.size());
            f.result_tiles.back() = int_list();
            if (accept(',')) {
              word("tile_of");
              expect('=');
              f.result_tile_of.resize(f.results.size());
              f.result_tile_of.back() = int_list();
            }
            expect('}');
          }
        } while (accept(','));
        break;
      }
      op_line(f);
    }
    expect('}');
    --depth_;
    return f;
  }

  [[noreturn]] void fail(const std::string& m) const { throw Error(fmt::format("{}:{}: {}", file_, line_, m)); }
  void skip() {
    while (pos_ < s_.size()) {
      const char c = s_[pos_];
      if (c == '#') {
        while (pos_ < s_.size() && s_[pos_] != '\n') ++pos_;
      } else if (c == ' ' || c == '\t' || c == '\r' || c == '\n') {
        line_ += c == '\n';
        ++pos_;
      } else {
        break;
      }
    }
  }
  bool accept(char c) {
    skip();
    if (pos_ < s_.size() && s_[pos_] == c) return ++pos_, true;
    return false;
  }
  void expect(char c) {
    if (!accept(c)) fail(fmt::format("expected '{}'", c));
  }
  bool peek_word(std::string_view w) {
    skip();
    return s_.substr(pos_, w.size()) == w;
  }
  void word(std::string_view w) {
    if (!peek_word(w)) fail(fmt::format("expected '{}'", w));
    pos_ += w.size();
  }
  std::string ident() {
    skip();
    const size_t b = pos_;
    while (pos_ < s_.size() && (std::isalnum(uint8_t(s_[pos_])) || s_[pos_] == '_' || s_[pos_] == '-' || s_[pos_] == '.' || s_[pos_] == '/')) ++pos_;
    if (b == pos_) fail("expected a name");
    return std::string(s_.substr(b, pos_ - b));
  }
  int64_t integer() {
    skip();
    const size_t b = pos_;
    if (pos_ < s_.size() && s_[pos_] == '-') ++pos_;
    while (pos_ < s_.size() && std::isdigit(uint8_t(s_[pos_]))) ++pos_;
    const std::string t(s_.substr(b, pos_ - b));
    if (t.empty() || t == "-" || t.size() > 18) fail("expected an integer");
    return std::stoll(t);
  }
  double number() {
    skip();
    const size_t b = pos_;
    while (pos_ < s_.size() && (std::isalnum(uint8_t(s_[pos_])) || s_[pos_] == '.' || s_[pos_] == '-' || s_[pos_] == '+')) ++pos_;
    const std::string t(s_.substr(b, pos_ - b));
    if (t == "nan") return std::numeric_limits<double>::quiet_NaN();
    if (t == "inf") return INFINITY;
    if (t == "-inf") return -INFINITY;
    char* end = nullptr;
    const double v = std::strtod(t.c_str(), &end);
    if (t.empty() || *end) fail("expected a number");
    return v;
  }
  std::string quoted() {
    expect('"');
    const size_t b = pos_;
    while (pos_ < s_.size() && s_[pos_] != '"' && s_[pos_] != '\n') ++pos_;
    if (pos_ >= s_.size() || s_[pos_] != '"') fail("unterminated string");
    return std::string(s_.substr(b, pos_++ - b));
  }
  std::vector<int64_t> int_list() {
    std::vector<int64_t> v;
    expect('[');
    if (accept(']')) return v;
    do {
      v.push_back(integer());
      if (v.size() > 64) fail("list too long");
    } while (accept(','));
    expect(']');
    return v;
  }
  int value(const Function& f) {
    expect('%');
    const int64_t v = integer();
    if (v < 0 || size_t(v) >= f.ops.size()) fail(fmt::format("%{} is not defined before this line", v));
    return int(v);
  }
  Type type() {
    const std::string d = ident();
    Type t;
    static const std::pair<const char*, DType> names[] = {
        {"pred", DType::pred}, {"s8", DType::s8}, {"s32", DType::s32}, {"bf16", DType::bf16}, {"f16", DType::f16}, {"f32", DType::f32}, {"u32", DType::u32}};
    bool found = false;
    for (auto& [n, dt] : names)
      if (d == n) t.dtype = dt, found = true;
    if (!found) fail(fmt::format("unknown dtype '{}'", d));
    t.dims = int_list();
    int64_t n = 1;
    for (int64_t x : t.dims) {
      if (x < 0 || x > (int64_t(1) << 40)) fail("dimension out of range");
      n *= x;
      if (n > (int64_t(1) << 40)) fail("tensor too large");
    }
    return t;
  }
  template <typename E, size_t N>
  E pick(const std::string& v, const char* const (&names)[N], const char* what) {
    for (size_t i = 0; i < N; ++i)
      if (v == names[i]) return E(i);
    fail(fmt::format("unknown {} '{}'", what, v));
  }

  void op_line(Function& f) {
    expect('%');
    const int start_line = line_;
    const int64_t id = integer();
    if (id != int64_t(f.ops.size())) fail(fmt::format("expected %{} (values are numbered in order)", f.ops.size()));
    expect('=');
    const std::string kind = ident();
    Op op;
    bool known = false;
    for (int k = 0; k <= int(kLastOp); ++k)
      if (kind == op_name(OpKind(k))) op.kind = OpKind(k), known = true;
    if (!known) fail(fmt::format("unknown operation '{}'", kind));
    expect('(');
    if (!accept(')')) {
      do {
        op.operands.push_back(value(f));
      } while (accept(','));
      expect(')');
    }
    if (accept('{')) {
      do {
        const std::string key = ident();
        expect('=');
        attribute(f, op, key);
      } while (accept(','));
      expect('}');
    }
    expect(':');
    if (op.kind == OpKind::while_) {  // its state's types
      expect('(');
      std::vector<Type> ts;
      if (!accept(')')) {
        do {
          ts.push_back(type());
        } while (accept(','));
        expect(')');
      }
      for (size_t k = 0; k < ts.size() || k < op.operands.size(); ++k)
        if (k >= ts.size() || k >= op.operands.size() || ts[k] != f.ops[size_t(op.operands[k])].type)
          fail("while: its types must be its operands'");
      op.type = {DType::pred, {}};
    } else {
      op.type = type();
    }
    if (peek_word("loc")) {
      word("loc");
      expect('(');
      op.loc = quoted();
      expect(')');
    }
    lines_.push_back(start_line);
    f.ops.push_back(std::move(op));
  }

  void attribute(Function& f, Op& op, const std::string& key) {
    static const char* const prec[] = {"default", "high", "highest"};
    static const char* const dirs[] = {"EQ", "NE", "LT", "LE", "GT", "GE"};
    static const char* const comb[] = {"add", "multiply", "maximum", "minimum", "and", "or", "replace"};
    if (key == "index" || key == "dimension") {
      op.index = integer();
      if (op.index < 0 || op.index > 1 << 20) fail("index out of range");
    } else if (key == "name") {
      if (size_t(op.index) >= f.param_names.size()) f.param_names.resize(op.index + 1);
      f.param_names[op.index] = quoted();
    } else if (key == "tiles") {
      if (size_t(op.index) >= f.param_tiles.size()) f.param_tiles.resize(op.index + 1);
      f.param_tiles[op.index] = int_list();
    } else if (key == "tile_of") {
      if (size_t(op.index) >= f.param_tile_of.size()) f.param_tile_of.resize(op.index + 1);
      f.param_tile_of[op.index] = int_list();
    } else if (key == "sharding") {
      op.sharding = int_list();
    } else if (key == "groups" || key == "pairs") {
      expect('[');
      do {
        op.groups.push_back(int_list());
      } while (accept(','));
      expect(']');
    } else if (key == "opaque") {
      op.opaque = ident() == "true";
    } else if (key == "value") {
      expect('[');
      if (!accept(']')) {
        do {
          op.literal.push_back(number());
        } while (accept(','));
        expect(']');
      }
    } else if (key == "dims") {
      op.dims = int_list();
    } else if (key == "start" || key == "low") {
      op.lo = int_list();
    } else if (key == "limit" || key == "high") {
      op.hi = int_list();
    } else if (key == "interior") {
      op.interior = int_list();
    } else if (key == "stride") {
      op.strides = int_list();
    } else if (key == "window") {
      op.window = int_list();
    } else if (key == "lhs_dilation") {
      op.lhs_dilation = int_list();
    } else if (key == "rhs_dilation") {
      op.rhs_dilation = int_list();
    } else if (key == "lhs_batch") {
      op.lhs_batch = int_list();
    } else if (key == "rhs_batch") {
      op.rhs_batch = int_list();
    } else if (key == "lhs_contract") {
      op.lhs_contract = int_list();
    } else if (key == "rhs_contract") {
      op.rhs_contract = int_list();
    } else if (key == "input_dims" || key == "kernel_dims" || key == "output_dims") {
      std::vector<int64_t> v = int_list();
      if (v.size() < 2) fail(key + " needs at least two entries");
      std::vector<int64_t> sp(v.begin() + 2, v.end());
      ConvDims& c = op.conv;
      if (key[0] == 'i') c.in_batch = v[0], c.in_feature = v[1], c.in_spatial = sp;
      if (key[0] == 'k') c.k_in = v[0], c.k_out = v[1], c.k_spatial = sp;
      if (key[0] == 'o') c.out_batch = v[0], c.out_feature = v[1], c.out_spatial = sp;
    } else if (key == "offset_dims" || key == "update_window_dims") {
      op.gather.offset = int_list();
    } else if (key == "collapsed_slice_dims" || key == "inserted_window_dims") {
      op.gather.collapsed = int_list();
    } else if (key == "start_index_map" || key == "scatter_dims_to_operand_dims") {
      op.gather.start_index_map = int_list();
    } else if (key == "operand_batching_dims" || key == "input_batching_dims") {
      op.gather.operand_batching = int_list();
    } else if (key == "start_indices_batching_dims" || key == "scatter_indices_batching_dims") {
      op.gather.index_batching = int_list();
    } else if (key == "index_vector_dim") {
      op.gather.index_vector_dim = integer();
    } else if (key == "slice_sizes") {
      op.gather.slice_sizes = int_list();
    } else if (key == "feature_groups") {
      op.feature_groups = integer();
    } else if (key == "batch_groups") {
      op.batch_groups = integer();
    } else if (key == "condition" || key == "body") {
      op.regions.resize(2);
      std::vector<int> lines;
      std::swap(lines, lines_);  // the region's own lines
      Function g = function_text();
      verify_or_locate(g);
      std::swap(lines, lines_);
      op.regions[key == "body"] = std::move(g);
    } else if (key == "precision") {
      op.precision = pick<Precision>(ident(), prec, "precision");
    } else if (key == "direction") {
      op.direction = pick<Direction>(ident(), dirs, "direction");
    } else if (key == "combiner") {
      op.combiner = pick<Combiner>(ident(), comb, "combiner");
    } else {
      fail(fmt::format("unknown attribute '{}'", key));
    }
  }

  // Verifier errors carry the op's loc; add the IR file's line.
  void verify_or_locate(const Function& f) {
    for (size_t i = 0; i < f.ops.size(); ++i) {
      try {
        Type t = infer_type(f, f.ops[i]);
        if (t != f.ops[i].type)
          throw Error(fmt::format("%{} has type {}, its operands give {}", i, f.ops[i].type.str(), t.str()));
      } catch (const Error& e) {
        line_ = lines_[i];
        fail(e.what());
      }
    }
    verify(f);
  }

  std::string_view s_;
  std::string_view file_;
  size_t pos_ = 0;
  int line_ = 1;
  int depth_ = 0;
  std::vector<int> lines_;
};

}  // namespace

Function parse(std::string_view text, std::string_view filename) { return Parser(text, filename).function(); }

}  // namespace tpu::ir
