// The back end (codegen.h): plan kernels over the canonical IR, then emit
// assembly for them. docs/compiler.md explains the kernels and their
// synchronisation; in short:
//
// - Every materialised tensor lives in HBM, row-major; reshape is free.
// - Element-wise ops fuse into one VPU loop over the flat tensor, with
//   scalars, splat constants and row vectors (bias) broadcast inside it.
// - A matmul (a dot, or a sum of dots such as the bf16 passes of an f32 dot)
//   runs on every MXU, with its element-wise consumer fused as the epilogue
//   the VPU applies while it drains the accumulators.
// - Reductions and layout changes (transpose, slice, pad, concatenate,
//   broadcast) have their own kernels.
// - Every kernel double-buffers its VMEM tiles: DMA, MXU and VPU work
//   overlap, ordered by counting semaphores; kernels follow each other.
#include "tpu/compiler/codegen.h"
#include "tpu/isa/isa.h"
#include "tpu/isa/program.h"
#include "loops.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <set>
#include <tuple>

namespace tpu::compiler {

using namespace ir;

namespace {

constexpr uint64_t kHbmAlign = 512;
constexpr int kMaxExprRegs = 24;  // vector registers an expression may use per vector

uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }
int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

const char* vty(DType d) {  // load/store suffix
  switch (d) {
    case DType::f32: return "f32";
    case DType::s32:
    case DType::u32: return "s32";  // the same 32 bits (lower-unsigned leaves only bit-level u32 ops)
    case DType::bf16: return "bf16";
    default: return "s8";
  }
}
const char* aty(DType d) { return is_float(d) ? "f32" : "s32"; }  // arithmetic suffix

namespace ib = isa::build;

// The opcode of the mnemonic `parts` spell: instruction selection is a
// lookup in isa.def's table (a name it lacks is a bug here).
template <typename... S>
isa::Opcode opcode(const S&... parts) {
  std::string m;
  ((m += parts), ...);
  const isa::InsnSpec* s = isa::find_mnemonic(m);
  if (s == nullptr) throw std::logic_error("internal error: no instruction " + m);
  return s->op;
}

// Instruction `op` with its scalar-register operands left 0 for the values
// push() binds to them, and its other operands `rest`, in format order.
isa::Instruction with_regs(isa::Opcode op, std::initializer_list<int64_t> rest) {
  const auto& ops = isa::format_spec(isa::spec(op).format).operands;
  std::vector<int64_t> v;
  auto it = rest.begin();
  for (const auto& o : ops) {
    if (o.kind == isa::OperandKind::Sreg) v.push_back(0);
    else if (it == rest.end()) throw std::logic_error(fmt::format("internal error: {} lacks its {}", isa::spec(op).mnemonic, o.role));
    else v.push_back(*it++);
  }
  return isa::make(op, v.data(), v.size());
}

uint32_t lane_bits(DType d, double v) {
  if (is_float(d)) {
    const float f = float(v);
    uint32_t b;
    std::memcpy(&b, &f, 4);
    return b;
  }
  return uint32_t(uint64_t(int64_t(v)));
}

std::vector<int64_t> row_major(const std::vector<int64_t>& dims) {
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
  int row_len = 0;          // row leaves' length (the broadcast dimension)
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

std::set<uint32_t> Expr::constants() const {
  std::set<uint32_t> c;
  for (const Node& n : nodes) {
    if (n.leaf == Leaf::splat) c.insert(lane_bits(n.dtype, n.value));
    if (n.leaf == Leaf::col) c.insert({0u, is_float(n.dtype) ? kNegInf : kIntMin});
    if (n.leaf != Leaf::none) continue;
    if (n.dtype == DType::s8) c.insert(kS8Shift);
    if (n.kind == OpKind::convert && n.dtype == DType::pred) c.insert(0u);
    if (n.kind == OpKind::not_ && n.dtype == DType::pred) c.insert(1u);
    if (n.kind == OpKind::shift_right_logical && n.dtype == DType::s8) c.insert(kLowByte);
  }
  return c;
}

// A strided view of a tensor in HBM, in elements.
struct View {
  uint64_t base = 0;  // byte address of element 0
  std::vector<int64_t> dims, strides;
};

enum class KKind { elementwise, copy, reduce_lanes, reduce_columns, matmul, all_reduce, all_gather, reduce_scatter, all_to_all, permute };
const char* kind_name(KKind k) {
  static const char* const names[] = {"elementwise", "copy",       "reduce-lanes", "reduce-columns", "matmul",
                                      "all-reduce",  "all-gather", "reduce-scatter", "all-to-all",   "collective-permute"};
  return names[int(k)];
}

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
  std::vector<std::string> from;  // HLO locations
};

// ---------------------------------------------------------------- the plan

// A symbol name for the assembler: letters, digits and '_', at most 64
// characters, unique.
std::string clean_name(const std::string& s, std::set<std::string>& used) {
  std::string n;
  for (char c : s.substr(0, 48)) n += std::isalnum(uint8_t(c)) ? c : '_';
  if (n.empty() || std::isdigit(uint8_t(n[0]))) n = "t_" + n;
  std::string u = n;
  for (int i = 2; used.count(u); ++i) u = fmt::format("{}_{}", n, i);
  used.insert(u);
  return u;
}

}  // namespace

struct Plan {
  const Function& f;
  isa::Target t;
  std::vector<std::vector<int>> users;
  std::vector<bool> result;
  std::vector<int> base;        // reshape alias root
  std::vector<bool> mat;        // has an HBM buffer of its own
  std::vector<bool> view;       // a layout op read only by copies: folded into their strided views
  std::vector<bool> chain;      // add of dots (a matmul pass sum)
  std::vector<bool> in_chain;   // dot or chain consumed by a chain add
  std::vector<int> fused_into;  // matmul root -> epilogue kernel's output value
  std::vector<uint64_t> addr;   // HBM byte address of each materialised base
  std::vector<Kernel> kernels;
  uint64_t hbm_used = 0;
  std::vector<isa::DataSegment> data;  // the constants' bytes
  std::vector<isa::TensorSymbol> symbols;

  Plan(const Function& fn, const isa::Target& target);

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
  Kernel kernel_of(int v, const std::vector<int>& epilogue_of);
  void assign_buffers();
};

Plan::Plan(const Function& fn, const isa::Target& target) : f(fn), t(target) {
  if (t.mxu_dim != t.vpu_lanes)
    throw Error(fmt::format("the code generator needs vpu_lanes == mxu_dim (target has {} and {})", t.vpu_lanes, t.mxu_dim));
  const size_t n = f.ops.size();
  users.assign(n, {});
  result.assign(n, false);
  for (size_t i = 0; i < n; ++i)
    for (int o : f.ops[i].operands) users[o].push_back(int(i));
  for (int r : f.results) result[r] = true;
  base.resize(n);
  for (size_t i = 0; i < n; ++i) base[i] = f.ops[i].kind == OpKind::reshape ? base[f.ops[i].operands[0]] : int(i);
  classify();
  make_kernels();
  assign_buffers();
}

void Plan::classify() {
  const size_t n = f.ops.size();
  chain.assign(n, false);
  in_chain.assign(n, false);
  fused_into.assign(n, -1);
  for (size_t i = 0; i < n; ++i) {
    const Op& o = f.ops[i];
    if (o.kind != OpKind::add) continue;
    bool ok = true;
    for (int a : o.operands)
      ok &= (op(a).kind == OpKind::dot || chain[a]) && users[a].size() == 1 && !result[a] && type(a) == o.type;
    if (ok && o.operands[0] != o.operands[1]) {
      // All dots of a chain share their shapes.
      const Op* d0 = nullptr;
      std::function<bool(int)> same = [&](int v) -> bool {
        if (op(v).kind == OpKind::dot) {
          if (!d0) d0 = &op(v);
          return type(op(v).operands[0]).dims == type(d0->operands[0]).dims &&
                 type(op(v).operands[1]).dims == type(d0->operands[1]).dims &&
                 type(op(v).operands[0]).dtype == type(d0->operands[0]).dtype;
        }
        return same(op(v).operands[0]) && same(op(v).operands[1]);
      };
      if (same(int(i))) {
        chain[i] = true;
        for (int a : o.operands) in_chain[a] = true;
      }
    }
  }
  mat.assign(n, false);
  for (size_t i = 0; i < n; ++i) {
    const Op& o = f.ops[i];
    const bool ew = is_elementwise(o.kind);
    bool m = result[i];
    switch (o.kind) {
      case OpKind::parameter: m = true; break;
      case OpKind::constant: m = m || !splat(int(i)); break;
      case OpKind::reshape: break;
      case OpKind::dot: m = m || !in_chain[i]; break;
      case OpKind::broadcast: m = m || !leaf_broadcast(int(i)); break;
      default:
        if (chain[i]) {
          m = m || !in_chain[i];
        } else if (!ew) {
          m = true;
        }
    }
    // Anything read by a non-element-wise consumer needs a buffer.
    for (int u : users[i]) {
      const Op& uo = f.ops[u];
      const bool ew_user = is_elementwise(uo.kind) && !chain[u];
      const bool bcast_user = uo.kind == OpKind::broadcast && leaf_broadcast(u);
      if (!ew_user && !(chain[u] && op(int(i)).kind == OpKind::dot) && !(chain[u] && chain[i])) {
        if (o.kind == OpKind::constant && splat(int(i)) && bcast_user) continue;
        // Reduce inits and pad values are immediates in their kernels.
        const bool immediate = (uo.kind == OpKind::reduce || uo.kind == OpKind::pad) && uo.operands[1] == int(i);
        if (o.kind == OpKind::constant && splat(int(i)) && immediate && uo.operands[0] != int(i)) continue;
        m = true;
      }
    }
    if (ew && !chain[i] && users[i].size() != 1) m = true;
    if (ew && type(int(i)).dims.empty() && !users[i].empty()) {
      // A rank-0 value feeding larger element-wise ops is loaded as a scalar.
      for (int u : users[i])
        if (!type(u).dims.empty()) m = true;
    }
    if (o.kind == OpKind::reshape) mat[base[i]] = true;
    mat[i] = m;
  }
  // Slices, transposes, reverses and (non-leaf) broadcasts read only by
  // other copies (concatenate, pad, another layout op) are not
  // materialised: the copy reads through them (im2col: one kernel).
  view.assign(n, false);
  auto layout_op = [&](int v) {
    const OpKind k = op(v).kind;
    return k == OpKind::slice || k == OpKind::transpose || k == OpKind::reverse || (k == OpKind::broadcast && !leaf_broadcast(v));
  };
  for (size_t i = 0; i < n; ++i) {
    if (!layout_op(int(i)) || result[i] || users[i].empty()) continue;
    bool copies_only = true;
    for (int u : users[i])
      copies_only &= layout_op(u) || op(u).kind == OpKind::concatenate || (op(u).kind == OpKind::pad && op(u).operands[0] == int(i));
    if (copies_only) view[i] = true, mat[i] = false;
  }
  // Splat constants and leaf broadcasts read only by element-wise ops stay unmaterialised.
  for (size_t i = 0; i < n; ++i) {
    const Op& o = f.ops[i];
    if (result[i] || o.kind == OpKind::parameter) continue;
    if ((o.kind == OpKind::constant && splat(int(i))) || leaf_broadcast(int(i))) {
      bool only_ew = true;
      for (int u : users[i]) only_ew &= (is_elementwise(op(u).kind) && !chain[u]) || leaf_broadcast(u);
      if (only_ew) mat[i] = false;
    }
  }
}

// Builds the expression of an element-wise kernel rooted at `root`.
Expr Plan::build_expr(int root, std::vector<int>& inputs, bool& too_big) {
  Expr e;
  std::map<int, int> done;     // IR value -> node
  std::map<std::tuple<int, int, int, uint32_t, int64_t>, int> leaf_of;  // (kind, input, dtype, splat bits, col span) -> node
  auto input_index = [&](int v) {
    for (size_t i = 0; i < inputs.size(); ++i)
      if (inputs[i] == v) return int(i);
    inputs.push_back(v);
    return int(inputs.size()) - 1;
  };
  const Type& rt = type(root);
  std::function<int(int, bool)> visit = [&](int v, bool top) -> int {
    if (auto it = done.find(v); it != done.end()) return it->second;
    Node nd;
    nd.value_id = v;
    nd.dtype = type(v).dtype;
    const Op& o = op(v);
    if (auto s = splat(v)) {
      nd.leaf = Leaf::splat, nd.value = *s;
    } else if (!top && leaf_broadcast(v) && !mat[v]) {
      const int src = o.operands[0];
      if (auto s2 = splat(src)) {
        nd.leaf = Leaf::splat, nd.value = *s2;
      } else if (type(src).dims.empty()) {
        nd.leaf = Leaf::scalar, nd.input = input_index(base[src]);
      } else if (col_inner(v) > 0 && !(type(src).dims.size() == 1 && o.dims[0] == int64_t(o.type.dims.size()) - 1)) {
        nd.leaf = Leaf::col, nd.input = input_index(base[src]);
        nd.value = double(col_inner(v));  // elements per source element
      } else {
        nd.leaf = Leaf::row, nd.input = input_index(base[src]);
        e.row_len = int(type(src).dims[0]);
      }
    } else if (!top && (mat[v] || !is_elementwise(o.kind) || chain[v])) {
      nd.leaf = type(v).dims.empty() && !rt.dims.empty() ? Leaf::scalar : Leaf::input;
      nd.input = input_index(base[v]);
    } else {
      nd.kind = o.kind;
      nd.dir = o.direction;
      nd.src = type(o.operands[0]).dtype;
      for (int a : o.operands) nd.args.push_back(visit(a, false));
    }
    if (nd.leaf != Leaf::none) {  // one node per distinct leaf
      const auto key = std::make_tuple(int(nd.leaf), nd.input, int(nd.dtype), nd.leaf == Leaf::splat ? lane_bits(nd.dtype, nd.value) : 0u,
                                       nd.leaf == Leaf::col ? int64_t(nd.value) : 0);
      if (auto it = leaf_of.find(key); it != leaf_of.end()) return done[v] = it->second;
      leaf_of[key] = int(e.nodes.size());
    }
    e.nodes.push_back(nd);
    return done[v] = int(e.nodes.size()) - 1;
  };
  visit(root, true);
  int live = 0;
  for (const Node& nd : e.nodes) live += !nd.hoisted();
  too_big = live > kMaxExprRegs || live + e.held_registers() > isa::kNumVregs;
  return e;
}

void Plan::make_kernels() {
  bound_expressions();
  const std::vector<int> epilogue_of = fuse_epilogues();
  for (size_t i = 0; i < f.ops.size(); ++i) {
    const Op& o = op(int(i));
    if (!mat[i] || o.kind == OpKind::parameter || (o.kind == OpKind::constant && !splat(int(i))) || o.kind == OpKind::reshape)
      continue;
    if (fused_into[i] >= 0) continue;
    kernels.push_back(kernel_of(int(i), epilogue_of));
  }
}

// Bounds the fused element-wise expressions by materialising values.
void Plan::bound_expressions() {
  const size_t n = f.ops.size();
  // Long element-wise chains first: a bottom-up estimate of each fused
  // expression's nodes (shared subtrees counted once per use, so it is an
  // upper bound) materialises the largest operand until the estimate is
  // small. Linear in the ops, and it bounds the expressions the exact split
  // below builds (its recursion depth and its cost); expressions already
  // this small are untouched.
  constexpr int64_t kMaxEstimate = 16 * kMaxExprRegs;
  std::vector<int64_t> est(n, 0);
  for (size_t i = 0; i < n; ++i) {
    if (mat[i] || !is_elementwise(op(int(i)).kind) || chain[i]) continue;
    for (;;) {
      int64_t e = 1, largest = 0;
      int arg = -1;
      for (int a : op(int(i)).operands) {
        e += est[a] ? est[a] : 1;
        if (est[a] > largest) largest = est[a], arg = a;
      }
      est[i] = e;
      if (e <= kMaxEstimate || arg < 0) break;
      mat[arg] = true;
      est[arg] = 0;
    }
  }
  // Split expressions that would need too many registers: materialise the
  // root's largest element-wise operand and try again. A split at root i
  // leaves the roots before the split value unchanged and only shrinks the
  // others, so the scan resumes at the split value (a new root).
  for (size_t i = 0; i < n; ++i) {
    if (!mat[i] || !is_elementwise(op(int(i)).kind) || chain[i]) continue;
    std::vector<int> inputs;
    bool big = false;
    Expr e = build_expr(int(i), inputs, big);
    if (!big) continue;
    // The non-materialised element-wise operand subtree with the most nodes.
    std::map<int, int> sizes;
    std::function<int(int)> size = [&](int v) -> int {
      if (mat[v] || !is_elementwise(op(v).kind)) return 0;
      if (auto it = sizes.find(v); it != sizes.end()) return it->second;
      int s = 1;
      for (int a : op(v).operands) s += size(a);
      return sizes[v] = s;
    };
    int best = -1, best_size = 0;
    std::function<void(int)> walk = [&](int v) {
      for (int a : op(v).operands)
        if (!mat[a] && is_elementwise(op(a).kind)) {
          if (size(a) > best_size) best = a, best_size = size(a);
          walk(a);
        }
    };
    walk(int(i));
    if (best < 0) throw std::logic_error(fmt::format("{}: internal error: cannot split a large expression", op(int(i)).loc));
    mat[best] = true;
    i = size_t(best) - 1;  // ++i: resume at the new root
  }
}

