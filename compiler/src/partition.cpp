// spmd-partition (passes.h): a global program with shardings (jax.jit's
// in_shardings over a mesh: Function::partitions) becomes every
// device's program on local shapes, with the collectives that keep it
// equal to the global one. docs/compiler.md, "Automatic SPMD partitioning".
//
// A value is split along one dimension over every device, whole on every
// device, or partial: each device holds a term of an add-sum (a dot or a
// reduction over a split dimension) whose all-reduce waits until a consumer
// needs the value whole (all-reduce) or split (reduce-scatter). Ops go in
// program order, each taking the layout its operands allow:
//   - element-wise ops keep their operands' split; an operand whole on every
//     device that a broadcast, a splat constant or an iota makes (and
//     element-wise ops of those) is remade split on each device; scaling,
//     negating or adding partial sums keeps them partial;
//   - broadcast, transpose and reshape move the split with its dimension
//     (a reshape where the dimensions before it keep their product);
//   - a dot split on a matching contracting dimension of both operands is
//     partial; split on a batch dimension of both, or on a free dimension of
//     one whose other operand is whole (all-gathered if it was split), its
//     result is split there;
//   - a reduction over the split dimension is partial (add) or all-reduced
//     (multiply, maximum, minimum);
//   - every other op runs on whole operands (all-gathered), as on one chip.
// Results keep the layout they have (tpusim writes the global array either
// way).
#include <fmt/format.h>

#include <map>
#include <numeric>

#include "tpu/compiler/passes.h"

namespace tpu::compiler {

using namespace ir;

namespace {

constexpr int64_t kWhole = -1;    // every device holds the whole value
constexpr int64_t kPartial = -2;  // every device holds a term of its sum

void set_devices(Function& f, int64_t n) {
  f.devices = n;
  for (Op& op : f.ops)
    for (Function& r : op.regions) set_devices(r, n);
}

class Partitioner {
 public:
  explicit Partitioner(const Function& f) : f_(f), n_(f.partitions) {}

  Function run() {
    g_.name = f_.name;
    g_.param_names = f_.param_names;
    g_.checks = f_.checks;
    g_.devices = n_;
    for (int64_t d = 0; d < n_; ++d) all_.push_back(d);
    map_.resize(f_.ops.size(), -1);
    for (size_t i = 0; i < f_.ops.size(); ++i) map_[i] = op(f_.ops[i]);
    for (size_t r = 0; r < f_.results.size(); ++r) {
      int v = map_[f_.results[r]];
      if (split_[v] == kPartial) v = to(v, kWhole, "a result");
      g_.results.push_back(v);
      if (split_[v] >= 0) {
        g_.result_tiles.resize(f_.results.size());
        g_.result_tiles[r] = tiles(g_.ops[v].type.dims.size(), split_[v]);
      }
    }
    return std::move(g_);
  }

 private:
  std::vector<int64_t> tiles(size_t rank, int64_t split) const {
    std::vector<int64_t> t(rank, 1);
    t[size_t(split)] = n_;
    return t;
  }
  Type local(Type t, int64_t split) const {
    if (split >= 0) t.dims[size_t(split)] /= n_;
    return t;
  }
  bool divides(const Type& t, int64_t d) const { return d >= 0 && size_t(d) < t.dims.size() && t.dims[d] % n_ == 0 && t.dims[d] >= n_; }
  int add(Op op, int64_t split) {
    const int v = g_.add(std::move(op));
    split_.push_back(split);
    return v;
  }
  // The global type of value v of g_.
  Type global(int v) const {
    Type t = g_.ops[v].type;
    if (split_[v] >= 0) t.dims[size_t(split_[v])] *= n_;
    return t;
  }
  Op collective(OpKind k, int v, const std::string& why) {
    Op c;
    c.kind = k, c.operands = {v}, c.groups = {all_};
    c.loc = g_.ops[v].loc + " [spmd: " + why + "]";
    return c;
  }

