// Common behaviour of the units fed by an instruction queue (DMA, VPU, MXU):
// the head instruction is examined each cycle; `wait` and `signal` are
// handled here identically for every unit.
#pragma once

#include <systemc>

#include <fmt/format.h>

#include <deque>
#include <optional>
#include <string>

#include "../obs/observer.h"
#include "issued.h"
#include "run_control.h"
#include "semaphores.h"
#include "sleep.h"

namespace tpu::sim {

class QueuedUnit {
 public:
  QueuedUnit(int core, int unit_id, uint32_t queue_depth, RunControl& rc, SemaphoreFile& sems)
      : queue_(queue_depth), depth_(queue_depth), core_(core), unit_id_(unit_id), rc_(rc), sems_(sems) {}

  sc_core::sc_fifo<Issued>& queue() { return queue_; }
  int queue_depth() const { return queue_.num_available() + (head_ ? 1 : 0); }
  void set_trace(TraceSink* t) { trace_ = t; }
  const UnitStats& stats() const { return stats_; }
  // The pc of the instruction at the head of the queue, or of the last one
  // retired (the waveform's `pc`).
  uint32_t current_pc() const { return head_ ? head_->pc : last_pc_; }
  UnitState state() const { return state_; }
  // Why the head instruction cannot proceed, for deadlock reports.
  std::string blocked_on() const {
    if (!head_ || head_->insn.op != isa::Opcode::WAIT) return {};
    return fmt::format("pc {}: wait sem{} >= {} (it is {})", head_->pc, head_->insn[isa::operand::SYNC::sem], head_->insn[isa::operand::SYNC::count],
                       sems_.value(int(head_->insn[isa::operand::SYNC::sem])));
  }

 protected:
  enum class SyncResult { NotSync, Done, Blocked };

  // The instruction at the head of the queue, if any (kept until popped).
  const Issued* head() {
    if (!head_) {
      Issued is;
      if (queue_.nb_read(is)) head_ = is;
    }
    return head_ ? &*head_ : nullptr;
  }
  void pop() { head_.reset(); }

  // The instruction to work on this cycle: a wait at the head whose grant
  // arrived (requested last cycle) retires first without using the cycle.
  const Issued* current(uint64_t now) {
    const Issued* h = head();
    if (h && waiting_ && sems_.take_grant(unit_id_)) {
      waiting_ = false;
      if (trace_) trace_->instruction(track_id(core_, unit_id_), h->pc, wait_start_, now, 0);
      retire();
      h = head();
    }
    return h;
  }

  // Handles wait/signal at the head. `all_done` says whether every earlier
  // instruction of this unit has completed (a signal waits for that).
  SyncResult sync(const Issued& h, uint64_t now, bool all_done) { return handle_sync(h, now, all_done, std::nullopt); }
  // As above, for a unit that knows at dispatch the cycle `done_at` in which
  // every earlier instruction will have completed: the signal leaves the
  // queue at once and its count is added in that cycle (at most Q signals
  // pending; fire_due() adds them).
  SyncResult sync_deferred(const Issued& h, uint64_t now, uint64_t done_at) { return handle_sync(h, now, false, done_at); }
  // Adds the deferred signals that are due by `now`.
  void fire_due(uint64_t now) {
    while (!deferred_.empty() && deferred_.front().at <= now) {
      const Deferred& d = deferred_.front();
      sems_.signal(d.sem, d.count);
      if (trace_) trace_->instruction(track_id(core_, unit_id_), d.pc, d.issued, now + 1, 0);
      deferred_.pop_front();
    }
  }
  bool signals_pending() const { return !deferred_.empty(); }

