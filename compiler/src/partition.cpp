// spmd-partition (passes.h): a global program with shardings (jax.jit's
// in_shardings over a mesh: Function::mesh) becomes every device's program
// on local shapes, with the collectives that keep it equal to the global
// one. docs/compiler.md, "Automatic SPMD partitioning".
//
// A value's layout gives, for each dimension, the mesh axes it is split
// over (whole along the axes it does not name), and the axes over which it
// is partial: each device holds a term of an add-sum (a dot or a reduction
// over a split dimension) whose all-reduce waits until a consumer needs the
// value whole (all-reduce) or split (reduce-scatter); a split that moves
// to another dimension is an all-to-all. Ops go in program order, each
// taking the layout its operands allow:
//   - element-wise ops take the layout of an operand the others can follow;
//     a value a broadcast, a splat constant or an iota makes (and
//     element-wise ops and transposes of those) is remade in any layout on
//     each device; negating, scaling or adding partial sums keeps them
//     partial;
//   - broadcast, transpose and reshape move each split with its dimension
//     (a reshape where the dimensions before it keep their product);
//   - a dot's contracting and batch dimensions take one layout on both
//     operands (the split one where the other can follow, else whole); split
//     contracting dimensions make the result partial over their axes;
//   - a reduction over split dimensions is partial (add) or all-reduced
//     (maximum, minimum, multiply);
//   - slice, pad, reverse, concatenate, reduce-window and dynamic slices and
//     updates keep the splits of the dimensions they take whole; a
//     convolution keeps a split batch; a while loop's state keeps its
//     initial layouts where its body gives them back;
//   - every other op runs on whole operands (all-gathered), as on one chip.
// Results keep the layout they have (tpusim writes the global array either
// way).
#include <fmt/format.h>

#include <map>
#include <set>
#include <numeric>

#include "tpu/compiler/passes.h"

namespace tpu::compiler {

using namespace ir;

namespace {

using Mask = int64_t;  // mesh axes: bit a for axis a

struct Layout {
  std::vector<Mask> dims;  // by dimension: the axes it is split over
  Mask partial = 0;        // the axes over which each device holds a term of the sum
  bool operator==(const Layout& o) const { return dims == o.dims && partial == o.partial; }
  bool operator<(const Layout& o) const { return std::tie(dims, partial) < std::tie(o.dims, o.partial); }
  Mask used() const {
    Mask m = partial;
    for (Mask d : dims) m |= d;
    return m;
  }
  // Each axis at most once.
  bool valid() const {
    Mask m = partial;
    for (Mask d : dims) {
      if (m & d) return false;
      m |= d;
    }
    return true;
  }
};

void set_devices(Function& f, int64_t n) {
  f.devices = n;
  for (Op& op : f.ops)
    for (Function& r : op.regions) set_devices(r, n);
}

class Partitioner {
 public:
  explicit Partitioner(const Function& f) : f_(f), mesh_{f.mesh}, n_(f.partitions()) {}
  // A loop's condition or body: its parameters (the state) in `state`.
  Partitioner(const Function& region, const Mesh& mesh, std::vector<Layout> state)
      : f_(region), mesh_(mesh), n_(mesh.count(~Mask(0))), state_(std::move(state)) {}

  Function run() {
    ops();
    for (size_t r = 0; r < f_.results.size(); ++r) {
      int v = map_[f_.results[r]];
      if (layout_[v].partial) {
        Layout l = layout_[v];
        l.partial = 0;
        v = to(v, l, "a result");
      }
      g_.results.push_back(v);
      if (layout_[v].used()) {
        g_.result_tiles.resize(f_.results.size());
        g_.result_tile_of.resize(f_.results.size());
        g_.result_tiles[r] = tiles(layout_[v]);
        g_.result_tile_of[r] = tile_of(layout_[v]);
      }
    }
    return std::move(g_);
  }

