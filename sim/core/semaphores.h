// The semaphore file of one TensorCore, as a SystemC primitive channel so
// that the result never depends on the order in which units are evaluated
// within a cycle: signals and wait requests made in cycle t are resolved
// together in that cycle's update phase (signals first, then waits in
// requester order sc, dma, vpu, mxu0..7), and a granted unit proceeds in
// cycle t + 1.
#pragma once

#include <systemc>

#include <algorithm>
#include <array>
#include <cstdint>
#include <vector>

#include "tpu/isa/isa.h"

namespace tpu::sim {

// Requesters are numbered as the ISA's Unit operand: sc 0, dma 1, vpu 2, mxuK 8 + K.
inline constexpr int kNumRequesters = 16;

class SemaphoreFile : public sc_core::sc_prim_channel {
 public:
  // `period`: the clock's (units request on its rising edges).
  SemaphoreFile(const char* name, sc_core::sc_time period) : sc_core::sc_prim_channel(name), period_(period) {}

  void signal(int sem, uint32_t count) {
    pending_signal_[size_t(sem)] += count;
    signalled_ |= uint64_t(1) << sem;
    request_update();
  }
  void request_wait(int requester, int sem, uint32_t count) {
    requests_.push_back({requester, sem, count, false});
    request_update();
  }
  // Makes `requester`'s request of this cycle stand: it is tried again in
  // every later update at a rising edge until granted, and
  // grant_event(requester) tells when (the requester sleeps meanwhile,
  // sleep.h). Equal to requesting every cycle: a request that failed can only
  // succeed after a signal, and a signal runs the update. A signal between
  // edges (the ICI delivers on the falling edge) wakes the standing
  // requesters without a grant: they withdraw and ask again at the next edge,
  // as a unit asking every cycle would.
  void stand(int requester) {
    for (Request& r : requests_)
      if (r.requester == requester) r.standing = true;
  }
  // Drops `requester`'s standing request, if any.
  void withdraw(int requester) {
    requests_.erase(std::remove_if(requests_.begin(), requests_.end(), [&](const Request& r) { return r.requester == requester && r.standing; }),
                    requests_.end());
  }
  const sc_core::sc_event& grant_event(int requester) const { return grant_event_[size_t(requester)]; }
  // True once, in the cycle after the request was granted.
  bool take_grant(int requester) {
    bool g = granted_[size_t(requester)];
    granted_[size_t(requester)] = false;
    return g;
  }
  uint64_t value(int sem) const { return values_[size_t(sem)]; }
  // When an update last changed anything (a signal or a grant).
  sc_core::sc_time last_change() const { return last_change_; }

 protected:
  void update() override;

 private:
  struct Request {
    int requester;
    int sem;
    uint32_t count;
    bool standing = false;
  };
  std::array<uint64_t, isa::kNumSems> values_{};
  std::array<uint64_t, isa::kNumSems> pending_signal_{};
  static_assert(isa::kNumSems <= 64);
  uint64_t signalled_ = 0;  // bit s: pending_signal_[s] may be non-zero
  std::array<bool, kNumRequesters> granted_{};
  std::vector<Request> requests_;
  std::array<sc_core::sc_event, kNumRequesters> grant_event_;
  sc_core::sc_time last_change_ = sc_core::SC_ZERO_TIME;
  sc_core::sc_time period_;
};

}  // namespace tpu::sim
