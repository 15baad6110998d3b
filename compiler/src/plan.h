// Kernel planning (internal to the back end, codegen.h): which ops fuse into
// which kernel, the fused element-wise expressions, and where every tensor
// lives in HBM. docs/compiler.md, "Kernel planning".
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "tpu/ir/ir.h"
#include "tpu/isa/half.h"
#include "tpu/isa/isa.h"
#include "tpu/isa/program.h"
#include "tpu/isa/target.h"

namespace tpu::compiler::backend {

using namespace ir;


constexpr uint64_t kHbmAlign = 512;
constexpr int kMaxExprRegs = 24;  // vector registers an expression may use per vector

inline uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }
inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

inline const char* vty(DType d) {  // load/store suffix
  switch (d) {
    case DType::f32: return "f32";
    case DType::s32:
    case DType::u32: return "s32";  // the same 32 bits (lower-unsigned leaves only bit-level u32 ops)
    case DType::bf16: return "bf16";
    case DType::f16: return "f16";
    default: return "s8";
  }
}
inline const char* aty(DType d) { return is_float(d) ? "f32" : "s32"; }  // arithmetic suffix


inline uint32_t lane_bits(DType d, double v) {
  if (is_float(d)) {
    const float f = float(v);
    uint32_t b;
    std::memcpy(&b, &f, 4);
    return b;
  }
  return uint32_t(uint64_t(int64_t(v)));
}

inline std::vector<int64_t> row_major(const std::vector<int64_t>& dims) {
  std::vector<int64_t> s(dims.size(), 1);
  for (int i = int(dims.size()) - 2; i >= 0; --i) s[i] = s[i + 1] * dims[i + 1];
  return s;
}

// ---------------------------------------------------------------- expressions

// Leaves of a fused expression: a full tensor, a splat constant, a runtime
// scalar, a vector broadcast along the last dimension (row: a bias), a
// tensor broadcast over trailing dimensions (col: a per-row value), or the
// matmul's accumulators.
enum class Leaf { none, input, splat, scalar, row, col, acc };

struct Node {
  Leaf leaf = Leaf::none;
  int input = -1;    // Kernel::inputs index (input, scalar, row)
  double value = 0;  // splat
  OpKind kind = OpKind::add;
  Direction dir = Direction::EQ;
  DType dtype = DType::f32;  // result
  DType src = DType::f32;    // first operand's dtype
  std::vector<int> args;
  int value_id = -1;
  bool hoisted() const { return leaf == Leaf::splat || leaf == Leaf::scalar; }
};

struct Expr {
  std::vector<Node> nodes;  // topological; the root is last
  std::vector<int> stored;  // nodes stored besides the root, in order
  std::vector<int> stored_values() const {  // their IR values
    std::vector<int> v;
    for (int i : stored) v.push_back(nodes[size_t(i)].value_id);
    return v;
  }
  int row_len = 0;          // row leaves' length (the broadcast dimension)
  // Per node: its value only goes to memory (the root, or stored and read
  // by no node).
  std::vector<bool> only_stored() const {
    std::vector<bool> o(nodes.size(), false);
    if (!o.empty()) o.back() = true;
    for (int s : stored) o[size_t(s)] = true;
    for (const Node& nd : nodes)
      for (int x : nd.args) o[size_t(x)] = false;
    return o;
  }
  bool has(Leaf l) const {
    for (const Node& n : nodes)
      if (n.leaf == l) return true;
    return false;
  }
  // The lane patterns its code holds in registers for the whole kernel: its
  // splats, and the constants its nodes' code needs (Emitter::node and
  // Emitter::hoist write the same ones).
  std::set<uint32_t> constants() const;
  // Registers it holds for the whole kernel: those constants, its scalar
  // inputs, and the lane-0 mask of its col leaves.
  int held_registers() const {
    int n = int(constants().size()) + (has(Leaf::col) ? 1 : 0);
    for (const Node& nd : nodes) n += nd.leaf == Leaf::scalar;
    return n;
  }
};

// Constants of the node code (Emitter::node, Emitter::hoist).
constexpr uint32_t kS8Shift = 24;          // s8 results are sign-extended from bit 7: << 24, >> 24
constexpr uint32_t kLowByte = 0xff;        // s8 logical shifts see the low byte only
constexpr uint32_t kNegInf = 0xff800000;   // the identity of max on f32, for col leaves
constexpr uint32_t kIntMin = 0x80000000;   // the identity of max on s32