  // A region whose results must take the layouts `want`; the state
  // elements better whole: those whose results cannot take theirs, and
  // those the region all-gathers (every trip) where one all-gather before
  // the loop would do (none: the region is right).
  std::vector<size_t> run_region(const std::vector<Layout>& want, Function& out, std::map<size_t, Layout>* wished = nullptr) {
    ops();
    if (wished) *wished = wished_;
    std::set<size_t> whole(gathered_);
    for (size_t r = 0; r < f_.results.size(); ++r) {
      const int v = to(map_[f_.results[r]], want[r], "the loop's state");
      if (v < 0) whole.insert(r);
      g_.results.push_back(v);
    }
    out = std::move(g_);
    return {whole.begin(), whole.end()};
  }

 private:
  void ops() {
    g_.name = f_.name;
    g_.param_names = f_.param_names;
    g_.checks = f_.checks;
    g_.devices = n_;
    map_.resize(f_.ops.size(), -1);
    for (size_t i = 0; i < f_.ops.size(); ++i) {
      map_[i] = op(f_.ops[i]);
      // A with_sharding_constraint: the value in that layout where collectives or remaking give it.
      if (const auto& c = f_.ops[i].sharding; !c.empty() && f_.ops[i].kind != OpKind::parameter)
        if (const int v = to(map_[i], Layout{c, 0}, fmt::format("a sharding constraint ({})", f_.ops[i].loc)); v >= 0) map_[i] = v;
    }
  }

  // A while loop: its state keeps the layouts of its initial values (partial
  // sums combined), the body partitioned for them and its results moved
  // back into them; a state element whose result cannot be, or that the
  // body all-gathers, is whole (gathered once, before the loop).
  int loop(const Op& in, Op op, const std::string& what) {
    std::vector<Layout> state;
    for (int o : op.operands) state.push_back(resolved(o));
    Function cond, body;
    std::set<size_t> fixed;  // elements made whole: not split again
    bool settled = false;
    for (size_t tries = 0; tries <= 2 * state.size() && !settled; ++tries) {
      std::map<size_t, Layout> wished;
      const std::vector<size_t> failed = Partitioner(in.regions[1], mesh_, state).run_region(state, body, &wished);
      settled = true;
      for (size_t k : failed) state[k] = whole(state[k].dims.size()), fixed.insert(k), settled = false;
      // A whole element the body wants split (an update written into it in
      // place, say), where its initial value can be made so on each device.
      for (const auto& [k, l] : wished)
        if (!fixed.count(k) && !state[k].used() && !l.partial && to(op.operands[k], l, what) >= 0) state[k] = l, settled = false;
    }
    while (!settled) {  // out of tries: the body for the state as it stands, elements it cannot give back whole
      const std::vector<size_t> failed = Partitioner(in.regions[1], mesh_, state).run_region(state, body);
      settled = failed.empty();
      for (size_t k : failed) state[k] = whole(state[k].dims.size());
    }
    Partitioner(in.regions[0], mesh_, state).run_region({whole(0)}, cond);
    for (size_t k = 0; k < op.operands.size(); ++k) op.operands[k] = to(op.operands[k], state[k], what);
    op.regions = {std::move(cond), std::move(body)};
    const int w = add(std::move(op), whole(0));
    loops_[w] = state;
    return w;
  }

  // ---- the mesh
  int64_t count(Mask m) const { return mesh_.count(m); }
  std::vector<std::vector<int64_t>> groups(Mask m) const { return mesh_.groups(m); }
  std::vector<int64_t> tiles(const Layout& l) const { return mesh_.tiles(l.dims); }
  std::vector<int64_t> tile_of(const Layout& l) const { return mesh_.tile_of(l.dims); }
  Type local(Type t, const Layout& l) const {
    for (size_t k = 0; k < l.dims.size(); ++k) t.dims[k] /= count(l.dims[k]);
    return t;
  }
  bool fits(const Type& global, const Layout& l) const {
    if (!l.valid() || l.dims.size() != global.dims.size()) return false;
    for (size_t k = 0; k < l.dims.size(); ++k)
      if (global.dims[k] % count(l.dims[k])) return false;
    return true;
  }
  Type global(int v) const {
    Type t = g_.ops[v].type;
    for (size_t k = 0; k < layout_[v].dims.size(); ++k) t.dims[k] *= count(layout_[v].dims[k]);
    return t;
  }
  static Layout whole(size_t rank) { return Layout{std::vector<Mask>(rank, 0), 0}; }

