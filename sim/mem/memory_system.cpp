#include "memory_system.h"

#include <algorithm>
#include <deque>

#include "dram.h"
#include "dram_checker.h"
#include "dram_stats.h"

namespace tpu::sim {

namespace {

using u128 = unsigned __int128;

// ceil(n / d), in 64 bits when n fits (a 128-bit division is a slow call).
uint64_t div_ceil(u128 n, uint64_t d) {
  if (n >> 64 == 0) {
    const uint64_t n64 = uint64_t(n);
    return n64 / d + (n64 % d != 0);
  }
  return uint64_t((n + d - 1) / d);
}

class IdealTiming : public HbmTiming {
 public:
  explicit IdealTiming(const MachineConfig& cfg)
      : latency_((uint64_t(cfg.hbm.ideal.latency_ns) * cfg.clock_hz + 999999999) / 1000000000) {}
  void request(int, uint64_t now, HbmBurst* b) override {
    b->done_cycle = now + std::max<uint64_t>(latency_, 1);
    known(b);
  }

 private:
  uint64_t latency_;
};

// A burst of S bytes requested in cycle t starts when the server is free (no
// earlier than t), occupies it for S / B cycles (B in 1/1024-byte fixed
// point, so the arithmetic is exact), and is done `latency` cycles after it
// leaves the server, rounded up to a whole cycle.
class SimpleTiming : public HbmTiming {
 public:
  explicit SimpleTiming(const MachineConfig& cfg) : bw_fp_(cfg.hbm_bytes_per_cycle_fp()), latency_(cfg.hbm_latency_cycles()) {}
  void request(int, uint64_t now, HbmBurst* b) override {
    const u128 start = std::max(u128(now) * bw_fp_, free_fp_);
    free_fp_ = start + u128(b->bytes) * 1024;
    b->done_cycle = uint64_t((free_fp_ + bw_fp_ - 1) / bw_fp_) + latency_;
    known(b);
  }

 private:
  uint64_t bw_fp_, latency_;
  u128 free_fp_ = 0;  // the server is free from this time, in cycles * bw_fp_
};

// The interconnect and the DRAM. A burst becomes requests of the device's
// size; each crosses the crossbar (hop_latency, the core port's bandwidth,
// a credit of the channel's input buffer), enters its channel's controller
// at most one a memory cycle, and its data (or a write's acknowledgement)
// crosses back. The burst is done when its last request is.
class DetailedTiming : public HbmTiming {
 public:
  DetailedTiming(const MachineConfig& cfg, bool check)
      : cfg_(cfg), p_(cfg.hbm.detailed), dram_(p_), checker_(p_), check_(check), req_bytes_(p_.request_bytes()) {
    if (check) dram_.set_listener(&checker_);
    const size_t cores = cfg.target.cores;
    to_send_.assign(cores, std::vector<std::deque<Send>>(p_.channels));
    waiting_.assign(cores, 0);
    next_channel_.assign(cores, 0);
    links_.resize(cores);
    return_free_.assign(cores, 0);
    inbox_.resize(p_.channels);
  }

  void request(int requester, uint64_t now, HbmBurst* b) override {
    const uint64_t first = b->hbm_addr / req_bytes_, last = (b->hbm_addr + std::max<uint32_t>(b->bytes, 1) - 1) / req_bytes_;
    const uint32_t slot = alloc(bursts_, free_bursts_);
    bursts_[slot] = {b, uint32_t(last - first + 1), now + 1};
    for (uint64_t r = first; r <= last; ++r) {
      const uint32_t id = alloc(pieces_, free_pieces_);
      pieces_[id] = {slot, r * req_bytes_, b->write, requester};
      to_send_[size_t(requester)][dram_.channel_of(r * req_bytes_)].push_back({id, now + cfg_.noc.hop_latency});
      ++waiting_[size_t(requester)], ++sending_;
    }
  }

