// Loops from a scheduled program (loops.h).
//
// Rerolling works bottom-up on a sequence of nodes (instructions, then loops
// of them). A pass walks the sequence; at each position it tries the nearest
// repeats of the node there as periods p, and takes the period whose run
// saves most instructions: the nodes of [i, i + p) repeat in [i + p, i + 2p),
// ... with the same instructions (keys) and operands that change by the same
// amount from one repeat to the next. Those become a loop whose body is the
// first repeat; every operand gets that amount as its step for the new loop.
// Passes run until nothing changes, so a loop of loops forms when the inner
// loops repeat with stepping start values.
#include "loops.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <set>
#include <stdexcept>
#include <tuple>
#include <unordered_map>

namespace tpu::compiler {
namespace {

struct Node {
  int insn = -1;                             // a leaf: index into the program; -1: a loop
  int64_t count = 0;                         // a loop's trip count
  std::vector<Node> body;                    // a loop's body
  std::vector<uint64_t> vals;                // a leaf's operands in the first iteration of every enclosing loop
  std::vector<std::vector<int64_t>> steps;   // steps[v][l]: operand v's step per iteration of enclosing loop l (innermost first)
  uint64_t key = 0;                          // equal keys: the same instructions and steps (operands may differ)
  size_t size = 0;                           // instructions it emits (a loop's overhead estimated)
  double cost = 0;                           // cycles the scalar unit takes to issue it, every iteration included
  double t = 0;                              // the estimated cycle of its first instruction
  int stepping = 0;                          // a loop's registers that step
  bool stated = false;                       // an explicit loop (Scheduled::loop), not one found here
};

uint64_t mix(uint64_t h, uint64_t v) { return h ^ (v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2)); }

// The share of a stretch of the schedule its loop may take to issue: the
// scalar unit also loads constants, waits and starts loops.
constexpr double kScalarShare = 0.85;
// Where no loop keeps up (the scalar unit is the bottleneck), one whose
// steps and back edge take at most 1/kMaxOverhead of its body's issue
// cycles is formed all the same: it costs at most 0.5% of its stretch.
constexpr double kMaxOverhead = 200;
constexpr int64_t kMinSaving = 16;  // instructions a loop must save to be worth its registers and branches

bool fits32(int64_t v) { return v >= std::numeric_limits<int32_t>::min() && v <= std::numeric_limits<int32_t>::max(); }

// The hash of an instruction and its comment (bound operands are 0).
uint64_t hash_of(const Scheduled& s) {
  uint64_t h = mix(std::hash<std::string>()(s.comment), uint64_t(s.insn.op));
  for (int64_t v : s.insn.operands) h = mix(h, uint64_t(v));
  return h;
}

class Reroller {
 public:
  Reroller(const std::vector<Scheduled>& prog, const LoopOptions& o) : prog_(prog), o_(o) {}

  std::vector<Node> run() {
    size_t i = 0;
    std::vector<Node> seq = read(i, 0);
    return fold(std::move(seq));
  }

 private:
  // The program from line i as nodes: its explicit loops (Scheduled::loop)
  // as loop nodes, up to the line that closes the loop the reading is
  // `depth` loops inside (0: to the end).
  std::vector<Node> read(size_t& i, size_t depth) const {
    std::vector<Node> seq;
    if (depth == 0) seq.reserve(prog_.size());
    while (i < prog_.size()) {
      const Scheduled& s = prog_[i];
      if (s.loop < 0) {
        if (depth == 0) throw std::logic_error("internal error: a loop closes that is not open");
        ++i;
        return seq;
      }
      if (s.loop > 0) {
        Node l;
        l.count = s.loop;
        l.stated = true;
        l.body = read(++i, depth + 1);
        if (l.body.empty()) throw std::logic_error("internal error: an empty loop");
        std::vector<int64_t> delta;
        std::vector<uint64_t> first;
        std::vector<bool> addr;
        for (const Node& b : l.body) steps_of_loop(b, depth, delta), flatten(b, first), flatten_kinds(b, addr);
        l.stepping = stepping(delta, first, addr);
        rekey(l);
        seq.push_back(std::move(l));
        continue;
      }
      Node n;
      n.insn = int(i);
      n.vals = s.vals;
      n.steps.resize(s.vals.size());
      if (s.steps.size() != depth) throw std::logic_error("internal error: an instruction lacks the steps of its loops");
      for (size_t v = 0; v < s.vals.size(); ++v)
        for (const auto& level : s.steps) {
          if (level.size() != s.vals.size()) throw std::logic_error("internal error: an instruction lacks the steps of its loops");
          n.steps[v].push_back(level[v]);
        }
      rekey(n);
      seq.push_back(std::move(n));
      ++i;
    }
    if (depth > 0) throw std::logic_error("internal error: a loop is not closed");
    return seq;
  }
  // The steps of every value in n (flatten order) for the loop that
  // `depth` loops enclose (its steps come that far from the outermost).
  static void steps_of_loop(const Node& n, size_t depth, std::vector<int64_t>& out) {
    if (n.insn >= 0)
      for (const auto& st : n.steps) out.push_back(st[st.size() - 1 - depth]);
    for (const Node& b : n.body) steps_of_loop(b, depth, out);
  }