  int add(Op op, Layout l) {
    const int v = g_.add(std::move(op));
    layout_.push_back(std::move(l));
    return v;
  }
  int collective(OpKind k, int v, Mask axes, Layout out, const std::string& why) {
    Op c;
    c.kind = k, c.operands = {v}, c.groups = groups(axes);
    c.loc = g_.ops[v].loc + " [spmd: " + why + "]";
    c.type = local(global(v), out);
    return add(std::move(c), std::move(out));
  }

  // Value v of g_ in layout `want`; -1 where that takes more than
  // collectives and remaking it on each device.
  int to(int v, const Layout& want, const std::string& why) {
    const Layout& have = layout_[v];
    if (have == want) return v;
    if (!fits(global(v), want)) return -1;
    if (auto it = moved_.find({v, want}); it != moved_.end()) return it->second;
    int out = want.partial ? -1 : remake(v, want, why);
    if (out < 0) out = move(v, want, why);
    if (out >= 0) moved_[{v, want}] = out;
    else if (auto it = state_of_.find(v); it != state_of_.end() && !wished_.count(it->second)) wished_[it->second] = want;
    return out;
  }

  // Collectives from v's layout to `want`: partial sums reduce-scattered
  // into a dimension `want` splits over the same axes, or all-reduced;
  // splits `want` lacks all-gathered. -1 where `want` splits a dimension v
  // holds whole.
  int move(int v, const Layout& want, const std::string& why) {
    Layout l = layout_[v];
    if (l.partial && l.partial != want.partial) {
      if (want.partial) return -1;
      size_t k = 0;
      while (k < l.dims.size() && !(l.dims[k] == 0 && want.dims[k] == l.partial)) ++k;
      Layout next = l;
      next.partial = 0;
      if (k < l.dims.size() && global(v).dims[k] % count(l.partial) == 0) {
        next.dims[k] = l.partial;
        v = collective(OpKind::reduce_scatter, v, l.partial, next, fmt::format("reduce-scatter: {} needs the sum split along dimension {}", why, k));
        g_.ops[v].index = int64_t(k), g_.ops[v].combiner = Combiner::add;
      } else {
        v = collective(OpKind::all_reduce, v, l.partial, next, "all-reduce: " + why + " needs the sum");
        g_.ops[v].combiner = Combiner::add;
      }
      l = next;
    }
    // A split that moves from dimension j to dimension k: an all-to-all.
    for (size_t j = 0; j < l.dims.size(); ++j)
      for (size_t k = 0; k < l.dims.size(); ++k)
        if (j != k && l.dims[j] && l.dims[j] == want.dims[k] && !l.dims[k] && !want.dims[j] &&
            global(v).dims[k] % count(l.dims[j]) == 0) {
          v = reshard(v, j, k, why);
          l = layout_[v];
        }
    if (auto it = state_of_.find(v); it != state_of_.end())
      for (size_t k = 0; k < l.dims.size(); ++k)
        if (l.dims[k] && l.dims[k] != want.dims[k]) gathered_.insert(it->second);
    for (size_t k = 0; k < l.dims.size(); ++k) {
      if (l.dims[k] == 0 || l.dims[k] == want.dims[k]) continue;
      Layout next = l;
      next.dims[k] = 0;
      v = collective(OpKind::all_gather, v, l.dims[k], next, fmt::format("all-gather: {} needs dimension {} whole", why, k));
      g_.ops[v].index = int64_t(k);
      l = next;
    }
    return l == want ? v : -1;
  }