  // Value v of g_ laid out as `want` (a dimension or kWhole); -1 where that
  // takes more than a collective or remaking it on each device.
  int to(int v, int64_t want, const std::string& why) {
    const int64_t s = split_[v];
    if (s == want) return v;
    if (auto it = moved_.find({v, want}); it != moved_.end()) return it->second;
    int out = -1;
    if (s == kPartial) {
      if (want == kWhole) {
        Op c = collective(OpKind::all_reduce, v, "all-reduce: " + why + " needs the sum");
        c.combiner = Combiner::add, c.type = g_.ops[v].type;
        out = add(std::move(c), kWhole);
      } else if (divides(g_.ops[v].type, want)) {
        Op c = collective(OpKind::reduce_scatter, v, fmt::format("reduce-scatter: {} needs the sum split along dimension {}", why, want));
        c.combiner = Combiner::add, c.index = want, c.type = local(g_.ops[v].type, want);
        out = add(std::move(c), want);
      }
    } else if (want == kWhole) {
      Op c = collective(OpKind::all_gather, v, "all-gather: " + why + " needs it whole");
      c.index = s, c.type = global(v);
      out = add(std::move(c), kWhole);
    } else {
      out = remake(v, want, why);
    }
    if (out >= 0) moved_[{v, want}] = out;
    return out;
  }

  // Value v (whole, or split along another dimension) made split along
  // `want` on each device from what it is computed from: broadcasts, splat
  // constants, iotas along another dimension and element-wise ops of those.
  // -1 otherwise.
  int remake(int v, int64_t want, const std::string& why) {
    Op op = g_.ops[v];  // a copy: adding ops moves g_.ops
    const Op src = op;
    const Type global_type = global(v);
    if (!divides(global_type, want)) return -1;
    op.type = local(global_type, want);
    switch (src.kind) {
      case OpKind::constant:
        if (src.literal.size() != 1 || src.opaque) return -1;
        return add(std::move(op), want);
      case OpKind::iota:
        if (src.index == want) return -1;
        return add(std::move(op), want);
      case OpKind::broadcast: {
        const auto at = std::find(src.dims.begin(), src.dims.end(), want);
        const int x = to(src.operands[0], at != src.dims.end() ? at - src.dims.begin() : kWhole, why);
        if (x < 0) return -1;
        op.operands[0] = x;
        return add(std::move(op), want);
      }
      default:
        if (!is_elementwise(src.kind)) return -1;
        for (int& o : op.operands) {
          if (g_.ops[o].type.dims.size() != global_type.dims.size()) continue;  // a scalar bound of clamp
          o = to(o, want, why);
          if (o < 0) return -1;
        }
        return add(std::move(op), want);
    }
  }

  int whole(int v, const std::string& why) { return to(v, kWhole, why); }

