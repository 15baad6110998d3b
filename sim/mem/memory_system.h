// A chip's HBM: the backing store (its contents) and a timing model chosen by
// hbm.model, behind one port the DMA engines send bursts to. The timing
// models (docs/memory.md):
//   ideal     every burst returns hbm.ideal.latency_ns after it is sent;
//   simple    one FIFO server with a bandwidth and a latency;
//   detailed  the on-chip interconnect (noc) in front of the DRAM model of
//             dram.h, in the device's own clock domain.
// Requests of one cycle reach the model in requester order (a primitive
// channel: independent of the evaluation order of the DMA engines).
#pragma once

#include <systemc>

#include <cstdint>
#include <functional>
#include <memory>
#include <queue>
#include <optional>
#include <string>
#include <nlohmann/json.hpp>
#include <vector>

#include "memory.h"
#include "tpu/sim/config.h"

namespace tpu::sim {

namespace dram {
class Dram;
}

struct HbmBurst {
  int requester = 0;
  uint64_t tag = 0;  // the requester's own (the DMA engine's slot)
  bool write = false;
  uint64_t hbm_addr = 0;
  uint64_t vmem_addr = 0;
  uint32_t bytes = 0;
  uint64_t done_cycle = ~uint64_t(0);  // the core cycle its data has landed, once the model knows
  std::vector<uint8_t> data;           // a write's bytes, read from VMEM when the burst is issued
};

// The timing of a memory: told of every burst, it sets each one's done_cycle
// and then passes the burst to the sink.
class HbmTiming {
 public:
  virtual ~HbmTiming() = default;
  void set_sink(std::function<void(HbmBurst*)> sink) { sink_ = std::move(sink); }
  // Bursts of core cycle `now`, in requester order.
  virtual void request(int requester, uint64_t now, HbmBurst* b) = 0;
  // The end of core cycle `now` (every request of it has been made).
  virtual void end_cycle(uint64_t /*now*/) {}
  // A broken timing constraint (the detailed model's checker), as one line.
  virtual std::optional<std::string> violation() const { return std::nullopt; }
  // The model's own figures for stats.json's "hbm" (and "noc").
  virtual void add_stats(nlohmann::json& /*hbm*/, nlohmann::json& /*noc*/, uint64_t /*cycles*/) const {}
  // For the detailed model: its DRAM (waveforms, counters) and the device
  // cycle it has reached; else null and 0.
  virtual const dram::Dram* dram() const { return nullptr; }
  virtual uint64_t memory_cycle() const { return 0; }

 protected:
  void known(HbmBurst* b) { sink_(b); }

 private:
  std::function<void(HbmBurst*)> sink_;
};

// `check`: the detailed model runs the DRAM timing checker on every command.
std::unique_ptr<HbmTiming> make_hbm_timing(const MachineConfig& cfg, bool check);

class MemorySystem : public sc_core::sc_prim_channel {
 public:
  MemorySystem(const char* name, const MachineConfig& cfg, MemoryBudget& budget, bool dram_check);
  ~MemorySystem() override;

  SparseMemory& memory() { return mem_; }
  // `burst` must stay valid until it has landed (taken by next_landed).
  void request(int requester, uint64_t now, HbmBurst* burst) {
    burst->requester = requester;
    pending_.push_back({requester, now, burst});
    request_update();
  }
  // A burst of `requester` that has landed by cycle `now` (oldest landing
  // first), or null.
  HbmBurst* next_landed(int requester, uint64_t now) {
    auto& h = landed_[size_t(requester)];
    if (h.empty() || h.top().done > now) return nullptr;
    HbmBurst* b = h.top().burst;
    h.pop();
    return b;
  }
  // Called once a cycle after every unit has run (the chip's monitor).
  void end_cycle(uint64_t now) { timing_->end_cycle(now); }
  uint64_t bytes_read() const { return bytes_read_; }
  uint64_t bytes_written() const { return bytes_written_; }
  const HbmTiming& timing() const { return *timing_; }

 protected:
  void update() override;

 private:
  struct Pending {
    int requester;
    uint64_t cycle;
    HbmBurst* burst;
  };
  SparseMemory mem_;
  std::unique_ptr<HbmTiming> timing_;
  std::vector<Pending> pending_;
  // Per requester: bursts whose landing cycle is known, earliest first (ties
  // in the order they became known).
  struct Landing {
    uint64_t done, seq;
    HbmBurst* burst;
  };
  struct Later {
    bool operator()(const Landing& a, const Landing& b) const { return a.done != b.done ? a.done > b.done : a.seq > b.seq; }
  };
  uint64_t seq_ = 0;
  std::vector<std::priority_queue<Landing, std::vector<Landing>, Later>> landed_;
  uint64_t bytes_read_ = 0, bytes_written_ = 0;
};

}  // namespace tpu::sim