  void end_cycle(uint64_t now) override {
    // The device's cycles that start before the next core edge run now.
    const u128 edge = u128(now + 1) * 1000000000000ull;
    // Nothing to send, nothing waiting to enter a channel and the device's
    // next event past the edge: nothing to do but turn the crossbar's
    // priority.
    if (sending_ == 0 && !inbox_ready_ && edge <= quiet_from_) {
      rotate_ = rotate_ + 1 >= to_send_.size() ? 0 : rotate_ + 1;
      return;
    }
    cross(now);
    for (;;) {
      // An inbox's request enters when its channel has room, which only a
      // controller's tick makes: while none can, the next tick is next.
      const uint64_t m = inbox_ready_ ? mem_cycle_ : dram_.next_event(mem_cycle_);
      const u128 at = u128(m) * p_.tck_ps * cfg_.clock_hz;
      if (at >= edge) {
        quiet_from_ = at;
        break;
      }
      for (uint32_t c = 0; c < inbox_.size() && inbox_ready_; ++c) {
        auto& in = inbox_[c];
        if (in.empty()) continue;
        const Piece& pc = pieces_[in.front()];
        if (!dram_.channel(c).will_accept(pc.write)) continue;
        dram_.add(in.front(), pc.addr, pc.write, m);
        in.pop_front();
        --inboxed_;
      }
      done_.clear();
      dram_.tick(m, done_);
      for (const dram::Completion& c : done_) finish(c);
      inbox_ready_ = false;
      for (uint32_t c = 0; c < inbox_.size() && inboxed_ > 0 && !inbox_ready_; ++c)
        inbox_ready_ = !inbox_[c].empty() && dram_.channel(c).will_accept(pieces_[inbox_[c].front()].write);
      mem_cycle_ = m + 1;
      if (checker_.violation()) break;
    }
  }

  const dram::Dram* dram() const override { return &dram_; }
  uint64_t memory_cycle() const override { return mem_cycle_; }
  std::optional<std::string> violation() const override { return checker_.violation(); }

  void add_stats(nlohmann::json& hbm, nlohmann::json& noc, uint64_t cycles) const override {
    const uint64_t mem_cycles = uint64_t(u128(cycles) * 1000000000000ull / (u128(p_.tck_ps) * cfg_.clock_hz));
    nlohmann::json d = dram::stats_json(dram_, mem_cycles);
    // The DMA's bytes keep their names; the device's (whole requests) are device_*.
    auto rename = [](nlohmann::json& j) {
      for (const char* k : {"bytes_read", "bytes_written", "bandwidth_bytes_per_s"}) {
        j[std::string("device_") + k] = j[k];
        j.erase(k);
      }
    };
    rename(d);
    for (auto& ch : d["channels"]) rename(ch);
    for (auto& [k, v] : d.items()) hbm[k] = v;
    hbm["memory_cycles"] = mem_cycles;
    hbm["device"] = p_.preset;
    hbm["checker"] = !check_ ? "off" : checker_.violation() ? "violation" : "passed";
    nlohmann::json links = nlohmann::json::array();
    const double cap = double(cycles) * cfg_.noc.link_bytes_per_cycle;
    for (size_t k = 0; k < links_.size(); ++k)
      links.push_back({{"core", k},
                       {"bytes_to_memory", links_[k].to_memory},
                       {"bytes_from_memory", links_[k].from_memory},
                       {"utilization_to_memory", cap > 0 ? double(links_[k].to_memory) / cap : 0.0},
                       {"utilization_from_memory", cap > 0 ? double(links_[k].from_memory) / cap : 0.0},
                       {"stall_cycles", links_[k].stall_cycles}});
    noc = {{"link_bytes_per_cycle", cfg_.noc.link_bytes_per_cycle}, {"links", links}};
  }

 private:
  struct Piece {
    uint32_t burst;
    uint64_t addr;
    bool write;
    int core;
  };
  struct BurstState {
    HbmBurst* burst = nullptr;
    uint32_t remaining = 0;
    uint64_t done = 0;
  };
  struct Send {
    uint32_t piece;
    uint64_t ready;  // the core cycle it reaches the crossbar
  };
  struct Link {
    uint64_t to_memory = 0, from_memory = 0, stall_cycles = 0;
  };

  // A slot of `pool`: a freed one, else a new one.
  template <typename T>
  static uint32_t alloc(std::vector<T>& pool, std::vector<uint32_t>& free) {
    if (free.empty()) {
      pool.emplace_back();
      return uint32_t(pool.size() - 1);
    }
    const uint32_t id = free.back();
    free.pop_back();
    return id;
  }