  int op(const Op& in) {
    Op op = in;
    for (int& o : op.operands) o = map_[o];
    const std::string what = fmt::format("{} ({})", op_name(in.kind), in.loc);
    switch (in.kind) {
      case OpKind::parameter: {
        const int64_t p = in.index;
        int64_t s = kWhole;
        if (size_t(p) < f_.param_sharding.size() && !f_.param_sharding[p].empty())
          for (size_t d = 0; d < f_.param_sharding[p].size(); ++d)
            if (f_.param_sharding[p][d] > 1) s = int64_t(d);
        if (s >= 0) {
          g_.param_tiles.resize(std::max(g_.param_tiles.size(), size_t(p) + 1));
          g_.param_tiles[p] = f_.param_sharding[p];
        }
        op.type = local(in.type, s);
        return add(std::move(op), s);
      }
      case OpKind::broadcast: {
        const int64_t s = split_[op.operands[0]];
        if (s == kPartial) op.operands[0] = whole(op.operands[0], what);
        const int64_t out = s >= 0 ? in.dims[s] : kWhole;
        op.type = local(in.type, out);
        return add(std::move(op), out);
      }
      case OpKind::transpose: {
        const int64_t s = split_[op.operands[0]];
        if (s == kPartial) return add_whole(std::move(op), what);  // a partial sum moves as any value would; kept simple
        const int64_t out = s >= 0 ? std::find(in.dims.begin(), in.dims.end(), s) - in.dims.begin() : kWhole;
        op.type = local(in.type, out);
        return add(std::move(op), out);
      }
      case OpKind::reshape: {
        const int64_t s = split_[op.operands[0]];
        if (s < 0) return add_whole(std::move(op), what);
        const Type& from = f_.ops[in.operands[0]].type;
        int64_t before = 1;
        for (int64_t d = 0; d < s; ++d) before *= from.dims[d];
        int64_t p = 1;
        for (size_t e = 0; e < in.type.dims.size(); p *= in.type.dims[e], ++e)
          if (p == before && in.type.dims[e] > 1 && divides(in.type, int64_t(e))) {
            op.type = local(in.type, int64_t(e));
            return add(std::move(op), int64_t(e));
          }
        return add_whole(std::move(op), what);
      }
      case OpKind::dot: return dot(in, std::move(op), what);
      case OpKind::reduce: {
        const int x = op.operands[0];
        const int64_t s = split_[x];
        if (s >= 0 && split_[op.operands[1]] == kWhole) {
          const auto at = std::find(in.dims.begin(), in.dims.end(), s);
          if (at == in.dims.end()) {  // the split dimension is kept
            const int64_t out = s - std::count_if(in.dims.begin(), in.dims.end(), [&](int64_t d) { return d < s; });
            op.type = local(in.type, out);
            return add(std::move(op), out);
          }
          const DType dt = in.type.dtype;
          const bool combinable = dt == DType::f32 || dt == DType::bf16 || dt == DType::f16 || dt == DType::s32;
          if (combinable && in.combiner == Combiner::add && is_identity(op.operands[1], 0)) return add(std::move(op), kPartial);
          const bool idempotent = in.combiner == Combiner::maximum || in.combiner == Combiner::minimum;
          if (combinable && (idempotent || (in.combiner == Combiner::multiply && is_identity(op.operands[1], 1)))) {
            op.type = in.type;  // each device's reduction of its part, then theirs
            const int part = add(std::move(op), kWhole);
            Op c = collective(OpKind::all_reduce, part, fmt::format("all-reduce ({}): the reduction crosses the split dimension", combiner_name(in.combiner)));
            c.combiner = in.combiner, c.type = in.type;
            return add(std::move(c), kWhole);
          }
        }
        return add_whole(std::move(op), what);
      }
      default:
        if (is_elementwise(in.kind)) return elementwise(in, std::move(op), what);
        return add_whole(std::move(op), what);
    }
  }

  bool is_identity(int v, double x) const {
    const Op& o = g_.ops[v];
    return o.kind == OpKind::constant && o.literal.size() == 1 && o.literal[0] == x;
  }

  // The op on whole operands, as on one chip.
  int add_whole(Op op, const std::string& what) {
    for (int& o : op.operands) o = whole(o, what);
    if (!op.regions.empty())
      for (Function& r : op.regions) set_devices(r, n_);
    return add(std::move(op), kWhole);
  }

  int elementwise(const Op& in, Op op, const std::string& what) {
    const size_t rank = in.type.dims.size();
    auto full = [&](int o) { return g_.ops[o].type.dims.size() == rank || split_[o] != kWhole; };
    // Partial sums stay partial through linear ops: -p, p * w, p / w, p + q.
    int partials = 0, splits = 0;
    for (int o : op.operands) partials += split_[o] == kPartial, splits += split_[o] >= 0;
    if (partials > 0 && splits == 0) {
      const bool ok = (in.kind == OpKind::negate && partials == 1) ||
                      ((in.kind == OpKind::add || in.kind == OpKind::subtract) && partials == int(op.operands.size())) ||
                      (in.kind == OpKind::multiply && partials == 1) ||
                      (in.kind == OpKind::divide && partials == 1 && split_[op.operands[0]] == kPartial);
      if (ok && is_float(in.type.dtype)) {
        op.type = in.type;
        return add(std::move(op), kPartial);
      }
    }
    // Split where an operand is split (the first that the others can follow).
    for (int o : op.operands) {
      const int64_t s = split_[o];
      if (s < 0 || !full(o)) continue;
      std::vector<int> ops = op.operands;
      bool ok = true;
      for (int& x : ops)
        if (full(x) && (x = to(x, s, what)) < 0) ok = false;
      if (!ok) continue;
      op.operands = ops;
      op.type = local(in.type, s);
      return add(std::move(op), s);
    }
    return add_whole(std::move(op), what);
  }

