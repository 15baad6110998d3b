// Shared run state of one simulation: the clock period, the first fault, and
// the observers (stats, VCD, trace) that units report to.
#pragma once

#include <systemc>

#include <cstdint>
#include <optional>
#include <string>

#include "../mem/memory.h"
#include "tpu/sim/simulator.h"

namespace tpu::sim {

class RunControl {
 public:
  RunControl(sc_core::sc_time period, uint64_t memory_budget_bytes) : period_(period), budget_(memory_budget_bytes) {}
  // One chip's view of a system's run: its faults begin with `prefix`
  // ("chip 3: "); everything else is the system's.
  RunControl(RunControl& system, std::string prefix)
      : period_(system.period_), budget_(0), system_(&system), prefix_(std::move(prefix)) {}

  // The cycle whose rising edge is being evaluated (0-based).
  uint64_t cycle() const { return sc_core::sc_time_stamp().value() / period_.value(); }
  sc_core::sc_time period() const { return period_; }

  // A fault in the program (not in the simulator): the first one ends the run.
  void fault(const std::string& message) { stop(RunStatus::fault, message); }
  // Ends the run early for `why` (not finished); the first reason stands.
  void stop(RunStatus why, const std::string& message) {
    if (system_) return system_->stop(why, prefix_ + message);
    if (!fault_) {
      fault_ = message;
      status_ = why;
    }
    sc_core::sc_stop();
  }
  const std::optional<std::string>& fault_message() const { return system_ ? system_->fault_ : fault_; }
  bool faulted() const { return fault_message().has_value(); }
  RunStatus status() const { return system_ ? system_->status_ : status_; }
  MemoryBudget& budget() { return system_ ? system_->budget_ : budget_; }
  // Whether units may sleep (SimOptions::sleep).
  bool units_sleep() const { return system_ ? system_->sleep_ : sleep_; }
  void set_units_sleep(bool on) { sleep_ = on; }

 private:
  sc_core::sc_time period_;
  std::optional<std::string> fault_;
  RunStatus status_ = RunStatus::finished;
  MemoryBudget budget_;
  RunControl* system_ = nullptr;
  bool sleep_ = true;
  std::string prefix_;
};

}  // namespace tpu::sim