  SyncResult handle_sync(const Issued& h, uint64_t now, bool all_done, std::optional<uint64_t> done_at) {
    if (h.insn.op == isa::Opcode::WAIT) {
      if (!waiting_) wait_start_ = now;
      waiting_ = true;
      sems_.request_wait(unit_id_, int(h.insn[isa::operand::SYNC::sem]), uint32_t(h.insn[isa::operand::SYNC::count]));
      return SyncResult::Blocked;
    }
    if (h.insn.op == isa::Opcode::SIGNAL) {
      if (done_at && *done_at > now) {
        if (deferred_.size() >= depth_) return SyncResult::Blocked;
        deferred_.push_back({*done_at, now, int(h.insn[isa::operand::SYNC::sem]), uint32_t(h.insn[isa::operand::SYNC::count]), h.pc});
        retire();
        return SyncResult::Done;
      }
      if (!all_done && !done_at) return SyncResult::Blocked;
      sems_.signal(int(h.insn[isa::operand::SYNC::sem]), uint32_t(h.insn[isa::operand::SYNC::count]));
      if (trace_) trace_->instruction(track_id(core_, unit_id_), h.pc, now, now + 1, 0);
      retire();
      return SyncResult::Done;
    }
    return SyncResult::NotSync;
  }

  // At the top of tick(): whether this call wakes the unit from sleep (it
  // then waits for the next edge).
  bool woke(uint64_t now) {
    if (!sleep_.woke(now, stats_)) return false;
    if (waiting_) sems_.withdraw(unit_id_);  // woken by something else: it asks again next edge
    return true;
  }
  // At the end of tick(), with `quiet` when nothing the unit started is still
  // in flight (no work, no deferred signal): a unit blocked on a wait, or
  // with no instruction, sleeps until the grant or the next instruction, or
  // until `also` (work that comes to the unit other than through its queue).
  void rest(uint64_t now, bool quiet, const sc_core::sc_event* also = nullptr) {
    if (!quiet || signals_pending() || rc_.faulted() || !rc_.units_sleep()) return;
    const sc_core::sc_event* e = nullptr;
    if (state_ == UnitState::Blocked && waiting_) {
      sems_.stand(unit_id_);
      e = &sems_.grant_event(unit_id_);
    } else if (state_ == UnitState::Idle && !head_ && queue_.num_available() == 0) {
      e = &queue_.data_written_event();
    }
    if (!e) return;
    if (also)
      sleep_.until(*e | *also, now, state_, cause_);
    else
      sleep_.until(*e, now, state_, cause_);
  }
  bool asleep() const { return sleep_.asleep(); }

 public:
  // The end of the run in cycle `last`: the cycles slept so far are counted.
  void settle(uint64_t last) { sleep_.settle(last, stats_); }

 protected:
  // The stall cause of a head instruction sync() reported Blocked.
  static const char* blocked_cause(const Issued& h) { return h.insn.op == isa::Opcode::WAIT ? "semaphore" : "drain"; }

  void retire() {
    if (head_) last_pc_ = head_->pc;
    pop();
    ++stats_.instructions;
  }
  void finish(UnitState s, const char* cause) {
    state_ = s;
    cause_ = cause;
    stats_.account(s, cause);
  }
  void trace_event(uint32_t pc, uint64_t start, uint64_t end, uint64_t work = 0) {
    if (trace_) trace_->instruction(track_id(core_, unit_id_), pc, start, end, work);
  }

  struct Deferred {
    uint64_t at, issued;
    int sem;
    uint32_t count, pc;
  };
  sc_core::sc_fifo<Issued> queue_;
  const uint32_t depth_;
  std::deque<Deferred> deferred_;
  std::optional<Issued> head_;
  int core_;
  int unit_id_;
  RunControl& rc_;
  SemaphoreFile& sems_;
  TraceSink* trace_ = nullptr;
  UnitStats stats_;
  UnitState state_ = UnitState::Idle;
  const char* cause_ = "";
  Sleep sleep_;
  bool waiting_ = false;
  uint64_t wait_start_ = 0;
  uint32_t last_pc_ = 0;
};

}  // namespace tpu::sim
