// Kernel planning (plan.h).
#include "plan.h"

#include "loops.h"

namespace tpu::compiler::backend {

namespace {

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

const char* kind_name(KKind k) {
  static const char* const names[] = {"elementwise", "copy",       "reduce-lanes", "reduce-columns", "matmul",
                                      "all-reduce",  "all-gather", "reduce-scatter", "all-to-all",   "collective-permute", "loop"};
  return names[int(k)];
}

Plan::Plan(const Function& fn, const isa::Target& target, const Region* where) : f(fn), t(target), region(where) {
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
  // A kernel reads one sliced value where it lies (one offset register);
  // any other is copied out by a kernel of its own.
  for (bool again = true; again;) {
    again = false;
    for (const Kernel& k : kernels) {
      const std::vector<int> s = slices_read(k);
      for (size_t j = 1; j < s.size(); ++j) sliced[size_t(s[j])] = false, mat[size_t(s[j])] = true, again = true;
    }
    if (again) kernels.clear(), loops.clear(), fused_into.assign(n, -1), make_kernels();
  }
  assign_buffers();
}

bool Plan::readable_in_place(int v) const {
  for (int u : users[size_t(v)]) {
    const Op& uo = op(u);
    const bool ok = (uo.kind == OpKind::reshape && !result[size_t(u)] && readable_in_place(u)) || uo.kind == OpKind::dot ||
                    (is_elementwise(uo.kind) && !chain[size_t(u)]) || (uo.kind == OpKind::reduce && uo.operands[0] == v) ||
                    (leaf_broadcast(u) && !mat[size_t(u)]);
    if (!ok) return false;
  }
  return true;
}

std::vector<int> Plan::slices_read(const Kernel& k) const {
  std::vector<int> s;
  const auto add = [&](int v) {
    v = base[size_t(v)];
    if (sliced[size_t(v)] && std::find(s.begin(), s.end(), v) == s.end()) s.push_back(v);
  };
  for (int v : k.inputs) add(v);
  for (auto [a, w] : k.passes) add(a), add(w);
  return s;
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
        // So are a dynamic slice's constant starts.
        const bool start = (uo.kind == OpKind::dynamic_slice && uo.operands[0] != int(i)) ||
                           (uo.kind == OpKind::dynamic_update_slice && uo.operands[0] != int(i) && uo.operands[1] != int(i));
        const bool immediate = ((uo.kind == OpKind::reduce || uo.kind == OpKind::pad) && uo.operands[1] == int(i)) || start;
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
    mat[i] = m && o.kind != OpKind::while_;  // a loop writes its state elements (its get-tuple-elements)
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
  // Dynamic slices of a contiguous piece (a scan's layer of stacked
  // weights) whose readers load it by DMA are read where they lie.
  sliced.assign(n, false);
  for (size_t i = 0; i < n; ++i) {
    const Op& o = f.ops[i];
    if (o.kind != OpKind::dynamic_slice || result[i] || users[i].empty()) continue;
    const Op& x = op(o.operands[0]);
    if (x.kind == OpKind::dynamic_slice || x.kind == OpKind::dynamic_update_slice || sliced[size_t(base[size_t(o.operands[0])])]) continue;
    const auto& xd = type(o.operands[0]).dims;
    size_t d = 0;  // dims of 1 element, one partial, then whole ones
    while (d < xd.size() && o.type.dims[d] == 1) ++d;
    bool contiguous = true;
    for (size_t e = d + 1; e < xd.size(); ++e) contiguous &= o.type.dims[e] == xd[e];
    if (contiguous && readable_in_place(int(i))) sliced[i] = true, mat[i] = false;
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
    } else if (!top && ((mat[v] && absorbed[v] != root) || !is_elementwise(o.kind) || chain[v])) {
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
  for (size_t i = 0; i + 1 < e.nodes.size(); ++i)
    if (e.nodes[i].leaf == Leaf::none && absorbed[size_t(e.nodes[i].value_id)] == root) e.stored.push_back(int(i));
  int live = 0;
  for (const Node& nd : e.nodes) live += !nd.hoisted();
  too_big = live > kMaxExprRegs || live + e.held_registers() > isa::kNumVregs;
  return e;
}

void Plan::make_kernels() {
  absorbed.assign(f.ops.size(), -1);
  bound_expressions();
  const std::vector<int> epilogue_of = fuse_epilogues();
  absorb_into_consumers(epilogue_of);
  for (size_t i = 0; i < f.ops.size(); ++i) {
    const Op& o = op(int(i));
    if (o.kind == OpKind::while_) {
      kernels.push_back(kernel_of(int(i), epilogue_of));
      continue;
    }
    if (o.kind == OpKind::get_tuple_element) continue;
    if (!mat[i] || o.kind == OpKind::parameter || (o.kind == OpKind::constant && !splat(int(i))) || o.kind == OpKind::reshape)
      continue;
    if (fused_into[i] >= 0 || absorbed[i] >= 0) continue;
    kernels.push_back(kernel_of(int(i), epilogue_of));
  }
}

// Sibling outputs (XLA's multi-output fusion): an element-wise value that
// needs a buffer (another kernel reads it too) but whose element-wise
// readers are all in one later kernel of its shape is computed there, in
// registers, and stored from there as well, instead of written by a kernel
// of its own and read back. Its other readers must come after that kernel.
// The latest kernel takes first, so a chain (f32 -> bf16 parts: x, x - b0,
// ...) becomes one kernel that reads x once and stores every part.
void Plan::absorb_into_consumers(const std::vector<int>& epilogue_of) {
  auto plain = [&](int v) {
    return mat[size_t(v)] && is_elementwise(op(v).kind) && !chain[size_t(v)] && epilogue_of[size_t(v)] < 0 && fused_into[size_t(v)] < 0 &&
           absorbed[size_t(v)] < 0 && !result[size_t(v)] && base[size_t(v)] == v;
  };
  for (int r = int(f.ops.size()) - 1; r >= 0; --r) {
    if (!plain(r)) continue;
    std::vector<int> inputs;
    bool big = false;
    Expr e = build_expr(r, inputs, big);
    for (bool grew = true; grew;) {
      grew = false;
      std::set<int> inside;
      for (const Node& nd : e.nodes)
        if (nd.leaf == Leaf::none) inside.insert(nd.value_id);
      for (size_t i = 0; i < e.nodes.size() && !grew; ++i) {
        const Node& nd = e.nodes[i];
        const int v = nd.value_id;
        if (nd.leaf != Leaf::input || v < 0 || v == r || !plain(v) || type(v).dims != type(r).dims) continue;
        bool after = true, elsewhere = false;
        for (int u : users[size_t(v)]) after &= inside.count(u) > 0 || u > r, elsewhere |= inside.count(u) == 0;
        if (!after) continue;
        // Read by this kernel alone, it is a node of its expression, not stored.
        if (elsewhere) absorbed[size_t(v)] = r;
        else mat[size_t(v)] = false;
        std::vector<int> trial_inputs;
        Expr trial = build_expr(r, trial_inputs, big);
        if (big) {
          if (elsewhere) absorbed[size_t(v)] = -1;
          else mat[size_t(v)] = true;
          continue;
        }
        e = std::move(trial);
        grew = true;
      }
    }
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
  if (o.kind == OpKind::while_) {
    k.kind = KKind::loop;
    for (int a : o.operands) k.inputs.push_back(base[a]);
    k.loop = int(loops.size());
    loops.emplace_back().trips = counted_trips(o);
  } else if (is_elementwise(o.kind) && !chain[size_t(v)] && epilogue_of[size_t(v)] < 0) {
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
                                const std::vector<std::vector<int64_t>>& tiles = {}, const std::vector<std::vector<int64_t>>& tile_of = {},
                                size_t k = 0) {
  isa::TensorSymbol s;
  s.kind = kind, s.name = std::move(name), s.dtype = isa_dtype(t.dtype), s.hbm_addr = addr;
  for (int64_t d : t.dims) s.dims.push_back(uint64_t(d));
  if (k < tiles.size())
    for (int64_t d : tiles[k]) s.tiles.push_back(uint64_t(d));
  if (k < tile_of.size())
    for (int64_t d : tile_of[k]) s.tile_of.push_back(uint32_t(d));
  return s;
}

// The materialised values kernel k reads: its inputs and dot operands, and
// for a copy whatever its strided views read through.
std::vector<int> Plan::reads(const Kernel& k) const {
  std::vector<int> r;
  std::function<void(int)> add = [&](int v) {
    v = base[size_t(v)];
    if (view[size_t(v)]) return add(op(v).operands[0]);
    if (sliced[size_t(v)]) {  // its operand and starts
      for (int a : op(v).operands) add(a);
      return;
    }
    if (std::find(r.begin(), r.end(), v) == r.end()) r.push_back(v);
  };
  for (int v : k.inputs) add(v);
  for (auto [a, w] : k.passes) add(a), add(w);
  if (k.kind == KKind::copy)
    for (int a : op(k.out).operands) add(a);
  return r;
}

// Buffer assignment by liveness (XLA's BufferAssignment over a heap
// simulator). Parameters and constants hold their place for the whole run,
// at the bottom of HBM in that order. Every other buffer lives from the
// kernel that writes it to the last kernel that reads it (a result to the
// end), and buffers whose lives do not overlap share memory. An
// element-wise kernel writes a result in place of an input of the same
// bytes per element that nothing reads after it.
void Plan::assign_buffers() {
  const size_t n = f.ops.size();
  const int64_t nk = int64_t(kernels.size());
  addr.assign(n, ~uint64_t(0));
  // Buffers: a value's buffer, shared by the values written in place into it.
  struct Buffer {
    uint64_t size = 0, at = 0;
    int64_t first = 0, last = 0;  // kernel steps; -1 .. nk for the whole run
    std::vector<int> values;
  };
  std::vector<Buffer> bufs;
  std::vector<int> buf_of(n, -1);
  auto make_buf = [&](uint64_t bytes, int64_t first, int64_t last, const std::vector<int>& values) {
    for (int v : values) buf_of[size_t(v)] = int(bufs.size());
    bufs.push_back({align_up(bytes, kHbmAlign), 0, first, last, values});
    return bufs.size() - 1;
  };
  auto make = [&](int v, int64_t first, int64_t last) { make_buf(uint64_t(type(v).bytes()), first, last, {v}); };
  std::set<std::string> used;
  const auto params = f.params();
  uint64_t cursor = 0;
  auto fixed = [&](int v) {
    make(v, -1, nk);
    bufs.back().at = cursor;
    addr[size_t(v)] = cursor;
    cursor += bufs.back().size;
  };
  for (size_t p = 0; p < params.size(); ++p) {
    if (region) {  // a loop's state, where the loop keeps it
      make(params[p], -1, nk);
      addr[size_t(params[p])] = bufs.back().at = region->param_addr.at(p);
      continue;
    }
    fixed(params[p]);
    const std::string name = clean_name(p < f.param_names.size() && !f.param_names[p].empty() ? f.param_names[p] : fmt::format("arg{}", p), used);
    symbols.push_back(tensor_symbol(isa::SymbolKind::Input, name, f.param_global_type(p), addr[params[p]], f.param_tiles, f.param_tile_of, p));
  }
  for (size_t i = 0; i < n; ++i) {
    const Op& o = f.ops[i];
    if (o.kind != OpKind::constant || !mat[i] || splat(int(i))) continue;
    if (region) throw std::logic_error(fmt::format("{}: internal error: a loop's constant reaches the back end", o.loc));
    fixed(int(i));
    symbols.push_back(tensor_symbol(isa::SymbolKind::Constant, clean_name(fmt::format("const{}", i), used), o.type, addr[i]));
    isa::DataSegment d;
    d.hbm_addr = addr[i];
    const int esz = dtype_bytes(o.type.dtype);
    for (double v : o.literal) {
      uint32_t bits = lane_bits(o.type.dtype, v);
      if (o.type.dtype == DType::bf16) bits >>= 16;
      if (o.type.dtype == DType::f16) bits = isa::f32_bits_to_f16(bits);
      for (int b = 0; b < esz; ++b) d.bytes.push_back(uint8_t(bits >> (8 * b)));  // little-endian
    }
    if (!d.bytes.empty()) data.push_back(std::move(d));  // an empty constant has a symbol only
  }
  const size_t nfixed = bufs.size();
  std::vector<int64_t> last_read(n, -1);
  std::vector<std::vector<int>> reads_of(kernels.size());
  for (int64_t i = 0; i < nk; ++i) {
    reads_of[size_t(i)] = reads(kernels[size_t(i)]);
    for (int v : reads_of[size_t(i)]) last_read[size_t(v)] = i;
  }
  for (size_t r = 0; r < f.results.size(); ++r) last_read[size_t(base[f.results[r]])] = nk;
  // The state element that value v is the next of, where it is one result
  // alone and not a parameter; else -1.
  const auto state_result = [&](int v) {
    int j = -1;
    for (size_t r = 0; r < f.results.size(); ++r)
      if (base[size_t(f.results[r])] == v) {
        if (j >= 0) return -1;
        j = int(r);
      }
    return j >= 0 && op(v).kind != OpKind::parameter ? j : -1;
  };
  // A loop writes its state buffers (read after it through its
  // get-tuple-elements) and uses a scratch block while it runs.
  std::vector<std::vector<size_t>> state_buf(loops.size());
  std::vector<size_t> scratch_buf(loops.size());
  for (int64_t i = 0; i < nk; ++i) {
    const Kernel& k = kernels[size_t(i)];
    if (k.kind == KKind::loop) {
      const Op& w = op(k.out);
      LoopPlan& l = loops[size_t(k.loop)];
      std::vector<std::vector<int>> gtes(w.operands.size());
      for (int u : users[size_t(k.out)]) gtes[size_t(op(u).index)].push_back(u);
      const Function& body = w.regions[1];
      for (size_t j = 0; j < gtes.size(); ++j) {
        int64_t last = i;
        for (int g : gtes[j]) last = std::max(last, last_read[size_t(g)]);
        // An element the body passes on unchanged (a scan's stacked
        // weights) stays where its first value is: the loop reads it
        // there, and so does what reads it after the loop.
        const Op& next = body.ops[size_t(body.results[j])];
        if (const int b = buf_of[size_t(k.inputs[j])]; b >= 0 && next.kind == OpKind::parameter && next.index == int64_t(j)) {
          for (int g : gtes[j]) buf_of[size_t(g)] = b, bufs[size_t(b)].values.push_back(g);
          bufs[size_t(b)].last = std::max(bufs[size_t(b)].last, last);
          state_buf[size_t(k.loop)].push_back(size_t(b));
          continue;
        }
        state_buf[size_t(k.loop)].push_back(make_buf(uint64_t(type(w.operands[j]).bytes()), i, last, gtes[j]));
      }
      plan_loop(l, w, std::vector<uint64_t>(gtes.size(), 0), 0);  // its size
      scratch_buf[size_t(k.loop)] = make_buf(l.scratch_bytes, i, i, {});
      continue;
    }
    std::vector<int> outs = {k.out};
    for (int v : k.expr.stored_values()) outs.push_back(v);
    std::vector<int> taken;
    for (int v : outs) {
      const int64_t last = std::max(last_read[size_t(v)], i);
      // Whether this kernel is element-wise and reads x element for
      // element only (it reads each chunk before it stores it), so that v,
      // of x's size, may be written over x.
      // A dynamic-update-slice writes its piece over its operand x.
      const bool update = k.kind == KKind::copy && op(v).kind == OpKind::dynamic_update_slice;
      const auto over = [&](int x) {
        if (update) return x == base[size_t(op(v).operands[0])];
        if (k.kind != KKind::elementwise || type(x).elements() != type(v).elements() ||
            dtype_bytes(type(x).dtype) != dtype_bytes(type(v).dtype))
          return false;
        for (const Node& nd : k.expr.nodes)
          if (nd.input >= 0 && k.inputs[size_t(nd.input)] == x && nd.leaf != Leaf::input) return false;
        return true;
      };
      const auto untaken = [&](int b) { return std::find(taken.begin(), taken.end(), b) == taken.end(); };
      std::vector<int> candidates;  // in place of an input nothing reads after
      for (const Node& nd : k.expr.nodes)
        if (nd.leaf == Leaf::input) candidates.push_back(k.inputs[size_t(nd.input)]);
      if (update) candidates.push_back(base[size_t(op(v).operands[0])]);
      int into = -1;
      for (const int x : candidates) {
        const int b = buf_of[size_t(x)];
        if (b >= 0 && size_t(b) >= nfixed && last_read[size_t(x)] == i && bufs[size_t(b)].last == i && over(x) && untaken(b)) {
          into = b;
          break;
        }
      }
      // Inside a loop's body, a result goes straight into its state
      // element's buffer where nothing reads that element after this
      // kernel (else the loop copies it there after the body).
      // A matmul's epilogue may read that element too (a residual): it
      // loads each tile of it before it stores that tile of the result.
      const auto tiles = [&](int x) {
        if (k.kind != KKind::matmul || v != k.out || type(x).elements() != type(v).elements() ||
            dtype_bytes(type(x).dtype) != dtype_bytes(type(v).dtype))
          return false;
        for (auto [a, w] : k.passes)
          if (a == x || w == x) return false;
        for (const Node& nd : k.expr.nodes)
          if (nd.input >= 0 && k.inputs[size_t(nd.input)] == x && nd.leaf != Leaf::input) return false;
        return true;
      };
      if (const int j = into < 0 && region && region->body ? state_result(v) : -1; j >= 0) {
        const int x = params[size_t(j)], b = buf_of[size_t(x)];
        if ((last_read[size_t(x)] < i || (last_read[size_t(x)] == i && (over(x) || tiles(x)))) && bufs[size_t(b)].values.size() == 1 &&
            untaken(b))
          into = b;
      }
      if (into < 0) {
        make(v, i, last);
        continue;
      }
      taken.push_back(into);
      buf_of[size_t(v)] = into;
      bufs[size_t(into)].values.push_back(v);
      bufs[size_t(into)].last = last;
    }
  }
  // First fit in the order the buffers are written: each takes the lowest
  // gap that holds it among the buffers live at the same time. Where
  // nothing has died yet that is the end of what is in use, so a program
  // that needs no reuse keeps the layout of a bump allocator.
  std::vector<size_t> placed;
  for (size_t b = 0; b < bufs.size(); ++b) {
    Buffer& nb = bufs[b];
    if (b >= nfixed) {
      std::vector<std::pair<uint64_t, uint64_t>> busy;  // [at, end) of the buffers live with it
      for (size_t o : placed)
        if (bufs[o].first <= nb.last && nb.first <= bufs[o].last && !(region && o < nfixed))  // a loop's state lies outside its heap
          busy.push_back({bufs[o].at, bufs[o].at + bufs[o].size});
      std::sort(busy.begin(), busy.end());
      uint64_t at = region ? region->heap_base : 0;
      for (auto [lo, hi] : busy) {
        if (lo >= at + nb.size) break;
        at = std::max(at, hi);
      }
      nb.at = at;
    }
    placed.push_back(b);
  }
  hbm_used = 0;
  heap_top = region ? region->heap_base : 0;
  zeroed.assign(n, false);
  for (size_t i = 0; i < bufs.size(); ++i) {
    const Buffer& b = bufs[i];
    hbm_used = std::max(hbm_used, b.at + b.size);
    if (i >= nfixed) heap_top = std::max(heap_top, b.at + b.size);
    for (int v : b.values) addr[size_t(v)] = b.at;
  }
  for (size_t v = 0; v < n; ++v)
    if (sliced[v]) addr[v] = kOffset + addr[size_t(base[size_t(op(int(v)).operands[0])])];
  for (size_t i = 0; i < bufs.size(); ++i) {
    const Buffer& b = bufs[i];
    // HBM starts zeroed; a buffer stays so until one live before it takes
    // its place (inside a loop, the trips before).
    bool fresh = !region;
    for (const Buffer& o : bufs)
      fresh &= !(o.first < b.first && o.at < b.at + b.size && b.at < o.at + o.size);
    if (!b.values.empty()) zeroed[size_t(b.values.front())] = fresh;
  }
  for (const Kernel& k : kernels) {
    if (k.kind != KKind::loop) continue;
    LoopPlan& l = loops[size_t(k.loop)];
    std::vector<uint64_t> state;
    for (size_t b : state_buf[size_t(k.loop)]) state.push_back(bufs[b].at);
    const uint64_t sized = l.scratch_bytes;
    plan_loop(l, op(k.out), state, bufs[scratch_buf[size_t(k.loop)]].at);
    if (l.scratch_bytes > sized) throw std::logic_error("internal error: a loop's scratch grew where it was placed");
  }
  if (region) return;
  for (size_t r = 0; r < f.results.size(); ++r) {
    const int v = base[f.results[r]];
    if (addr[v] == ~uint64_t(0)) throw Error(fmt::format("internal error: result {} has no buffer", r));
    symbols.push_back(tensor_symbol(isa::SymbolKind::Output, clean_name(fmt::format("out{}", r), used), f.result_global_type(r), addr[v],
                                    f.result_tiles, f.result_tile_of, r));
  }
  if (hbm_used <= t.hbm_bytes) return;
  // Too large: name the values live where the most bytes are.
  int64_t peak_at = -1;
  uint64_t peak = 0;
  for (int64_t s = -1; s <= nk; ++s) {
    uint64_t live = 0;
    for (const Buffer& b : bufs) live += b.first <= s && s <= b.last ? b.size : 0;
    if (live > peak) peak = live, peak_at = s;
  }
  std::vector<const Buffer*> live;
  for (const Buffer& b : bufs)
    if (b.first <= peak_at && peak_at <= b.last) live.push_back(&b);
  std::stable_sort(live.begin(), live.end(), [](const Buffer* a, const Buffer* b) { return a->size > b->size; });
  std::vector<std::string> names;
  for (size_t i = 0; i < live.size() && i < 6; ++i) {
    if (live[i]->values.empty()) {
      names.push_back(fmt::format("{} bytes a while loop's condition and body use", live[i]->size));
      continue;
    }
    const int v = live[i]->values.back();
    names.push_back(fmt::format("%{} {} ({})", v, type(v).str(), op(v).loc.empty() ? op_name(op(v).kind) : op(v).loc));
  }
  if (live.size() > 6) names.push_back(fmt::format("{} more", live.size() - 6));
  throw Error(fmt::format("the program needs {} bytes of HBM, the target has {} ({} too many); {} bytes are live {}: {}", hbm_used,
                          t.hbm_bytes, hbm_used - t.hbm_bytes, peak,
                          peak_at < 0 || peak_at >= nk ? std::string("throughout") : fmt::format("in kernel {}", peak_at), fmt::join(names, ", ")));
}

// The trips of a counted loop (fori_loop, scan), where the compiler can
// tell them: the condition compares one integer state element with a
// constant, the body adds a constant to that element, and the loop starts
// it at a constant; -1 otherwise (or where the element would leave s32's
// range, or never meet the condition).
int64_t Plan::counted_trips(const Op& w) const {
  const Function &c = w.regions[0], &body = w.regions[1];
  const auto scalar = [](const Function& g, int v) -> std::optional<int64_t> {
    const Op& o = g.ops[size_t(v)];
    if (o.kind != OpKind::constant || o.literal.size() != 1 || o.type.dtype != DType::s32) return std::nullopt;
    return int64_t(o.literal[0]);
  };
  const auto param = [](const Function& g, int v) { return g.ops[size_t(v)].kind == OpKind::parameter ? g.ops[size_t(v)].index : -1; };
  const Op& cmp = c.ops[size_t(c.results.at(0))];
  if (cmp.kind != OpKind::compare || c.ops[size_t(cmp.operands[0])].type.dtype != DType::s32) return -1;
  int64_t j = param(c, cmp.operands[0]);
  std::optional<int64_t> n = scalar(c, cmp.operands[1]);
  Direction dir = cmp.direction;
  if (j < 0 || !n) {  // constant first: n < i is i > n
    j = param(c, cmp.operands[1]), n = scalar(c, cmp.operands[0]);
    const Direction flip[] = {Direction::EQ, Direction::NE, Direction::GT, Direction::GE, Direction::LT, Direction::LE};
    dir = flip[int(dir)];
  }
  if (j < 0 || !n || size_t(j) >= w.operands.size()) return -1;
  const Op& next = body.ops[size_t(body.results.at(size_t(j)))];
  std::optional<int64_t> d;  // the step
  if (next.kind == OpKind::add || next.kind == OpKind::subtract) {
    const int a = next.operands[0], b = next.operands[1];
    if (param(body, a) == j) d = scalar(body, b);
    else if (next.kind == OpKind::add && param(body, b) == j) d = scalar(body, a);
    if (d && next.kind == OpKind::subtract) d = -*d;
  }
  const Op& init = op(w.operands[size_t(j)]);
  if (!d || init.kind != OpKind::constant || init.literal.size() != 1) return -1;
  const int64_t i0 = int64_t(init.literal[0]);
  const auto holds = [&](int64_t i) {
    switch (dir) {
      case Direction::LT: return i < *n;
      case Direction::LE: return i <= *n;
      case Direction::GT: return i > *n;
      case Direction::GE: return i >= *n;
      case Direction::NE: return i != *n;
      case Direction::EQ: return i == *n;
    }
    return false;
  };
  if (!holds(i0)) return 0;
  if (*d == 0 || dir == Direction::EQ) return -1;  // forever, or at most once (the unroller's)
  // The first i0 + t d for which the condition fails: t = distance / |d|, rounded by the direction.
  const int64_t dist = *d > 0 ? *n - i0 : i0 - *n, step = *d > 0 ? *d : -*d;
  const bool up = *d > 0;
  int64_t t = -1;
  if ((dir == Direction::LT && up) || (dir == Direction::GT && !up)) t = (dist + step - 1) / step;
  else if ((dir == Direction::LE && up) || (dir == Direction::GE && !up)) t = dist / step + 1;
  else if (dir == Direction::NE && dist % step == 0) t = dist / step;
  if (t < 0) return -1;
  const int64_t last = i0 + (t - 1) * *d;  // the last trip's value, then the next one the body writes
  if (last < INT32_MIN || last > INT32_MAX || last + *d < INT32_MIN || last + *d > INT32_MAX) return -1;
  return t;
}

// The loop's condition and body over its state at `state`, their buffers
// from `scratch` up, and the temporaries of the state's move after the body.
void Plan::plan_loop(LoopPlan& l, const Op& w, const std::vector<uint64_t>& state, uint64_t scratch) const {
  l.cond.reset(), l.body.reset();
  l.where = std::make_shared<Region>(Region{state, scratch, false});
  l.body_where = std::make_shared<Region>(Region{state, scratch, true});
  l.state = state, l.scratch = scratch;
  l.bytes.clear();
  for (int a : w.operands) l.bytes.push_back(uint64_t(type(a).bytes()));
  l.cond = std::make_shared<Plan>(w.regions[0], t, l.where.get());
  l.body = std::make_shared<Plan>(w.regions[1], t, l.body_where.get());
  const Function& b = w.regions[1];
  uint64_t top = l.body->heap_top;
  l.temps.assign(state.size(), 0);
  for (size_t j = 0; j < state.size(); ++j) {
    const Op& r = b.ops[size_t(l.body->base[size_t(b.results[j])])];
    if (r.kind == OpKind::parameter && r.index != int64_t(j)) l.temps[j] = top, top += align_up(l.bytes[j], kHbmAlign);
  }
  l.scratch_bytes = std::max(l.cond->heap_top, top) - scratch;
}

}  // namespace tpu::compiler::backend
