#include "hbm_simple.h"

#include <algorithm>

namespace tpu::sim {

void HbmSimple::update() {
  std::stable_sort(pending_.begin(), pending_.end(), [](const Pending& a, const Pending& b) { return a.requester < b.requester; });
  for (const Pending& p : pending_) {
    const unsigned __int128 arrive = (unsigned __int128)p.cycle * bw_fp_;
    const unsigned __int128 start = std::max(arrive, free_fp_);
    free_fp_ = start + (unsigned __int128)p.burst->bytes * 1024;
    const uint64_t leave = uint64_t((free_fp_ + bw_fp_ - 1) / bw_fp_);
    p.burst->done_cycle = leave + latency_;
    (p.burst->write ? bytes_written_ : bytes_read_) += p.burst->bytes;
  }
  pending_.clear();
}

}  // namespace tpu::sim
