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
#include <memory>
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
  bool write = false;
  uint64_t hbm_addr = 0;
  uint64_t vmem_addr = 0;
  uint32_t bytes = 0;
  uint64_t done_cycle = ~uint64_t(0);  // the core cycle its data has landed, once the model knows
  std::vector<uint8_t> data;           // a write's bytes, read from VMEM when the burst is issued
};

// The timing of a memory: told of every burst, it sets each one's done_cycle.
class HbmTiming {
 public:
  virtual ~HbmTiming() = default;
  // Bursts of core cycle `now`, in requester order.
  virtual void request(int requester, uint64_t now, HbmBurst* b) = 0;
  // The end of core cycle `now` (every request of it has been made).
  virtual void end_cycle(uint64_t /*now*/) {}
  virtual bool idle() const { return true; }
  // A broken timing constraint (the detailed model's checker), as one line.
  virtual std::optional<std::string> violation() const { return std::nullopt; }
  // The model's own figures for stats.json's "hbm" (and "noc").
  virtual void add_stats(nlohmann::json& /*hbm*/, nlohmann::json& /*noc*/, uint64_t /*cycles*/) const {}
  // For the detailed model: its DRAM (waveforms, counters); else null.
  virtual const dram::Dram* dram() const { return nullptr; }
};

std::unique_ptr<HbmTiming> make_hbm_timing(const MachineConfig& cfg);

class MemorySystem : public sc_core::sc_prim_channel {
 public:
  MemorySystem(const char* name, const MachineConfig& cfg, MemoryBudget& budget);
  ~MemorySystem() override;

  SparseMemory& memory() { return mem_; }
  // `burst` must stay valid until its done_cycle is set.
  void request(int requester, uint64_t now, HbmBurst* burst) {
    pending_.push_back({requester, now, burst});
    request_update();
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
  uint64_t bytes_read_ = 0, bytes_written_ = 0;
};

}  // namespace tpu::sim
