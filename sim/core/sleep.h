// Units that sleep: a unit with nothing to do until some event (an
// instruction in its queue, a semaphore grant, room in a queue it issues to)
// stops being evaluated at every clock edge and waits on that event instead
// (SystemC's next_trigger). Its state stays what it was in the cycle it fell
// asleep, and the cycles it sleeps count in that state and cause, as if it
// had run each of them to the same effect. Such events take effect in the
// update phase of some cycle t (a queue write, a grant), after the units of
// t have run: the unit wakes in a delta cycle of t, counts the cycles slept
// through t, and runs again from the clock edge of t + 1, the first at which
// it could have seen the event. Cycles and results are those of a unit that
// never sleeps (docs/timing.md, "Units that sleep").
#pragma once

#include <systemc>

#include <cstdint>

#include "../obs/observer.h"

namespace tpu::sim {

class Sleep {
 public:
  // In a unit's tick, after it has counted cycle `now` in `state`; `e` an
  // sc_event or an or-list of them (e1 | e2).
  template <typename Event>
  void until(const Event& e, uint64_t now, UnitState state, const char* cause) {
    asleep_ = true;
    from_ = now;
    state_ = state;
    cause_ = cause;
    sc_core::next_trigger(e);
  }
  // At the top of a tick: whether this call is the wake-up of a sleeping
  // unit (which then does nothing more until the next edge); counts the
  // cycles slept into `stats`.
  bool woke(uint64_t now, UnitStats& stats) {
    if (!asleep_) return false;
    stats.account(state_, cause_, now - from_);
    asleep_ = false;
    return true;
  }
  // The end of the run, after cycle `last`: counts the cycles slept so far.
  void settle(uint64_t last, UnitStats& stats) {
    if (!asleep_ || last <= from_) return;
    stats.account(state_, cause_, last - from_);
    from_ = last;
  }
  bool asleep() const { return asleep_; }

 private:
  bool asleep_ = false;
  uint64_t from_ = 0;
  UnitState state_ = UnitState::Idle;
  const char* cause_ = "";
};

}  // namespace tpu::sim
