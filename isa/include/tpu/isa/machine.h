// The machine configuration: the target (what programs are compiled for)
// plus everything that only changes timing. Read from a preset or a JSON
// file whose shape mirrors the component tree; every parameter is checked.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tpu/isa/target.h"

namespace tpu::isa {

struct CoreParams {
  uint32_t queue_depth = 16;    // entries in each unit's instruction queue
  uint32_t branch_penalty = 2;  // bubble cycles after a taken branch
  uint32_t issue_width = 1;     // instructions the scalar unit issues per cycle
};

struct VpuLatency {
  uint32_t alu = 2;             // add, compare, select, logic, moves, conversions
  uint32_t mul = 3;
  uint32_t div = 8;             // divide, sqrt, rsqrt, pow
  uint32_t transcendental = 8;  // exp, log, tanh, logistic
  uint32_t load = 3;            // vld.*, vlda
  uint32_t store = 1;           // vst.*, vsta
  uint32_t reduce = 7;          // cross-lane reductions
};

// Instructions the VPU may dispatch in one cycle, in queue order: at most
// `width` in all, `alu` of the arithmetic classes, `load` vld/vlda, `store`
// vst/vsta (docs/timing.md).
struct VpuIssue {
  uint32_t width = 1;
  uint32_t alu = 1;
  uint32_t load = 1;
  uint32_t store = 1;
};

struct VpuParams {
  VpuLatency latency;
  VpuIssue issue;
};

struct DmaParams {
  uint32_t max_outstanding = 16;  // transfers in flight
  uint32_t burst_bytes = 512;     // a transfer is cut into bursts of at most this
  uint32_t bursts_per_cycle = 1;  // bursts the engine sends to HBM per cycle
};

struct HbmParams {
  std::string model = "simple";  // "simple": one FIFO server, bandwidth + latency
  uint64_t bandwidth_bytes_per_s = 0;
  uint32_t latency_ns = 100;
};

struct MachineConfig {
  Target target;
  std::string description;
  uint64_t clock_hz = 0;
  CoreParams core;
  VpuParams vpu;
  DmaParams dma;
  HbmParams hbm;

  // Derived.
  uint64_t hbm_latency_cycles() const;
  // HBM bandwidth in 1/1024 bytes per cycle (fixed point, at least 1).
  uint64_t hbm_bytes_per_cycle_fp() const;

  std::string to_json() const;  // the resolved config, every parameter
};

// A preset name or a path to a JSON config, with `settings` ("KEY=VALUE",
// KEY a dotted path the config has: hbm.bandwidth_bytes_per_s=1.6e12)
// applied before validation. Throws Error naming the parameter and the file.
MachineConfig load_config(const std::string& preset_or_path, const std::vector<std::string>& settings = {});
MachineConfig config_from_json(const std::string& text, const std::string& where);

}  // namespace tpu::isa