// A strided view of a tensor in HBM, in elements.
struct View {
  uint64_t base = 0;  // byte address of element 0
  std::vector<int64_t> dims, strides;
};

enum class KKind { elementwise, copy, reduce_lanes, reduce_columns, matmul, all_reduce, all_gather, reduce_scatter, all_to_all, permute, loop };
const char* kind_name(KKind k);

struct Kernel {
  KKind kind = KKind::elementwise;
  int out = -1;             // IR value written
  std::vector<int> inputs;  // IR values read (expression leaves refer to these)
  Expr expr;                // elementwise body or matmul epilogue
  std::vector<std::pair<View, View>> copies;  // copy: (dst, src) pairs
  DType dtype = DType::f32;                   // copy element type
  // reduce
  Combiner combiner = Combiner::add;
  double init = 0;
  int64_t rows = 0, cols = 0;  // reduce_lanes: [rows, R=cols]; reduce_columns: [R=rows, cols]
  // matmul: sum over passes of A_p x W_p; A [B, M, K], W [B, K, N]
  std::vector<std::pair<int, int>> passes;
  int64_t B = 1, M = 0, K = 0, N = 0;
  std::vector<std::vector<int64_t>> groups;  // collectives: Op::groups
  int64_t dimension = 0;                      // all_gather, reduce_scatter, all_to_all
  int loop = -1;                              // loop: Plan::loops index
  std::vector<std::string> from;  // HLO locations
};

// ---------------------------------------------------------------- the plan



struct Plan;

// Where a loop's condition or body finds its state and its own buffers: the
// state at fixed addresses, everything else from heap_base up.
struct Region {
  std::vector<uint64_t> param_addr;
  uint64_t heap_base = 0;
  bool body = false;  // its results are the next state (a condition's is the predicate)
};

// A while loop (a kernel of kind loop): its state in fixed buffers, its
// condition and body planned as functions of their own whose parameters are
// those buffers and whose buffers share a scratch block live while the loop
// runs. After the body, its results move into the state buffers: first
// those that are other state elements (a swap) into `temps` in the scratch
// block, then all (a result the body could write into its state element's
// buffer, nothing reading that element after it, is there already).
struct LoopPlan {
  // A counted loop's trips, known at compile time (counted_trips()); -1
  // where the condition runs every trip.
  int64_t trips = -1;
  std::vector<uint64_t> state;   // by element
  std::vector<uint64_t> bytes;   // by element
  uint64_t scratch = 0, scratch_bytes = 0;
  std::vector<uint64_t> temps;   // by element: 0, or where the result waits
  std::shared_ptr<Region> where, body_where;  // the condition's and the body's plans point at them
  std::shared_ptr<Plan> cond, body;
};

struct Plan {
  const Function& f;
  isa::Target t;
  std::vector<std::vector<int>> users;
  std::vector<bool> result;
  std::vector<int> base;        // reshape alias root
  std::vector<bool> mat;        // has an HBM buffer of its own
  std::vector<bool> view;       // a layout op read only by copies: folded into their strided views
  // A dynamic slice whose piece is contiguous in its operand, read where it
  // lies: its readers (one such slice a kernel) add its offset, computed
  // when they start (Emitter::slice_offset); addr holds kOffset + the
  // operand's address.
  std::vector<bool> sliced;
  std::vector<bool> chain;      // add of dots (a matmul pass sum)
  std::vector<bool> in_chain;   // dot or chain consumed by a chain add
  std::vector<int> fused_into;  // matmul root -> epilogue kernel's output value
  std::vector<int> absorbed;    // a materialised element-wise value -> the later element-wise kernel that computes and stores it
  std::vector<uint64_t> addr;   // HBM byte address of each materialised base (buffers shared by liveness)
  std::vector<Kernel> kernels;
  std::vector<bool> zeroed;     // the value's buffer holds zeros when its kernel starts (no earlier buffer shared it)
  uint64_t hbm_used = 0;        // the program's peak HBM: the top of its highest buffer
  std::vector<isa::DataSegment> data;  // the constants' bytes
  std::vector<isa::TensorSymbol> symbols;
  std::vector<LoopPlan> loops;
  const Region* region = nullptr;  // set: a loop's condition or body
  uint64_t heap_top = 0;           // the top of its non-fixed buffers