  void rekey(Node& n) const {
    uint64_t h;
    if (n.insn >= 0) {
      const Scheduled& s = prog_[size_t(n.insn)];
      h = mix(mix(mix(hash_of(s), uint64_t(s.unit + 2)), uint64_t(s.kernel + 2)), uint64_t(s.entry));
      for (const auto& st : n.steps)
        for (int64_t d : st) h = mix(h, uint64_t(d));
      n.size = s.unit < 0 ? 0 : 1;
      n.cost = s.unit < 0 ? 0 : 1 / o_.issue_width;
      n.t = s.t;
    } else {
      h = mix(0x6c6f6f70, uint64_t(n.count));
      n.size = 2;
      double body = 0;
      for (const Node& b : n.body) h = mix(h, b.key), n.size += b.size, body += b.cost;
      n.cost = double(n.count) * (body + iteration_cost(n.stepping)) + 2 / o_.issue_width;
      n.t = n.body.front().t;
    }
    n.key = h;
  }
  // Passes until nothing changes, then the same inside every loop formed
  // (a body that repeats a smaller pattern, as a loop over tiles of a chunk
  // inside the loop over double-buffered chunks).
  std::vector<Node> fold(std::vector<Node> seq) const {
    for (bool changed = true; changed;) seq = pass(std::move(seq), changed);
    for (Node& n : seq)
      if (n.insn < 0) n.body = fold(std::move(n.body)), rekey(n);
    return seq;
  }
  // The scalar unit's extra cycles per iteration of a loop: its steps and
  // back edge, and the taken branch's bubble.
  double iteration_cost(int stepping) const { return (stepping + 1) / o_.issue_width + o_.branch_penalty; }
  static void flatten(const Node& n, std::vector<uint64_t>& out) {
    if (n.insn >= 0) out.insert(out.end(), n.vals.begin(), n.vals.end());
    for (const Node& b : n.body) flatten(b, out);
  }
  // Per flattened value: whether it is an address (Scheduled::addr; its
  // register holds only the steps, shared by every address with the same
  // step).
  void flatten_kinds(const Node& n, std::vector<bool>& out) const {
    if (n.insn >= 0)
      for (size_t v = 0; v < n.vals.size(); ++v) out.push_back(prog_[size_t(n.insn)].addr == int(v));
    for (const Node& b : n.body) flatten_kinds(b, out);
  }
  // Registers a loop steps: one per step of addresses, one per start
  // and step of other operands.
  static int stepping(const std::vector<int64_t>& delta, const std::vector<uint64_t>& first, const std::vector<bool>& addr) {
    std::set<std::pair<uint64_t, int64_t>> regs;
    int toggling = 0;  // each takes two instructions a trip
    for (size_t k = 0; k < delta.size(); ++k)
      if (delta[k] != 0 && regs.insert({addr[k] ? 0 : first[k], delta[k]}).second) toggling += toggles(delta[k]);
    return int(regs.size()) + toggling;
  }
  // Keys are hashes: before a run becomes a loop, its repeats are compared
  // instruction by instruction.
  bool same_shape(const Node& a, const Node& b) const {
    if (a.insn >= 0 || b.insn >= 0) {
      if (a.insn < 0 || b.insn < 0 || a.steps != b.steps) return false;
      const Scheduled &x = prog_[size_t(a.insn)], &y = prog_[size_t(b.insn)];
      return x.unit == y.unit && x.kernel == y.kernel && x.insn == y.insn && x.comment == y.comment && x.entry == y.entry;
    }
    if (a.count != b.count || a.body.size() != b.body.size()) return false;
    for (size_t k = 0; k < a.body.size(); ++k)
      if (!same_shape(a.body[k], b.body[k])) return false;
    return true;
  }
  bool same_shapes(const std::vector<Node>& seq, size_t i, size_t p, size_t r) const {
    for (size_t k = i + p; k < i + r * p; ++k)
      if (!same_shape(seq[k], seq[k - p])) return false;
    return true;
  }
  // Gives every leaf of n a step for a new loop around n (from d, in
  // flatten order); `depth` loops of n enclose the leaf inside it.
  void add_level(Node& n, const int64_t*& d, size_t depth = 0) const {
    for (auto& st : n.steps) st.insert(st.begin() + long(depth), *d++);
    for (Node& b : n.body) add_level(b, d, depth + 1);
    rekey(n);
  }

