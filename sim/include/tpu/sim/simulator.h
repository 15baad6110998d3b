// Running a program on the simulated machine. SystemC elaborates once per
// process: create one Simulator per process and call run() once.
#pragma once

#include <csignal>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tpu/isa/program.h"
#include "tpu/sim/config.h"

namespace tpu::sim {

// How a run ended (stats.json "status").
enum class RunStatus { finished, cycle_limit, fault, deadlock, interrupted };
const char* status_name(RunStatus s);

// Cycles a run may take when SimOptions::max_cycles is not given: far above
// any program of the test suite and benchmarks (a 4096^3 GEMM on v5e takes
// about 1e6), and reached in about 15 s by a program that never halts.
inline constexpr uint64_t kDefaultMaxCycles = 50'000'000;

// Host memory the simulated memories' contents may take by default
// (docs/robustness.md): touched 64 KiB pages of HBM, VMEM and SMEM, and the
// accumulators.
inline constexpr uint64_t kDefaultMemoryBudget = uint64_t(8) << 30;

// The trace's counter tracks (busy %, HBM bytes per cycle) sample this often
// when --stats-interval does not say.
inline constexpr uint64_t kTraceCounterInterval = 256;

struct SimOptions {
  bool pe_level_mxu = false;    // --mxu=pe: advance every PE register every cycle
  bool rtl_mxu = false;         // --mxu=rtl: the Verilated RTL of hw/ in place of the model
  bool sleep = true;            // idle and blocked units sleep (docs/timing.md); false: every unit runs every cycle (tests compare)
  bool dram_check = true;       // the detailed HBM model checks every DRAM command's timing (--no-dram-check: off)
  std::string rtl_trace_path;   // with rtl_mxu: the RTL's own VCD, on the model VCD's time base
  std::string record_mxu_path;  // core 0 MXU 0's command stream with the rows it reads (lockstep replay)
  uint64_t max_cycles = kDefaultMaxCycles;  // 0: no limit
  uint64_t memory_budget = kDefaultMemoryBudget;  // bytes
  // Set (by a signal handler) to end the run early with status interrupted;
  // outputs, stats, trace and VCD are still written.
  const volatile std::sig_atomic_t* interrupt = nullptr;
  std::string vcd_path;         // waveforms (and vcd_path + ".gtkw", + ".states")
  bool fst = false;             // write vcd_path as FST (GTKWave's format), not VCD
  uint64_t vcd_start = 0;       // window of cycles [start, end)
  uint64_t vcd_end = UINT64_MAX;
  std::string trace_path;       // Perfetto / Chrome trace-event JSON
  uint64_t trace_start = 0;     // the trace's window of cycles [start, end): events outside it are left out
  uint64_t trace_end = UINT64_MAX;
  // A time series: a CSV row every stats_interval cycles (0: none) to
  // intervals_path, whose columns add up to the stats' totals.
  uint64_t stats_interval = 0;
  std::string intervals_path;
  std::string report_dir;       // an HTML report (index.html) with charts of the run: docs/stats.md
  std::string report_stats_path;  // the stats file the report links to
  bool progress = false;        // a progress line on stderr for long runs
  std::vector<std::string> log_units;  // log every instruction of these units at debug level ("dma", "mxu0", ..., "all")
};

struct RunResult {
  RunStatus status = RunStatus::finished;
  std::optional<std::string> fault;  // unless finished: the fault, deadlock, cycle limit or interruption; one line
  uint64_t cycles = 0;
  std::vector<std::vector<uint8_t>> outputs;  // one per output symbol, in order
  std::string stats_json;
  std::string profile;  // the top kernels and HLO ops as a table (tpusim --profile); "" without kernels
};

class Simulator {
 public:
  // Throws Error when the program's target differs from the machine's.
  Simulator(MachineConfig config, isa::Program program, SimOptions options);
  ~Simulator();
  Simulator(const Simulator&) = delete;
  Simulator& operator=(const Simulator&) = delete;

  // inputs: one byte buffer per input symbol, in order, of the symbol's size.
  RunResult run(const std::vector<std::vector<uint8_t>>& inputs);

 private:
  MachineConfig config_;
  isa::Program program_;
  SimOptions options_;
};

// Why --log-units names something that is not a unit ("" if they all are).
std::string check_log_units(const std::vector<std::string>& units);

// Why a program cannot run on a machine ("" if it can).
std::string target_mismatch(const isa::Target& program, const isa::Target& machine);

}  // namespace tpu::sim