// Epilogue fusion: an element-wise root whose one tensor input is a
// single-use matmul and whose other leaves are splats, scalars and rows.
// Returns, per value, the matmul fused into it (or -1).
std::vector<int> Plan::fuse_epilogues() {
  const size_t n = f.ops.size();
  std::vector<int> epilogue_of(n, -1);
  for (size_t i = 0; i < n; ++i) {
    if (!mat[i] || !is_elementwise(op(int(i)).kind) || chain[i]) continue;
    std::vector<int> inputs;
    bool big = false;
    Expr e = build_expr(int(i), inputs, big);
    // One tensor leaf must be a matmul (the accumulators); up to two more
    // full tensors (a residual, a mask) are loaded tile by tile.
    int mm = -1, others = 0;
    for (const Node& nd : e.nodes)
      if (nd.leaf == Leaf::input) {
        if (mm < 0 && matmul_root(inputs[nd.input]) && !result[inputs[nd.input]] && fused_into[inputs[nd.input]] < 0) mm = inputs[nd.input];
        else if (inputs[nd.input] != mm) ++others;
      }
    if (mm < 0 || others > 2) continue;
    for (const Node& nd : e.nodes)  // the other tensors have the result's element order
      if (nd.leaf == Leaf::input && inputs[nd.input] != mm && type(inputs[nd.input]).elements() != type(mm).elements()) others = 99;
    if (others > 2) continue;
    bool single = true;
    // Every reader of the matmul (through reshapes) must be in this expression.
    std::set<int> members;
    for (const Node& nd : e.nodes)
      if (nd.leaf == Leaf::none) members.insert(nd.value_id);
    int reads = 0;
    std::function<void(int)> count = [&](int v) {
      for (int u : users[v]) {
        if (op(u).kind == OpKind::reshape) {
          single &= !result[u];
          count(u);
        } else {
          ++reads;
          single &= members.count(u) > 0;
        }
      }
    };
    count(mm);
    const int64_t N = type(mm).dims.back();
    if (!single || reads < 1 || (e.row_len && e.row_len != N) || type(int(i)).dims.empty() || type(int(i)).dims.back() != N)
      continue;
    fused_into[mm] = int(i);
    epilogue_of[i] = mm;
  }
  return epilogue_of;
}

// The kernel computing materialised value v.
Kernel Plan::kernel_of(int v, const std::vector<int>& epilogue_of) {
  const Op& o = op(v);
  Kernel k;
  k.out = v;
  k.from.push_back(o.loc);
  if (is_elementwise(o.kind) && !chain[size_t(v)] && epilogue_of[size_t(v)] < 0) {
    k.kind = KKind::elementwise;
    bool big = false;
    k.expr = build_expr(v, k.inputs, big);
  } else if ((o.kind == OpKind::constant) || (o.kind == OpKind::broadcast && leaf_broadcast(v) &&
                                              (splat(o.operands[0]) || type(o.operands[0]).dims.empty()))) {
    k.kind = KKind::elementwise;  // a fill
    bool big = false;
    k.expr = build_expr(v, k.inputs, big);
    if (o.kind == OpKind::broadcast) {
      Expr e;
      Node nd;
      nd.dtype = o.type.dtype;
      nd.value_id = v;
      if (auto s = splat(o.operands[0])) {
        nd.leaf = Leaf::splat, nd.value = *s;
      } else {
        nd.leaf = Leaf::scalar;
        k.inputs = {base[o.operands[0]]};
        nd.input = 0;
      }
      e.nodes.push_back(nd);
      k.expr = e;
    }
  } else if (matmul_root(v) || epilogue_of[size_t(v)] >= 0) {
    const int mm = epilogue_of[size_t(v)] >= 0 ? epilogue_of[size_t(v)] : v;
    k.kind = KKind::matmul;
    std::function<void(int)> collect = [&](int v) {
      if (op(v).kind == OpKind::dot) {
        k.passes.push_back({base[op(v).operands[0]], base[op(v).operands[1]]});
        k.from.push_back(op(v).loc);
      } else {
        collect(op(v).operands[0]), collect(op(v).operands[1]);
      }
    };
    collect(mm);
    const Op* d = &op(mm);
    while (d->kind != OpKind::dot) d = &op(d->operands[0]);
    const Type& at = type(d->operands[0]);
    const Type& wt = type(d->operands[1]);
    if (at.dims.size() == 3) k.B = at.dims[0];
    k.M = at.dims[at.dims.size() - 2], k.K = at.dims.back(), k.N = wt.dims.back();
    k.dtype = at.dtype;
    if (epilogue_of[size_t(v)] >= 0) {
      bool big = false;
      k.expr = build_expr(v, k.inputs, big);
      for (Node& nd : k.expr.nodes)
        if (nd.leaf == Leaf::input && k.inputs[nd.input] == base[mm]) nd.leaf = Leaf::acc;
    } else {
      Node nd;
      nd.leaf = Leaf::acc;
      nd.dtype = o.type.dtype;
      nd.value_id = mm;
      k.expr.nodes.push_back(nd);
    }
  } else if (is_collective(o.kind)) {
    k.kind = o.kind == OpKind::all_reduce       ? KKind::all_reduce
             : o.kind == OpKind::all_gather     ? KKind::all_gather
             : o.kind == OpKind::reduce_scatter ? KKind::reduce_scatter
             : o.kind == OpKind::all_to_all     ? KKind::all_to_all
                                                : KKind::permute;
    k.inputs = {base[o.operands[0]]};
    k.combiner = o.combiner;
    k.groups = o.groups;
    k.dimension = o.index;
    k.dtype = o.type.dtype;
  } else if (o.kind == OpKind::reduce) {
    const Type& xt = type(o.operands[0]);
    k.kind = o.dims[0] == 1 ? KKind::reduce_lanes : KKind::reduce_columns;
    k.inputs = {base[o.operands[0]]};
    k.rows = xt.dims[0], k.cols = xt.dims[1];
    k.combiner = o.combiner;
    const auto s = splat(o.operands[1]);
    if (!s) throw Error(fmt::format("{}: internal error: reduce init is not a constant", o.loc));
    k.init = *s;
    k.dtype = xt.dtype;
  } else {
    k.kind = KKind::copy;
    k.dtype = o.type.dtype;
    for (int a : o.operands) k.inputs.push_back(base[a]);
  }
  return k;
}

isa::TensorSymbol tensor_symbol(isa::SymbolKind kind, std::string name, const Type& t, uint64_t addr,
                                const std::vector<int64_t>& tiles = {}) {
  isa::TensorSymbol s;
  s.kind = kind, s.name = std::move(name), s.dtype = isa_dtype(t.dtype), s.hbm_addr = addr;
  for (int64_t d : t.dims) s.dims.push_back(uint64_t(d));
  for (int64_t d : tiles) s.tiles.push_back(uint64_t(d));
  return s;
}

void Plan::assign_buffers() {
  const size_t n = f.ops.size();
  addr.assign(n, ~uint64_t(0));
  uint64_t cursor = 0;
  auto take = [&](int v) {
    addr[v] = cursor;
    cursor = align_up(cursor + uint64_t(type(v).bytes()), kHbmAlign);
  };
  std::set<std::string> used;
  std::vector<std::string> out_names;
  const auto params = f.params();
  for (size_t p = 0; p < params.size(); ++p) {
    take(params[p]);
    const std::string name = clean_name(p < f.param_names.size() && !f.param_names[p].empty() ? f.param_names[p] : fmt::format("arg{}", p), used);
    symbols.push_back(tensor_symbol(isa::SymbolKind::Input, name, f.param_global_type(p), addr[params[p]],
                                    p < f.param_tiles.size() ? f.param_tiles[p] : std::vector<int64_t>{}));
  }
  for (size_t i = 0; i < n; ++i) {
    const Op& o = f.ops[i];
    if (o.kind != OpKind::constant || !mat[i] || splat(int(i))) continue;
    take(int(i));
    symbols.push_back(tensor_symbol(isa::SymbolKind::Constant, clean_name(fmt::format("const{}", i), used), o.type, addr[i]));
    isa::DataSegment d;
    d.hbm_addr = addr[i];
    const int esz = dtype_bytes(o.type.dtype);
    for (double v : o.literal) {
      uint32_t bits = lane_bits(o.type.dtype, v);
      if (o.type.dtype == DType::bf16) bits >>= 16;
      for (int b = 0; b < esz; ++b) d.bytes.push_back(uint8_t(bits >> (8 * b)));  // little-endian
    }
    if (!d.bytes.empty()) data.push_back(std::move(d));  // an empty constant has a symbol only
  }
  for (const Kernel& k : kernels) take(k.out);
  for (size_t r = 0; r < f.results.size(); ++r) {
    const int v = base[f.results[r]];
    if (addr[v] == ~uint64_t(0)) throw Error(fmt::format("internal error: result {} has no buffer", r));
    out_names.push_back(clean_name(fmt::format("out{}", r), used));
    symbols.push_back(tensor_symbol(isa::SymbolKind::Output, out_names.back(), f.result_global_type(r), addr[v],
                                    r < f.result_tiles.size() ? f.result_tiles[r] : std::vector<int64_t>{}));
  }
  hbm_used = cursor;
  if (hbm_used > t.hbm_bytes)
    throw Error(fmt::format("the program needs {} bytes of HBM, the target has {}", hbm_used, t.hbm_bytes));
}

// ---------------------------------------------------------------- emission

namespace {

// A semaphore whose counts arrive in order: consumers wait for running totals.
struct Counter {
  int sem = 0;
  int64_t produced = 0, consumed = 0;
  // when[i]: estimated cycle by which i + 1 counts have arrived (a running
  // maximum, so a wait is placed after every signal it may need).
  std::vector<double> when;
  void produce(double t, int64_t n = 1) {
    produced += n;
    if (!when.empty()) t = std::max(t, when.back());
    when.insert(when.end(), size_t(n), t);
  }
};

// One instruction (or comment) before the schedule orders them.
struct Pending {
  double key = 0;  // its place in the program: its dispatch estimate, unless pinned (Emitter::pin_)
  Scheduled s;
};

// The DMA's bytes per cycle for the cost model: the HBM's peak, or with
// ideal memory (no bandwidth limit) what the engine sends, whole bursts a
// cycle.
double dma_bytes_per_cycle(const isa::MachineConfig& m) {
  const double peak = m.hbm_peak_bytes_per_s();
  return peak > 0 ? std::max(1.0, peak / double(m.clock_hz)) : double(m.dma.burst_bytes) * m.dma.bursts_per_cycle;
}

// The vector registers of the kernel being emitted. What the kernel holds
// for its whole length (constants, scalar inputs, a lane mask) is taken
// from v31 down; values computed per vector use v0 up to below those.
class VRegs {
 public:
  void reset() { *this = VRegs(); }
  // A register held for the rest of the kernel.
  int hold() {
    if (top_ <= low_) throw std::logic_error("internal error: out of vector registers");
    return --top_;
  }
  // The register that holds lane pattern `bits`, and whether it is new (its
  // holder loads it).
  std::pair<int, bool> constant(uint32_t bits) {
    if (auto it = consts_.find(bits); it != consts_.end()) return {it->second, false};
    return {consts_[bits] = hold(), true};
  }
  int at(uint32_t bits) const { return consts_.at(bits); }
  // Per-vector values use v0 .. v(n - 1) from now on; returns how many are free for them.
  int below_held() const { return top_; }
  void per_vector(int n) {
    if (n > top_) throw std::logic_error("internal error: out of vector registers");
    low_ = std::max(low_, n);
  }

 private:
  std::map<uint32_t, int> consts_;
  int top_ = isa::kNumVregs, low_ = 0;
};

class MatmulEmitter;

// The units, numbered as `wait` and `signal` name them.
constexpr int kSc = isa::kUnitScalar, kDma = isa::kUnitDma, kVpu = isa::kUnitVpu, kMxu0 = isa::kUnitMxu0;

class Emitter {
 public:
  // The program of core `core` of `ncores` (each runs its share of every
  // kernel; see run()) of chip `chip` of `nchips` (its collectives differ).
  Emitter(const Plan& p, const isa::MachineConfig& m, bool loops, int64_t core = 0, int64_t ncores = 1, int64_t chip = 0,
          int64_t nchips = 1)
      : p_(p),
        core_(core),
        ncores_(ncores),
        chip_(chip),
        nchips_(nchips),
        L_(int64_t(p.t.vpu_lanes)),
        D_(int64_t(p.t.mxu_dim)),
        m_(m),
        loops_(loops),
        kDmaBytesPerCycle(dma_bytes_per_cycle(m)),
        kDmaLatency(m.dma_latency_cycles()),
        kDmaBurst(m.dma.burst_bytes),
        kDmaBurstsPerCycle(m.dma.bursts_per_cycle) {}

  // The whole program. On a chip of several TensorCores every core runs
  // it: each reads its `core` CSR and branches to its own code, which does
  // its share of every kernel (Emitter::share) and meets the other cores at
  // the end of each kernel (their results are in HBM before any core reads
  // them in the next).
  Generated run() {
    Generated g;
    isa::Program& prog = g.program;
    prog.target = p_.t;
    prog.symbols = p_.symbols;
    prog.data = p_.data;
    prog.checks = p_.f.checks;
    for (size_t i = 0; i < p_.kernels.size(); ++i) {
      kernel_ops_.push_back(p_.profile_ops(p_.kernels[i]));
      isa::KernelInfo info{debug_text(kernel_name(i, p_.kernels[i])), {}};
      for (const auto& [loc, work] : kernel_ops_.back()) info.ops.push_back({debug_text(loc), work});
      prog.kernels.push_back(std::move(info));
    }
    // Each (chip, core) runs its own code: the cores split the work, and a
    // system's chips (an SPMD program) differ in their collectives.
    std::vector<isa::Instruction> code;
    const int64_t programs = nchips_ * ncores_;
    std::vector<size_t> branch;  // per program after the first: the beq to its code
    if (programs > 1) {
      constexpr int id = 29, tmp = 30;
      if (nchips_ > 1) {
        code.push_back(ib::CSRR(id, isa::values::Csr_chip));
        code.push_back(ib::MULI(id, id, ncores_));
        code.push_back(ib::CSRR(tmp, isa::values::Csr_core));
        code.push_back(ib::ADD(id, id, tmp));
      } else {
        code.push_back(ib::CSRR(id, isa::values::Csr_core));
      }
      for (int64_t c = 1; c < programs; ++c) {
        code.push_back(ib::LI(tmp, c));
        branch.push_back(code.size());
        code.push_back(ib::BEQ(id, tmp, 0));
      }
    }
    std::vector<std::pair<size_t, int>> marks;
    for (int64_t c = 0; c < programs; ++c) {
      Emitter e(p_, m_, loops_, c % ncores_, ncores_, c / ncores_, nchips_);
      e.kernel_ops_ = kernel_ops_;
      const size_t start = code.size();
      if (c > 0) code[branch[size_t(c - 1)]][isa::operand::B::target] = int64_t(start - branch[size_t(c - 1)]);
      LoopCode body = e.body();
      if (start + body.code.size() > isa::kMaxInstructions)
        throw Error(fmt::format("the program needs more than {} instructions, the most a .tpu holds", isa::kMaxInstructions));
      code.insert(code.end(), body.code.begin(), body.code.end());
      for (const auto& [pc, k] : body.kernel_marks) marks.push_back({start + pc, k});
      for (auto& [pc, text] : body.notes) g.notes.push_back({start + pc, std::move(text)});
    }
    prog.code.reserve(code.size());
    for (const isa::Instruction& i : code) prog.code.push_back(isa::encode(i));
    if (!prog.kernels.empty()) {
      prog.kernel_of.assign(code.size(), isa::kNoKernel);
      for (size_t i = 0; i < marks.size(); ++i) {
        const size_t end = i + 1 < marks.size() ? marks[i + 1].first : code.size();
        std::fill(prog.kernel_of.begin() + long(marks[i].first), prog.kernel_of.begin() + long(end), uint32_t(marks[i].second));
      }
    }
    isa::validate(prog);
    return g;
  }

 private:
  // This core's code: its share of every kernel, each followed (on several
  // cores) by a barrier across the cores.
  LoopCode body() {
    for (size_t i = 0; i < p_.kernels.size(); ++i) {
      kernel(i, p_.kernels[i]);
      if (ncores_ > 1 && i + 1 < p_.kernels.size()) core_barrier();
    }
    cur_kernel_ = -1;
    push(kSc, now(), ib::HALT());
    return schedule();
  }
  // Every core's stores of the kernel have landed (its drain waited for
  // them); each tells the others behind its own transfers and waits for
  // theirs, on a semaphore no kernel uses.
  void core_barrier() {
    for (int64_t o = 0; o < ncores_; ++o)
      if (o != core_) push(kDma, done_[kDma], ib::DMA_CSIG(0, kCoreSem, 1), {uint64_t(o)});
    push(kSc, now(), ib::WAIT(kSc, kCoreSem, ncores_ - 1));
  }
  // [lo, hi) of n items (multiples of `align` but the last) for this core.
  std::pair<int64_t, int64_t> share(int64_t n, int64_t align) const {
    auto cut = [&](int64_t c) { return c == ncores_ ? n : n * c / ncores_ / align * align; };
    return {cut(core_), cut(core_ + 1)};
  }

