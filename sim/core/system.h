// The system top: the clock, target.chips chips (each its own HBM and
// TensorCores) and the ICI network between them. A monitor on the falling
// edge moves the network a cycle, lets every chip end its cycle, and
// detects the end of the run (every chip finished, no packet in flight),
// deadlocks, the cycle limit and interruptions.
#pragma once

#include <systemc>

#include <chrono>
#include <memory>
#include <vector>

#include "../ici/ici_network.h"
#include "chip.h"

namespace tpu::sim {

class System : public sc_core::sc_module {
 public:
  // `trace` observes chip 0 (stats' kernels and ops, and the event log are
  // chip 0's); `others`, if any, the other chips, each through ChipTracks.
  System(sc_core::sc_module_name name, const MachineConfig& cfg, const DecodedProgram& program, const SimOptions& opts,
         RunControl& rc, TraceSink* trace, TraceSink* others = nullptr);
  // Waveforms of every chip, sampled once a cycle after every chip ended it:
  // scopes core0..., hbm on one chip, chip0.core0... on several.
  void attach_vcd(VcdWriter* vcd);

  sc_core::sc_clock clk;
  IciNetwork ici;
  std::vector<std::unique_ptr<RunControl>> chip_rc;  // each chip's view of rc: faults name the chip
  std::vector<std::unique_ptr<Chip>> chips;

  bool done() const { return done_; }
  uint64_t end_cycle() const { return end_cycle_; }
  bool progress_shown() const { return progress_shown_; }

 private:
  void monitor();
  // Whether nothing is in flight (ICI, DMA, pipelines) and no semaphore
  // changed this cycle: with no unit busy, a deadlock.
  bool quiet(uint64_t now, bool delivered) const;
  std::string where(const Chip& c) const;

  std::vector<std::unique_ptr<ChipTracks>> tracks_;
  VcdWriter* vcd_ = nullptr;
  const SimOptions& opts_;
  RunControl& rc_;
  bool done_ = false;
  uint64_t end_cycle_ = 0;
  std::chrono::steady_clock::time_point wall_start_ = std::chrono::steady_clock::now();
  bool progress_shown_ = false;
};

}  // namespace tpu::sim
