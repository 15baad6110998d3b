// stats.json's view of the detailed HBM model (docs/stats.md): the totals
// and the same per channel.
#pragma once

#include <nlohmann/json.hpp>

#include "dram.h"

namespace tpu::sim::dram {

// `cycles`: the memory cycles the run took (for bandwidth and fractions).
nlohmann::json stats_json(const ChannelStats& s, const isa::DramParams& p, uint64_t cycles);
// The totals, with "channels": [...] of the same fields.
nlohmann::json stats_json(const Dram& d, uint64_t cycles);

}  // namespace tpu::sim::dram