  // ---- scheduling. Kernels are generated unit by unit in dependency order;
  // every instruction gets an estimated dispatch cycle from a simple model
  // of its unit (below). The program is then those instructions sorted by
  // that cycle (stable, so each unit keeps its order and every signal
  // precedes the waits it satisfies): the scalar unit pushes work to each
  // queue shortly before the queue can take it, so no queue fills up with
  // blocked work while another unit starves.
  static constexpr int kBarrierSem = isa::kNumSems - 1;  // every queue signals it at the end of a kernel
  static constexpr int kCoreSem = isa::kNumSems - 2;     // the other cores signal it at the end of a kernel
  static constexpr int kChipSem = isa::kNumSems - 3;     // the other chips signal it entering a collective
  double now() const {
    double t = floor_;
    for (double c : clk_) t = std::max(t, c);
    return t;
  }
  // Records an instruction of `unit` that may not dispatch before `ready`,
  // keeps the unit busy `occupancy` cycles and completes `latency` after it
  // dispatches. Returns the dispatch estimate.
  // `vals` are the values of its scalar-register operands, in order; the
  // loop writer puts each in a register (loops.h).
  double push(int unit, double ready, const isa::Instruction& insn, std::vector<uint64_t> vals = {}, double occupancy = 1,
              double latency = 1) {
    if (unit == kVpu) return push_vpu(ready, insn, std::move(vals), occupancy, latency);
    const double t = std::max({clk_[unit], ready, floor_, pin_});
    record(t, unit, insn, std::move(vals));
    clk_[unit] = t + std::max(1.0, occupancy);
    done_[unit] = std::max(done_[unit], t + latency);
    if (unit == kSc) floor_ = t;  // the scalar unit stalls: nothing after it issues earlier
    return t;
  }
  // The VPU dispatches in order, in issue groups within its slots
  // (docs/timing.md); `wait` takes no slot, `signal` and `vxpose` go alone.
  // Register dependencies are not modelled. An instruction's slot and
  // latency come from its class (isa.def) and the config.
  double push_vpu(double ready, const isa::Instruction& insn, std::vector<uint64_t> vals, double occupancy, double latency) {
    const isa::InsnSpec* spec = &isa::spec(insn.op);
    const bool wait = spec->op == isa::Opcode::WAIT, sync = spec->unit == isa::ExecUnit::Sync;
    const isa::VpuSlot slot = sync ? isa::VpuSlot::Whole : isa::vpu_slot(spec->vpu_class);
    const bool alone = slot == isa::VpuSlot::Whole;
    if (!sync) latency = m_.vpu_latency(spec->vpu_class);
    const int k = slot == isa::VpuSlot::Load ? 0 : slot == isa::VpuSlot::Store ? 1 : 2;
    const auto& iss = m_.vpu.issue;
    const double limit[3] = {double(iss.load), double(iss.store), double(iss.alu)};
    auto next_group = [&](double t) { vgroup_ = t, vn_ = 0, vused_[0] = vused_[1] = vused_[2] = 0; };
    double t = std::max({ready, vgroup_, floor_, pin_});
    if (t > vgroup_) next_group(t);
    if (!wait) {
      if (vn_ > 0 && (alone || vn_ >= double(iss.width) || vused_[k] >= limit[k])) next_group(vgroup_ + 1);
      t = vgroup_;
      if (alone) {
        next_group(t + std::max(1.0, occupancy));
      } else {
        ++vn_, ++vused_[k];
      }
    }
    record(t, kVpu, insn, std::move(vals));
    clk_[kVpu] = vn_ > 0 ? vgroup_ + 1 : vgroup_;
    done_[kVpu] = std::max(done_[kVpu], t + latency);
    return t;
  }
  // Adds an instruction at its place; `vals` bind its scalar-register
  // operands, in order. A VPU load or store from `s0 + imm` has its
  // address bound instead, so a loop can step it.
  void record(double t, int unit, const isa::Instruction& insn, std::vector<uint64_t> vals) {
    Scheduled s;
    s.unit = unit, s.insn = insn, s.kernel = cur_kernel_, s.t = t;
    const auto& ops = isa::format_spec(isa::spec(insn.op).format).operands;
    const isa::Format f = isa::spec(insn.op).format;
    if (vals.empty() && (f == isa::Format::VLD || f == isa::Format::VST) && insn[isa::operand::VLD::rs1] == 0) {
      static_assert(int(isa::operand::VLD::rs1) == int(isa::operand::VST::rs1) && int(isa::operand::VLD::imm) == int(isa::operand::VST::imm) &&
                    isa::operand::VLD::imm == isa::operand::VLD::rs1 + 1);
      s.vals = {uint64_t(insn[isa::operand::VLD::imm])};
      s.at[0] = isa::operand::VLD::rs1, s.addr = 0;
      s.insn[isa::operand::VLD::imm] = 0;
    } else if (!vals.empty()) {
      size_t v = 0;
      for (size_t o = 0; o < ops.size(); ++o)
        if (ops[o].kind == isa::OperandKind::Sreg) {
          if (v == vals.size() || v == Scheduled::kMaxBound) throw std::logic_error("internal error: operands do not match");
          s.at[v++] = int8_t(o);
        }
      if (v != vals.size()) throw std::logic_error("internal error: operands do not match");
      s.vals = std::move(vals);
    }
    prog_.push_back({place(t, unit), std::move(s)});
  }
  std::string kernel_name(size_t idx, const Kernel& k) const {
    return fmt::format("kernel {}: {} -> %{} {}", idx, kind_name(k.kind), k.out, p_.type(k.out).str());
  }
  // Text for a .kernel string: no quote, backslash or control character.
  static std::string debug_text(std::string t) {
    if (t.size() > isa::kMaxDebugText) t.resize(isa::kMaxDebugText);
    for (char& c : t)
      if (uint8_t(c) < 0x20 || c == '"' || c == '\\' || uint8_t(c) == 0x7f) c = '?';
    return t;
  }
  // Where something estimated to dispatch at t goes in the program.
  // Pinned work of a unit goes after the unit's work pushed before it, so
  // every queue receives its work in the order the cost model assumed.
  double place(double t, int unit = -1) {
    double key = pin_ >= 0 ? pin_ : t;
    if (unit >= 0) key = std::max(key, last_key_[unit]), last_key_[unit] = key;
    return key;
  }
  void note(const std::string& text, int unit = -1) {
    const double t = unit >= 0 ? clk_[unit] : floor_;
    Scheduled s;
    s.unit = -1, s.comment = text, s.t = t;
    prog_.push_back({place(t), std::move(s)});
  }
  // VPU instructions and mxu.swap (no scalar register operands).
  void ins(const isa::Instruction& i) {
    if (i.op == isa::Opcode::MXU_SWAP) {
      const int m = int(i[isa::operand::M1::mxu]);
      push(kMxu0 + m, weights_ready_[m], i);
    } else if (isa::spec(i.op).unit != isa::ExecUnit::Vpu) {
      throw std::logic_error(fmt::format("internal error: unscheduled instruction {}", isa::spec(i.op).mnemonic));
    } else if (capture_) {
      capture_->push_back(i);
    } else {
      push(kVpu, 0, i);  // latency: its class's
    }
  }
  template <typename... A>
  void vop(isa::Opcode op, A... a) {
    ins(isa::make(op, {int64_t(a)...}));
  }
  // A vector load or store of VMEM at `at`.
  void vld(DType dt, int vd, uint64_t at) { vop(opcode("vld.", vty(dt)), vd, 0, at); }
  void vst(DType dt, int vs, uint64_t at) { vop(opcode("vst.", vty(dt)), vs, 0, at); }
  // A weight load commits N - 1 cycles after it starts, once the last
  // stream through the weights it replaces has reached the accumulators
  // (docs/timing.md).
  void mxu_lw(int m, uint64_t src, uint64_t stride, int dt) {
    const double t = push(kMxu0 + m, mm_done_[m][1] - double(D_ - 1), with_regs(isa::Opcode::MXU_LW, {m, dt}), {src, stride}, 1, double(D_));
    weights_ready_[m] = t + double(D_);
  }
  // `more` continues the previous stream's rows through the same weights.
  // Returns its dispatch estimate.
  double mxu_mm(bool acc, int m, uint64_t racc, uint64_t src, uint64_t stride, uint64_t rows, int dt, bool more = false) {
    const double t = push(kMxu0 + m, feed_free_[m], with_regs(acc ? isa::Opcode::MXU_MMA : isa::Opcode::MXU_MM, {m, dt}),
                          {racc, src, stride, rows}, 1, double(rows) + 2.0 * double(D_));
    feed_free_[m] = t + double(rows);
    if (!more) mm_done_[m][1] = mm_done_[m][0];
    mm_done_[m][0] = t + double(rows) + 2.0 * double(D_) - 1;
    return t;
  }

  // The scheduled program, its repeats folded into loops (loops.h).
  LoopCode schedule() {
    std::stable_sort(prog_.begin(), prog_.end(), [](const Pending& a, const Pending& b) { return a.key < b.key; });
    std::vector<Scheduled> code;
    code.reserve(prog_.size());
    for (Pending& p : prog_) code.push_back(std::move(p.s));
    prog_.clear();
    LoopOptions o;
    o.enabled = loops_;
    o.kernels = !p_.kernels.empty();
    o.issue_width = m_.core.issue_width;
    o.branch_penalty = m_.core.branch_penalty;
    return write_loops(code, o);
  }

  // ---- synchronisation
  Counter counter() {
    if (next_sem_ >= kChipSem) throw Error("internal error: out of semaphores");
    Counter c;
    c.sem = next_sem_++;
    return c;
  }
  void wait(int unit, Counter& c, int64_t total) {
    while (c.consumed < total) {
      const int64_t n = std::min<int64_t>(total - c.consumed, 65535);
      const double ready = c.when.at(size_t(c.consumed + n - 1));
      push(unit, ready, ib::WAIT(unit, c.sem, n));
      c.consumed += n;
    }
  }
  // A queued unit's signal leaves its queue at once and adds the count when
  // the unit's earlier work is done (docs/timing.md).
  void signal(int u, Counter& c, int64_t n = 1) {
    const bool deferred = u != kSc;
    for (int64_t left = n; left > 0;) {
      const int64_t k = std::min<int64_t>(left, 65535);
      const double done = done_[u];
      const double t = push(u, deferred ? 0 : done, ib::SIGNAL(u, c.sem, k));
      c.produce(std::max(t, done) + 1, k);
      left -= k;
    }
  }
  // The end of a kernel: every queue has finished (each signals the barrier
  // semaphore once its earlier instructions are done), then the scalar unit
  // takes what is left on each counter, so every semaphore is back at 0.
  void drain(const std::vector<Counter*>& cs, int mxus = 0) {
    Counter barrier;
    barrier.sem = kBarrierSem;
    signal(kDma, barrier);
    signal(kVpu, barrier);
    for (int m = 0; m < mxus; ++m) signal(kMxu0 + m, barrier);
    wait(kSc, barrier, barrier.produced);
    for (Counter* c : cs) wait(kSc, *c, c->produced);
    next_sem_ = 0;
  }

  // ---- DMA (byte addresses); each transfer counts once on its counter
  // A transfer of `rows` rows of `rowbytes` costs the larger of its bytes at
  // HBM bandwidth and its bursts at one per cycle.
  void dma(isa::Opcode op, std::vector<uint64_t> regs, uint64_t rows, uint64_t rowbytes, Counter& c) {
    const double bursts = double(rows) * std::ceil(double(rowbytes) / kDmaBurst) / kDmaBurstsPerCycle;
    const double cost = std::max(double(rows * rowbytes) / kDmaBytesPerCycle, bursts);
    const double t = push(kDma, 0, with_regs(op, {c.sem}), std::move(regs), cost, cost + kDmaLatency);
    c.produce(t + cost + kDmaLatency);
  }
  void dma_ld(uint64_t vmem, uint64_t hbm, uint64_t bytes, Counter& c) { dma(isa::Opcode::DMA_LD, {vmem, hbm, bytes}, 1, bytes, c); }
  void dma_st(uint64_t hbm, uint64_t vmem, uint64_t bytes, Counter& c) { dma(isa::Opcode::DMA_ST, {hbm, vmem, bytes}, 1, bytes, c); }
  void dma_2d(bool load, uint64_t dst, uint64_t src, uint64_t rows, uint64_t rowbytes, uint64_t dstride, uint64_t sstride,
              Counter& c) {
    if (rows == 1 || (dstride == rowbytes && sstride == rowbytes)) {
      load ? dma_ld(dst, src, rows * rowbytes, c) : dma_st(dst, src, rows * rowbytes, c);
      return;
    }
    dma(load ? isa::Opcode::DMA_LD2D : isa::Opcode::DMA_ST2D, {dst, src, rows, rowbytes, dstride, sstride}, rows, rowbytes, c);
  }

  // ---- VMEM: a bump allocator per kernel
  uint64_t vmem(uint64_t bytes) {
    const uint64_t a = vmem_top_;
    vmem_top_ = align_up(vmem_top_ + bytes + uint64_t(L_) * 4, 64);  // a vector of slack
    if (vmem_top_ > p_.t.vmem_bytes)
      throw Error(fmt::format("{}: the kernel computing it does not fit in target.vmem_bytes = {} (it needs more than {} bytes)",
                              kernel_loc_, p_.t.vmem_bytes, vmem_top_));
    return a;
  }
  uint64_t vmem_budget() const { return p_.t.vmem_bytes - vmem_top_; }

  void kernel(size_t idx, const Kernel& k) {
    kernel_loc_ = k.from.empty() ? fmt::format("kernel {}", idx) : k.from.back();
    vmem_top_ = 0;
    next_sem_ = 0;
    vregs_.reset();
    note("");
    note(kernel_name(idx, k));
    cur_kernel_ = int(idx);
    for (const auto& [loc, work] : kernel_ops_[idx]) note("  from " + loc);
    if (p_.type(k.out).elements() == 0) return;
    switch (k.kind) {
      case KKind::elementwise: elementwise(k); break;
      case KKind::copy: copy(k); break;
      case KKind::reduce_lanes: reduce_lanes(k); break;
      case KKind::reduce_columns: reduce_columns(k); break;
      case KKind::matmul: matmul(k); break;
      case KKind::all_reduce: all_reduce(k); break;
      case KKind::all_gather: all_gather(k); break;
      case KKind::reduce_scatter: reduce_scatter(k); break;
      case KKind::all_to_all: all_to_all(k); break;
      case KKind::permute: permute(k); break;
    }
  }

  // ---- one expression node, vector registers assigned
  void node(const Node& n, int d, const std::vector<int>& a) {
    const bool fl = is_float(n.dtype);
    auto round = [&] {
      if (n.dtype == DType::bf16) ins(ib::VRND_BF16(d, d));
      if (n.dtype == DType::s8) {
        ins(ib::VSHL(d, d, vregs_.at(kS8Shift)));
        ins(ib::VSRA(d, d, vregs_.at(kS8Shift)));
      }
    };
    switch (n.kind) {
      case OpKind::bitcast_convert: ins(ib::VMOV(d, a[0])); return;
      case OpKind::convert: {
        const bool sf = is_float(n.src);
        if (n.dtype == DType::pred) {
          vop(opcode("vcmpne.", aty(n.src)), d, a[0], vregs_.at(0));
        } else if (sf && fl) {
          ins(n.dtype == DType::bf16 && n.src == DType::f32 ? ib::VRND_BF16(d, a[0]) : ib::VMOV(d, a[0]));
        } else if (!sf && fl) {
          ins(ib::VCVT_F32_S32(d, a[0]));
          round();
        } else {
          if (sf) ins(ib::VCVT_S32_F32(d, a[0]));
          else ins(ib::VMOV(d, a[0]));
          round();
        }
        return;
      }
      case OpKind::not_:
        if (n.dtype == DType::pred) {
          ins(ib::VXOR(d, a[0], vregs_.at(1)));
        } else {
          ins(ib::VNOT(d, a[0]));
        }
        return;
      case OpKind::negate: vop(opcode("vneg.", aty(n.dtype)), d, a[0]); return round();
      case OpKind::abs: vop(opcode("vabs.", aty(n.dtype)), d, a[0]); return round();
      case OpKind::sign: vop(opcode("vsign.", aty(n.dtype)), d, a[0]); return;
      case OpKind::compare: {
        static const char* dn[] = {"eq", "ne", "lt", "le", "gt", "ge"};
        vop(opcode("vcmp", dn[int(n.dir)], ".", aty(n.src)), d, a[0], a[1]);
        return;
      }
      case OpKind::select: ins(ib::VSEL(d, a[0], a[1], a[2])); return;
      case OpKind::clamp: vop(opcode("vclamp.", aty(n.dtype)), d, a[0], a[1], a[2]); return;
      case OpKind::and_: ins(ib::VAND(d, a[0], a[1])); return;
      case OpKind::or_: ins(ib::VOR(d, a[0], a[1])); return;
      case OpKind::xor_: ins(ib::VXOR(d, a[0], a[1])); return;
      case OpKind::shift_left: ins(ib::VSHL(d, a[0], a[1])); return round();
      case OpKind::shift_right_arithmetic: ins(ib::VSRA(d, a[0], a[1])); return;
      case OpKind::shift_right_logical:
        if (n.dtype == DType::s8) {
          ins(ib::VAND(d, a[0], vregs_.at(kLowByte)));  // d is none of the arguments (regplan)
          ins(ib::VSHR(d, d, a[1]));
          return round();
        }
        ins(ib::VSHR(d, a[0], a[1]));
        return;
      default: break;
    }
    static const std::map<OpKind, const char*> f1 = {
        {OpKind::exponential, "vexp"}, {OpKind::log, "vlog"},     {OpKind::tanh, "vtanh"},   {OpKind::logistic, "vlogistic"},
        {OpKind::rsqrt, "vrsqrt"},     {OpKind::sqrt, "vsqrt"},   {OpKind::floor, "vfloor"}, {OpKind::ceil, "vceil"},
        {OpKind::round_nearest_even, "vround"}};
    if (auto it = f1.find(n.kind); it != f1.end()) {
      vop(opcode(it->second, ".f32"), d, a[0]);
      return round();
    }
    static const std::map<OpKind, const char*> f2 = {{OpKind::add, "vadd"},     {OpKind::subtract, "vsub"}, {OpKind::multiply, "vmul"},
                                                     {OpKind::divide, "vdiv"},  {OpKind::maximum, "vmax"},  {OpKind::minimum, "vmin"},
                                                     {OpKind::power, "vpow"}};
    if (auto it = f2.find(n.kind); it != f2.end()) {
      if (!fl && n.kind == OpKind::power) throw Error("unsupported integer power (the VPU has vpow.f32 only)");
      vop(opcode(it->second, ".", aty(n.dtype)), d, a[0], a[1]);
      return round();
    }
    throw Error(fmt::format("internal error: no VPU code for {}", op_name(n.kind)));
  }