  // How many times [i, i + p) repeats from i (at least 1), and the operands'
  // steps from one repeat to the next. `stop`: the offset in the body of the
  // first instruction that differs from its place in the repeat before (p:
  // none, the sequence or the limit ended the run).
  size_t repeats(const std::vector<Node>& seq, const std::vector<std::vector<uint64_t>>& flat, size_t i, size_t p,
                 std::vector<int64_t>& delta, size_t limit = ~size_t(0), size_t* stop = nullptr) const {
    delta.clear();
    size_t r = 1;
    const auto stopped = [&](size_t t) {
      if (stop) *stop = t;
      return r;
    };
    for (; r < limit && i + (r + 1) * p <= seq.size(); ++r) {
      size_t k = 0;
      for (size_t t = 0; t < p; ++t) {
        const size_t a = i + (r - 1) * p + t, b = a + p;
        if (seq[a].key != seq[i + t].key || seq[b].key != seq[i + t].key || flat[b].size() != flat[a].size()) return stopped(t);
        for (size_t v = 0; v < flat[a].size(); ++v, ++k) {
          const int64_t d = int64_t(flat[b][v] - flat[a][v]);
          if (r == 1) {
            if (!fits32(d)) return stopped(t);  // a step is an addi's immediate
            delta.push_back(d);
          } else if (d != delta[k]) {
            return stopped(t);
          }
        }
      }
    }
    return stopped(p);
  }

  // Whether instruction x + p repeats x with the steps x repeats x - p.
  static bool steps_alike(const std::vector<Node>& seq, const std::vector<std::vector<uint64_t>>& flat, size_t x, size_t p) {
    if (seq[x - p].key != seq[x].key || seq[x + p].key != seq[x].key) return false;
    if (flat[x - p].size() != flat[x].size() || flat[x + p].size() != flat[x].size()) return false;
    for (size_t v = 0; v < flat[x].size(); ++v)
      if (flat[x + p][v] - flat[x][v] != flat[x][v] - flat[x - p][v]) return false;
    return true;
  }

  // Whether r iterations of [i, i + p) as a loop keep up with the schedule:
  // the scalar unit issues them, the loop's own instructions included, in
  // no more cycles than the units are estimated to take for that work.
  // Where the scalar unit is the bottleneck (one instruction a cycle
  // feeding a unit that takes one a cycle) the code stays straight.
  bool keeps_up(const std::vector<Node>& seq, const std::vector<double>& pcost, size_t i, size_t p, size_t r, int stepping) const {
    const size_t end = i + r * p;
    const double span = (end < seq.size() ? seq[end].t : seq[end - 1].t + 1) - seq[i].t;
    const double body = pcost[i + p] - pcost[i];
    return double(r) * (body + iteration_cost(stepping)) <= kScalarShare * span || iteration_cost(stepping) * kMaxOverhead <= body;
  }

  // A candidate loop: r repeats of the p nodes from a position.
  struct Run {
    size_t p = 0, r = 0, stop = 0;  // stop: as repeats() says
    int stepping = 0;
    int64_t saving = 0;
    std::vector<int64_t> delta;
  };
  // The loop of body [i, i + p) as long as it repeats, if it keeps up with
  // the schedule ({0, 0}: it does not; `slow` remembers where). p == 0 with
  // r == 1: no repeat.
  Run try_run(const std::vector<Node>& seq, const std::vector<std::vector<uint64_t>>& flat, const std::vector<size_t>& psize,
              const std::vector<double>& pcost, size_t i, size_t p, std::unordered_map<size_t, size_t>& slow) const {
    Run run;
    // Two repeats first: cheap, and where they do not keep up, more will
    // not (checked first as if no register stepped).
    if (!keeps_up(seq, pcost, i, p, 2, 0)) {
      slow[p] = i + p;
      return run;
    }
    if (repeats(seq, flat, i, p, run.delta, 2) < 2) return run.r = 1, run;
    std::vector<uint64_t> first;
    std::vector<bool> addr;
    for (size_t t = 0; t < p; ++t) flatten(seq[i + t], first), flatten_kinds(seq[i + t], addr);
    if (!keeps_up(seq, pcost, i, p, 2, stepping(run.delta, first, addr))) {
      slow[p] = i + p;
      return run;
    }
    const size_t r = repeats(seq, flat, i, p, run.delta, ~size_t(0), &run.stop);
    const int st = stepping(run.delta, first, addr);
    if (!keeps_up(seq, pcost, i, p, r, st)) {
      slow[p] = i + (r - 1) * p;  // the same run entered later: no faster
      return run;
    }
    run.p = p, run.r = r, run.stepping = st;
    run.saving = int64_t((r - 1) * (psize[i + p] - psize[i])) - st - 3;
    return run;
  }