  // Value v's split moved from dimension j to dimension k by one all-to-all
  // over its axes: each device cuts its tile along k into a piece per group
  // member (a dimension of n before k), the all-to-all sends piece i to
  // member i, and what arrives (now indexed by its sender, the sender's part
  // of dimension j) is moved before j's part and merged into it.
  int reshard(int v, size_t j, size_t k, const std::string& why) {
    const Mask axes = layout_[v].dims[j];
    const int64_t n = count(axes);
    const Type t = g_.ops[v].type;
    const std::string loc = g_.ops[v].loc + fmt::format(" [spmd: all-to-all: {} needs the split of dimension {} on dimension {}]", why, j, k);
    Layout l = layout_[v];
    auto emit = [&](Op op) {
      op.loc = loc;
      return add(std::move(op), l);  // the layout of the steps between is not read
    };
    Type cut = t;  // dimension k as [n, t.dims[k] / n]
    cut.dims[k] = t.dims[k] / n;
    cut.dims.insert(cut.dims.begin() + long(k), n);
    Op r1;
    r1.kind = OpKind::reshape, r1.operands = {v}, r1.type = cut;
    const int a = emit(r1);
    Op x;
    x.kind = OpKind::all_to_all, x.operands = {a}, x.index = int64_t(k), x.groups = groups(axes), x.type = cut;
    const int b = emit(x);
    // The sender's axis (k in `cut`) goes before j's part.
    auto at = [&](size_t d) { return d < k ? d : d + 1; };
    Op tr;
    tr.kind = OpKind::transpose, tr.operands = {b};
    for (size_t d = 0; d < t.dims.size(); ++d) {
      if (d == j) tr.dims.push_back(int64_t(k));
      tr.dims.push_back(int64_t(d == k ? k + 1 : at(d)));
    }
    for (int64_t d : tr.dims) tr.type.dims.push_back(cut.dims[size_t(d)]);
    tr.type.dtype = t.dtype;
    const int c = emit(tr);
    l.dims[j] = 0, l.dims[k] = axes;
    Op r2;
    r2.kind = OpKind::reshape, r2.operands = {c}, r2.type = local(global(v), l);
    return emit(r2);
  }

  // Value v made in layout `want` on each device from what it is computed
  // from: broadcasts, splat constants, iotas along a whole dimension, and
  // element-wise ops and transposes of those. -1 otherwise.
  int remake(int v, const Layout& want, const std::string& why) {
    Op op = g_.ops[v];  // a copy: adding ops moves g_.ops
    const Type type = global(v);
    op.type = local(type, want);
    switch (op.kind) {
      case OpKind::constant:
        if (op.literal.size() != 1 || op.opaque) return -1;
        return add(std::move(op), want);
      case OpKind::iota:
        if (want.dims[size_t(op.index)]) return -1;
        return add(std::move(op), want);
      case OpKind::broadcast: {
        Layout from = whole(op.dims.size());
        for (size_t i = 0; i < op.dims.size(); ++i) from.dims[i] = want.dims[size_t(op.dims[i])];
        const int x = to(op.operands[0], from, why);
        if (x < 0) return -1;
        op.operands[0] = x;
        return add(std::move(op), want);
      }
      case OpKind::transpose: {
        Layout from = whole(op.dims.size());
        for (size_t i = 0; i < op.dims.size(); ++i) from.dims[size_t(op.dims[i])] = want.dims[i];
        const int x = to(op.operands[0], from, why);
        if (x < 0) return -1;
        op.operands[0] = x;
        return add(std::move(op), want);
      }
      default:
        if (!is_elementwise(op.kind)) return -1;
        for (int& o : op.operands) {
          if (g_.ops[o].type.dims.size() != type.dims.size()) continue;  // a scalar bound of clamp
          o = to(o, want, why);
          if (o < 0) return -1;
        }
        return add(std::move(op), want);
    }
  }

  Layout resolved(int v) const {  // v's layout without its pending sum
    Layout l = layout_[v];
    l.partial = 0;
    return l;
  }