  // Register assignment for an expression: what it holds for the whole
  // kernel (hoisted leaves, the constants its code needs, the col leaves'
  // lane-0 mask) is taken from vregs_; the rest is linearly scanned per
  // vector into the registers below, U vectors at once.
  struct RegPlan {
    std::vector<int> hoisted_reg;                  // per node (-1 if not hoisted)
    std::vector<std::vector<int>> reg;             // [u][node]
    std::vector<std::pair<int, uint32_t>> consts;  // registers hoist() loads with a lane pattern
    int lane0 = -1;                                // the col leaves' mask: lane 0 set
    int unroll = 1;
  };
  RegPlan regplan(const Expr& e, int max_unroll) {
    RegPlan rp;
    const size_t n = e.nodes.size();
    for (uint32_t bits : e.constants())
      if (auto [r, fresh] = vregs_.constant(bits); fresh) rp.consts.push_back({r, bits});
    if (e.has(Leaf::col)) rp.lane0 = vregs_.hold();
    rp.hoisted_reg.assign(n, -1);
    for (size_t i = 0; i < n; ++i) {
      const Node& nd = e.nodes[i];
      if (nd.leaf == Leaf::splat) rp.hoisted_reg[i] = vregs_.at(lane_bits(nd.dtype, nd.value));
      if (nd.leaf == Leaf::scalar) rp.hoisted_reg[i] = vregs_.hold();
    }
    std::vector<size_t> last(n, 0);
    for (size_t i = 0; i < n; ++i)
      for (int a : e.nodes[i].args) last[a] = i;
    last[n - 1] = n;
    // Linear scan over the node order: count registers one vector needs.
    std::vector<int> slot(n, -1);
    std::vector<bool> busy(32, false);
    int width = 0;
    for (size_t i = 0; i < n; ++i) {
      if (rp.hoisted_reg[i] >= 0) continue;
      int s = 0;
      while (busy[s]) ++s;
      busy[s] = true;
      slot[i] = s;
      width = std::max(width, s + 1);
      for (int a : e.nodes[i].args)
        if (last[a] == i && slot[a] >= 0) busy[slot[a]] = false;
    }
    const int avail = vregs_.below_held();
    rp.unroll = std::max(1, std::min(max_unroll, avail / std::max(1, width)));
    vregs_.per_vector(rp.unroll * width);
    rp.reg.assign(rp.unroll, std::vector<int>(n, -1));
    for (int u = 0; u < rp.unroll; ++u)
      for (size_t i = 0; i < n; ++i) rp.reg[u][i] = rp.hoisted_reg[i] >= 0 ? rp.hoisted_reg[i] : u * width + slot[i];
    return rp;
  }

  // Emits U vectors of an expression in the registers of rp's vectors
  // u0 .. u0 + U - 1. leaf(u, node, reg) loads non-hoisted leaves.
  void eval(const Expr& e, const RegPlan& rp, int U, const std::function<void(int, const Node&, int)>& leaf, int u0 = 0) {
    for (size_t i = 0; i < e.nodes.size(); ++i) {
      const Node& nd = e.nodes[i];
      if (nd.hoisted()) continue;
      for (int u = 0; u < U; ++u) {
        const int d = rp.reg[u0 + u][i];
        if (nd.leaf != Leaf::none) {
          leaf(u, nd, d);
        } else {
          std::vector<int> a;
          for (int x : nd.args) a.push_back(rp.reg[u0 + u][x]);
          node(nd, d, a);
        }
      }
    }
  }
  // Software pipelining of groups of vectors that use alternate register
  // banks: each group's leading loads go out paired with the previous
  // group's remaining instructions (its arithmetic and stores), so a VPU
  // with separate load and store slots overlaps them. Only loads of one
  // bank meet other instructions of the other, so the interleaving keeps
  // every group's meaning.
  struct Pipeliner {
    Emitter& em;
    std::vector<isa::Instruction> rest;  // the previous group's instructions after its loads
    // Runs gen() (which emits one group's VPU instructions) and interleaves them.
    template <typename G>
    void group(G gen) {
      std::vector<isa::Instruction> cur;
      em.capture_ = &cur;
      gen();
      em.capture_ = nullptr;
      size_t h = 0;
      while (h < cur.size() && isa::spec(cur[h].op).vpu_class == isa::VpuClass::Load) ++h;
      for (size_t i = 0; i < std::max(rest.size(), h); ++i) {
        if (i < rest.size()) em.ins(rest[i]);
        if (i < h) em.ins(cur[i]);
      }
      rest.assign(cur.begin() + long(h), cur.end());
    }
    void flush() {
      for (const auto& i : rest) em.ins(i);
      rest.clear();
    }
  };
  void hoist(const Expr& e, const RegPlan& rp, const std::vector<uint64_t>& scalar_vmem) {
    for (const auto& [r, bits] : rp.consts) ins(ib::VLI(r, bits));
    for (size_t i = 0; i < e.nodes.size(); ++i) {
      const Node& nd = e.nodes[i];
      if (nd.leaf == Leaf::scalar) vld(nd.dtype, rp.hoisted_reg[i], scalar_vmem[nd.input]);
    }
    if (rp.lane0 >= 0) {
      ins(ib::VIOTA(rp.lane0));
      ins(ib::VCMPEQ_S32(rp.lane0, rp.lane0, vregs_.at(0)));
    }
  }
  // A col leaf: source element `index` in every lane. The vector loaded from
  // there has it in lane 0; the other lanes become the identity of max.
  void col_splat(const RegPlan& rp, int d, uint64_t at, DType dt) {
    vld(dt, d, at);
    ins(ib::VSEL(d, rp.lane0, d, vregs_.at(is_float(dt) ? kNegInf : kIntMin)));
    vop(opcode("vredmax.", aty(dt)), d, d);
  }
  // Loads scalar inputs (L copies each), row inputs (repeated to cover any
  // L-lane window) and col inputs (whole) once per kernel. Returns the VMEM
  // address per input.
  std::vector<uint64_t> preload(const Kernel& k, Counter& ld) {
    std::vector<uint64_t> at(k.inputs.size(), 0);
    std::vector<bool> done(k.inputs.size(), false);
    for (const Node& nd : k.expr.nodes) {
      if (nd.leaf != Leaf::scalar && nd.leaf != Leaf::row && nd.leaf != Leaf::col) continue;
      if (done[nd.input]) continue;
      done[nd.input] = true;
      const int v = k.inputs[nd.input];
      const int esz = dtype_bytes(p_.type(v).dtype);
      if (nd.leaf == Leaf::scalar) {
        at[nd.input] = vmem(uint64_t(L_) * esz);
        dma_2d(true, at[nd.input], p_.addr[v], uint64_t(L_), esz, esz, 0, ld);
      } else if (nd.leaf == Leaf::col) {
        const uint64_t bytes = uint64_t(p_.type(v).elements() * esz);
        at[nd.input] = vmem(bytes);
        dma_ld(at[nd.input], p_.addr[v], bytes, ld);
      } else {
        const int64_t len = p_.type(v).elements();
        const int64_t reps = ceil_div(len + L_, len);
        at[nd.input] = vmem(uint64_t(reps * len * esz));
        dma_2d(true, at[nd.input], p_.addr[v], uint64_t(reps), uint64_t(len * esz), uint64_t(len * esz), 0, ld);
      }
    }
    return at;
  }

  // A ring's sends: each send of `bytes` to the next member counts on
  // `arrivals` there, and the previous member's send to this chip is
  // expected alike. With `ways` rings sending at once (each its own link),
  // a send holds the DMA engine for 1/ways of its time on the link.
  struct Ring {
    uint64_t next = 0;
    double bytes_per_cycle = 0, hop = 0;
    int ways = 1;
    Ring(const Emitter& em, const std::vector<int64_t>* grp, int64_t pos, int ways)
        : next(uint64_t((*grp)[size_t((pos + 1) % int64_t(grp->size()))])),
          bytes_per_cycle(double(em.m_.ici.link_bandwidth_bytes_per_s) / double(em.m_.clock_hz)),
          hop(double(em.m_.ici_hop_cycles())),
          ways(ways) {}
    void send(Emitter& em, uint64_t dst, uint64_t src, uint64_t bytes, Counter& arrivals) const {
      const double cost = double(bytes) / bytes_per_cycle;
      const double t = em.push(kDma, 0, with_regs(isa::Opcode::DMA_RCP, {arrivals.sem}), {next, dst, src, bytes}, cost / ways, cost + hop);
      arrivals.produce(t + cost + hop);
    }
  };
  // A ring of a collective: its members in ring order and this chip's
  // place. Group member p sits at coord(p) along it: its place in the
  // group for a ring over the group, its coordinate for a ring along an
  // axis of the ICI grid (p / stride, modulo the ring's size). A reversed
  // ring runs through its members backwards.
  struct Axis {
    std::vector<int64_t> members;
    int64_t pos = 0, stride = 1;
    bool reversed = false;
    int64_t size() const { return int64_t(members.size()); }
    int64_t coord(int64_t p) const { return p / stride % size(); }
  };
  // The ways of a collective: its data is cut into ways, each a collective
  // of its own (its buffers, counters and rings) that runs at the same time
  // as the others.
  // - Where a ring has more than two members, half the ways go each way
  //   round it (bidirectional rings), so both links to each neighbour
  //   carry data.
  // - Over D axes of the grid, way r takes them in the order r, r + 1, ...
  //   (mod D), so in every phase each axis carries some way's data.
  // Each way's buffer holds a chunk per member. Its reduce-scatter cuts it
  // phase by phase, by each ring's coordinate, and leaves member p with the
  // chunk at slot(w, p): the coordinates as digits, the first phase's the
  // most significant (with a reversed ring's chunks counted from the end of
  // the buffer, the same slots).
  struct Ways {
    std::vector<std::vector<Axis>> rings;  // per way, its rings phase by phase
    int64_t count() const { return int64_t(rings.size()); }
    int64_t phases() const { return int64_t(rings[0].size()); }
    int64_t slot(int64_t w, int64_t p) const {
      int64_t s = 0;
      for (const Axis& x : rings[size_t(w)]) s = s * x.size() + x.coord(p);
      return s;
    }
    // Calls f(slot, member, count, step) for runs of slots [s0, s1): slots
    // slot .. slot + count - 1 hold members member, member + step, ... (the
    // last ring's coordinates are the least significant digit).
    template <typename F>
    void runs(int64_t w, int64_t n, int64_t s0, int64_t s1, F f) const {
      if (rings[size_t(w)].empty()) {
        if (s0 < s1) f(s0, s0, s1 - s0, 1);
        return;
      }
      const Axis& last = rings[size_t(w)].back();
      for (int64_t p = 0; p < n; ++p) {
        if (last.coord(p) != 0) continue;
        const int64_t first = slot(w, p), lo = std::max(s0, first), hi = std::min(s1, first + last.size());
        if (lo < hi) f(lo, p + (lo - first) * last.stride, hi - lo, last.stride);
      }
    }
  };
  // The ways of k's collective: up to `fit` of them (so each gets enough
  // data), dropping the axis orders first, then the directions.
  Ways collective_ways(const Kernel& k, int64_t fit) const {
    const std::vector<Axis> axes = ring_axes(k);
    int64_t widest = 1;
    for (const Axis& x : axes) widest = std::max(widest, x.size());
    int64_t turns = std::max<int64_t>(1, int64_t(axes.size())), dirs = widest > 2 ? 2 : 1;
    if (turns * dirs > fit) turns = 1;
    if (turns * dirs > fit) dirs = 1;
    Ways ws;
    for (int64_t r = 0; r < turns; ++r)
      for (int64_t d = 0; d < dirs; ++d) {
        std::vector<Axis> way;
        for (size_t a = 0; a < axes.size(); ++a) {
          Axis x = axes[(a + size_t(r)) % axes.size()];
          if (d == 1) {  // the other way round
            std::reverse(x.members.begin(), x.members.end());
            x.pos = x.size() - 1 - x.pos;
            x.reversed = true;
          }
          way.push_back(std::move(x));
        }
        ws.rings.push_back(std::move(way));
      }
    return ws;
  }
  // The rings of this chip's collective: one per axis of the ICI grid when
  // the group is the whole system in chip order and the grid has several
  // axes; otherwise the group itself. Rings of one member are left out.
  std::vector<Axis> ring_axes(const Kernel& k) const {
    const auto [grp, n, pos] = group_of(k);
    bool whole = n == nchips_;
    for (int64_t i = 0; whole && i < n; ++i) whole = (*grp)[size_t(i)] == i;
    const auto shape = m_.ici_shape();
    std::vector<Axis> axes;
    if (whole && int64_t(shape[0]) * shape[1] * shape[2] == n && (shape[1] > 1 || shape[2] > 1)) {
      const int64_t stride[3] = {1, int64_t(shape[0]), int64_t(shape[0]) * shape[1]};
      for (int a = 0; a < 3; ++a) {
        if (shape[size_t(a)] < 2) continue;
        Axis x;
        x.stride = stride[a];
        x.pos = chip_ / stride[a] % int64_t(shape[size_t(a)]);
        const int64_t first = chip_ - x.pos * stride[a];
        for (int64_t i = 0; i < int64_t(shape[size_t(a)]); ++i) x.members.push_back(first + i * stride[a]);
        axes.push_back(std::move(x));
      }
    } else if (n > 1) {
      axes.push_back({*grp, pos});
    }
    return axes;
  }
  // A block's buffers for a reduce-scatter or all-gather: its `mine`
  // elements of each of n pieces cut among up to all.count() ways, each at
  // least one element: [cut[w], cut[w + 1]) is way w's, whole vectors but
  // the last. Way w's buffer is at base[w], with a slot of size[w] / n
  // elements (whole vectors) per member.
  struct WayBuffers {
    Ways ws;  // the ways used
    std::vector<int64_t> cut, size;
    std::vector<uint64_t> base;
  };
  WayBuffers way_buffers(const Ways& all, int64_t mine, int64_t n, int esz) {
    const int64_t V = ceil_div(mine, L_), ways = std::min(all.count(), V);
    WayBuffers b;
    b.ws = all;
    b.ws.rings.resize(size_t(ways));
    b.cut = {0};
    for (int64_t w = 0; w < ways; ++w) {
      b.cut.push_back(std::min(mine, b.cut.back() + L_ * (V / ways + (w < V % ways ? 1 : 0))));
      b.size.push_back(n * ceil_div(b.cut.back() - b.cut.end()[-2], L_) * L_);
      b.base.push_back(vmem(uint64_t(b.size.back() * esz)));
    }
    return b;
  }