  std::vector<Node> pass(std::vector<Node> seq, bool& changed) const {
    changed = false;
    const size_t n = seq.size();
    std::vector<std::vector<uint64_t>> flat(n);
    for (size_t i = 0; i < n; ++i) flatten(seq[i], flat[i]);
    constexpr size_t kNone = ~size_t(0);
    std::vector<size_t> next(n, kNone), psize(n + 1, 0);
    std::unordered_map<uint64_t, size_t> seen;
    for (size_t i = n; i-- > 0;) {
      auto [it, fresh] = seen.emplace(seq[i].key, i);
      if (!fresh) next[i] = it->second, it->second = i;
    }
    std::vector<double> pcost(n + 1, 0);
    for (size_t i = 0; i < n; ++i) psize[i + 1] = psize[i] + seq[i].size, pcost[i + 1] = pcost[i] + seq[i].cost;

    std::vector<Node> out;
    out.reserve(n);
    // period -> the position before which it was found not to keep up (the
    // same stretch, entered a little later, does not either)
    std::unordered_map<size_t, size_t> slow;
    for (size_t i = 0; i < n;) {
      Run best;
      size_t j = next[i];
      for (int tries = 0; j != kNone && j - i <= size_t(o_.max_period) && tries < 8; ++tries, j = next[j]) {
        const size_t body = psize[j] - psize[i];
        if (body == 0) continue;
        // A small body is unrolled (each iteration's `loop` and steps cost
        // scalar issue slots), and more where the loop would not keep up:
        // doubled three times, then as far as its iterations' overhead is
        // at most 1 / kMaxOverhead of its issue cycles (two registers
        // stepping, a guess the run checks).
        const size_t p0 = (j - i) * std::max<size_t>(1, (size_t(o_.min_body) + body - 1) / body);
        const double once = pcost[j] - pcost[i];
        const size_t p_long = once > 0 ? (j - i) * size_t(std::ceil(kMaxOverhead * iteration_cost(2) / once)) : 0;
        const size_t periods[] = {p0, 2 * p0, 4 * p0, 8 * p0, std::max(p_long, 16 * p0)};
        for (size_t p : periods) {
          if (p > size_t(o_.max_period) || i + 2 * p > n) break;
          if (auto it = slow.find(p); it != slow.end() && i < it->second) continue;
          const Run run = try_run(seq, flat, psize, pcost, i, p, slow);
          if (run.p == 0 && run.r == 0) continue;  // too slow: try a longer body
          if (run.saving >= kMinSaving && run.saving > best.saving) best = run;
          break;
        }
      }
      // The same body entered a little later may repeat more often (a loop
      // over groups whose first one differs in its first few instructions):
      // then what comes before it stays straight. A later start s repeats
      // more (three times at least) only where every instruction of its
      // second repeat steps as the one before it (steps_alike): the run from
      // i stopped in its second repeat, at offset `stop`, and s is past it.
      size_t shift = 0;
      std::vector<size_t> unlike;  // prefix counts of instructions not alike, from y0
      const size_t p = best.p, y0 = i + p + best.stop + 1;
      if (best.r == 2 && best.stop + 1 < p)
        for (size_t y = y0; y < i + 3 * p && y + p < n; ++y)
          unlike.push_back((unlike.empty() ? 0 : unlike.back()) + !steps_alike(seq, flat, y, p));
      const auto alike = [&](size_t from, size_t to) {  // [from, to) all alike
        return to - y0 <= unlike.size() && unlike[to - y0 - 1] - (from > y0 ? unlike[from - y0 - 1] : 0) == 0;
      };
      for (size_t s = best.stop + 1; !unlike.empty() && s < p && i + s + 3 * p <= n; ++s) {
        if (!alike(i + s + p, i + s + 2 * p)) continue;
        std::unordered_map<size_t, size_t> none;
        const Run later = try_run(seq, flat, psize, pcost, i + s, best.p, none);
        if (later.p > 0 && later.r > best.r && later.saving > best.saving) {
          shift = s;
          break;
        }
      }
      if (shift) {
        for (size_t k = 0; k < shift; ++k) out.push_back(std::move(seq[i++]));
        continue;
      }
      const size_t best_p = best.p, best_r = best.r;
      const int best_stepping = best.stepping;
      const std::vector<int64_t>& best_delta = best.delta;
      if (best_p == 0 || !same_shapes(seq, i, best_p, best_r)) {
        out.push_back(std::move(seq[i++]));
        continue;
      }
      Node loop;
      loop.count = int64_t(best_r);
      loop.stepping = best_stepping;
      for (size_t t = 0; t < best_p; ++t) loop.body.push_back(std::move(seq[i + t]));
      const int64_t* d = best_delta.data();
      for (Node& b : loop.body) add_level(b, d);
      rekey(loop);
      out.push_back(std::move(loop));
      i += best_r * best_p;
      changed = true;
    }
    return out;
  }

