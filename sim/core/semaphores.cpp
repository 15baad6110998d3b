#include "semaphores.h"

#include <algorithm>

namespace tpu::sim {

void SemaphoreFile::update() {
  bool changed = false;
  for (; signalled_ != 0; signalled_ &= signalled_ - 1) {
    const size_t s = size_t(__builtin_ctzll(signalled_));
    if (pending_signal_[s] == 0) continue;
    values_[s] += pending_signal_[s];
    pending_signal_[s] = 0;
    changed = true;
  }
  // In requester order, stably (an insertion sort: a handful of requests,
  // no allocation).
  for (size_t i = 1; i < requests_.size(); ++i)
    for (size_t j = i; j > 0 && requests_[j].requester < requests_[j - 1].requester; --j) std::swap(requests_[j], requests_[j - 1]);
  const bool edge = sc_core::sc_time_stamp().value() % period_.value() == 0;
  size_t kept = 0;
  for (const Request& r : requests_) {
    if (!edge) {  // only standing requests: woken if something changed
      requests_[kept++] = r;
      if (changed) grant_event_[size_t(r.requester)].notify(sc_core::SC_ZERO_TIME);
      continue;
    }
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