  int op(const Op& in) {
    Op op = in;
    op.sharding.clear();
    for (int& o : op.operands) o = map_[o];
    const std::string what = fmt::format("{} ({})", op_name(in.kind), in.loc);
    switch (in.kind) {
      case OpKind::parameter: {
        const size_t p = size_t(in.index);
        Layout l = whole(in.type.dims.size());
        if (!in.sharding.empty()) l.dims = in.sharding;
        if (p < state_.size()) {  // a loop's state
          op.type = local(in.type, state_[p]);
          const int v = add(std::move(op), state_[p]);
          state_of_[v] = p;
          return v;
        }
        if (l.used()) {
          g_.param_tiles.resize(std::max(g_.param_tiles.size(), p + 1));
          g_.param_tile_of.resize(std::max(g_.param_tile_of.size(), p + 1));
          g_.param_tiles[p] = tiles(l);
          g_.param_tile_of[p] = tile_of(l);
        }
        op.type = local(in.type, l);
        return add(std::move(op), l);
      }
      case OpKind::broadcast: {  // linear: a partial sum stays one
        const Layout& x = layout_[op.operands[0]];
        Layout l = whole(in.type.dims.size());
        l.partial = x.partial;
        for (size_t i = 0; i < in.dims.size(); ++i) l.dims[size_t(in.dims[i])] = x.dims[i];
        op.type = local(in.type, l);
        return add(std::move(op), l);
      }
      case OpKind::transpose: {
        const Layout& x = layout_[op.operands[0]];
        Layout l = whole(in.type.dims.size());
        l.partial = x.partial;
        for (size_t i = 0; i < in.dims.size(); ++i) l.dims[i] = x.dims[size_t(in.dims[i])];
        op.type = local(in.type, l);
        return add(std::move(op), l);
      }
      case OpKind::reshape: return reshape(in, std::move(op), what);
      case OpKind::slice:  // a dimension taken whole keeps its split
        return per_dimension(in, std::move(op), what, 1,
                             [&](size_t d) { return in.lo[d] == 0 && in.strides[d] == 1 && in.hi[d] == f_.ops[in.operands[0]].type.dims[d]; });
      case OpKind::pad:
        return per_dimension(in, std::move(op), what, 1, [&](size_t d) { return !in.lo[d] && !in.hi[d] && !in.interior[d]; });
      case OpKind::reverse:
        return per_dimension(in, std::move(op), what, 1, [&](size_t d) { return std::find(in.dims.begin(), in.dims.end(), int64_t(d)) == in.dims.end(); });
      case OpKind::concatenate:
        return per_dimension(in, std::move(op), what, in.operands.size(), [&](size_t d) { return int64_t(d) != in.index; });
      case OpKind::reduce_window:  // a window of one element along the dimension
        return per_dimension(in, std::move(op), what, in.operands.size() / 2, [&](size_t d) {
          return in.window[d] == 1 && in.strides[d] == 1 && !in.lo[d] && !in.hi[d] && in.lhs_dilation[d] == 1 && in.rhs_dilation[d] == 1;
        });
      case OpKind::dynamic_slice:  // a dimension taken whole (its start clamps to 0)
        return per_dimension(in, std::move(op), what, 1, [&](size_t d) { return in.type.dims[d] == f_.ops[in.operands[0]].type.dims[d]; });
      case OpKind::dynamic_update_slice:  // a dimension the update covers
        return per_dimension(in, std::move(op), what, 2,
                             [&](size_t d) { return f_.ops[in.operands[1]].type.dims[d] == in.type.dims[d]; });
      case OpKind::convolution: return convolution(in, std::move(op), what);
      case OpKind::while_: return loop(in, std::move(op), what);
      case OpKind::get_tuple_element: {
        const Layout& l = loops_.at(op.operands[0]).at(size_t(in.index));
        op.type = local(in.type, l);
        return add(std::move(op), l);
      }
      case OpKind::dot: return dot(in, std::move(op), what);
      case OpKind::reduce: return reduce(in, std::move(op), what);
      default:
        if (is_elementwise(in.kind)) return elementwise(in, std::move(op), what);
        return add_whole(std::move(op), what);
    }
  }

