// The simulator's view of the machine configuration: the one description in
// tpu/isa/machine.h, which tpuc and tpu-as validate the same way.
#pragma once

#include "tpu/isa/machine.h"

namespace tpu::sim {
using isa::config_from_json;
using isa::CoreParams;
using isa::DmaParams;
using isa::HbmParams;
using isa::IciParams;
using isa::load_config;
using isa::MachineConfig;
using isa::parse_topology;
using isa::VpuIssue;
using isa::VpuLatency;
using isa::VpuParams;
}  // namespace tpu::sim