  const std::vector<Scheduled>& prog_;
  const LoopOptions& o_;
};

// Writes nodes as instructions and assigns scalar registers.
class Writer {
 public:
  Writer(const std::vector<Scheduled>& prog, const LoopOptions& o, WriterState& st) : prog_(prog), o_(o), st_(st) {}

  void seq(const std::vector<Node>& nodes) {
    for (const Node& n : nodes) {
      if (n.insn >= 0) leaf(n, nullptr);
      else nest(n);
    }
  }
  LoopCode done() { return std::move(code_); }

 private:
  // What a loop register holds: base + the sum of step * iteration over
  // loops (id, step), outermost first.
  using Fn = std::pair<uint64_t, std::vector<std::pair<int, int64_t>>>;
  // A nest's registers. A function f steps in loops L1 (outermost) .. Lk;
  // in loop Li it lives in the register of its prefix up to Li, set on
  // entry to Li from the prefix up to L(i-1) (a register of an enclosing
  // loop) and stepped at the end of each iteration. So a loop's registers
  // live only while it runs, and the loops inside one reuse each other's.
  // A constant is loaded on entry to the innermost loop enclosing all its
  // uses.
  struct Nest {
    std::unordered_map<const Node*, int> id;
    std::vector<std::vector<Fn>> fns;          // per loop id: the prefixes ending there
    std::vector<std::vector<uint64_t>> consts;  // per loop id: the constants it loads
    std::map<Fn, int> fn_reg;                   // live ones
    std::map<uint64_t, int> const_reg;          // live ones
    std::vector<bool> free;                     // per register
    std::vector<bool> written;                  // per register: taken at some point
    // Too many registers otherwise: an operand whose function is in
    // `fns_at_use` (or every one, with all_fns_at_use) is computed into a
    // temporary just before its instruction, from the register of its sum of
    // steps (base 0), and so is every constant in `consts_at_use`.
    bool all_fns_at_use = false;
    std::set<Fn> fns_at_use;
    std::set<uint64_t> consts_at_use;
    // How often an instruction names each function and each constant, every
    // iteration counted.
    std::map<Fn, double> fn_uses;
    std::map<uint64_t, double> const_uses;
    bool at_use(const Fn& f) const { return all_fns_at_use || fns_at_use.count(f) > 0; }
    bool at_use_const(uint64_t v) const { return consts_at_use.count(v) > 0; }
    bool any_at_use() const { return all_fns_at_use || !fns_at_use.empty() || !consts_at_use.empty(); }
    // Per free register: the (register of the sum of steps, base) it was
    // computed from at use, so the next instruction that needs the same
    // value takes it as it is. Forgotten at every label and loop end (the
    // sums step there) and when the register is taken for anything else.
    std::vector<std::pair<int, uint64_t>> held;
    int holding(int sum, uint64_t base) const {
      for (size_t r = 1; r < held.size(); ++r)
        if (free[r] && held[r] == std::make_pair(sum, base)) return int(r);
      return 0;
    }
    void forget() { held.assign(held.size(), {0, 0}); }
  };

  void put(const isa::Instruction& i) { code_.code.push_back(i); }
  size_t pc() const { return code_.code.size(); }
  void enter_kernel(int k) {
    if (o_.kernels && k != kNoKernel && (!st_.marked || k != st_.kernel)) {
      code_.kernel_marks.push_back({pc(), k});
      st_.kernel = k, st_.marked = true;
    }
  }
  void load(int r, uint64_t v) {
    if (!is_offset(v)) return load_constant(code_.code, r, v);
    load_constant(code_.code, r, v - kOffset);
    put(isa::build::ADD(r, r, kOffsetReg));
  }
  // A register holding constant v outside loops: from the cache, else
  // loaded into the least recently used register.
  int reg(uint64_t v) {
    if (v == 0) return 0;
    ++st_.clock;
    for (int r = 1; r <= o_.registers; ++r)
      if (st_.valid[r] && st_.val[r] == v) return st_.stamp[r] = st_.clock, r;
    int victim = 1;
    for (int r = 1; r <= o_.registers; ++r)
      if (!st_.valid[r] || st_.stamp[r] < st_.stamp[victim]) {
        victim = r;
        if (!st_.valid[r]) break;
      }
    load(victim, v);
    st_.val[victim] = v, st_.valid[victim] = true, st_.stamp[victim] = st_.clock;
    return victim;
  }

