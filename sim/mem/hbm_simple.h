// The `simple` HBM model: one FIFO server per chip with a fixed bandwidth and
// latency. A burst of S bytes requested in cycle t starts when the server is
// free (no earlier than t), occupies it for S / B cycles (B = bandwidth in
// bytes per cycle, kept in 1/1024-byte fixed point so the arithmetic is
// exact), and its data is delivered `latency` cycles after it leaves the
// server, rounded up to a whole cycle. Requests of one cycle are served in
// requester order (a primitive channel: independent of evaluation order).
#pragma once

#include <systemc>

#include <cstdint>
#include <vector>

#include "memory.h"

namespace tpu::sim {

struct HbmBurst {
  bool write = false;
  uint64_t hbm_addr = 0;
  uint64_t vmem_addr = 0;
  uint32_t bytes = 0;
  uint64_t done_cycle = ~uint64_t(0);  // set in the update phase of the request's cycle
  std::vector<uint8_t> data;           // a write's bytes, read from VMEM when the burst is issued
};

class HbmSimple : public sc_core::sc_prim_channel {
 public:
  HbmSimple(const char* name, uint64_t size, uint64_t bytes_per_cycle_fp, uint64_t latency_cycles, MemoryBudget& budget)
      : sc_core::sc_prim_channel(name), mem_(size, &budget), bw_fp_(bytes_per_cycle_fp), latency_(latency_cycles) {}

  SparseMemory& memory() { return mem_; }
  // `requester` orders requests of the same cycle; `burst` must stay valid
  // until its done_cycle has been set.
  void request(int requester, uint64_t now, HbmBurst* burst) {
    pending_.push_back({requester, now, burst});
    request_update();
  }
  uint64_t bytes_read() const { return bytes_read_; }
  uint64_t bytes_written() const { return bytes_written_; }

 protected:
  void update() override;

 private:
  struct Pending {
    int requester;
    uint64_t cycle;
    HbmBurst* burst;
  };
  SparseMemory mem_;
  uint64_t bw_fp_;
  uint64_t latency_;
  unsigned __int128 free_fp_ = 0;  // server free from this time, in cycles * bw_fp_
  std::vector<Pending> pending_;
  uint64_t bytes_read_ = 0, bytes_written_ = 0;
};

}  // namespace tpu::sim
