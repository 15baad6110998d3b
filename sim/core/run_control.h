// Shared run state of one simulation: the clock period, the first fault, and
// the observers (stats, VCD, trace) that units report to.
#pragma once

#include <systemc>

#include <cstdint>
#include <optional>
#include <string>

namespace tpu::sim {

class RunControl {
 public:
  explicit RunControl(sc_core::sc_time period) : period_(period) {}

  // The cycle whose rising edge is being evaluated (0-based).
  uint64_t cycle() const { return sc_core::sc_time_stamp().value() / period_.value(); }
  sc_core::sc_time period() const { return period_; }

  // A fault in the program (not in the simulator): the first one ends the run.
  void fault(const std::string& message) {
    if (!fault_) fault_ = message;
    sc_core::sc_stop();
  }
  const std::optional<std::string>& fault_message() const { return fault_; }
  bool faulted() const { return fault_.has_value(); }

 private:
  sc_core::sc_time period_;
  std::optional<std::string> fault_;
};

}  // namespace tpu::sim