  Plan(const Function& fn, const isa::Target& target, const Region* region = nullptr);

  const Type& type(int v) const { return f.ops[v].type; }
  const Op& op(int v) const { return f.ops[v]; }

  // The HLO ops a kernel computes, each with its share of the work (MACs of a
  // dot, elements of any other op), in first-seen order: the listing's
  // comments and the program's profile (.kernel).
  std::vector<std::pair<std::string, uint64_t>> profile_ops(const Kernel& k) const {
    std::vector<std::pair<std::string, uint64_t>> ops;
    auto add = [&](const std::string& loc, uint64_t work) {
      for (auto& o : ops)
        if (o.first == loc) return void(o.second += work);
      ops.push_back({loc, work});
    };
    if (k.kind == KKind::matmul)
      for (size_t i = 1; i < k.from.size(); ++i) add(k.from[i], uint64_t(k.B * k.M * k.N * k.K));  // one dot per pass
    if (k.kind == KKind::matmul || k.kind == KKind::elementwise)
      for (const Node& n : k.expr.nodes)
        if (n.leaf == Leaf::none && n.value_id >= 0) add(op(n.value_id).loc, uint64_t(type(n.value_id).elements()));
    const uint64_t own = k.kind == KKind::reduce_lanes || k.kind == KKind::reduce_columns ? uint64_t(k.rows * k.cols)
                                                                                          : uint64_t(type(k.out).elements());
    if (!k.from.empty()) add(k.from.front(), ops.empty() ? own : 0);
    return ops;
  }

  std::optional<double> splat(int v) const {
    const Op& o = op(v);
    if (o.kind == OpKind::constant && o.literal.size() == 1) return o.literal[0];
    return std::nullopt;
  }
  // broadcast of a rank-0 value, of a rank-1 value along the last dimension
  // (a row), or over trailing dimensions whose size is a multiple of the
  // lanes (a col: each vector lies within one source element's span).
  bool leaf_broadcast(int v) const {
    const Op& o = op(v);
    if (o.kind != OpKind::broadcast) return false;
    const Type& s = type(o.operands[0]);
    if (s.dims.empty()) return true;
    // Row and col sources are held whole in VMEM: small ones only.
    if (uint64_t(s.bytes()) * 2 + uint64_t(t.vpu_lanes) * 4 > t.vmem_bytes / 16) return false;
    if (s.dims.size() == 1 && o.dims[0] == int64_t(o.type.dims.size()) - 1 && s.dims[0] == o.type.dims.back()) return true;
    return col_inner(v) > 0;
  }
  int64_t col_inner(int v) const {  // 0 unless a col broadcast
    const Op& o = op(v);
    const Type& s = type(o.operands[0]);
    if (o.kind != OpKind::broadcast || s.dims.empty() || uint64_t(s.bytes()) * 2 > t.vmem_bytes / 16) return 0;
    for (size_t i = 0; i < o.dims.size(); ++i)
      if (o.dims[i] != int64_t(i) || s.dims[i] != o.type.dims[i]) return 0;
    int64_t inner = 1;
    for (size_t i = o.dims.size(); i < o.type.dims.size(); ++i) inner *= o.type.dims[i];
    return inner % int64_t(t.vpu_lanes) == 0 && inner > 1 ? inner : 0;
  }
  bool matmul_root(int v) const { return (op(v).kind == OpKind::dot || chain[v]) && !in_chain[v]; }

  void classify();
  Expr build_expr(int root, std::vector<int>& inputs, bool& too_big);
  void make_kernels();
  void bound_expressions();
  std::vector<int> fuse_epilogues();
  void absorb_into_consumers(const std::vector<int>& epilogue_of);
  Kernel kernel_of(int v, const std::vector<int>& epilogue_of);
  std::vector<int> reads(const Kernel& k) const;
  // The sliced values kernel k reads (at most one once planned).
  std::vector<int> slices_read(const Kernel& k) const;
  bool readable_in_place(int v) const;
  void assign_buffers();
  void plan_loop(LoopPlan& l, const Op& w, const std::vector<uint64_t>& state, uint64_t scratch) const;
  int64_t counted_trips(const Op& w) const;
};

}  // namespace tpu::compiler::backend