  // ---- all-reduce across chips. Each core of the chip reduces its share
  // of the elements with the same core of the other chips, in ways (above)
  // of rings. Each way:
  // - Reduce-scatter, phase by phase: the ring of the phase cuts what the
  //   earlier phases left this chip into one chunk per member, and n_a - 1
  //   steps (ring_reduce) leave each member its own chunk combined over
  //   the ring. After the last phase, each chip holds 1/n of the way's
  //   share combined over the group.
  // - All-gather, phase by phase in reverse: n_a - 1 steps pass the
  //   combined chunks on round the same ring.
  // The chips meet first (chip_barrier), so the VMEM a chip sends to
  // belongs to this kernel. No more handshakes are needed: a member's
  // reduce-scatter on a ring ends only after the next member's first send
  // on it, which follows that member's work on every earlier phase; and its
  // all-gather step s follows (through the ring's data) the next member's
  // combining at step s - 1, the last use of the chunk it overwrites.
  void all_reduce(const Kernel& k) {
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

  // ---- reduce-scatter across chips: member p keeps piece p of the
  // combination along the dimension. Only where every dimension before it
  // is 1, so the pieces are contiguous. The all-reduce's first half in
  // ways (above): way w takes its part of this core's share of every
  // piece, and puts piece p at slot(w, p) of its buffer, where member p
  // ends.
  void reduce_scatter(const Kernel& k) {
    const int64_t n = std::get<1>(group_of(k));
    const DType dt = check_combinable(k);
    const int esz = dtype_bytes(dt);
    const int64_t E = p_.type(k.out).elements();  // elements per piece
    require_contiguous(k, p_.type(k.inputs[0]));
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

  // Runs body(b0, b1) over blocks of this core's share [e0, e1) of a
  // collective's elements, each block a whole collective (its own barrier,
  // VMEM and counters), small enough that VMEM holds `per` bytes per
  // element of it and `chunks` chunks rounded up to whole vectors of esz.
  // Every chip cuts the same blocks, so they meet block by block.
  template <typename F>
  void in_blocks(int64_t e0, int64_t e1, uint64_t per, int64_t nchunks, int esz, F body) {
    if (e1 == e0) return drain({});
    const uint64_t top = vmem_top_, slack = 4 * (uint64_t(L_) * 4 + 64) + uint64_t(nchunks * L_ * esz);  // up to 4 buffers
    const uint64_t room = vmem_budget() > slack ? vmem_budget() - slack : 0;
    const int64_t most = std::max<int64_t>(L_, int64_t(room / per) / L_ * L_);
    for (int64_t b0 = e0; b0 < e1; b0 += most) {
      vmem_top_ = top;
      body(b0, std::min(e1, b0 + most));
    }
  }

  // The element type of an all-reduce or reduce-scatter, if tpuc combines it.
  DType check_combinable(const Kernel& k) const {
    const DType dt = p_.type(k.out).dtype;
    if (!(dt == DType::f32 || dt == DType::s32 || dt == DType::bf16) || k.combiner == Combiner::and_ || k.combiner == Combiner::or_)
      throw Error(fmt::format("{}: unsupported {} ({} of {}): tpuc combines f32, bf16 and s32 by add, multiply, maximum or minimum",
                              kernel_loc_, kind_name(k.kind), combiner_name(k.combiner), dtype_name(dt)));
    return dt;
  }
  // A collective that splits or joins along a dimension moves contiguous
  // pieces only: every dimension before it is 1.
  void require_contiguous(const Kernel& k, const Type& t) const {
    for (int64_t d = 0; d < k.dimension; ++d)
      if (t.dims[size_t(d)] != 1)
        throw Error(fmt::format("{}: unsupported {} along dimension {} of {} (tpuc splits and joins where the dimensions before it are 1)",
                                kernel_loc_, kind_name(k.kind), k.dimension, t.str()));
  }

  // A member's n chunks of cb bytes in VMEM, as a ring sees them: chunk
  // at(s) is the one this member sends at step s, from chunk pos - 1 at
  // step 0, so that it ends with chunk pos (at(n - 1)) combined over the
  // ring (counted from the end of the buffer with rev, for
  // a ring that runs through the group backwards). A chunk goes in P
  // pieces of whole vectors, each sent on as soon as it is ready, so the
  // VPU's work overlaps the links.
  struct Chunks {
    uint64_t buf = 0, cb = 0;
    int64_t n = 1, pos = 0;
    bool rev = false;
    int64_t P = 1;        // pieces a chunk
    uint64_t V = 1, vb = 0;  // vectors a chunk, bytes a vector
    uint64_t at(int64_t s) const {
      const int64_t c = (((pos - 1 - s) % n) + n) % n;
      return buf + uint64_t(rev ? n - 1 - c : c) * cb;
    }
    uint64_t lo(int64_t p) const { return uint64_t(p) * V / uint64_t(P) * vb; }  // piece p's offset in a chunk
    uint64_t piece(uint64_t chunk, int64_t p) const { return chunk + lo(p); }
    uint64_t piece_bytes(int64_t p) const { return lo(p + 1) - lo(p); }
  };
  // Chunks of C elements (whole vectors) of dt at buf; pieces of at least
  // 32 KiB, at most 8 a chunk.
  Chunks chunks(uint64_t buf, int64_t C, DType dt, int64_t n, int64_t pos) const {
    Chunks c;
    c.buf = buf, c.n = n, c.pos = pos;
    c.vb = uint64_t(L_ * dtype_bytes(dt));
    c.V = uint64_t(C / L_);
    c.cb = c.V * c.vb;
    c.P = std::clamp<int64_t>(int64_t(c.cb / 32768), 1, std::min<int64_t>(8, int64_t(c.V)));
    return c;
  }

  // One ring's part in a step of several rings at once: its chunks, where
  // it receives, and its counters (rs: pieces arrived, added: combined,
  // ag: gathered).
  struct Lane {
    Ring ring;
    Chunks ch;
    uint64_t recv = 0;
    Counter rs, added, ag;
    // With `first`: step 0 sends piece p once first has counted first_at[p]
    // (the piece's own load).
    Counter* first = nullptr;
    std::vector<int64_t> first_at = {};
  };

  // n - 1 reduce-scatter steps of rings that run at once (lanes, each of
  // its own n): at step s each member sends chunk at(s) to the next
  // and combines the previous member's into chunk at(s + 1), so after the
  // last step chunk at(n - 1) = pos is the group's
  // combination. A lane's `rs` counts pieces arriving, `added` pieces
  // combined; the rings take turns piece by piece. The VPU first waits for
  // `loaded`, if given (the chunks it combines into).
  void ring_reduce(std::vector<Lane>& lanes, DType dt, Combiner c, Counter* loaded = nullptr) {
    const int esz = dtype_bytes(dt);
    const bool bf = dt == DType::bf16;
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
              if (bf) ins(ib::VRND_BF16(j, j));
            }
            for (int64_t j = 0; j < u; ++j) vst(dt, j, got + uint64_t((v + j * L_) * esz));
          }
          signal(kVpu, l.added);
        }
    }
  }

  // Lanes for every phase of the ways: way w's buffer at base[w], of
  // size[w] elements (whole vectors in every chunk of every phase), cut
  // phase by phase; with `recv`, each lane has its own receive buffer (a
  // neighbour may send before this chip is done with the phase before).
  std::vector<std::vector<Lane>> phase_lanes(const Ways& ws, std::vector<uint64_t> base, std::vector<int64_t> size, DType dt, bool recv) {
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
  // `counters` and every lane's, for drain.
  static std::vector<Counter*> with_lanes(std::vector<Counter*> counters, std::vector<std::vector<Lane>>& lanes) {
    for (auto& phase : lanes)
      for (Lane& l : phase) counters.insert(counters.end(), {&l.rs, &l.added, &l.ag});
    return counters;
  }
  // The chunks the first rings send first, loaded (load(at, bytes), each
  // counting once on `first`) piece by piece, each piece sent as soon as
  // it has landed.
  template <typename F>
  void load_first(std::vector<Lane>& first_phase, Counter& first, F load) {
    int64_t P = 0;
    for (const Lane& l : first_phase) P = std::max(P, l.ch.P);
    for (int64_t p = 0; p < P; ++p)
      for (Lane& l : first_phase) {
        if (p >= l.ch.P) continue;
        load(l.ch.piece(l.ch.at(0), p), l.ch.piece_bytes(p));
        l.first = &first;
        l.first_at.push_back(first.produced);
      }
  }
  // The reduce-scatter phases of the ways, one after another: each ring
  // cuts what the phase before left combined. The VPU first waits for
  // `loaded` (the chunks it combines into).
  void reduce_phases(std::vector<std::vector<Lane>>& lanes, DType dt, Combiner c, Counter* loaded) {
    for (size_t a = 0; a < lanes.size(); ++a) {
      if (a > 0)
        for (Lane& l : lanes[a - 1]) wait(kDma, l.added, l.added.produced);  // the region is combined over the phase before
      ring_reduce(lanes[a], dt, c, a == 0 ? loaded : nullptr);
    }
  }
  // The all-gather phases of the ways, the last first: n_a - 1 steps pass
  // each member's chunks on round the phase's ring, its own first. With
  // `combined`, the first steps wait for the combination (an all-reduce's);
  // otherwise what they send is in already. In the first phase, each chunk
  // that is whole here is handed to store(w, at, bytes), w its way: a chunk
  // once sent, the last piece by piece as they arrive.
  template <typename F>
  void gather_phases(std::vector<std::vector<Lane>>& lanes, bool combined, F store) {
    for (size_t a = lanes.size(); a-- > 0;) {
      const bool last = a + 1 == lanes.size();
      if (!last)
        for (Lane& l : lanes[a + 1]) wait(kDma, l.ag, l.ag.produced);  // its own chunks are whole again
      int64_t steps = 0, P = 0;
      for (const Lane& l : lanes[a]) steps = std::max(steps, l.ch.n - 1), P = std::max(P, l.ch.P);
      for (int64_t s = 0; s < steps; ++s) {
        for (int64_t p = 0; p < P; ++p)
          for (Lane& l : lanes[a]) {
            if (s + 1 >= l.ch.n || p >= l.ch.P) continue;
            const uint64_t at = l.ch.at(s - 1);  // its own chunk first
            if (s > 0) wait(kDma, l.ag, (s - 1) * l.ch.P + p + 1);
            else if (last && combined) wait(kDma, l.added, (l.ch.n - 2) * l.ch.P + p + 1);  // the piece is combined
            l.ring.send(*this, l.ch.piece(at, p), l.ch.piece(at, p), l.ch.piece_bytes(p), l.ag);
          }
        if (a == 0)
          for (size_t w = 0; w < lanes[a].size(); ++w)
            if (s + 1 < lanes[a][w].ch.n) store(int64_t(w), lanes[a][w].ch.at(s - 1), lanes[a][w].ch.cb);
      }
      for (int64_t p = 0; p < P; ++p)
        for (size_t w = 0; w < lanes[a].size(); ++w) {
          Lane& l = lanes[a][w];
          if (p >= l.ch.P) continue;
          wait(kDma, l.ag, (l.ch.n - 2) * l.ch.P + p + 1);
          if (a == 0) store(int64_t(w), l.ch.piece(l.ch.at(l.ch.n - 2), p), l.ch.piece_bytes(p));
        }
    }
  }

  // ---- all-gather across chips: the group's values side by side along
  // the dimension, in group order. Only where every dimension before it is
  // 1, so each member's value is one contiguous piece of the result. The
  // all-reduce's second half in ways: way w takes its part of this core's
  // share of every piece; each chip starts with its own at slot(w, chip),
  // and the phases fill the other slots.
  void all_gather(const Kernel& k) {
    const auto [grp, n, pos] = group_of(k);
    const Type& it = p_.type(k.inputs[0]);
    require_contiguous(k, it);
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

  // ---- all-to-all across chips: member p's value is cut along the
  // dimension into n pieces, and piece q goes to member q, which puts it in
  // place p of its result. Only where every dimension before it is 1, so
  // pieces are contiguous. Each core sends its share of every piece
  // straight to its member (the network routes it), nearest first.
  void all_to_all(const Kernel& k) {
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

  // ---- collective-permute: each source's value goes to its target, after
  // the chips meet (chip_barrier); a chip no pair targets gets zeros.
  void permute(const Kernel& k) {
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

  // This chip's group of a collective, its size and the chip's place in it.
  std::tuple<const std::vector<int64_t>*, int64_t, int64_t> group_of(const Kernel& k) const {
    for (const auto& g : k.groups)
      if (auto it = std::find(g.begin(), g.end(), chip_); it != g.end()) return {&g, int64_t(g.size()), int64_t(it - g.begin())};
    throw Error(fmt::format("{}: internal error: chip {} is in no group of the collective", kernel_loc_, chip_));
  }
  // The chips meet at the start of a collective: each tells every other
  // chip (the same core) that it has entered the kernel, on a semaphore no
  // kernel uses, and the DMA waits for all of them before it sends. Every
  // chip runs every collective, so a count that comes early (a chip already
  // in the next collective) only arrives once every chip has entered this
  // one: the total is right whichever chips it comes from.
  void chip_barrier() {
    if (nchips_ < 2) return;
    Counter c;
    c.sem = kChipSem;
    for (int64_t o = 0; o < nchips_; ++o)
      if (o != chip_) push(kDma, 0, ib::DMA_RSIG(0, kChipSem, 1), {uint64_t(o)});
    c.produce(done_[kDma] + double(m_.ici_hop_cycles()), nchips_ - 1);
    wait(kDma, c, nchips_ - 1);
  }

  // ---- element-wise kernels: chunks of the flat tensor, double-buffered
  void elementwise(const Kernel& k) {
    const Expr& e = k.expr;
    const DType od = p_.type(k.out).dtype;
    const int64_t E = p_.type(k.out).elements();
    const int64_t nvec = ceil_div(E, L_);
    Counter ld = counter(), vd = counter(), st = counter();
    std::vector<uint64_t> pre = preload(k, ld);
    std::vector<int> tensor_inputs;
    for (const Node& nd : e.nodes)
      if (nd.leaf == Leaf::input && std::find(tensor_inputs.begin(), tensor_inputs.end(), nd.input) == tensor_inputs.end())
        tensor_inputs.push_back(nd.input);
    int64_t per_vec = L_ * dtype_bytes(od);
    for (int i : tensor_inputs) per_vec += L_ * dtype_bytes(p_.type(k.inputs[i]).dtype);
    // Two register banks of up to 4 vectors each: a group's loads overlap
    // the previous group's arithmetic and stores (Pipeliner).
    const RegPlan rp = regplan(e, 8);
    const int group = std::max(1, rp.unroll / 2);
    int64_t cv = std::min<int64_t>(nvec, std::max<int64_t>(1, int64_t(vmem_budget() / 2 / uint64_t(per_vec + 64)) - 2));
    cv = std::min<int64_t>({cv, 128, ceil_div(nvec, ncores_)});
    const auto [c_lo, c_hi] = share(ceil_div(nvec, cv), 1);  // this core's chunks
    const int64_t chunks = c_hi - c_lo;
    if (chunks == 0) return drain({&ld, &vd, &st});
    std::vector<std::vector<uint64_t>> in_buf(2, std::vector<uint64_t>(k.inputs.size(), 0));
    uint64_t out_buf[2];
    for (int s = 0; s < 2 && s < chunks; ++s) {
      for (int i : tensor_inputs) in_buf[s][i] = vmem(uint64_t(cv * L_ * dtype_bytes(p_.type(k.inputs[i]).dtype)));
      out_buf[s] = vmem(uint64_t(cv * L_ * dtype_bytes(od)));
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
    loads(0);
    if (chunks > 1) loads(1);
    for (int64_t c = 0; c < chunks; ++c) {
      const int64_t b = range(c).first, end = range(c).second;
      const int s = int(c % 2);
      wait(kVpu, ld, loads_through[c]);
      if (c >= 2) wait(kVpu, st, stores_through[c - 2]);
      if (c == 0) hoist(e, rp, pre);
      const int64_t nv = ceil_div(end - b, L_);
      Pipeliner pipe{*this, {}};
      for (int64_t q = 0, g = 0; q < nv; q += group, ++g) {
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
        for (int u = 0; u < U; ++u)
          vst(od, rp.reg[u0 + u][e.nodes.size() - 1], out_buf[s] + uint64_t((q + u) * L_ * dtype_bytes(od)));
        });
      }
      pipe.flush();
      signal(kVpu, vd);
      wait(kDma, vd, c + 1);
      dma_st(p_.addr[k.out] + uint64_t(b * dtype_bytes(od)), out_buf[s], uint64_t((end - b) * dtype_bytes(od)), st);
      stores_through[c] = st.produced;
      if (c + 2 < chunks) loads(c + 2);
    }
    drain({&ld, &vd, &st});
  }

  // ---- layout copies: HBM -> VMEM (logical order) -> HBM, box by box
  struct Run {  // one view decomposed for 2-D DMAs
    int64_t run = 1;     // contiguous elements per row
    int row_dim = -1;    // the DMA's row dimension (-1: one row)
    int first_run_dim;   // dims >= this form the run
  };
  static Run decompose(const std::vector<int64_t>& dims, const std::vector<int64_t>& strides) {
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
  void view_dma(bool load, const View& v, uint64_t vmem_base, int esz, Counter& c) {
    const Run r = decompose(v.dims, v.strides);
    const auto lstr = row_major(v.dims);  // logical (VMEM) strides
    std::vector<int64_t> loop_dims;
    for (int d = 0; d < r.first_run_dim; ++d)
      if (d != r.row_dim) loop_dims.push_back(d);
    std::vector<int64_t> idx(loop_dims.size(), 0);
    const uint64_t rows = r.row_dim >= 0 ? uint64_t(v.dims[r.row_dim]) : 1;
    const uint64_t rowbytes = uint64_t(r.run * esz);
    for (;;) {
      int64_t hoff = 0, voff = 0;
      for (size_t i = 0; i < loop_dims.size(); ++i) hoff += idx[i] * v.strides[loop_dims[i]], voff += idx[i] * lstr[loop_dims[i]];
      const uint64_t h = v.base + uint64_t(hoff * esz), m = vmem_base + uint64_t(voff * esz);
      const uint64_t hs = r.row_dim >= 0 ? uint64_t(v.strides[r.row_dim] * esz) : rowbytes;
      const uint64_t vs = r.row_dim >= 0 ? uint64_t(lstr[r.row_dim] * esz) : rowbytes;
      if (load) dma_2d(true, m, h, rows, rowbytes, vs, hs, c);
      else dma_2d(false, h, m, rows, rowbytes, hs, vs, c);
      int i = int(loop_dims.size()) - 1;
      while (i >= 0 && ++idx[i] == v.dims[loop_dims[i]]) idx[i--] = 0;
      if (i < 0) break;
    }
  }
  // The strided view of value v in HBM: its buffer, or a layout op's view of its operand.
  View view_of(int v) const {
    if (p_.view[v]) return view_through(v);
    return View{p_.addr[p_.base[v]], p_.type(v).dims, row_major(p_.type(v).dims)};
  }
  View view_through(int v) const {
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

  std::vector<std::pair<View, View>> copy_views(const Kernel& k, bool& fill, double& fill_value) {
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
        fill = *pv != 0 || std::signbit(*pv);
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
  void fill_region(uint64_t hbm, int64_t elements, DType dt, double value) {
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
  // A transpose that swaps two groups of dimensions behind optional batch
  // dimensions, [B, X, Y] -> [B, Y, X] after merging each group, as
  // (batch, rows, cols); nullopt otherwise.
  std::optional<std::array<int64_t, 3>> swap_transpose(const Op& o) const {
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
  // 32-bit transposes through the VPU's vxpose: L x L tiles loaded with 2-D
  // DMAs, transposed in VMEM, stored with 2-D DMAs; double-buffered.
  void transpose_tiles(const Kernel& k, std::array<int64_t, 3> shape) {
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

  void copy(const Kernel& k) {
    const Op& o = p_.op(k.out);
    if (o.kind == OpKind::transpose && dtype_bytes(o.type.dtype) == 4 && !p_.view[o.operands[0]])
      if (auto shape = swap_transpose(o); shape && (*shape)[1] > 1 && (*shape)[2] > 1)
        return core_ == 0 ? transpose_tiles(k, *shape) : void();  // on core 0
    bool fill = false;
    double fv = 0;
    const auto pairs = copy_views(k, fill, fv);
    // On several cores each copies every ncores-th box, unless the copy
    // writes over a fill (core 0 then does it all, in order).
    if (fill && core_ > 0) return;
    const int64_t ways = fill ? 1 : ncores_;
    int64_t nth = 0;  // boxes so far, on every core
    const DType dt = p_.type(k.out).dtype;
    const int esz = dtype_bytes(dt);
    if (fill) fill_region(p_.addr[k.out], p_.type(k.out).elements(), dt, fv);
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

  // ---- reductions
  static isa::Opcode combine_op(Combiner c, DType d) {
    switch (c) {
      case Combiner::add: return opcode("vadd.", aty(d));
      case Combiner::multiply: return opcode("vmul.", aty(d));
      case Combiner::maximum: return opcode("vmax.", aty(d));
      case Combiner::minimum: return opcode("vmin.", aty(d));
      case Combiner::and_: return isa::Opcode::VAND;
      case Combiner::or_: return isa::Opcode::VOR;
    }
    throw std::logic_error("internal error: unknown combiner");
  }
  void reduce_lanes(const Kernel& k) {
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
    const auto [c_lo, c_hi] = share(ceil_div(K, rc), 1);  // this core's chunks of rows
    const int64_t chunks = c_hi - c_lo;
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
    for (int64_t c = 0; c < chunks; ++c) {
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
    }
    drain({&ld, &vd, &st, &z});
  }
  void reduce_columns(const Kernel& k) {
    const DType dt = k.dtype;
    const int esz = dtype_bytes(dt);
    const int64_t R = k.rows, K = k.cols;
    constexpr int64_t UV = 8;  // vectors per column group
    const int64_t gw = std::min<int64_t>({ceil_div(K, L_), UV, ceil_div(ceil_div(K, L_), ncores_)});  // vectors per group
    const int64_t groups = ceil_div(ceil_div(K, L_), gw);
    const auto [g_lo, g_hi] = share(groups, 1);  // this core's groups of columns
    if (g_lo == g_hi) return;
    const int64_t row_bytes = gw * L_ * esz;
    const int64_t budget = int64_t(vmem_budget() / 2) - 4 * L_ * 4;
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
    for (size_t i = 0; i < steps.size(); ++i) {
      const auto [g, c] = steps[i];
      const int64_t r0 = c * rc, n = std::min(rc, R - r0);
      const int s = int(i % 2);
      wait(kVpu, ld, lt[i]);
      if (c == 0)
        for (int64_t q = 0; q < gw; ++q) ins(ib::VLI(q, lane_bits(dt, k.init)));
      for (int64_t r = 0; r < n; ++r) {
        for (int64_t q = 0; q < gw; ++q) vld(dt, 16 + q, in_buf[s] + uint64_t(r * row_bytes + q * L_ * esz));
        for (int64_t q = 0; q < gw; ++q) vop(op, q, q, 16 + q);
      }
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
    }
    drain({&ld, &vd, &st});
  }

  // ---- matmul: C[b] = sum_p A_p[b] x W_p[b] on every MXU, epilogue on the VPU
  friend class MatmulEmitter;
  void matmul(const Kernel& k);

  const Plan& p_;
  const int64_t core_, ncores_, chip_, nchips_;
  const int64_t L_, D_;
  const isa::MachineConfig& m_;
  const bool loops_;
  const double kDmaBytesPerCycle, kDmaLatency, kDmaBurst, kDmaBurstsPerCycle;
  std::vector<Pending> prog_;
  double clk_[isa::kUnitSlots] = {}, done_[isa::kUnitSlots] = {}, floor_ = 0;
  // When >= 0, what is pushed goes at this place in the program (and
  // dispatches no earlier): a kernel lays work out at fixed points of its
  // loop (MatmulEmitter's drain) rather than where the estimates fall.
  double pin_ = -1;
  double last_key_[isa::kUnitSlots] = {};  // per unit: the place of its last instruction
  std::vector<isa::Instruction>* capture_ = nullptr;  // VPU instructions go here instead when set
  double vgroup_ = 0, vused_[3] = {};  // the VPU's current issue group: its cycle, slots used
  int vn_ = 0;
  double weights_ready_[isa::kMaxMxus] = {}, feed_free_[isa::kMaxMxus] = {}, mm_done_[isa::kMaxMxus][2] = {};
  uint64_t vmem_top_ = 0;
  VRegs vregs_;  // the kernel's vector registers
  std::string kernel_loc_;  // the HLO op of the kernel being emitted, for errors
  int cur_kernel_ = -1;     // the kernel being emitted (-1: none)
  std::vector<std::vector<std::pair<std::string, uint64_t>>> kernel_ops_;  // Plan::profile_ops of each kernel
  int next_sem_ = 0;
};

}  // namespace

namespace {

// ---- matmul: C[b] = sum_p A_p[b] x W_p[b] on every MXU, epilogue on the VPU.
//
// One object per kernel. The constructor tiles the kernel and lays out its
// buffers and semaphores; run() then goes chunk by chunk of A's rows. A
// chunk is cut into blocks (one work item per MXU and column tile each);
// every block's MXU work is emitted, and the VPU drains the block before it
// through the epilogue meanwhile (drain_block). The members are the
// kernel's working set, named as in docs/compiler.md's description.
class MatmulEmitter {
 public:
  MatmulEmitter(Emitter& em, const Kernel& kernel);
  void run();

 private:
  using RegPlan = Emitter::RegPlan;
  using Pipeliner = Emitter::Pipeliner;
  struct Item {
    int m;
    int64_t j, idx;  // column tile, index among the MXU's items
  };
  struct Block {
    int64_t b, m0, rows;
    int as;
    std::vector<Item> items;
  };

  void zero_padding();
  void cut_blocks();
  void assign_items();
  void load_a(int64_t m0, int64_t rows, int64_t k0, int64_t k1, int64_t piece);
  // Whether a block's rows of A get an arrival count at K-step kk: the
  // first block's at every slice, the others' (loaded while the block
  // before computes) in at most eight pieces of K: finer cuts fill the
  // DMA queue with transfers and signals, coarser ones leave an MXU
  // waiting for more of A than its next steps need.
  bool a_arrives(int64_t kk, bool first_block) const { return first_block ? slice_of[size_t(kk)] >= 0 : kk % kq == 0; }
  void load_group_slice(int64_t g, int64_t sl);
  // Group g's weights, slice by slice; with `steps`, at a fixed number of
  // slices a step (prefetch()).
  void load_group(int64_t g, const std::vector<double>& steps = {});
  // The block of the first group during which the next groups' weights
  // load: the one before the last, after the last of A.
  int64_t panel_block() const { return blocks.size() <= 2 ? 0 : int64_t(blocks.size()) - 2; }
  // Pins what follows to K-step q of `steps` (the last if past it), if any.
  void pin_at(const std::vector<double>& steps, int64_t q) {
    if (!steps.empty()) em.pin_ = steps[size_t(std::min<int64_t>(q, int64_t(steps.size()) - 1))];
  }
  void load_first_block();
  void prefetch(int64_t g, size_t bi, const std::vector<double>& steps = {});
  void chunk_of_a();
  void block(int64_t g, size_t bi);
  // Where a block of `rows` rows drains the block before it (`items` items
  // of `held_rows` rows), when at fixed K-steps: every block's code is then
  // alike and folds into loops. The scalar unit runs up to a queue's depth
  // ahead of the MXUs and keeps pace with the VPU while it pushes a drain,
  // so the drain starts at the step by which the MXU queues have taken the
  // block before (q0), and goes in parts short enough for what they hold, a
  // part every `gap` steps (a step is `rows` cycles; the drain takes about
  // a cycle per row of each item).
  struct Drain {
    bool fixed = false;
    int64_t q0 = 0, parts = 1, gap = 0;
  };
  Drain drain_plan(int64_t rows, int64_t items, int64_t held_rows) const {
    Drain d;
    const int64_t qsteps = int64_t(em.m_.core.queue_depth) / 3, cycles = items * held_rows;
    d.q0 = qsteps + 1;
    d.parts = std::max<int64_t>(1, ceil_div(cycles, std::max<int64_t>(1, qsteps - 2) * rows));
    // Parts far enough apart to refill the queues, and the K-steps between
    // them (up to six) enough to fold into a loop.
    d.gap = std::max(ceil_div(cycles, d.parts * rows) + 2, std::min<int64_t>(6, (nsteps - d.q0) / d.parts));
    // The queues must hold a few steps beyond a part, and the scalar unit
    // push a drain faster than the VPU takes it.
    d.fixed = cycles > 0 && qsteps >= 4 && em.m_.core.issue_width >= 2 && d.q0 + d.parts * d.gap <= nsteps;
    return d;
  }
  // Blocks are steady (drain at fixed steps, docs/compiler.md) where the
  // kernel is clearly bound by its MXUs: where the DMA is the bottleneck, a
  // drain later than the estimate holds up the stores, and the loads queued
  // behind them.
  bool steady_kernel() const {
    const double hbm_bytes = double(Ml * K * esz * na) + double(K * N * esz * nw) + double(Ml * N * oesz);
    return mxu_cycles() >= 1.25 * double(Bl) * hbm_bytes / em.kDmaBytesPerCycle && drain_plan(Mb, nmu, Mb).fixed;
  }
  // The kernel's MXU cycles: every stream of every K-step and pass.
  double mxu_cycles() const { return double(Bl) * double(Ml) * double(nsteps) * double(nt) / double(nmu); }
  // The kernel's end: the last block's items drain after the MXUs stop,
  // `rows` cycles or so each. The staggered end and the last items' chunks
  // shorten that tail with code of their own (the end is like no block
  // before it); where the tail is under 1/1000 of the kernel's MXU cycles,
  // that code does not pay.
  bool shorten_end(int64_t rows) const { return double(rows * nmu) * 1000 >= mxu_cycles(); }
  void drain_block(const Block& blk, const std::vector<double>& at = {});
  void finish();

  uint64_t acc_base(int m, int64_t slot) const { return uint64_t((m * S + slot) * Mb); }
  // Telling an MXU that DMA data is in: a `signal dma` counts once every
  // transfer before it has landed, without holding up what follows.
  void dma_fence(Counter& c) { signal(kDma, c); }
  // An MXU's signals leave its queue at once and count when the streams
  // before them are done (docs/timing.md).
  void signal_mxu(int m, Counter& c, int slot) {
    signal(kMxu0 + m, c);
    if (slot >= 0) slot_release[size_t(slot)][size_t(m)] = c.produced;
  }
  bool first_pass(int pa, int pw) const { return pa == passes[0].first && pw == passes[0].second; }
  int64_t slice_k0(int64_t sl) const { return std::min(K, slice_step[size_t(std::min(sl, KS))] * D); }
  int64_t wslice_k0(int64_t sl) const { return std::min(K, wslice_step[size_t(std::min(sl, KSW))] * D); }

  // The Emitter's instruction and buffer primitives.
  void ins(const isa::Instruction& i) { em.ins(i); }
  template <typename... A>
  void vop(isa::Opcode op, A... a) {
    em.vop(op, a...);
  }
  void vld(DType dt, int vd, uint64_t at) { em.vld(dt, vd, at); }
  void vst(DType dt, int vs, uint64_t at) { em.vst(dt, vs, at); }
  void wait(int unit, Counter& c, int64_t total) { em.wait(unit, c, total); }
  void signal(int unit, Counter& c) { em.signal(unit, c); }
  void note(const std::string& s, int unit = -1) { em.note(s, unit); }
  Counter counter() { return em.counter(); }
  uint64_t vmem(uint64_t bytes) { return em.vmem(bytes); }
  void dma_2d(bool load, uint64_t dst, uint64_t src, uint64_t rows, uint64_t rowbytes, uint64_t dstride, uint64_t sstride, Counter& c) {
    em.dma_2d(load, dst, src, rows, rowbytes, dstride, sstride, c);
  }
  void mxu_lw(int m, uint64_t src, uint64_t stride, int dt) { em.mxu_lw(m, src, stride, dt); }
  double mxu_mm(bool acc, int m, uint64_t racc, uint64_t src, uint64_t stride, uint64_t rows, int dt, bool more = false) {
    return em.mxu_mm(acc, m, racc, src, stride, rows, dt, more);
  }

  Emitter& em;
  const Plan& p_;
  const Kernel& k;
  // The kernel's shape and this core's share of it.
  DType in, od;
  int esz, oesz;
  int mdt;  // the MXU operand type (values::MxuDtype_*)
  int64_t D, B, M, K, N, b_lo = 0, b_hi = 0, m_lo = 0, m_hi = 0, Bl = 0, Ml = 0, Kp = 0, kt = 0, nt = 0;
  int nmu = 0;
  std::vector<int> aparts, wparts;
  std::vector<std::pair<int, int>> passes;  // indices into aparts, wparts
  bool steady = false;  // whole blocks drain at fixed K-steps (drain_plan)
  int64_t na = 0, nw = 0, Mb = 0, S = 0, pw_elems = 0, chunk = 0, chunks_per_batch = 0, groups = 0, nsteps = 0;
  // Buffers: preloads, weight panels, output tiles, epilogue inputs, A.
  Counter pre;  // the preloads, then the loads of A
  int64_t preloads = 0;
  std::vector<uint64_t> pre_at;
  uint64_t panel_bytes = 0;
  int nslots = 0, ahead = 0, abufs = 0;
  std::vector<std::vector<uint64_t>> panel, obuf, abuf;
  std::vector<int> extras;                                  // Kernel::inputs indices
  std::map<int, std::vector<std::vector<uint64_t>>> ebuf;  // input -> [m][slot]
  std::vector<std::vector<int64_t>> ebuf_release;          // v totals that free a slot
  // Per kernel: preloads and padding (pre, z), drained rows (v), stores (st),
  // epilogue inputs (E). Per MXU: A chunk loaded (Ca) and released (Afree),
  // panel loaded (P) and released (Pfree), accumulator slot written (Acc)
  // and drained (AccFree); H[i]: the MXU of item i has handed its last
  // steps over (block()).
  Counter z, v, st, E;
  std::vector<Counter> Ca, Afree, P, Pfree, Acc, AccFree, H;
  RegPlan rp;
  std::vector<int64_t> items_on;                     // work items each MXU has been given
  int64_t groups_loaded = 0;                         // panel groups so far, all chunks
  std::vector<std::vector<int64_t>> slot_release;    // Pfree totals that free a slot
  std::vector<std::vector<int64_t>> slot_store;
  int64_t items_total = 0, chunk_no = 0;
  bool hoisted = false;
  // K-slices of A (slice_step: first K-step of each, then kt; slice_of: the
  // slice a K-step starts, or -1) and of the weight panels (wslice_*).
  int64_t kps = 0, KS = 0, kpw = 0, KSW = 0;
  std::vector<int64_t> slice_step, slice_of, wslice_step, wslice_of;
  // The drain: groups of U0 rows in `banks` register banks; the last items
  // in chunks of Cr rows.
  int banks = 1, U0 = 1;
  int64_t Cr = 0;
  std::vector<std::vector<std::vector<std::pair<int, int64_t>>>> acc_marks;  // [m][item]: per chunk, (MXU, Acc total)
  std::vector<std::vector<int64_t>> chunk_rows;                              // [m][item]
  std::optional<Block> held;  // the block whose drain waits for the next block's MXU work
  // The chunk of A being computed: batch b, rows c0.. (crows), buffer as.
  int64_t b = 0, c0 = 0, crows = 0;
  int as = 0;
  std::vector<std::pair<int64_t, int64_t>> blocks, blocks_end;            // (first row, rows)
  std::vector<std::vector<std::vector<std::pair<int, int64_t>>>> assign;  // [g][block] -> (MXU, tile)
  std::vector<std::vector<std::pair<int64_t, int64_t>>> uses;             // [g][m]: first and last block with an item
  int64_t kPiece = 0, kq = 0;
  std::vector<int> gslot;                                 // the panel slot of each group
  std::vector<std::vector<std::vector<int64_t>>> pready;  // [g][m][slice]: P totals when the slice is in
};

MatmulEmitter::MatmulEmitter(Emitter& em_, const Kernel& kernel)
    : em(em_),
      p_(em_.p_),
      k(kernel),
      in(k.dtype),
      od(p_.type(k.out).dtype),
      esz(dtype_bytes(in)),
      oesz(dtype_bytes(od)),
      mdt(in == DType::s8 ? isa::values::MxuDtype_s8 : isa::values::MxuDtype_bf16),
      D(em_.D_),
      B(k.B),
      M(k.M),
      K(k.K),
      N(k.N) {
  // This core's share of the output (the cores of a chip split it as
  // megacore does): whole batches when they divide evenly, else rows.
  const bool by_batch = B % em.ncores_ == 0;
  std::tie(b_lo, b_hi) = by_batch ? em.share(B, 1) : std::pair<int64_t, int64_t>{0, B};
  std::tie(m_lo, m_hi) = by_batch ? std::pair<int64_t, int64_t>{0, M} : em.share(M, M >= em.ncores_ * D ? D : 1);
  Bl = b_hi - b_lo, Ml = m_hi - m_lo;
  if (Bl == 0 || Ml == 0) return;
  Kp = ceil_div(K, D) * D, kt = Kp / D, nt = ceil_div(N, D);
  // Every MXU of the core while the semaphores last (5 for the kernel, 6
  // per MXU and one per pair, below the two barriers' semaphores) and each
  // has two accumulator slots of at least one row.
  if (p_.t.acc_rows < 2)
    throw Error(fmt::format("{}: target.acc_rows = {}: a matmul needs at least 2 accumulator rows", em.kernel_loc_, p_.t.acc_rows));
  const int64_t sem_mxus = (Emitter::kChipSem - 5) * 2 / 13;
  nmu = int(std::min<int64_t>({int64_t(p_.t.mxus_per_core), sem_mxus, nt, int64_t(p_.t.acc_rows) / 2}));
  for (auto [a, w] : k.passes) {
    auto idx = [](std::vector<int>& v, int x) {
      auto it = std::find(v.begin(), v.end(), x);
      if (it != v.end()) return int(it - v.begin());
      v.push_back(x);
      return int(v.size()) - 1;
    };
    passes.push_back({idx(aparts, a), idx(wparts, w)});
  }
  na = int64_t(aparts.size()), nw = int64_t(wparts.size());
  // Two weight panels of every part (one in use, one loading; below) must
  // fit in half of VMEM: with a long K and several parts (f32 at a higher
  // precision), fewer MXUs share a group of columns.
  const auto panels_fit = [&](int n) {
    return uint64_t(em.vmem_top_) + uint64_t(2 * nw) * (uint64_t(Kp * n * D * esz) + 4096) <= p_.t.vmem_bytes / 2;
  };
  while (nmu > 1 && !panels_fit(nmu)) --nmu;
  groups = ceil_div(nt, nmu), nsteps = kt * int64_t(passes.size());
  // Rows per work item: enough to hide the next weight load (3N - 1 cycles)
  // and few enough that draining the last items overlaps little else.
  const int64_t slots_min = 2;
  Mb = std::min<int64_t>({Ml, std::max<int64_t>(4 * D, 256), int64_t(p_.t.acc_rows) / (slots_min * nmu)});  // rows per item
  steady = steady_kernel();
  // Accumulator slots per MXU: two in steady blocks (the drain is done
  // within the next block, so the one after can take its slot, and every
  // other block's code is alike); else up to four, so the MXUs run ahead of
  // a slower drain.
  S = steady ? slots_min : std::max<int64_t>(slots_min, std::min<int64_t>(4, int64_t(p_.t.acc_rows) / (nmu * Mb)));
  // VMEM: preloads, weight panels, output tiles (2 per MXU), then A.
  pre = counter();
  pre_at = em.preload(k, pre);
  preloads = pre.produced;
  // Weight panels: the columns of one group of tiles (one tile per MXU), all
  // of K. Loads run `ahead` - 1 groups ahead: one where blocks are steady
  // (a group computes far longer than its weights take to load, and every
  // group but the last then loads one, so their code is alike); else two,
  // with a group of slack, when three panels fit in a quarter of VMEM, else
  // one. Every group has a slot of its own when all fit there (their
  // addresses then step evenly from group to group, so groups fold into a
  // loop), else they take `ahead` slots in turn. Wide rows make long DMA
  // bursts.
  pw_elems = nmu * D;
  panel_bytes = uint64_t(Kp * pw_elems * esz);
  ahead = !steady && panel_bytes * uint64_t(3 * nw) <= p_.t.vmem_bytes / 4 ? 3 : 2;
  nslots = panel_bytes * uint64_t(groups * nw) <= p_.t.vmem_bytes / 4 ? int(std::max<int64_t>(ahead, groups)) : ahead;
  panel.assign(size_t(nslots), std::vector<uint64_t>(size_t(nw)));
  for (int s = 0; s < nslots; ++s)
    for (int64_t w = 0; w < nw; ++w) {
      if (uint64_t(em.vmem_top_) + panel_bytes + 4096 > p_.t.vmem_bytes / 2)
        throw Error(fmt::format("{}: unsupported dot: a {}x{} weight panel does not fit in VMEM", k.from.back(), Kp, pw_elems));
      panel[s][w] = vmem(panel_bytes);
    }
  obuf.assign(size_t(nmu), std::vector<uint64_t>(2));
  for (int m = 0; m < nmu; ++m)
    for (int s = 0; s < 2; ++s) obuf[m][s] = vmem(uint64_t(Mb * D * oesz));
  // Full tensors the epilogue reads besides the accumulators (a residual):
  // one tile per work item, double-buffered per MXU.
  for (const Node& nd : k.expr.nodes)
    if (nd.leaf == Leaf::input && std::find(extras.begin(), extras.end(), nd.input) == extras.end()) extras.push_back(nd.input);
  for (int e : extras) {
    ebuf[e].assign(nmu, std::vector<uint64_t>(2));
    for (int m = 0; m < nmu; ++m)
      for (int s = 0; s < 2; ++s) ebuf[e][m][s] = vmem(uint64_t(Mb * D * dtype_bytes(p_.type(k.inputs[e]).dtype)));
  }
  ebuf_release.assign(size_t(nmu), std::vector<int64_t>(2, 0));
  // A: as many rows as fit (all of M when possible), double-buffered across chunks.
  const uint64_t slack = uint64_t(2 * na) * uint64_t(4 * em.L_ + 64) + 1024;
  const uint64_t left = em.vmem_budget() > slack ? em.vmem_budget() - slack : 0;
  const uint64_t row_bytes = uint64_t(na * Kp * esz);
  chunk = int64_t(left / row_bytes) >= Bl * Ml ? Ml : std::min<int64_t>(Ml, int64_t(left / 2 / row_bytes));
  if (chunk < 1) throw Error(fmt::format("{}: unsupported dot: K = {} is too long for VMEM", k.from.back(), K));
  if (chunk < Ml) {
    if (chunk >= Mb) chunk = chunk / Mb * Mb;
    else Mb = chunk;  // smaller work items; the buffers sized for Mb still fit
  }
  chunks_per_batch = ceil_div(Ml, chunk);
  abufs = Bl * chunks_per_batch > 1 ? 2 : 1;
  abuf.assign(size_t(abufs), std::vector<uint64_t>(size_t(na)));
  for (int s = 0; s < abufs; ++s)
    for (int64_t a = 0; a < na; ++a) abuf[s][a] = vmem(uint64_t(chunk * Kp * esz));
  z = counter(), v = counter(), st = counter(), E = counter();
  for (int m = 0; m < nmu; ++m)
    for (auto* c : {&Ca, &Afree, &P, &Pfree, &Acc, &AccFree}) c->push_back(counter());
  for (int m = 0; m < nmu / 2; ++m) H.push_back(counter());
  note(fmt::format("matmul B x M x K x N = {} x {} x {} x {}: {} pass(es) on {} MXU(s); {} column tiles of {}, K padded to {} ({} steps); "
                   "A in chunks of {} rows, work items of {} rows, {} accumulator slots per MXU{}",
                   B, M, K, N, passes.size(), nmu, nt, D, Kp, kt, chunk, Mb, S, steady ? "; steady blocks" : ""));
  zero_padding();
  rp = em.regplan(k.expr, 8);
  items_on.assign(size_t(nmu), 0);
  slot_release.assign(size_t(nslots), std::vector<int64_t>(size_t(nmu), 0));
  slot_store.assign(size_t(nmu), std::vector<int64_t>(2, 0));
  // Steady blocks: each output slot starts with a credit on `st` (-1: take
  // one), so the first drains wait for their slots as every later one does.
  if (steady) {
    em.signal(kSc, st, 2 * nmu);
    for (auto& s : slot_store) s.assign(2, -1);
  }
  // A is loaded in K-slices, so the MXUs start on the first and little work
  // is left after the last lands: one K-step each, unless that makes A's
  // rows shorter than what the DMA sends per burst slot.
  const double slot_bytes = em.kDmaBurst / em.kDmaBurstsPerCycle;
  kps = std::min<int64_t>(kt, std::max<int64_t>(1, int64_t(std::ceil(slot_bytes / double(D * esz)))));
  for (int64_t k = 0; k < kt; k += kps) slice_step.push_back(k);
  KS = int64_t(slice_step.size());
  slice_step.push_back(kt);
  slice_of.assign(size_t(kt + 1), -1);
  for (int64_t sl = 0; sl < KS; ++sl) slice_of[size_t(slice_step[size_t(sl)])] = sl;
  // Weight panels arrive in finer slices (one K-step each while K has at
  // most 16 steps): a panel row is a whole number of bursts however K is
  // cut, while A's rows are only one slice wide, so A keeps the coarser cut.
  kpw = kt <= 16 ? 1 : kps;
  for (int64_t k = 0; k < kt; k += kpw) wslice_step.push_back(k);
  KSW = int64_t(wslice_step.size());
  wslice_step.push_back(kt);
  wslice_of.assign(size_t(kt + 1), -1);
  for (int64_t sl = 0; sl < KSW; ++sl) wslice_of[size_t(wslice_step[size_t(sl)])] = sl;
  // The last items' final streams go in chunks of Cr rows, each signalled,
  // so the VPU drains (and the DMA stores) a chunk while the MXU computes
  // the next: what is left after the MXUs stop is one chunk, not an item.
  // (Earlier items drain while the next block computes; chunking them only
  // adds DMA waits.)
  // The drain goes in groups of U0 rows (two register banks when the
  // epilogue leaves room); a chunk is a whole number of groups.
  banks = rp.unroll >= 2 ? 2 : 1, U0 = rp.unroll / banks;
  Cr = ceil_div(std::max<int64_t>(D / 2, U0), U0) * U0;
  acc_marks.assign(size_t(nmu), {});
  chunk_rows.assign(size_t(nmu), {});
}

// Zeroes the padding columns of A and rows of the panels once.
void MatmulEmitter::zero_padding() {
  if (K % D == 0) return;
  ins(ib::VLI(0, 0));
  for (int s = 0; s < abufs; ++s)
    for (int64_t a = 0; a < na; ++a)
      for (int64_t r = 0; r < chunk; ++r) vst(in, 0, abuf[s][a] + uint64_t((r * Kp + K) * esz));
  for (int s = 0; s < nslots; ++s)
    for (int64_t w = 0; w < nw; ++w)
      for (int64_t r = K; r < Kp; ++r)
        for (int64_t c = 0; c < pw_elems; c += em.L_) vst(in, 0, panel[s][w] + uint64_t((r * pw_elems + c) * esz));
  signal(kVpu, z);
  wait(kDma, z, 1);
}

// The VPU drains a block's items through the epilogue; DMA stores them.
// Unpinned (`at` empty), where the estimates fall: item by item, each chunk
// as its rows are in. Pinned: the VPU's work in parts, part p at place at[p]
// in the program (Emitter::pin_), the items' rows interleaved, so the VPU
// waits for and signals each MXU's semaphores once, outside the loops the
// parts fold into.
void MatmulEmitter::drain_block(const Block& blk, const std::vector<double>& at) {
  const int64_t b = blk.b, m0 = blk.m0, rows = blk.rows;
  const std::vector<Item>& items = blk.items;
  std::vector<int64_t> eready(items.size(), 0);
  auto inputs = [&](size_t ii) {  // DMA: the epilogue's other tensors
    const Item& it = items[ii];
    const int64_t oslot = it.idx % 2, j0 = it.j * D, cols = std::min(D, N - j0);
    wait(kDma, v, ebuf_release[it.m][oslot]);
    for (int e : extras) {
      const int esz_e = dtype_bytes(p_.type(k.inputs[e]).dtype);
      dma_2d(true, ebuf[e][it.m][oslot], p_.addr[k.inputs[e]] + uint64_t(((b * M + m0) * N + j0) * esz_e), uint64_t(rows),
             uint64_t(cols * esz_e), uint64_t(D * esz_e), uint64_t(N * esz_e), E);
    }
    eready[ii] = E.produced;
  };
  auto before = [&](size_t ii) {  // VPU: its inputs are in, its output tile is free
    const int m = items[ii].m;
    wait(kVpu, E, eready[ii]);
    const int64_t free = slot_store[m][items[ii].idx % 2];
    wait(kVpu, st, free < 0 ? st.consumed + 1 : free);
    if (!hoisted) {
      // Pinned, only for the preloads: loads of A counted on `pre` since
      // may come later in the program. (Unpinned, for everything loaded so
      // far: the first drain then goes no earlier than the first block of
      // A, which keeps the VPU's queue clear for it.)
      wait(kVpu, pre, em.pin_ >= 0 ? preloads : pre.produced);
      em.hoist(k.expr, rp, pre_at);
      hoisted = true;
    }
  };
  // Rows r .. r + U of item ii through the epilogue, in register bank `bank`.
  auto gen = [&](size_t ii, int64_t r, int U, int bank) {
    const Item& it = items[ii];
    const int m = it.m;
    const int64_t aslot = it.idx % S, oslot = it.idx % 2, j0 = it.j * D;
    const int u0 = bank * U0;
    em.eval(k.expr, rp, U, [&](int u, const Node& nd, int rg) {
      if (nd.leaf == Leaf::acc) {
        ins(ib::VLDA(rg, 0, acc_base(m, aslot) + uint64_t(r + u)));
      } else if (nd.leaf == Leaf::row) {
        const DType dt = p_.type(k.inputs[nd.input]).dtype;
        vld(dt, rg, pre_at[nd.input] + uint64_t(j0 * dtype_bytes(dt)));
      } else if (nd.leaf == Leaf::input) {
        const DType dt = p_.type(k.inputs[nd.input]).dtype;
        vld(dt, rg, ebuf[nd.input][m][oslot] + uint64_t((r + u) * D * dtype_bytes(dt)));
      } else if (nd.leaf == Leaf::col) {  // the tile row lies within one source element's span
        const DType dt = p_.type(k.inputs[nd.input]).dtype;
        const int64_t index = ((b * M + m0 + r + u) * N + it.j * D) / int64_t(nd.value);
        em.col_splat(rp, rg, pre_at[nd.input] + uint64_t(index * dtype_bytes(dt)), dt);
      } else {
        throw std::logic_error("internal error: unexpected epilogue leaf");
      }
    }, u0);
    for (int u = 0; u < U; ++u)
      vst(od, rp.reg[u0 + u][k.expr.nodes.size() - 1], obuf[m][oslot] + uint64_t((r + u) * D * oesz));
  };
  // Row group g (rows r .. r + U0) of item ii, pipelined across the banks.
  auto rows_of = [&](Pipeliner& pipe, size_t ii, int64_t r, int64_t g) {
    const int U = int(std::min<int64_t>(U0, rows - r));
    if (banks == 2) pipe.group([&] { gen(ii, r, U, int(g % banks)); });
    else gen(ii, r, U, 0);
  };
  auto done = [&](size_t ii) {
    const int m = items[ii].m;
    signal(kVpu, AccFree[m]);
    signal(kVpu, v);  // the last chunk
    ebuf_release[m][items[ii].idx % 2] = v.produced;
  };
  auto drain = [&](size_t ii) {  // VPU: one item, chunk by chunk
    const Item& it = items[ii];
    const int m = it.m;
    before(ii);
    Pipeliner pipe{em, {}};
    for (int64_t r = 0, g = 0; r < rows; r += U0, ++g) {
      const int64_t cr = chunk_rows[m].at(size_t(it.idx));
      if (r % cr == 0) {  // a new chunk: its rows are in the accumulators
        if (r > 0) {
          pipe.flush();
          signal(kVpu, v);
        }
        const auto [mu, total] = acc_marks[m].at(size_t(it.idx)).at(size_t(r / cr));
        wait(kVpu, Acc[size_t(mu)], total);
      }
      rows_of(pipe, ii, r, g);
    }
    pipe.flush();
    done(ii);
  };
  auto store = [&](size_t ii) {  // DMA: store the tile
    const Item& it = items[ii];
    const int m = it.m;
    const int64_t oslot = it.idx % 2;
    const int64_t j0 = it.j * D, cols = std::min(D, N - j0);
    const int64_t cr = chunk_rows[m].at(size_t(it.idx));
    for (int64_t r = 0; r < rows; r += cr) {  // chunk by chunk, as the VPU finishes them
      const int64_t n = std::min(cr, rows - r);
      wait(kDma, v, ++items_total);
      dma_2d(false, p_.addr[k.out] + uint64_t(((b * M + m0 + r) * N + j0) * oesz), obuf[m][oslot] + uint64_t(r * D * oesz),
             uint64_t(n), uint64_t(cols * oesz), uint64_t(N * oesz), uint64_t(D * oesz), st);
    }
    slot_store[m][oslot] = st.produced;
  };
  if (at.empty()) {
    for (size_t ii = 0; ii < items.size() && !extras.empty(); ++ii) inputs(ii);
    for (size_t ii = 0; ii < items.size(); ++ii) drain(ii);
    for (size_t ii = 0; ii < items.size(); ++ii) store(ii);
    return;
  }
  // Pinned, never before the signals it waits for (so no wait precedes its
  // signal in the program); the epilogue inputs where the estimates fall.
  for (size_t ii = 0; ii < items.size() && !extras.empty(); ++ii) inputs(ii);
  double ready = 0;
  auto after = [&](const Counter& c, int64_t total) {
    if (total > 0) ready = std::max(ready, c.when.at(size_t(total - 1)));
  };
  for (size_t ii = 0; ii < items.size(); ++ii) {
    const Item& it = items[ii];
    after(E, eready[ii]);
    after(st, std::max<int64_t>(0, slot_store[size_t(it.m)][size_t(it.idx % 2)]));
    for (const auto& [mu, total] : acc_marks[size_t(it.m)].at(size_t(it.idx))) after(Acc[size_t(mu)], total);
  }
  if (!hoisted) after(pre, preloads);
  const int64_t parts = int64_t(at.size()), per = ceil_div(ceil_div(rows, U0), parts) * U0;
  for (int64_t p = 0; p < parts; ++p) {
    em.pin_ = std::max(ready, at[size_t(p)]);
    if (p == 0)
      for (size_t ii = 0; ii < items.size(); ++ii) {
        before(ii);
        for (const auto& [mu, total] : acc_marks[items[ii].m].at(size_t(items[ii].idx))) wait(kVpu, Acc[size_t(mu)], total);
      }
    Pipeliner pipe{em, {}};
    for (int64_t r = p * per, g = 0; r < std::min(rows, (p + 1) * per); r += U0)
      for (size_t ii = 0; ii < items.size(); ++ii, ++g) rows_of(pipe, ii, r, g);
    pipe.flush();
    if (p + 1 == parts)
      for (size_t ii = 0; ii < items.size(); ++ii) done(ii);
  }
  for (size_t ii = 0; ii < items.size(); ++ii) store(ii);  // right after the drain
  em.pin_ = -1;
}

void MatmulEmitter::run() {
  if (Bl == 0 || Ml == 0) return;
  for (b = b_lo; b < b_hi; ++b)
    for (c0 = m_lo; c0 < m_hi; c0 += chunk, ++chunk_no) chunk_of_a();
  finish();
}

void MatmulEmitter::finish() {
  if (held) drain_block(*held);
  em.drain({&pre, &z, &v, &st, &E}, nmu);
  for (int m = 0; m < nmu; ++m)
    for (Counter* c : {&Ca[m], &Afree[m], &P[m], &Pfree[m], &Acc[m], &AccFree[m]}) wait(kSc, *c, c->produced);
  for (Counter& c : H) wait(kSc, c, c.produced);
}

// One chunk of A's rows (batch b, rows c0..): its blocks, the order its
// data arrives in, and every block's MXU work.
void MatmulEmitter::chunk_of_a() {
  crows = std::min(chunk, m_hi - c0);
  as = int(chunk_no % abufs);
  note(fmt::format("A: batch {}, rows {}..{}", b, c0, c0 + crows - 1), kDma);
  for (int m = 0; m < nmu; ++m) wait(kDma, Afree[m], chunk_no - abufs + 1);  // every MXU is done with this buffer
  cut_blocks();
  assign_items();
  // A slice arrives in pieces of `piece` rows, each counted once on Ca
  // (the first block's in pieces of kPiece rows, below).
  kPiece = 2 * std::max<int64_t>(D, 128);
  kq = ceil_div(kt, 8);
  gslot.assign(size_t(groups), 0);
  pready.assign(size_t(groups), std::vector<std::vector<int64_t>>(size_t(nmu), std::vector<int64_t>(size_t(KSW), 0)));
  load_first_block();
  for (int64_t g = 0; g < groups; ++g) {
    const auto& gblocks = g > 0 && g == groups - 1 ? blocks_end : blocks;
    for (size_t bi = 0; bi < gblocks.size(); ++bi) block(g, bi);
  }
}

void MatmulEmitter::cut_blocks() {
  // A arrives block by block (one work item's rows), so the MXUs start
  // after the first block rather than the whole chunk. Blocks of Mb rows;
  // a last block shorter than 2N rows (too short to hide the next weight
  // load) takes rows from the one before.
  auto short_last = [&](std::vector<std::pair<int64_t, int64_t>>& bl) {
    if (bl.size() >= 2 && bl.back().second < 2 * D && bl.end()[-2].second + bl.back().second >= 4 * D) {
      auto& pen = bl.end()[-2];
      pen.second += bl.back().second - 2 * D;
      bl.back() = {pen.first + pen.second, 2 * D};
    }
  };
  blocks.clear();
  for (int64_t m0 = c0; m0 < c0 + crows; m0 += Mb) blocks.push_back({m0, std::min(Mb, c0 + crows - m0)});
  // The last group's last block is halved when the halves still cover the
  // weight loads (2N rows): less is left to drain at the end. (Where blocks
  // drain at fixed steps, earlier groups keep whole blocks: the drain of
  // their last overlaps the next group, and equal groups fold into a loop.)
  blocks_end = blocks;
  if (blocks_end.back().second >= 4 * D) {
    const int64_t m0 = blocks_end.back().first, rows = blocks_end.back().second, half = ceil_div(rows / 2, D) * D;
    blocks_end.back().second = half;
    blocks_end.push_back({m0 + half, rows - half});
  }
  short_last(blocks);
  short_last(blocks_end);
  if (groups == 1 || !steady) blocks = blocks_end;
  // The last group, when it is not the first (which sets how A arrives),
  // also cuts 2N rows off a long block before the last: the staggered end
  // (block()) then moves steps of 2N rows.
  if (groups > 1 && blocks_end.size() >= 2 && blocks_end.end()[-2].second >= 4 * D && blocks_end.back().second >= 2 * D) {
    const auto pen = blocks_end.end()[-2];
    blocks_end.end()[-2].second = pen.second - 2 * D;
    blocks_end.insert(blocks_end.end() - 1, {pen.first + pen.second - 2 * D, 2 * D});
  }
}

void MatmulEmitter::assign_items() {
  // Which MXU computes which column tile of which block: group g's tile
  // i goes to MXU i, except in a last group with fewer tiles than MXUs
  // (after a full first group), whose items go block by block to the
  // least-loaded MXUs not yet busy in the block, so no MXU idles while
  // the others finish the columns left over.
  assign.assign(size_t(groups), {});
  for (int64_t g = 0; g < groups; ++g) {
    const auto& gb = g > 0 && g == groups - 1 ? blocks_end : blocks;
    const int64_t tiles = std::min<int64_t>(nmu, nt - g * nmu);
    std::vector<int64_t> load(size_t(nmu), 0);
    for (const auto& [m0, rows] : gb) {
      auto& its = assign[size_t(g)].emplace_back();
      std::vector<bool> busy(size_t(nmu), false);
      for (int64_t i = 0; i < tiles; ++i) {
        int m = int(i);
        if (tiles < nmu)
          for (int x = 0; x < nmu; ++x)
            if (!busy[size_t(x)] && (busy[size_t(m)] || load[size_t(x)] < load[size_t(m)])) m = x;
        busy[size_t(m)] = true;
        load[size_t(m)] += rows;
        its.push_back({m, g * nmu + i});
      }
    }
  }
  // uses[g][m]: (first, last) block of group g where MXU m has an item, or (-1, -1)
  uses.assign(size_t(groups), std::vector<std::pair<int64_t, int64_t>>(size_t(nmu), {-1, -1}));
  for (int64_t g = 0; g < groups; ++g)
    for (size_t bi = 0; bi < assign[size_t(g)].size(); ++bi)
      for (const auto& [m, j] : assign[size_t(g)][bi]) {
        auto& u = uses[size_t(g)][size_t(m)];
        if (u.first < 0) u.first = int64_t(bi);
        u.second = int64_t(bi);
      }
}

void MatmulEmitter::load_a(int64_t m0, int64_t rows, int64_t k0, int64_t k1, int64_t piece) {
  for (int64_t r = 0; r < rows; r += piece) {
    for (int64_t a = 0; a < na; ++a)
      dma_2d(true, abuf[as][a] + uint64_t(((m0 + r - c0) * Kp + k0) * esz),
             p_.addr[aparts[a]] + uint64_t(((b * M + m0 + r) * K + k0) * esz), uint64_t(std::min(piece, rows - r)),
             uint64_t((k1 - k0) * esz), uint64_t(Kp * esz), uint64_t(K * esz), pre);
    for (int m = 0; m < nmu; ++m) dma_fence(Ca[m]);
  }
}

void MatmulEmitter::load_group_slice(int64_t g, int64_t sl) {
  if (sl == 0) {
    const int slot = int(groups_loaded++ % nslots);
    gslot[g] = slot;
    for (int m = 0; m < nmu; ++m) wait(kDma, Pfree[m], slot_release[slot][m]);  // every MXU is done with the slot
  }
  const int64_t j0 = g * nmu * D, cols = std::min(nmu * D, N - j0);
  Counter& any = P[0];  // the transfers count on MXU 0's counter; each MXU then gets one signal
  const int64_t k0 = wslice_k0(sl), k1 = std::min(K, wslice_k0(sl + 1));
  for (int64_t w = 0; w < nw; ++w)
    dma_2d(true, panel[gslot[g]][w] + uint64_t(k0 * pw_elems * esz), p_.addr[wparts[w]] + uint64_t((b * K * N + k0 * N + j0) * esz),
           uint64_t(k1 - k0), uint64_t(cols * esz), uint64_t(pw_elems * esz), uint64_t(N * esz), any);
  for (int m = 0; m < nmu; ++m) {
    if (uses[size_t(g)][size_t(m)].first < 0) continue;
    dma_fence(P[m]);
    pready[g][m][sl] = P[m].produced;
  }
}

void MatmulEmitter::load_first_block() {
  // The first block of A and the first group's weights arrive slice by
  // slice, interleaved (the weights of a slice's first step, the slice,
  // the rest of its weights), so the MXUs start after one slice of each.
  // The first block's slices come in pieces of kPiece rows: its streams
  // follow the DMA piece by piece instead of waiting for whole slices.
  for (int64_t sl = 0, wsl = 0; sl < KS; ++sl) {
    for (; wsl < KSW && wslice_step[size_t(wsl)] <= slice_step[size_t(sl)]; ++wsl) load_group_slice(0, wsl);
    load_a(c0, blocks[0].second, slice_k0(sl), slice_k0(sl + 1), kPiece);
    for (; wsl < KSW && wslice_step[size_t(wsl)] < slice_step[size_t(sl) + 1]; ++wsl) load_group_slice(0, wsl);
  }
}

// The rest arrives just in time, so the results of the first blocks
// are not stored behind loads that are not needed yet: in the first
// group, each block of A while the block before it computes, and the
// weights of the next groups after the last of A (panel_block()); later,
// group g + ahead - 1's weights while group g computes. With `steps` (the
// estimated starts of the K-steps of the block computing meanwhile), each
// piece of A goes at the step that starts its K-slice, and a later group's
// weights at a fixed number of slices a step, as many as the DMA moves in
// one (Emitter::pin_), so blocks and groups have alike code.
void MatmulEmitter::prefetch(int64_t g, size_t bi, const std::vector<double>& steps) {
  if (g > 0) {
    if (bi == 0 && g + ahead - 1 < groups) load_group(g + ahead - 1, steps);
    return;
  }
  if (bi + 1 < blocks.size())
    for (int64_t k = 0; k < kt; k += kq) {
      pin_at(steps, k * int64_t(passes.size()));
      load_a(blocks[bi + 1].first, blocks[bi + 1].second, k * D, std::min(K, (k + kq) * D), blocks[bi + 1].second);
    }
  em.pin_ = -1;
  // Steady blocks load the next groups' weights in the first group's last
  // block (it loads no A), at its steps: the blocks before it are alike.
  const bool last = steady && blocks.size() >= 2;
  if ((last ? int64_t(blocks.size()) - 1 : panel_block()) == int64_t(bi))
    for (int64_t h = 1; h < std::min<int64_t>(groups, ahead); ++h) load_group(h, last ? steps : std::vector<double>{});
}

void MatmulEmitter::load_group(int64_t g, const std::vector<double>& steps) {
  const double slice = double(kpw * D * std::min(nmu * D, N) * esz * nw) / em.kDmaBytesPerCycle;
  const int64_t step = steps.size() > 1 ? int64_t(steps[1] - steps[0]) : 1;
  const int64_t per = std::max<int64_t>(std::max<int64_t>(1, int64_t(double(step) / slice)), ceil_div(KSW, int64_t(steps.size()) + 1));
  for (int64_t sl = 0; sl < KSW; ++sl) {
    pin_at(steps, sl / per);
    load_group_slice(g, sl);
  }
  em.pin_ = -1;
}

void MatmulEmitter::block(int64_t g, size_t bi) {
  const auto& gblocks = g > 0 && g == groups - 1 ? blocks_end : blocks;
  const auto [m0, rows] = gblocks[bi];
  const bool first_block = bi == 0, last_block = bi + 1 == gblocks.size();
  if (!steady) prefetch(g, bi);  // else after this block's MXU work, at its steps
  std::vector<Item> items;
  for (const auto& [m, j] : assign[size_t(g)][bi]) items.push_back({m, j, items_on[size_t(m)]++});
  // Staggered ends: in the last group, the block before the last
  // hands the last steps of the first MXUs' items to the last MXUs
  // (MXU i gives n/2 - i steps to MXU n - 1 - i), which accumulate
  // into the same rows after the owner's streams are done (same
  // order of additions). The MXUs then finish the last block at
  // different times, and the VPU drains one MXU's rows while the
  // others still compute instead of all of them at the end.
  const int64_t n_it = int64_t(items.size());
  std::vector<double> step_t(size_t(nsteps), 0);  // when each K-step's streams start, the latest MXU's
  std::vector<int64_t> moved(size_t(n_it), 0);  // per item
  if (b == b_hi - 1 && c0 + crows >= m_hi && g == groups - 1 && bi + 2 == gblocks.size() && rows >= 2 * D && n_it >= 2 && n_it == nmu &&
      shorten_end(gblocks.back().second))
    for (int64_t i = 0; i < n_it / 2; ++i) moved[size_t(i)] = std::min(n_it / 2 - i, nsteps - 1);
  // The panel column of a tile, and whether this is MXU m's last item of the chunk.
  auto pcol = [&](const Item& it) { return (it.j - g * nmu) * D; };
  auto last_of_chunk = [&](int m) {
    for (int64_t h = g + 1; h < groups; ++h)
      if (uses[size_t(h)][size_t(m)].first >= 0) return false;
    return uses[size_t(g)][size_t(m)].second == int64_t(bi);
  };
  for (size_t ii = 0; ii < items.size(); ++ii) {  // MXU
    const Item& it = items[ii];
    const int m = it.m;
    const bool first_use = uses[size_t(g)][size_t(m)].first == int64_t(bi), last_use = uses[size_t(g)][size_t(m)].second == int64_t(bi);
    const int mu = kMxu0 + m;
    const int pslot = gslot[g];
    const int64_t aslot = it.idx % S;
    const uint64_t arow = uint64_t((m0 - c0) * Kp * esz);
    bool first = true;
    const int64_t keep = nsteps - moved[ii];  // the steps this MXU does
    for (int64_t q = 0; q < nsteps; ++q) {  // K-steps and passes
      const int64_t kk = q / int64_t(passes.size());
      const auto [pa, pw] = passes[size_t(q) % passes.size()];
      if (q >= keep) {  // handed over; the arrival counts of its A slices are still this MXU's to take
        if (first_pass(pa, pw) && g == 0 && a_arrives(kk, first_block))
          wait(mu, Ca[m], Ca[m].consumed + (first_block ? ceil_div(rows, kPiece) : 1));
        continue;
      }
      // A new K-slice: the weight load waits for its panel rows, the
      // stream for its A rows (which may still be arriving meanwhile).
      if (first_pass(pa, pw) && first_use && wslice_of[size_t(kk)] >= 0)
        wait(mu, P[m], pready[g][m][wslice_of[size_t(kk)]]);
      mxu_lw(m, panel[pslot][pw] + uint64_t((kk * D * pw_elems + pcol(it)) * esz), uint64_t(pw_elems * esz), mdt);
      const bool last = kk == kt - 1 && std::pair{pa, pw} == passes.back();
      const int64_t npieces = first_block ? ceil_div(rows, kPiece) : 1;
      const bool pieced = npieces > 1 && !last && first_pass(pa, pw) && g == 0 && a_arrives(kk, first_block);
      if (first_pass(pa, pw) && g == 0 && a_arrives(kk, first_block) && !pieced)
        wait(mu, Ca[m], Ca[m].consumed + npieces);
      if (first) wait(mu, AccFree[m], it.idx - S + 1);
      ins(ib::MXU_SWAP(m));
      const uint64_t src = abuf[as][pa] + arow + uint64_t(kk * D * esz);
      if (pieced) {
        for (int64_t r = 0; r < rows; r += kPiece) {
          wait(mu, Ca[m], Ca[m].consumed + 1);
          step_t[q] = std::max(step_t[q], mxu_mm(!first, m, acc_base(m, aslot) + uint64_t(r), src + uint64_t(r * Kp * esz), uint64_t(Kp * esz),
                 uint64_t(std::min(kPiece, rows - r)), mdt, r > 0));
        }
      } else if (!last) {
        step_t[q] = std::max(step_t[q], mxu_mm(!first, m, acc_base(m, aslot), src, uint64_t(Kp * esz), uint64_t(rows), mdt));
      } else {
        auto& marks = acc_marks[m];
        marks.resize(size_t(it.idx + 1));
        const bool final_items = b == b_hi - 1 && last_block && g == groups - 1 && c0 + crows >= m_hi && shorten_end(rows);
        const int64_t cr = final_items ? Cr : rows;
        chunk_rows[m].resize(size_t(it.idx + 1));
        chunk_rows[m][size_t(it.idx)] = cr;
        for (int64_t r = 0; r < rows; r += cr) {
          step_t[q] = std::max(step_t[q], mxu_mm(!first, m, acc_base(m, aslot) + uint64_t(r), src + uint64_t(r * Kp * esz), uint64_t(Kp * esz),
                 uint64_t(std::min(cr, rows - r)), mdt, r > 0));
          signal_mxu(m, Acc[m], -1);
          marks[size_t(it.idx)].push_back({m, Acc[m].produced});
        }
      }
      first = false;
    }
    if (keep < nsteps) signal_mxu(m, H[ii], -1);  // handed over
    // Done with the panel slot: at its last use, or in steady kernels after
    // every block (the slot's release total counts them all), so the
    // group's blocks have alike code.
    if (last_use || steady) signal_mxu(m, Pfree[m], last_use ? pslot : -1);
    if (last_of_chunk(m)) signal_mxu(m, Afree[m], -1);
  }
  for (int64_t i = 0; i < n_it; ++i) {  // the handed-over steps, on the receiving MXU
    if (!moved[size_t(i)]) continue;
    const Item& it = items[size_t(i)];
    const int f = items[size_t(n_it - 1 - i)].m;
    const int mu = kMxu0 + f;
    const uint64_t arow = uint64_t((m0 - c0) * Kp * esz);
    for (int64_t q = nsteps - moved[size_t(i)]; q < nsteps; ++q) {
      const int64_t kk = q / int64_t(passes.size());
      const auto [pa, pw] = passes[size_t(q) % passes.size()];
      mxu_lw(f, panel[gslot[g]][pw] + uint64_t((kk * D * pw_elems + pcol(it)) * esz), uint64_t(pw_elems * esz), mdt);
      if (q == nsteps - moved[size_t(i)]) wait(mu, H[size_t(i)], H[size_t(i)].produced);
      ins(ib::MXU_SWAP(f));
      mxu_mm(true, f, acc_base(it.m, it.idx % S), abuf[as][pa] + arow + uint64_t(kk * D * esz), uint64_t(Kp * esz), uint64_t(rows), mdt);
    }
    signal_mxu(f, Acc[size_t(f)], -1);
    acc_marks[size_t(it.m)].resize(size_t(it.idx + 1));
    acc_marks[size_t(it.m)][size_t(it.idx)] = {{f, Acc[size_t(f)].produced}};
    chunk_rows[size_t(it.m)].resize(size_t(it.idx + 1));
    chunk_rows[size_t(it.m)][size_t(it.idx)] = rows;
  }
  // Drain in the order the items finish.
  std::stable_sort(items.begin(), items.end(), [&](const Item& x, const Item& y) {
    auto done = [&](const Item& z) {
      const auto [mu, total] = acc_marks[size_t(z.m)].at(size_t(z.idx)).back();
      return Acc[size_t(mu)].when.at(size_t(total - 1));
    };
    return done(x) < done(y);
  });
  if (steady) prefetch(g, bi, step_t);
  // The VPU drains the previous block while the MXUs work on this one;
  // where this block has K-steps enough, at fixed K-steps (drain_plan).
  if (held) {
    const Drain d = drain_plan(rows, int64_t(held->items.size()), held->rows);
    bool fixed = steady && d.fixed;
    for (size_t i = 0; fixed && i < held->items.size(); ++i)  // no item drained chunk by chunk
      fixed = chunk_rows[size_t(held->items[i].m)].at(size_t(held->items[i].idx)) == held->rows;
    std::vector<double> at;
    for (int64_t p = 0; p < d.parts && fixed; ++p) at.push_back(step_t[size_t(d.q0 + p * d.gap)]);
    drain_block(*held, at);
  }
  held = Block{b, m0, rows, as, items};
}

void Emitter::matmul(const Kernel& k) { MatmulEmitter(*this, k).run(); }

}  // namespace
// ---------------------------------------------------------------- Backend

Backend::Backend(const Function& f, const isa::MachineConfig& m, bool loops) : plan_(new Plan(f, m.target)), machine_(m), loops_(loops) {}
Backend::~Backend() { delete plan_; }

std::string Backend::describe() const {
  const Plan& p = *plan_;
  std::string s = fmt::format("# kernel plan: {} kernels, {} bytes of HBM\n", p.kernels.size(), p.hbm_used);
  for (size_t i = 0; i < p.kernels.size(); ++i) {
    const Kernel& k = p.kernels[i];
    std::vector<std::string> in;
    for (int v : k.inputs) in.push_back(fmt::format("%{}", v));
    s += fmt::format("kernel {}: {} -> %{} {} @ {:#x}", i, kind_name(k.kind), k.out, p.type(k.out).str(), p.addr[k.out]);
    if (!in.empty()) s += fmt::format(" reads {}", fmt::join(in, ", "));
    if (k.kind == KKind::matmul) {
      std::vector<std::string> ps;
      for (auto [a, w] : k.passes) ps.push_back(fmt::format("%{}x%{}", a, w));
      s += fmt::format(" passes {} [B={} M={} K={} N={}]", fmt::join(ps, " + "), k.B, k.M, k.K, k.N);
    }
    if (k.kind == KKind::elementwise || (k.kind == KKind::matmul && k.expr.nodes.size() > 1)) {
      std::vector<std::string> ops;
      for (const Node& nd : k.expr.nodes)
        if (nd.leaf == Leaf::none) ops.push_back(op_name(nd.kind));
      s += fmt::format(" ops [{}]", fmt::join(ops, " "));
    }
    s += "\n";
  }
  return s;
}

Generated Backend::generate() const {
  return Emitter(*plan_, machine_, loops_, 0, int64_t(plan_->t.cores), 0, plan_->f.devices).run();
}

}  // namespace tpu::compiler
