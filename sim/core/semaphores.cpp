#include "semaphores.h"

#include <algorithm>

namespace tpu::sim {

void SemaphoreFile::update() {
  bool changed = false;
  for (size_t s = 0; s < values_.size(); ++s) {
    if (pending_signal_[s] == 0) continue;
    values_[s] += pending_signal_[s];
    pending_signal_[s] = 0;
    changed = true;
  }
  std::stable_sort(requests_.begin(), requests_.end(),
                   [](const Request& a, const Request& b) { return a.requester < b.requester; });
  size_t kept = 0;
  for (const Request& r : requests_) {
    uint64_t& v = values_[size_t(r.sem)];
    if (v < r.count) {
      if (r.standing) requests_[kept++] = r;
      continue;
    }
    v -= r.count;
    granted_[size_t(r.requester)] = true;
    if (r.standing) grant_event_[size_t(r.requester)].notify(sc_core::SC_ZERO_TIME);
    changed = true;
  }
  requests_.resize(kept);
  if (changed) last_change_ = sc_core::sc_time_stamp();
}

}  // namespace tpu::sim