  // The op on whole operands, as on one chip.
  int add_whole(Op op, const std::string& what) {
    for (int& o : op.operands) o = to(o, whole(g_.ops[o].type.dims.size()), what);
    for (Function& r : op.regions) set_devices(r, n_);
    const size_t rank = op.type.dims.size();
    return add(std::move(op), whole(rank));
  }

  // An op that works along each dimension on its own (slice, pad, ...):
  // its first `n` operands (the arrays; the rest whole) take the first's
  // layout along the dimensions where keep(d) holds, whole along the others,
  // and so does the result.
  template <typename Keep>
  int per_dimension(const Op& in, Op op, const std::string& what, size_t n, Keep keep) {
    std::vector<Layout> candidates;  // the arrays' layouts (split ones first), then whole
    for (size_t k = 0; k < n; ++k) {
      Layout l = resolved(op.operands[k]);
      for (size_t d = 0; d < l.dims.size(); ++d)
        if (!keep(d)) l.dims[d] = 0;
      if (l.used()) candidates.push_back(l);
    }
    candidates.push_back(whole(in.type.dims.size()));
    for (const Layout& l : candidates) {
      Op next = op;
      bool ok = true;
      for (size_t k = 0; k < next.operands.size() && ok; ++k) {
        int& o = next.operands[k];
        ok = (o = to(o, k < n ? l : whole(g_.ops[o].type.dims.size()), what)) >= 0;
      }
      if (!ok) continue;
      if (next.kind == OpKind::slice)  // a split dimension is taken whole: its local extent
        for (size_t d = 0; d < l.dims.size(); ++d) next.hi[d] /= count(l.dims[d]);
      next.type = local(in.type, l);
      return add(std::move(next), l);
    }
    return add_whole(std::move(op), what);
  }

  // A convolution whose batch is split (data parallel) and kernel whole:
  // each device convolves its part of the batch. Otherwise whole.
  int convolution(const Op& in, Op op, const std::string& what) {
    const ConvDims& c = in.conv;
    Layout x = resolved(op.operands[0]);
    const Mask batch = x.dims[size_t(c.in_batch)];
    if (!batch || in.batch_groups != 1) return add_whole(std::move(op), what);
    Layout lx = whole(x.dims.size());
    lx.dims[size_t(c.in_batch)] = batch;
    const int a = to(op.operands[0], lx, what);
    const int k = to(op.operands[1], whole(g_.ops[op.operands[1]].type.dims.size()), what);
    if (a < 0 || k < 0) return add_whole(std::move(op), what);
    op.operands = {a, k};
    Layout out = whole(in.type.dims.size());
    out.dims[size_t(c.out_batch)] = batch;
    op.type = local(in.type, out);
    return add(std::move(op), out);
  }

  int reshape(const Op& in, Op op, const std::string& what) {
    const Layout& x = layout_[op.operands[0]];
    const Type& from = f_.ops[in.operands[0]].type;
    Layout l = whole(in.type.dims.size());
    l.partial = x.partial;
    for (size_t k = 0; k < x.dims.size(); ++k) {
      if (!x.dims[k]) continue;
      int64_t before = 1, p = 1;
      for (size_t d = 0; d < k; ++d) before *= from.dims[d];
      size_t e = 0;
      while (e < in.type.dims.size() && !(p == before && in.type.dims[e] > 1 && in.type.dims[e] % count(x.dims[k]) == 0)) p *= in.type.dims[e++];
      if (e == in.type.dims.size()) return add_whole(std::move(op), what);
      l.dims[e] = x.dims[k];
    }
    op.type = local(in.type, l);
    return add(std::move(op), l);
  }