  // Where dimension d of a dot's operand lands in its result: batch
  // dimensions first, then the lhs's free ones, then the rhs's.
  static int64_t out_dim(const Op& in, bool rhs, int64_t d, size_t lhs_rank) {
    const auto& batch = rhs ? in.rhs_batch : in.lhs_batch;
    const auto& contract = rhs ? in.rhs_contract : in.lhs_contract;
    if (auto at = std::find(batch.begin(), batch.end(), d); at != batch.end()) return at - batch.begin();
    int64_t out = int64_t(batch.size());
    if (rhs) out += int64_t(lhs_rank - in.lhs_batch.size() - in.lhs_contract.size());
    for (int64_t k = 0; k < d; ++k)
      if (std::find(batch.begin(), batch.end(), k) == batch.end() && std::find(contract.begin(), contract.end(), k) == contract.end()) ++out;
    return out;
  }

  int dot(const Op& in, Op op, const std::string& what) {
    int& l = op.operands[0];
    int& r = op.operands[1];
    const size_t lrank = g_.ops[l].type.dims.size();
    if (split_[l] == kPartial) l = whole(l, what);
    if (split_[r] == kPartial) r = whole(r, what);
    auto emit = [&](int64_t out) {
      op.type = infer_type(g_, op);
      return add(std::move(op), out);
    };
    auto pos = [](const std::vector<int64_t>& v, int64_t x) { return int64_t(std::find(v.begin(), v.end(), x) - v.begin()); };
    // Split on matching contracting (partial sums) or batch dimensions.
    for (const bool batch : {false, true})
      for (const bool from_rhs : {false, true}) {
        const auto& mine = from_rhs ? (batch ? in.rhs_batch : in.rhs_contract) : (batch ? in.lhs_batch : in.lhs_contract);
        const auto& theirs = from_rhs ? (batch ? in.lhs_batch : in.lhs_contract) : (batch ? in.rhs_batch : in.rhs_contract);
        const int64_t s = split_[from_rhs ? r : l];
        const int64_t p = s >= 0 ? pos(mine, s) : int64_t(mine.size());
        if (p >= int64_t(mine.size())) continue;
        int& other = from_rhs ? l : r;
        const int o = to(other, theirs[p], what);
        if (o < 0) continue;
        other = o;
        return emit(batch ? p : kPartial);
      }
    // Split on a free dimension of one operand, the other whole.
    for (const bool from_rhs : {false, true}) {
      const int64_t s = split_[from_rhs ? r : l];
      const auto& batch = from_rhs ? in.rhs_batch : in.lhs_batch;
      const auto& contract = from_rhs ? in.rhs_contract : in.lhs_contract;
      if (s < 0 || pos(batch, s) < int64_t(batch.size()) || pos(contract, s) < int64_t(contract.size())) continue;
      int& other = from_rhs ? l : r;
      other = whole(other, what);
      return emit(out_dim(in, from_rhs, s, lrank));
    }
    l = whole(l, what), r = whole(r, what);
    return emit(kWhole);
  }

  const Function& f_;
  const int64_t n_;
  Function g_;
  std::vector<int64_t> all_;
  std::vector<int> map_;             // f_'s op -> its value in g_
  std::vector<int64_t> split_;       // by value of g_: the split dimension, kWhole or kPartial
  std::map<std::pair<int, int64_t>, int> moved_;  // (value, layout) -> the value in that layout
};

}  // namespace

Function spmd_partition(const Function& f) {
  if (f.partitions <= 1) return f;
  return Partitioner(f).run();
}

}  // namespace tpu::compiler
