#include "dram_stats.h"

namespace tpu::sim::dram {

nlohmann::json stats_json(const ChannelStats& s, const isa::DramParams& p, uint64_t cycles) {
  const uint64_t bytes = p.request_bytes();
  const uint64_t cmds = s.read_cmds + s.write_cmds;
  const double seconds = double(cycles) * p.tck_ps * 1e-12;
  auto frac = [&](uint64_t n) { return cycles ? double(n) / double(cycles) : 0.0; };
  return {{"requests", s.reads + s.writes},
          {"reads", s.reads},
          {"writes", s.writes},
          {"bytes_read", s.reads * bytes},
          {"bytes_written", s.writes * bytes},
          {"bandwidth_bytes_per_s", seconds > 0 ? double((s.reads + s.writes) * bytes) / seconds : 0.0},
          {"read_latency_cycles",
           {{"mean", s.read_latency.mean()}, {"p50", s.read_latency.percentile(0.5)}, {"p99", s.read_latency.percentile(0.99)}}},
          {"row_hits", s.row_hits},
          {"row_misses", s.row_misses},
          {"row_conflicts", s.row_conflicts},
          {"row_hit_rate", cmds ? double(s.row_hits) / double(cmds) : 0.0},
          {"activates", s.activates},
          {"precharges", s.precharges},
          {"refreshes", s.refreshes},
          {"data_bus_utilization", frac(s.data_cycles)},
          {"refresh_fraction", frac(s.refresh_bank_cycles) / (double(p.ranks) * p.bankgroups * p.banks_per_group)},
          {"activate_wait_fraction", frac(s.act_wait_cycles)},
          {"turnarounds", s.turnarounds},
          {"turnaround_fraction", frac(s.turnaround_cycles)},
          {"queue_occupancy_mean", s.cycles ? double(s.queue_occupancy) / double(s.cycles) : 0.0}};
}

nlohmann::json stats_json(const Dram& d, uint64_t cycles) {
  const ChannelStats total = d.total();
  nlohmann::json j = stats_json(total, d.params(), cycles);
  // Fractions of time are per channel; the totals give their mean.
  const double n = double(d.channels());
  for (const char* k : {"data_bus_utilization", "refresh_fraction", "activate_wait_fraction", "turnaround_fraction"})
    j[k] = j[k].get<double>() / n;
  nlohmann::json ch = nlohmann::json::array();
  for (uint32_t c = 0; c < d.channels(); ++c) ch.push_back(stats_json(d.channel(c).stats(), d.params(), cycles));
  j["channels"] = ch;
  return j;
}

}  // namespace tpu::sim::dram