  // The crossbar: each core's port moves up to link_bytes_per_cycle of
  // requests a cycle. A port keeps a queue per channel (virtual output
  // queues: a full channel does not hold back the others); it serves its
  // channels round robin, one request each a pass, while they have credits.
  // Ports take turns being first.
  void cross(uint64_t now) {
    const size_t n = to_send_.size(), channels = inbox_.size();
    for (size_t i = 0; i < n; ++i) {
      const size_t k = rotate_ + i < n ? rotate_ + i : rotate_ + i - n;
      if (waiting_[k] == 0) continue;
      uint64_t budget = cfg_.noc.link_bytes_per_cycle;
      bool moved = true, stalled = false;
      while (moved && budget > 0) {
        moved = false;
        for (size_t j = 0, ch = next_channel_[k]; j < channels && budget > 0; ++j, ch = ch + 1 == channels ? 0 : ch + 1) {
          auto& q = to_send_[k][ch];
          if (q.empty() || q.front().ready > now) continue;
          if (inbox_[ch].size() >= cfg_.noc.credits) {
            stalled = true;
            continue;
          }
          const Piece& pc = pieces_[q.front().piece];
          budget -= std::min<uint64_t>(budget, req_bytes_);  // a request wider than the port takes a whole cycle
          if (pc.write) links_[k].to_memory += req_bytes_;
          inbox_[ch].push_back(q.front().piece);
          ++inboxed_;
          inbox_ready_ = true;
          q.pop_front();
          --waiting_[k], --sending_;
          moved = true;
          next_channel_[k] = ch + 1 == channels ? 0 : ch + 1;
        }
      }
      if (stalled) ++links_[k].stall_cycles;
    }
    rotate_ = rotate_ + 1 >= n ? 0 : rotate_ + 1;
  }

  // A request the device finished at memory cycle c.cycle: its data crosses
  // back through the core's port (bandwidth, then hop_latency).
  void finish(const dram::Completion& c) {
    Piece& pc = pieces_[c.id];
    const uint64_t at = div_ceil(u128(c.cycle) * p_.tck_ps * cfg_.clock_hz, 1000000000000ull);
    uint64_t done = at + cfg_.noc.hop_latency;
    if (!pc.write) {
      const u128 bw = cfg_.noc.link_bytes_per_cycle;
      u128& free = return_free_[size_t(pc.core)];
      free = std::max(free, u128(at) * bw) + req_bytes_;
      done = div_ceil(free, uint64_t(bw)) + cfg_.noc.hop_latency;
      links_[size_t(pc.core)].from_memory += req_bytes_;
    }
    BurstState& b = bursts_[pc.burst];
    b.done = std::max(b.done, done);
    if (--b.remaining == 0) {
      b.burst->done_cycle = b.done;
      known(b.burst);
      free_bursts_.push_back(pc.burst);
    }
    free_pieces_.push_back(c.id);
  }

  const MachineConfig& cfg_;
  const isa::DramParams p_;
  dram::Dram dram_;
  dram::TimingChecker checker_;
  const bool check_;
  const uint64_t req_bytes_;
  uint64_t mem_cycle_ = 0;
  std::vector<Piece> pieces_;
  std::vector<uint32_t> free_pieces_;
  std::vector<BurstState> bursts_;
  std::vector<uint32_t> free_bursts_;
  std::vector<std::vector<std::deque<Send>>> to_send_;  // per core, per channel
  std::vector<uint64_t> waiting_;                        // per core: requests in to_send_
  uint64_t sending_ = 0;                                 // requests in to_send_
  u128 quiet_from_ = 0;  // when device cycle m of the last pass starts (cycles * ps * Hz): nothing is due before it
  std::vector<size_t> next_channel_;                     // per core: round robin
  std::vector<std::deque<uint32_t>> inbox_;
  uint64_t inboxed_ = 0;  // requests in all inboxes
  bool inbox_ready_ = false;  // an inbox's first request may enter its channel now
  std::vector<Link> links_;
  std::vector<u128> return_free_;  // per core: its return port is free from this time, in cycles * link bytes
  size_t rotate_ = 0;
  std::vector<dram::Completion> done_;
};

}  // namespace

std::unique_ptr<HbmTiming> make_hbm_timing(const MachineConfig& cfg, bool check) {
  if (cfg.hbm.model == "ideal") return std::make_unique<IdealTiming>(cfg);
  if (cfg.hbm.model == "detailed") return std::make_unique<DetailedTiming>(cfg, check);
  return std::make_unique<SimpleTiming>(cfg);
}

MemorySystem::MemorySystem(const char* name, const MachineConfig& cfg, MemoryBudget& budget, bool dram_check)
    : sc_core::sc_prim_channel(name), mem_(cfg.target.hbm_bytes, &budget), timing_(make_hbm_timing(cfg, dram_check)) {
  landed_.resize(cfg.target.cores);
  timing_->set_sink([this](HbmBurst* b) { landed_[size_t(b->requester)].push({b->done_cycle, seq_++, b}); });
}

MemorySystem::~MemorySystem() = default;

void MemorySystem::update() {
  std::stable_sort(pending_.begin(), pending_.end(), [](const Pending& a, const Pending& b) { return a.requester < b.requester; });
  for (const Pending& p : pending_) {
    timing_->request(p.requester, p.cycle, p.burst);
    (p.burst->write ? bytes_written_ : bytes_read_) += p.burst->bytes;
  }
  pending_.clear();
}

}  // namespace tpu::sim