  // The function operand v of leaf n computes, inside `loops` (outermost first).
  Fn fn_of(const Node& n, size_t v, const std::vector<const Node*>& loops, const Nest& ns) const {
    Fn f{prog_[size_t(n.insn)].addr == int(v) ? 0 : n.vals[v], {}};
    const auto& st = n.steps[v];  // innermost first
    for (size_t l = st.size(); l-- > 0;)
      if (st[l] != 0) f.second.push_back({ns.id.at(loops[loops.size() - 1 - l]), st[l]});
    return f;
  }
  void leaf(const Node& n, Nest* ns, const std::vector<const Node*>& loops = {}) {
    const Scheduled& s = prog_[size_t(n.insn)];
    std::vector<int> temps;
    if (s.unit < 0) {
      code_.notes.push_back({pc(), s.comment});
      return;
    }
    enter_kernel(s.kernel);
    isa::Instruction insn = s.insn;
    for (size_t v = 0; v < n.vals.size(); ++v) {
      const bool addr = s.addr == int(v);
      int r = 0;
      Fn f = ns ? fn_of(n, v, loops, *ns) : Fn{};
      if (ns && (f.second.empty() ? !addr && ns->at_use_const(n.vals[v]) : ns->at_use(f))) {
        const uint64_t base = addr ? 0 : n.vals[v];
        f.first = 0;
        const int sum = f.second.empty() ? 0 : ns->fn_reg.at(f);
        if (base == 0) {
          r = sum;
        } else if (const int h = ns->holding(sum, base); h > 0) {
          r = h;  // computed for an earlier instruction, and still there
          ns->free[size_t(r)] = false;
          temps.push_back(r);
        } else {
          r = take(*ns);
          temps.push_back(r);
          if (fits32(int64_t(base)) && sum != 0) {
            put(isa::build::ADDI(r, sum, int64_t(base)));
          } else {
            load(r, base);
            if (sum != 0) put(isa::build::ADD(r, r, sum));
          }
          ns->held[size_t(r)] = {sum, base};
        }
      } else if (ns) {
        if (!f.second.empty()) r = ns->fn_reg.at(f);
        else if (!addr && n.vals[v] != 0) r = ns->const_reg.at(n.vals[v]);
      } else if (!addr) {
        r = reg(n.vals[v]);
      }
      const size_t at = size_t(s.at[v]);
      insn[at] = r;
      if (addr) {
        if (!fits32(int64_t(n.vals[v]))) throw std::logic_error("internal error: a VMEM address beyond an immediate's range");
        insn[at + 1] = int64_t(n.vals[v]);
      }
    }
    put(insn);
    for (int r : temps) ns->free[size_t(r)] = true;
    // An instruction the emitter wrote with its own registers (a dynamic
    // slice's offset code): the constants cached in those are gone.
    if (s.vals.empty())
      for (uint32_t w = isa::register_use(insn).swrite; w != 0; w &= w - 1) {
        if (ns) throw std::logic_error("internal error: a loop's instruction writes a scalar register of its own");
        st_.valid[__builtin_ctz(w)] = false;
      }
  }

  // Numbers the loops, and files every stepping operand's prefixes and
  // every constant under the loop that sets them.
  void collect(const Node& n, std::vector<const Node*>& loops, Nest& ns, std::map<uint64_t, std::vector<int>>& paths) {
    double weight = 1;
    for (const Node* l : loops) weight *= double(l->count);
    if (n.insn < 0) {
      ns.id.emplace(&n, int(ns.id.size()));
      loops.push_back(&n);
      for (const Node& b : n.body) collect(b, loops, ns, paths);
      loops.pop_back();
      return;
    }
    std::vector<int> path;
    for (const Node* l : loops) path.push_back(ns.id.at(l));
    for (size_t v = 0; v < n.vals.size(); ++v) {
      Fn f = fn_of(n, v, loops, ns);
      if (!f.second.empty()) {
        ns.fn_uses[f] += weight;
        if (ns.at_use(f)) f.first = 0;
      }
      if (f.second.empty()) {
        if (prog_[size_t(n.insn)].addr == int(v) || n.vals[v] == 0) continue;
        ns.const_uses[n.vals[v]] += weight;
        if (ns.at_use_const(n.vals[v])) continue;
        auto [it, fresh] = paths.emplace(n.vals[v], path);
        if (!fresh) {  // the loops enclosing every use
          size_t k = 0;
          while (k < it->second.size() && k < path.size() && it->second[k] == path[k]) ++k;
          it->second.resize(k);
        }
        continue;
      }
      for (size_t k = 1; k <= f.second.size(); ++k) {
        Fn prefix{f.first, {f.second.begin(), f.second.begin() + long(k)}};
        ns.fns.resize(ns.id.size());
        auto& at = ns.fns[size_t(prefix.second.back().first)];
        if (std::find(at.begin(), at.end(), prefix) == at.end()) at.push_back(std::move(prefix));
      }
    }
  }
  // Registers loop l and the loops inside it need at once.
  size_t need(const Node& l, const Nest& ns) const {
    size_t inner = 0;
    for (const Node& b : l.body)
      if (b.insn < 0) inner = std::max(inner, need(b, ns));
    const size_t id = size_t(ns.id.at(&l));
    size_t toggling = 0;  // each also holds its next step
    for (const Fn& f : ns.fns[id]) toggling += toggles(f.second.back().second);
    return ns.fns[id].size() + toggling + ns.consts[id].size() + 1 + std::max<size_t>(inner, ns.any_at_use() ? Scheduled::kMaxBound : 0);
  }

