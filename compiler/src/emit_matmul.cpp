// Matmul kernels on every MXU of a core (emitter.h).
#include <algorithm>
#include <deque>
#include <numeric>

#include "emitter.h"

namespace tpu::compiler::backend {


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
  // Whether group g is the last of the chunk that gives MXU m an item.
  bool last_group_of_chunk(int64_t g, int m) const {
    for (int64_t h = g + 1; h < groups; ++h)
      if (uses[size_t(h)][size_t(m)].first >= 0) return false;
    return uses[size_t(g)][size_t(m)].first >= 0;
  }
  // Block `blk` of the first group: rows m0.. of A, K from k0 to k1, in
  // pieces; each piece counted on the Ca of the MXUs with an item in the block.
  void load_a(size_t blk, int64_t m0, int64_t rows, int64_t k0, int64_t k1, int64_t piece);
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
  void block(int64_t g, size_t bi);
  // Where a block of `rows` rows drains the block before it (`items` items
  // of `held_rows` rows), when at fixed K-steps: every block's code is then
  // alike and folds into loops. The scalar unit runs up to a queue's depth
  // ahead of the MXUs and keeps pace with the VPU while it pushes a drain,
  // so the drain starts at the step by which the MXU queues have taken the
  // block before (q0), and goes in parts short enough for what they hold, a
  // part every `gap` steps (a step is `rows` cycles; the drain takes about
  // a cycle per row of each item). Steps count on from the block's first
  // into the blocks after it: a drain may reach S - 2 blocks further (with
  // S accumulator slots, the block after those takes its slot), so kernels
  // of few K-steps drain at fixed steps too.
  struct Drain {
    bool fixed = false;
    int64_t q0 = 0, parts = 1, gap = 0;
  };
  Drain drain_plan(int64_t rows, int64_t items, int64_t held_rows) const {
    Drain d;
    const int64_t qsteps = int64_t(em.m_.core.queue_depth) / 3, cycles = items * held_rows, span = (S - 1) * nsteps;
    d.q0 = qsteps + 1;
    d.parts = std::max<int64_t>(1, ceil_div(cycles, std::max<int64_t>(1, qsteps - 2) * rows));
    // Parts far enough apart to refill the queues, and the K-steps between
    // them (up to six) enough to fold into a loop.
    d.gap = std::max(ceil_div(cycles, d.parts * rows) + 2, std::min<int64_t>(6, (nsteps - d.q0) / d.parts));
    // The queues must hold a few steps beyond a part, and the scalar unit
    // push a drain faster than the VPU takes it.
    d.fixed = cycles > 0 && qsteps >= 4 && em.m_.core.issue_width >= 2 && d.q0 + d.parts * d.gap <= span;
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
  // before it) and cost weight loads of their own (a handed-over step
  // reloads its weights). Where the tail is under 1/100 of the kernel's
  // MXU cycles, that does not pay: on v5e the 2048^3 and 4096x2048x2048
  // GEMMs and a 4096-token FFN layer (768 -> 3072 -> 768) run 0.1-0.4%
  // faster without it, 2048x4096x2048 0.3% slower, with 8% less code.
  bool shorten_end(int64_t rows) const { return double(rows * nmu) * 100 >= mxu_cycles(); }
  // Drains `blk`: unpinned (`at` empty) all of it; else parts first ..
  // first + at.size() - 1 of `parts`, part p pinned at at[p - first],
  // each with `part_cycles` cycles of MXU work around it to issue in.
  void drain_block(const Block& blk, const std::vector<double>& at = {}, int64_t parts = 0, int64_t first = 0, double part_cycles = 0);
  // A drain at fixed steps under way: part p goes at the kernel's K-step
  // step[p] (counted over all blocks so far; kstep0 is the current
  // block's first), `cycles` apart.
  struct Pending {
    Block blk;
    std::vector<int64_t> step;
    double cycles = 0;
    int64_t next = 0;
  };
  std::deque<Pending> pending;
  int64_t kstep0 = 0;
  // Emits the parts of pending drains that fall in the current block's
  // steps (starting at step_t), or with `all`, the rest of them unpinned.
  void drain_pending(const std::vector<double>& step_t, bool all);
  void finish();

  uint64_t acc_base(int m, int64_t slot) const { return uint64_t((m * S + slot) * Mb); }
  // A ring of `n` slots (accumulator slots, output tiles, panel slots)
  // that a loop goes round, `taken` per item of the loop (chunk, group,
  // block). A loop's iteration of p items finds it where it was after one
  // iteration, or alternating between two places (`toggles`: a value the
  // loop states as toggling). A loop inside another must find its rings
  // as it left them, so a ring it toggles comes back after every
  // iteration of the loop around it (`toggles` false there).
  struct Ring {
    int64_t n, taken;
    bool toggles;
  };
  static int64_t ring_turn(const Ring& r, int64_t p) { return r.n / std::gcd(r.n, p * r.taken); }
  // The fewest items an iteration takes for every ring to come back.
  static int64_t ring_period(const std::vector<Ring>& rings) {
    for (int64_t p = 1;; ++p) {
      bool back = true;
      for (const Ring& r : rings) back = back && ring_turn(r, p) <= (r.toggles ? 2 : 1);
      if (back) return p;
    }
  }
  // The period of a loop over n items of `cycles` MXU cycles each: every
  // ring back exactly where that leaves the loop enough trips and its
  // trips are short, else rings may toggle. A toggle costs the scalar unit
  // an add and a negation a trip, and the shorter period a back edge more:
  // on tiny 3% of a 2x41x90x81 bf16 dot (trips of 500 MXU cycles), 0.04%
  // of 512x146x1136 (10,000).
  static constexpr double kToggleTrip = 2000;
  static int64_t loop_period(std::vector<Ring> rings, int64_t n, double cycles) {
    const int64_t toggling = ring_period(rings);
    for (Ring& r : rings) r.toggles = false;
    const int64_t exact = ring_period(rings);
    return n / exact > Emitter::kMinTrips && double(toggling) * cycles < kToggleTrip ? exact : toggling;
  }
  // The rings a loop toggles: accumulator slots, output tiles, panel slots.
  struct Toggled {
    bool acc = false, out = false, panel = false, a = false;  // a: the A buffers
    Toggled operator|(const Toggled& o) const { return {acc || o.acc, out || o.out, panel || o.panel, a || o.a}; }
  };
  // One chunk of A; returns the rings its loops toggled (its loop over
  // groups and the groups' loops over blocks).
  Toggled chunk_of_a();
  // How group g goes over its blocks: n blocks, a loop (items()) or not.
  struct BlockLoop {
    int64_t n = 0, head = 0, period = 1, tail = 0;
    bool loops = false;  // else block by block
    Toggled toggles;     // the rings the loop toggles
  };
  BlockLoop block_loop(int64_t g) const;
  // Blocks go round their rings exactly (no toggles), so that the loop
  // over groups around them may toggle (chunk_of_a()).
  bool exact_blocks = false;
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
  bool whole_end = false;  // the last group's last block is like the others (cut_blocks)
  // A steady group's blocks before its loop over pairs (chunk_of_a).
  static constexpr int64_t kHeadBlocks = 2;
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
  bool credits = false;  // every ring of slots starts with a count per slot (the constructor)
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
  std::tie(m_lo, m_hi) = by_batch ? std::pair<int64_t, int64_t>{0, M} : em.share(M, M >= em.ncores_ * 8 ? 8 : 1);
  Bl = b_hi - b_lo, Ml = m_hi - m_lo;
  if (Bl == 0 || Ml == 0) return;
  Kp = ceil_div(K, D) * D, kt = Kp / D, nt = ceil_div(N, D);
  // Every MXU of the core while the semaphores last (5 for the kernel, 6
  // per MXU and one per pair, below the two barriers' semaphores) and each
  // has two accumulator slots of at least one row.
  if (p_.t.acc_rows < 2)
    throw Error(fmt::format("{}: target.acc_rows = {}: a matmul needs at least 2 accumulator rows", em.kernel_loc_, p_.t.acc_rows));
  // Fewer column tiles than MXUs: the blocks of A's rows go to the MXUs
  // in turn (assign_items()), so as many MXUs as there are work items,
  // while they outrun the VPU: an item's drain takes about a cycle a row
  // (more with an epilogue), its MXU work a cycle a row for each of K's
  // steps, so no more than K-steps times tiles MXUs.
  const int64_t sem_mxus = (Emitter::kChipSem - 5) * 2 / 13;
  const int64_t block_rows = std::max<int64_t>(4 * D, 256);  // at most, rows per work item (Mb, below)
  const int64_t items = nt * ceil_div(Ml, std::min(Ml, block_rows));
  const int64_t busy = std::min(items, nt * kt * int64_t(k.passes.size()));
  nmu = int(std::min<int64_t>({int64_t(p_.t.mxus_per_core), sem_mxus, std::max(nt, busy), int64_t(p_.t.acc_rows) / 2}));
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
  Mb = std::min<int64_t>({Ml, block_rows, int64_t(p_.t.acc_rows) / (slots_min * nmu)});  // rows per item
  // Accumulator slots per MXU: in steady blocks, two where the drain is done
  // within the next block (so the one after can take its slot, and every
  // other block's code is alike), else four (a drain reaching two blocks
  // on; a power of two, so slots come back in step with groups of blocks)
  // or three; elsewhere up to four, so the MXUs run ahead of a slower drain.
  const int64_t fit = int64_t(p_.t.acc_rows) / (nmu * Mb);
  for (int64_t s : {2, 4, 3})
    if (!steady && s <= fit) S = s, steady = steady_kernel();
  if (!steady) S = std::max<int64_t>(slots_min, std::min<int64_t>(4, fit));
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
  // loop), else they take `ahead` slots in turn, four rather than three
  // where four fit (a loop over groups, or over chunks of A that each take
  // a number of groups, then comes back to the same slot within a short
  // period). Wide rows make long DMA bursts.
  pw_elems = nmu * D;
  panel_bytes = uint64_t(Kp * pw_elems * esz);
  const auto fits = [&](int64_t n) { return panel_bytes * uint64_t(n * nw) <= p_.t.vmem_bytes / 4; };
  ahead = !steady && fits(3) ? 3 : 2;
  nslots = fits(groups) ? int(std::max<int64_t>(ahead, groups)) : ahead == 3 && fits(4) ? 4 : ahead;
  // Chunks of A (several batches, say) each load their groups' panels in
  // turn, so a loop over chunks comes back to the same panel slots after
  // nslots / gcd(nslots, groups) chunks, and to the same accumulator slots
  // after S at most (run()): where there are several batches, of the slot
  // counts that fit, up to one group more, the one that makes the two
  // come back soonest (two groups, four accumulator slots: with three
  // panel slots after 12 chunks, with four after 4).
  const auto chunk_period = [&](int64_t n) { return std::lcm(ring_turn({n, groups, false}, 1), S); };
  if (fits(groups) && Bl >= 4)
    for (int64_t n = nslots + 1; n <= nslots + groups && fits(n); ++n)
      if (chunk_period(n) < chunk_period(nslots)) nslots = int(n);
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
  // Where the kernel goes round its A buffers, every ring of slots it
  // takes in turn starts with a count (a credit) per slot: A buffers on
  // Afree, output slots on `st` (-1: take one), weight-panel slots on
  // Pfree, accumulator slots on AccFree. The first uses then wait for their
  // slot as every later one does, so the second chunk is like those after
  // it (run()) and the first chunk's loop over groups takes its second
  // group as every later chunk's does. (In a kernel of one chunk, the loop
  // it would let form costs a scalar unit that issues one instruction a
  // cycle more than it saves.) Steady blocks always take output slots so.
  credits = Bl * chunks_per_batch > abufs;
  if (steady || credits) {
    em.signal(kSc, st, 2 * nmu);
    for (auto& s : slot_store) s.assign(2, -1);
  }
  for (int m = 0; m < nmu && credits; ++m) {
    em.signal(kSc, Pfree[size_t(m)], nslots);
    for (int slot = 0; slot < nslots; ++slot) slot_release[size_t(slot)][size_t(m)] = slot + 1;
  }
  for (int m = 0; m < nmu && credits; ++m) em.signal(kSc, AccFree[size_t(m)], S);
  for (int m = 0; m < nmu && credits; ++m) em.signal(kSc, Afree[size_t(m)], abufs);
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
void MatmulEmitter::drain_block(const Block& blk, const std::vector<double>& at, int64_t parts, int64_t first, double part_cycles) {
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
  // Row group g (rows r .. r + U0) of item ii, pipelined across the banks
  // (pipe.last: its instructions).
  auto rows_of = [&](Pipeliner& pipe, size_t ii, int64_t r, int64_t g) {
    const int U = int(std::min<int64_t>(U0, rows - r));
    if (banks == 2) return pipe.group([&] { gen(ii, r, U, int(g % banks)); });
    pipe.last.clear();
    em.capture_ = &pipe.last;
    gen(ii, r, U, 0);
    em.capture_ = nullptr;
    for (const isa::Instruction& i : pipe.last) ins(i);
  };
  // Rows r0 .. r1 of every item, a step of U0 rows of each at a time:
  // the first step (its instructions tell what a step costs), then, in a
  // part pinned among the MXU work (drain_pending), a loop whose trips
  // take enough steps for the scalar unit to issue the part in its share
  // of the MXU work around it (Emitter::trip_items; an even number where
  // the banks alternate from step to step, and whole rows of a column
  // leaf, whose offsets then step by a constant), after those that fill
  // the VPU's queue, then those left (and a short last step). Unpinned
  // rows are written out: a loop goes as one in the program, ahead of the
  // other units' work the straight code interleaves with its rows.
  auto row_steps = [&](Pipeliner& pipe, int64_t r0, int64_t r1) {
    const int64_t n = ceil_div(r1 - r0, U0), ni = int64_t(items.size());
    std::vector<isa::Instruction> first;
    auto step = [&](int64_t s) {
      for (int64_t x = 0; x < ni; ++x) {
        rows_of(pipe, size_t(x), r0 + s * U0, s * ni + x);
        if (s == 0) first.insert(first.end(), pipe.last.begin(), pipe.last.end());
      }
    };
    step(0);
    if (first.empty()) return;
    const double has = std::max(em.vpu_cycles(first), part_cycles / double(n));
    int64_t per = em.trip_items(double(first.size()), has, int(2 + extras.size()));
    if (banks == 2 && ni % 2 != 0) per += per % 2;
    for (const Node& nd : k.expr.nodes)
      if (nd.leaf == Leaf::col) per = std::lcm(per, int64_t(nd.value) / std::gcd(int64_t(nd.value), U0 * N));
    const int64_t lead = int64_t(em.m_.core.queue_depth) / int64_t(first.size());
    if (per > 0 && em.pin_ >= 0) em.items(n - 1, lead, per, (r1 - r0) % U0 != 0, [&](int64_t s) { step(s + 1); });
    else for (int64_t s = 1; s < n; ++s) step(s);
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
    Pipeliner pipe{em, {}, {}};
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
  // A part pinned at -1 goes where the estimates fall.
  if (first == 0)
    for (size_t ii = 0; ii < items.size() && !extras.empty(); ++ii) inputs(ii);
  double ready = 0;
  auto after = [&](const Counter& c, int64_t total) {
    if (total > 0) ready = std::max(ready, c.when.at(size_t(total - 1)));
  };
  for (size_t ii = 0; ii < items.size() && first == 0; ++ii) {
    const Item& it = items[ii];
    after(E, eready[ii]);
    after(st, std::max<int64_t>(0, slot_store[size_t(it.m)][size_t(it.idx % 2)]));
    for (const auto& [mu, total] : acc_marks[size_t(it.m)].at(size_t(it.idx))) after(Acc[size_t(mu)], total);
  }
  if (!hoisted) after(pre, preloads);
  const int64_t per = ceil_div(ceil_div(rows, U0), parts) * U0;
  for (int64_t p = first; p < first + int64_t(at.size()); ++p) {
    const double t = at[size_t(p - first)];
    em.pin_ = t < 0 ? -1 : std::max(ready, t);
    if (p == 0)
      for (size_t ii = 0; ii < items.size(); ++ii) {
        before(ii);
        for (const auto& [mu, total] : acc_marks[items[ii].m].at(size_t(items[ii].idx))) wait(kVpu, Acc[size_t(mu)], total);
      }
    Pipeliner pipe{em, {}, {}};
    if (p * per < rows) row_steps(pipe, p * per, std::min(rows, (p + 1) * per));
    pipe.flush();
    if (p + 1 == parts) {
      for (size_t ii = 0; ii < items.size(); ++ii) done(ii);
      for (size_t ii = 0; ii < items.size(); ++ii) store(ii);  // right after the drain
    }
  }
  em.pin_ = -1;
}

void MatmulEmitter::run() {
  if (Bl == 0 || Ml == 0) return;
  // Chunk i of A: batch b_lo + i / chunks_per_batch, its rows from there.
  // The first (it loads the first weights), a loop over the next in
  // periods (below), the last one (perhaps short).
  const int64_t chunks = Bl * chunks_per_batch;
  Toggled last;  // what the last chunk's loops toggled
  const auto chunk_at = [&](int64_t i) {
    b = b_lo + i / chunks_per_batch, c0 = m_lo + i % chunks_per_batch * chunk, chunk_no = i;
    last = chunk_of_a();
  };
  // Without credits (the constructor) the second chunk, the first to wait
  // for an A buffer, differs from those after it.
  const int64_t lead = std::min<int64_t>(credits ? 1 : 2, chunks);
  for (int64_t c = 0; c < lead; ++c) chunk_at(c);
  const Toggled full = last;  // a whole chunk's (the lead's)
  // A period of chunks returns to the same panel slots (a chunk loads
  // `groups` panels into the slots in turn: with more slots than groups,
  // the next chunk's start where this one's end), accumulator slots and
  // output tiles (taken as if a chunk gave MXU m items_on[m] items, what
  // the chunks before the loop gave it: too short a period only fails
  // repeat()'s check), or toggles between two places (the two A buffers;
  // panels, slots or tiles taken two at a time).
  const Ring pan{nslots, groups, !full.panel}, abuf{abufs, 1, true};
  std::vector<Ring> accs, outs;
  for (int64_t given : items_on) accs.push_back({S, given, !full.acc}), outs.push_back({2, given, !full.out});
  std::vector<Ring> rings = {pan, abuf};
  rings.insert(rings.end(), accs.begin(), accs.end());
  rings.insert(rings.end(), outs.begin(), outs.end());
  const int64_t period = ring_period(rings);
  // Where a batch's last chunk is short, each batch's chunks loop up to it
  // (chunks from `from`, up to the batch's end).
  const int64_t per = Ml % chunk != 0 ? chunks_per_batch : chunks;
  const auto batch = [&](int64_t first) {
    const int64_t from = std::max(first, lead), n = std::max<int64_t>(0, first + per - from);
    em.items(n, 0, period, 1, [&](int64_t i) { chunk_at(from + i); });
  };
  batch(0);
  if (per < chunks) {
    // The batches after the first are alike (each follows a short chunk):
    // a loop over them but the last (it ends the kernel), whose rings
    // come back as the chunks' do, taken a batch at a time.
    const bool loops = (per - 1) / period >= Emitter::kMinTrips;
    const auto toggles = [&](const std::vector<Ring>& rs) {
      return loops && std::any_of(rs.begin(), rs.end(), [&](const Ring& r) { return ring_turn(r, period) == 2; });
    };
    const Toggled inner = full | last | Toggled{toggles(accs), toggles(outs), toggles({pan}), toggles({abuf})};
    std::vector<Ring> batch_rings = {{nslots, groups * per, !inner.panel}, {abufs, per, !inner.a}};
    for (int64_t given : items_on) batch_rings.push_back({S, given, !inner.acc}), batch_rings.push_back({2, given, !inner.out});
    em.items(Bl - 1, 0, loop_period(batch_rings, Bl - 2, double(Ml * groups * nsteps)), 1, [&](int64_t i) { batch((i + 1) * per); });
  }
  finish();
}

void MatmulEmitter::finish() {
  drain_pending({}, true);
  if (held) drain_block(*held);
  em.drain({&pre, &z, &v, &st, &E}, nmu);
  for (int m = 0; m < nmu; ++m)
    for (Counter* c : {&Ca[m], &Afree[m], &P[m], &Pfree[m], &Acc[m], &AccFree[m]}) wait(kSc, *c, c->produced);
  for (Counter& c : H) wait(kSc, c, c.produced);
}

// One chunk of A's rows (batch b, rows c0..): its blocks, the order its
// data arrives in, and every block's MXU work.
MatmulEmitter::Toggled MatmulEmitter::chunk_of_a() {
  crows = std::min(chunk, m_hi - c0);
  as = int(chunk_no % abufs);
  note(fmt::format("A: batch {}, rows {}..{}", b, c0, c0 + crows - 1), kDma);
  for (int m = 0; m < nmu; ++m) wait(kDma, Afree[m], chunk_no - abufs + 1 + (credits ? abufs : 0));  // every MXU is done with this buffer
  cut_blocks();
  assign_items();
  // A slice arrives in pieces of `piece` rows, each counted once on Ca
  // (the first block's in pieces of kPiece rows, below).
  kPiece = 2 * std::max<int64_t>(D, 128);
  kq = ceil_div(kt, 8);
  gslot.assign(size_t(groups), 0);
  pready.assign(size_t(groups), std::vector<std::vector<int64_t>>(size_t(nmu), std::vector<int64_t>(size_t(KSW), 0)));
  load_first_block();
  // The first group (it loads A and the next groups' weights), a loop over
  // the groups whose code is alike (their weights load `ahead` - 1 groups
  // ahead), and the last `ahead` - 1 (nothing left to load ahead; the last
  // also ends with its own blocks).
  auto group = [&](int64_t g) {
    const BlockLoop bl = block_loop(g);
    if (bl.loops) em.items(bl.n, bl.head, bl.period, bl.tail, [&](int64_t bi) { block(g, size_t(bi)); });
    else for (int64_t bi = 0; bi < bl.n; ++bi) block(g, size_t(bi));
    // An MXU done with the chunk frees its A buffer after the group (its
    // queue takes the signal after its last stream), so no block differs
    // by it from the blocks before.
    for (int m = 0; m < nmu; ++m)
      if (last_group_of_chunk(g, m)) signal_mxu(m, Afree[m], -1);
  };
  // A period of groups returns to (or toggles between two) accumulator
  // slots, output tiles and panel slots: each MXU takes a group's blocks as
  // items, S accumulator slots and 2 tiles in turn; a group takes the next
  // of the panel slots unless every group has its own.
  const int64_t nb = int64_t(blocks.size());
  // Where the blocks' toggles leave too few groups for a loop, the blocks
  // go round exactly if that writes fewer blocks (groups written times
  // blocks written a group).
  Toggled inner;
  Ring acc{}, out{}, pan{};
  int64_t period = 0, written = 0;
  bool loops = false;
  const auto plan = [&](bool exact) {
    exact_blocks = exact;
    const BlockLoop bl = block_loop(std::min<int64_t>(1, groups - 1));  // a group's in the loop
    inner = bl.toggles;
    acc = {S, nb, !inner.acc}, out = {2, nb, !inner.out}, pan = {nslots >= groups ? 1 : nslots, 1, true};
    period = loop_period({acc, out, pan}, groups - ahead, double(crows * nsteps));
    loops = (groups - ahead) / period >= Emitter::kMinTrips;
    const auto items_written = [](int64_t n, int64_t head, int64_t per, int64_t tail, bool loop) {
      const int64_t left = std::max<int64_t>(0, n - head - tail);
      return loop && left / per >= Emitter::kMinTrips ? n - left + per + left % per : n;
    };
    written = items_written(groups, 1, period, ahead - 1, loops) * items_written(bl.n, bl.head, bl.period, bl.tail, bl.loops);
  };
  plan(false);
  if (!loops && (inner.acc || inner.out)) {
    const int64_t toggling = written;
    plan(true);
    if (written >= toggling) plan(false);
  }
  em.items(groups, 1, period, ahead - 1, group);
  return inner | Toggled{loops && ring_turn(acc, period) == 2, loops && ring_turn(out, period) == 2, loops && ring_turn(pan, period) == 2};
}

// How group g goes over its blocks (chunk_of_a()). Blocks at the group's
// end that differ from those before follow the loop: in the last group
// its own end (blocks_end: halved and staggered blocks); in the first,
// the block that loads the next groups' weights, and where a block of
// other rows ends the group, the block before it (it loads that block's
// A). Steady blocks: the first two (the first drains what the group
// before left, the second has no drain of two blocks back), then a loop
// over pairs of blocks (output tiles come back after two, accumulator
// slots after two or toggle from pair to pair; with exact_blocks, over as
// many blocks as bring both back). Other blocks: the first
// (it loads the next group's weights or, in the first group, A piece by
// piece), a loop over those alike, then the end: each MXU's last use of
// the panel, in the first group also the block that loads the last
// block's A, in the last the staggered end, and in any group every block
// from where the rows change. Blocks loop where each gives the same MXUs
// an item each (in a last group of fewer tiles than MXUs they take turns).
MatmulEmitter::BlockLoop MatmulEmitter::block_loop(int64_t g) const {
  const auto& gblocks = g > 0 && g == groups - 1 ? blocks_end : blocks;
  BlockLoop bl;
  bl.n = int64_t(gblocks.size());
  const auto other = std::find_if(gblocks.begin(), gblocks.end(), [&](const auto& x) { return x.second != gblocks[0].second; });
  const int64_t changed = gblocks.end() - other;  // blocks from where the rows change
  if (steady) {
    bl.head = kHeadBlocks, bl.period = exact_blocks ? ring_period({{S, 1, false}, {2, 1, false}}) : 2;
    bl.tail = gblocks.end() - std::mismatch(gblocks.begin(), gblocks.end(), blocks.begin(), blocks.end()).first;
    if (g == 0) bl.tail = std::max<int64_t>({bl.tail, changed + 1, 1});
  } else {
    bl.head = 1, bl.tail = std::max<int64_t>({g == 0 || g == groups - 1 ? 2 : 1, changed + (g == 0 ? 1 : 0)});
    bl.period = loop_period({{S, 1, !exact_blocks}, {2, 1, !exact_blocks}}, bl.n - bl.head - bl.tail, double(gblocks[0].second * nsteps));
    for (int64_t bi = 1; bi < bl.n; ++bi)
      if (assign[size_t(g)][size_t(bi)] != assign[size_t(g)][0]) return bl;
    // A loop's steps and back edge cost the scalar unit what the MXUs do
    // not hide where it issues a block's drain and streams (about an
    // instruction per epilogue node and row of each item, four per K-step)
    // in more than kLoopPace of the MXUs' time for the block: the blocks
    // of a short K on tiny (f32 2225x10x105: 16% slower as a loop).
    const double items = double(assign[size_t(g)][0].size()), rows = double(gblocks[0].second);
    const double issue = items * (rows * double(k.expr.nodes.size() + 1) + 4 * double(nsteps)) / em.m_.core.issue_width;
    if (issue > Emitter::kLoopPace * double(nsteps) * rows) return bl;
  }
  bl.loops = true;
  const bool trips = (bl.n - bl.head - bl.tail) / bl.period >= Emitter::kMinTrips;
  bl.toggles = {trips && ring_turn({S, 1, true}, bl.period) == 2, trips && ring_turn({2, 1, true}, bl.period) == 2, false};
  return bl;
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
  // Halves are not alike, so in the last group of steady blocks they are
  // left out where the group would then have too few alike pairs for a
  // loop (chunk_of_a): such a group ends with a whole block, and takes no
  // other measure to shorten the end either (whole_end).
  const auto pair_trips = [](size_t n, size_t tail) { return (int64_t(n) - kHeadBlocks - int64_t(tail)) / 2; };
  whole_end = steady && groups > 1 && pair_trips(blocks.size(), 0) >= Emitter::kMinTrips && pair_trips(blocks.size() + 1, 2) < Emitter::kMinTrips;
  if (blocks_end.back().second >= 4 * D && !whole_end) {
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
  if (!whole_end && groups > 1 && blocks_end.size() >= 2 && blocks_end.end()[-2].second >= 4 * D && blocks_end.back().second >= 2 * D) {
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

void MatmulEmitter::load_a(size_t blk, int64_t m0, int64_t rows, int64_t k0, int64_t k1, int64_t piece) {
  for (int64_t r = 0; r < rows; r += piece) {
    for (int64_t a = 0; a < na; ++a)
      dma_2d(true, abuf[as][a] + uint64_t(((m0 + r - c0) * Kp + k0) * esz),
             p_.addr[aparts[a]] + uint64_t(((b * M + m0 + r) * K + k0) * esz), uint64_t(std::min(piece, rows - r)),
             uint64_t((k1 - k0) * esz), uint64_t(Kp * esz), uint64_t(K * esz), pre);
    for (const auto& [m, j] : assign[0].at(blk)) dma_fence(Ca[m]);
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
    load_a(0, c0, blocks[0].second, slice_k0(sl), slice_k0(sl + 1), kPiece);
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
      load_a(bi + 1, blocks[bi + 1].first, blocks[bi + 1].second, k * D, std::min(K, (k + kq) * D), blocks[bi + 1].second);
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
      !whole_end && shorten_end(gblocks.back().second))
    for (int64_t i = 0; i < n_it / 2; ++i) moved[size_t(i)] = std::min(n_it / 2 - i, nsteps - 1);
  // The panel column of a tile.
  auto pcol = [&](const Item& it) { return (it.j - g * nmu) * D; };
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
      if (first) wait(mu, AccFree[m], it.idx - S + 1 + (credits ? S : 0));
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
        const bool final_items = b == b_hi - 1 && last_block && g == groups - 1 && c0 + crows >= m_hi && !whole_end && shorten_end(rows);
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
  // The VPU drains the previous block while the MXUs work on this one: in
  // steady kernels at fixed K-steps (drain_plan), which may reach into the
  // blocks after it.
  drain_pending(step_t, false);
  if (held) {
    const Drain d = drain_plan(rows, int64_t(held->items.size()), held->rows);
    bool fixed = steady && d.fixed;
    for (size_t i = 0; fixed && i < held->items.size(); ++i)  // no item drained chunk by chunk
      fixed = chunk_rows[size_t(held->items[i].m)].at(size_t(held->items[i].idx)) == held->rows;
    if (fixed) {
      Pending pd{*held, {}, double(d.gap * rows), 0};
      for (int64_t p = 0; p < d.parts; ++p) pd.step.push_back(kstep0 + d.q0 + p * d.gap);
      pending.push_back(std::move(pd));
      drain_pending(step_t, false);
    } else {
      drain_pending({}, true);
      drain_block(*held);
    }
  }
  held = Block{b, m0, rows, as, items};
  kstep0 += nsteps;
}

void MatmulEmitter::drain_pending(const std::vector<double>& step_t, bool all) {
  for (Pending& pd : pending) {
    const int64_t parts = int64_t(pd.step.size());
    std::vector<double> at;
    for (int64_t p = pd.next; p < parts && (all || pd.step[size_t(p)] < kstep0 + nsteps); ++p)
      // (a part whose step has passed waited for the drain before it to finish: at this block's first step)
      at.push_back(all ? -1.0 : step_t[size_t(std::max<int64_t>(0, pd.step[size_t(p)] - kstep0))]);
    if (at.empty()) break;  // the VPU takes the drains in order
    drain_block(pd.blk, at, parts, pd.next, pd.cycles);
    pd.next += int64_t(at.size());
  }
  while (!pending.empty() && pending.front().next == int64_t(pending.front().step.size())) pending.pop_front();
}

void Emitter::matmul(const Kernel& k) { MatmulEmitter(*this, k).run(); }


}  // namespace tpu::compiler::backend