  int reduce(const Op& in, Op op, const std::string& what) {
    int& x = op.operands[0];
    if (layout_[x].partial || layout_[op.operands[1]].used()) return add_whole(std::move(op), what);
    const Layout& lx = layout_[x];
    Mask crossed = 0;
    Layout l;
    for (size_t d = 0; d < lx.dims.size(); ++d) {
      if (std::find(in.dims.begin(), in.dims.end(), int64_t(d)) != in.dims.end()) crossed |= lx.dims[d];
      else l.dims.push_back(lx.dims[d]);
    }
    auto identity = [&](double v) {
      const Op& o = g_.ops[op.operands[1]];
      return o.kind == OpKind::constant && o.literal.size() == 1 && o.literal[0] == v;
    };
    const DType dt = in.type.dtype;
    const bool combinable = dt == DType::f32 || dt == DType::bf16 || dt == DType::f16 || dt == DType::s32;
    if (crossed && combinable && in.combiner == Combiner::add && identity(0)) {
      l.partial = crossed;
    } else if (crossed && combinable &&
               (in.combiner == Combiner::maximum || in.combiner == Combiner::minimum || (in.combiner == Combiner::multiply && identity(1)))) {
      op.type = local(in.type, l);
      Layout part = l;
      part.partial = crossed;  // not a sum: combined at once
      const int v = add(std::move(op), part);
      Layout out = l;
      const int c = collective(OpKind::all_reduce, v, crossed, out,
                               fmt::format("all-reduce ({}): the reduction crosses split dimensions", combiner_name(in.combiner)));
      g_.ops[c].combiner = in.combiner;
      return c;
    } else if (crossed) {
      return add_whole(std::move(op), what);
    }
    op.type = local(in.type, l);
    return add(std::move(op), l);
  }

  int elementwise(const Op& in, Op op, const std::string& what) {
    const size_t rank = in.type.dims.size();
    auto full = [&](int o) { return g_.ops[o].type.dims.size() == rank; };
    // Partial sums stay partial through linear ops: -p, p * w, p / w, p + q.
    int partials = 0, others = 0;
    for (int o : op.operands) {
      if (layout_[o].partial) ++partials;
      else if (full(o)) others += layout_[o].used() != 0;
    }
    if (partials && !others && is_float(in.type.dtype)) {
      Layout l;
      for (int o : op.operands)
        if (layout_[o].partial) l = layout_[o];
      bool same = true;
      for (int o : op.operands) same &= !layout_[o].partial || layout_[o] == l;
      const bool linear = (in.kind == OpKind::negate && partials == 1) ||
                          ((in.kind == OpKind::add || in.kind == OpKind::subtract) && partials == int(op.operands.size())) ||
                          (in.kind == OpKind::multiply && partials == 1) ||
                          (in.kind == OpKind::divide && partials == 1 && layout_[op.operands[0]].partial);
      if (same && linear) {
        std::vector<int> ops = op.operands;
        bool ok = true;
        for (int& o : ops)
          if (full(o) && !layout_[o].partial) {
            Layout w = l;
            w.partial = 0;
            ok &= (o = to(o, w, what)) >= 0;
          }
        if (ok) {
          op.operands = ops;
          op.type = local(in.type, l);
          return add(std::move(op), l);
        }
      }
    }
    // The layout of an operand the others can follow (split ones first).
    std::vector<Layout> candidates;
    for (int o : op.operands)
      if (full(o) && layout_[o].used()) candidates.push_back(resolved(o));
    for (const Layout& c : candidates) {
      std::vector<int> ops = op.operands;
      bool ok = true;
      for (int& x : ops)
        if (full(x) && (x = to(x, c, what)) < 0) ok = false;
      if (!ok) continue;
      op.operands = ops;
      op.type = local(in.type, c);
      return add(std::move(op), c);
    }
    return add_whole(std::move(op), what);
  }