  void plan(const Node& top, Nest& ns) {
    std::vector<const Node*> loops;
    std::map<uint64_t, std::vector<int>> paths;
    collect(top, loops, ns, paths);
    ns.fns.resize(ns.id.size());
    ns.consts.resize(ns.id.size());
    for (const auto& [v, path] : paths) ns.consts[size_t(path.empty() ? 0 : path.back())].push_back(v);
  }
  // A loop nest. Its registers as planned above; with too few, temporaries
  // at use; with still too few, the outer loop is unrolled and the loops
  // inside it are nested on their own.
  void nest(const Node& top) {
    Nest ns;
    plan(top, ns);
    const auto fits = [&](const Nest& n) { return need(top, n) <= size_t(o_.registers); };
    // The nest with the fewest k of `order` (least used first) computed at
    // use that fits, or with all k_max (need() falls as k grows).
    const auto fewest = [&](size_t k_max, const std::function<void(Nest&, size_t)>& at_use) {
      const auto make = [&](size_t k) {
        Nest n;
        at_use(n, k);
        plan(top, n);
        return n;
      };
      size_t lo = 0, hi = k_max;
      while (lo < hi) {
        const size_t mid = (lo + hi) / 2;
        if (fits(make(mid))) hi = mid;
        else lo = mid + 1;
      }
      return make(lo);
    };
    // Operands computed at use, the functions that name the fewest
    // instructions (each costs an addi every time its instruction runs)
    // first; k = all of them: every loop register holds a sum of steps.
    if (!fits(ns)) {
      std::vector<std::pair<double, Fn>> order;
      for (const auto& [f, n] : ns.fn_uses)
        if (f.first != 0) order.push_back({n, f});
      std::sort(order.begin(), order.end());
      ns = fewest(order.size() + 1, [&](Nest& n, size_t k) {
        n.all_fns_at_use = k > order.size();
        for (size_t i = 0; i < std::min(k, order.size()); ++i) n.fns_at_use.insert(order[i].second);
      });
    }
    // Issuing one instruction a cycle, the scalar unit would delay every
    // instruction by its constant's load (often one an MXU waits for).
    // Wider, constants are loaded at use too, the least used first; and in
    // a loop the kernel states, which stays a loop rather than unrolled.
    if (!fits(ns) && (o_.issue_width >= 2 || top.stated)) {
      std::vector<std::pair<double, uint64_t>> order;
      for (const auto& [v, n] : ns.const_uses) order.push_back({n, v});
      std::sort(order.begin(), order.end());
      ns = fewest(order.size(), [&](Nest& n, size_t k) {
        n.all_fns_at_use = true;
        for (size_t i = 0; i < k; ++i) n.consts_at_use.insert(order[i].second);
      });
    }
    std::vector<const Node*> loops;
    if (need(top, ns) > size_t(o_.registers)) {
      // Unroll the outer loop, nest the inner ones.
      const size_t entry = entry_of(top);
      for (int64_t r = 0; r < top.count; ++r) {
        std::vector<Node> copy;
        for (size_t k = r == 0 ? entry : 0; k < top.body.size(); ++k)
          if (k != entry || entry == 0) copy.push_back(peel(top.body[k], r));
        seq(copy);
      }
      return;
    }
    enter_kernel(first_kernel(top));
    ns.free.assign(size_t(o_.registers) + 1, true);
    ns.free[0] = false;
    ns.written.assign(size_t(o_.registers) + 1, false);
    ns.held.assign(size_t(o_.registers) + 1, {0, 0});
    emit_loop(top, ns, loops);
    // The registers the nest wrote no longer hold what the cache says.
    for (int r = 1; r <= o_.registers; ++r)
      if (ns.written[size_t(r)]) st_.valid[r] = false;
  }
  // A free register for the nest: one the cache of constants does not use,
  // else its least recently used, so the constants outside survive the loop.
  // Among those, one that holds no value computed at use, if any.
  int take(Nest& ns) const {
    int best = -1;
    const auto rank = [&](int r) { return std::make_tuple(st_.valid[r], ns.held[size_t(r)].second != 0, st_.valid[r] ? st_.stamp[r] : 0); };
    for (int r = 1; r <= o_.registers; ++r)
      if (ns.free[size_t(r)] && (best < 0 || rank(r) < rank(best))) best = r;
    if (best < 0) throw std::logic_error("internal error: no scalar register left");
    ns.free[size_t(best)] = false;
    ns.held[size_t(best)] = {0, 0};
    ns.written[size_t(best)] = true;
    return best;
  }
  void emit_loop(const Node& l, Nest& ns, std::vector<const Node*>& loops) {
    const size_t id = size_t(ns.id.at(&l));
    std::vector<int> mine;
    for (uint64_t c : ns.consts[id]) {
      const int r = take(ns);
      mine.push_back(r), ns.const_reg[c] = r;
      load(r, c);
    }
    std::map<int, int> sign;  // a toggling function's register -> the register of its next step
    for (const Fn& f : ns.fns[id]) {
      const int r = take(ns);
      mine.push_back(r), ns.fn_reg[f] = r;
      Fn outer{f.first, {f.second.begin(), f.second.end() - 1}};
      if (outer.second.empty()) load(r, f.first);
      else put(isa::build::ADDI(r, ns.fn_reg.at(outer), 0));
      if (const int64_t st = f.second.back().second; toggles(st)) {
        const int d = take(ns);
        mine.push_back(d), sign[r] = d;
        load(d, uint64_t(st - kToggle));
      }
    }
    const int rc = take(ns);
    mine.push_back(rc);
    put(isa::build::LI(rc, l.count));
    ++code_.loops;
    const size_t entry = entry_of(l), jump = pc();
    if (entry > 0) put(isa::build::JMP(0));  // to the entry, below
    const size_t top = pc();
    ns.forget();
    loops.push_back(&l);
    for (size_t k = 0; k < l.body.size(); ++k) {
      const Node& b = l.body[k];
      if (k == entry && entry > 0) {
        code_.code[jump] = isa::build::JMP(int64_t(pc()) - int64_t(jump));
        ns.forget();
      } else if (b.insn >= 0) {
        leaf(b, &ns, loops);
      } else {
        emit_loop(b, ns, loops);
      }
    }
    loops.pop_back();
    for (const Fn& f : ns.fns[id]) {
      const int r = ns.fn_reg.at(f);
      if (const auto d = sign.find(r); d != sign.end()) {
        put(isa::build::ADD(r, r, d->second));
        put(isa::build::SUB(d->second, 0, d->second));
      } else {
        put(isa::build::ADDI(r, r, f.second.back().second));
      }
    }
    put(isa::build::LOOP(rc, int64_t(top) - int64_t(pc())));
    ns.forget();
    for (uint64_t c : ns.consts[id]) ns.const_reg.erase(c);
    for (const Fn& f : ns.fns[id]) ns.fn_reg.erase(f);
    for (int r : mine) ns.free[size_t(r)] = true;
  }
  // Where loop l's first trip starts in its body (Scheduled::entry); 0:
  // at the top.
  size_t entry_of(const Node& l) const {
    for (size_t k = 0; k < l.body.size(); ++k)
      if (l.body[k].insn >= 0 && prog_[size_t(l.body[k].insn)].entry) return k;
    return 0;
  }
  int first_kernel(const Node& n) const {
    if (n.insn >= 0) return prog_[size_t(n.insn)].unit < 0 ? kNoKernel : prog_[size_t(n.insn)].kernel;
    for (const Node& b : n.body)
      if (int k = first_kernel(b); k != kNoKernel) return k;
    return kNoKernel;
  }
  // Node n in iteration r of its outermost enclosing loop.
  static Node peel(const Node& n, int64_t r) {
    Node c;
    c.insn = n.insn;
    c.count = n.count;
    c.vals = n.vals;
    c.steps = n.steps;
    for (size_t v = 0; v < c.steps.size(); ++v) {
      c.vals[v] += uint64_t(after_trips(c.steps[v].back(), r));
      c.steps[v].pop_back();
    }
    for (const Node& b : n.body) c.body.push_back(peel(b, r));
    return c;
  }

  const std::vector<Scheduled>& prog_;
  const LoopOptions& o_;
  LoopCode code_;
  static constexpr int kNoKernel = std::numeric_limits<int>::min();
  WriterState& st_;  // the cache of constants outside loops, the last .in_kernel written
};

}  // namespace

void load_constant(std::vector<isa::Instruction>& code, int r, uint64_t v) {
  code.push_back(isa::build::LI(r, int32_t(uint32_t(v & 0xffffffffu))));
  if (v >= (uint64_t(1) << 31)) code.push_back(isa::build::LIH(r, int32_t(uint32_t(v >> 32))));
}

LoopCode write_loops(const std::vector<Scheduled>& prog, const LoopOptions& opt, WriterState& state) {
  Writer w(prog, opt, state);
  if (opt.enabled) {
    auto tree = Reroller(prog, opt).run();
    w.seq(tree);
  } else {
    std::vector<Node> flat(prog.size());
    for (size_t i = 0; i < prog.size(); ++i) flat[i].insn = int(i), flat[i].vals = prog[i].vals, flat[i].steps.resize(prog[i].vals.size());
    w.seq(flat);
  }
  return w.done();
}

}  // namespace tpu::compiler
