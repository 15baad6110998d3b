// What the chip needs of an MXU, whichever model implements it: the SystemC
// model (Mxu: fast or PE-level array) or the Verilated RTL (RtlMxu).
#pragma once

#include <systemc>

#include <memory>
#include <string>

#include "../core/issued.h"
#include "../core/run_control.h"
#include "../core/semaphores.h"
#include "../mem/accumulators.h"
#include "../mem/memory.h"
#include "../obs/observer.h"
#include "tpu/sim/config.h"

namespace tpu::sim {

class MxuUnit {
 public:
  virtual ~MxuUnit() = default;
  virtual void bind_clock(sc_core::sc_clock& clk) = 0;
  // The end of the run in cycle `last`: a unit that sleeps (sleep.h) counts the cycles slept.
  virtual void settle(uint64_t /*last*/) {}
  virtual sc_core::sc_fifo<Issued>& instruction_queue() = 0;
  virtual void attach_trace(TraceSink* t) = 0;
  virtual bool idle(uint64_t now) const = 0;       // no work left after cycle now
  virtual bool in_flight(uint64_t now) const = 0;  // started work not finished after cycle now
  virtual uint64_t macs() const = 0;
  virtual uint32_t rows_in_flight() const = 0;
  virtual bool streaming() const = 0;
  virtual bool loading() const = 0;
  virtual int pending_instructions() const = 0;
  virtual UnitState unit_state() const = 0;
  virtual uint32_t current_pc() const = 0;  // the head instruction's, or the last retired
  virtual const UnitStats& unit_stats() const = 0;
  virtual std::string blocked_report() const = 0;
};

enum class MxuModel { Fast, Pe, Rtl };

// The RTL model exists for the array sizes Verilated at build time.
bool rtl_mxu_available(uint32_t n);
std::string rtl_mxu_sizes();
// trace_path: the RTL's own VCD (empty: none), on the model VCD's time base.
std::unique_ptr<MxuUnit> make_rtl_mxu(const char* name, int core, int index, const MachineConfig& cfg, RunControl& rc,
                                      SemaphoreFile& sems, SparseMemory& vmem, Accumulators& acc,
                                      const std::string& trace_path);

}  // namespace tpu::sim