  int dot(const Op& in, Op op, const std::string& what) {
    int& l = op.operands[0];
    int& r = op.operands[1];
    if (layout_[l].partial) l = to(l, resolved(l), what);
    if (layout_[r].partial) r = to(r, resolved(r), what);
    // Matching dimensions (contracting and batch) take one layout on both
    // operands: the lhs's split, the rhs's, or whole.
    std::vector<std::pair<int64_t, int64_t>> pairs;
    for (size_t i = 0; i < in.lhs_contract.size(); ++i) pairs.push_back({in.lhs_contract[i], in.rhs_contract[i]});
    for (size_t i = 0; i < in.lhs_batch.size(); ++i) pairs.push_back({in.lhs_batch[i], in.rhs_batch[i]});
    for (const auto& [a, b] : pairs) {
      const Mask ml = layout_[l].dims[size_t(a)], mr = layout_[r].dims[size_t(b)];
      if (ml == mr) continue;
      std::vector<Mask> tries;  // split ones first
      if (ml) tries.push_back(ml);
      if (mr) tries.push_back(mr);
      tries.push_back(0);
      bool done = false;
      for (const Mask m : tries) {
        if (done) break;
        Layout wl = layout_[l], wr = layout_[r];
        wl.dims[size_t(a)] = m, wr.dims[size_t(b)] = m;
        const int nl = to(l, wl, what);
        if (nl < 0) continue;
        const int nr = to(r, wr, what);
        if (nr < 0) continue;
        l = nl, r = nr, done = true;
      }
    }
    // Free dimensions of the rhs split over axes the lhs already uses: whole.
    Layout wr = layout_[r];
    bool changed = false;
    for (size_t d = 0; d < wr.dims.size(); ++d) {
      const bool free = std::find(in.rhs_contract.begin(), in.rhs_contract.end(), int64_t(d)) == in.rhs_contract.end() &&
                        std::find(in.rhs_batch.begin(), in.rhs_batch.end(), int64_t(d)) == in.rhs_batch.end();
      if (free && (wr.dims[d] & layout_[l].used())) wr.dims[d] = 0, changed = true;
    }
    if (changed) r = to(r, wr, what);
    // The result: batch dimensions, the lhs's free ones, the rhs's.
    const Layout& ll = layout_[l];
    const Layout& lr = layout_[r];
    Layout out;
    for (int64_t b : in.lhs_batch) out.dims.push_back(ll.dims[size_t(b)]);
    for (size_t d = 0; d < ll.dims.size(); ++d)
      if (std::find(in.lhs_contract.begin(), in.lhs_contract.end(), int64_t(d)) == in.lhs_contract.end() &&
          std::find(in.lhs_batch.begin(), in.lhs_batch.end(), int64_t(d)) == in.lhs_batch.end())
        out.dims.push_back(ll.dims[d]);
    for (size_t d = 0; d < lr.dims.size(); ++d)
      if (std::find(in.rhs_contract.begin(), in.rhs_contract.end(), int64_t(d)) == in.rhs_contract.end() &&
          std::find(in.rhs_batch.begin(), in.rhs_batch.end(), int64_t(d)) == in.rhs_batch.end())
        out.dims.push_back(lr.dims[d]);
    for (int64_t c : in.lhs_contract) out.partial |= ll.dims[size_t(c)];
    op.type = infer_type(g_, op);
    return add(std::move(op), out);
  }

  const Function& f_;
  const Mesh mesh_;
  const int64_t n_;
  Function g_;
  std::vector<int> map_;        // f_'s op -> its value in g_
  std::vector<Layout> layout_;  // by value of g_
  std::map<std::pair<int, Layout>, int> moved_;  // (value, layout) -> the value in that layout
  const std::vector<Layout> state_;  // a region's parameters: the loop's state
  std::map<int, size_t> state_of_;   // a region's parameter value -> its state element
  std::set<size_t> gathered_;        // state elements the region all-gathers
  std::map<size_t, Layout> wished_;  // whole state elements the region would rather have split so
  std::map<int, std::vector<Layout>> loops_;  // a while op -> its state's layouts
};

}  // namespace

Function spmd_partition(const Function& f) {
  if (f.mesh.empty()) return f;
  return Partitioner(f).run();
}

}  // namespace tpu::compiler
