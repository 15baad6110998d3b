// tpusim --report DIR: one self-contained HTML page (DIR/index.html, inline
// SVG, no script) that answers where the cycles went: totals, unit busy
// fractions over time, HBM bandwidth against its peak, a roofline with every
// kernel, stalls by cause, the heaviest kernels and HLO ops, the config, and
// links to the run's other files.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "observer.h"

namespace tpu::sim {

struct ReportInput {
  nlohmann::json stats;   // stats.json
  std::string config;     // the resolved config (JSON text)
  // The run's (Chip::series); on a system of several chips each column
  // summed over the chips.
  const TimeSeries* series = nullptr;
  int chips = 1;
  double peak_hbm_bytes_per_cycle = 0;  // one chip's
  std::vector<std::pair<std::string, std::string>> links;  // (label, path relative to the report)
};

// The page's HTML.
std::string report_html(const ReportInput& in);

}  // namespace tpu::sim
