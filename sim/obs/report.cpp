#include "report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace tpu::sim {
namespace {

std::string esc(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '<') o += "&lt;";
    else if (c == '>') o += "&gt;";
    else if (c == '&') o += "&amp;";
    else if (c == '"') o += "&quot;";
    else o += c;
  }
  return o;
}

const char* kColors[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};

// Busy fraction of each unit over time: one band per unit, its fill the
// fraction of every row's cycles the unit was busy (on a system, the mean
// over the chips of that unit's fraction).
std::string units_chart(const ReportInput& in) {
  std::vector<size_t> cols;
  for (size_t c = 0; c < in.series->columns.size(); ++c)
    if (in.series->columns[c].size() > 12 && in.series->columns[c].substr(in.series->columns[c].size() - 12) == ".busy_cycles") cols.push_back(c);
  if (in.series->rows.empty() || cols.empty()) return "<p>No time series.</p>";
  const double W = 900, band = 34, left = 130, right = 10;
  const double H = band * double(cols.size()) + 30;
  const double total = double(in.series->rows.back().end);
  auto x = [&](double cycle) { return left + (W - left - right) * cycle / total; };
  std::string s = fmt::format("<svg width=\"{}\" height=\"{}\" xmlns=\"http://www.w3.org/2000/svg\" font-size=\"11\">", W, H);
  for (size_t i = 0; i < cols.size(); ++i) {
    const double y0 = 5 + band * double(i), h = band - 6;
    const std::string name = in.series->columns[cols[i]].substr(0, in.series->columns[cols[i]].size() - 12);
    std::string pts = fmt::format("{:.1f},{:.1f} ", x(0), y0 + h);
    uint64_t busy = 0;
    for (const auto& r : in.series->rows) {
      const double f = double(r.values[cols[i]]) / double(r.end - r.start) / in.chips;
      pts += fmt::format("{:.1f},{:.1f} {:.1f},{:.1f} ", x(double(r.start)), y0 + h * (1 - f), x(double(r.end)), y0 + h * (1 - f));
      busy += r.values[cols[i]];
    }
    pts += fmt::format("{:.1f},{:.1f}", x(total), y0 + h);
    s += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"#f3f3f3\"/>", left, y0, W - left - right, h);
    s += fmt::format("<polygon points=\"{}\" fill=\"{}\" opacity=\"0.8\"/>", pts, kColors[i % 10]);
    s += fmt::format("<text x=\"4\" y=\"{:.1f}\">{} {:.0f}%</text>", y0 + h / 2 + 4, esc(name), 100.0 * double(busy) / total / in.chips);
  }
  s += fmt::format("<text x=\"{}\" y=\"{}\">0</text><text x=\"{}\" y=\"{}\" text-anchor=\"end\">{} cycles</text>", left, H - 6,
                   W - right, H - 6, in.series->rows.back().end);
  return s + "</svg>";
}

// HBM bytes per cycle in each row against the peak (on a system, of all
// the chips together).
std::string hbm_chart(const ReportInput& in) {
  std::vector<size_t> cols;
  for (size_t c = 0; c < in.series->columns.size(); ++c)
    if (in.series->columns[c] == "hbm.bytes_read" || in.series->columns[c] == "hbm.bytes_written") cols.push_back(c);
  if (in.series->rows.empty() || cols.empty() || in.peak_hbm_bytes_per_cycle <= 0) return "<p>No time series.</p>";
  const double W = 900, H = 180, left = 60, right = 10, top = 10, bottom = 25;
  const double total = double(in.series->rows.back().end), peak = in.peak_hbm_bytes_per_cycle * in.chips;
  auto x = [&](double c) { return left + (W - left - right) * c / total; };
  auto y = [&](double v) { return top + (H - top - bottom) * (1 - std::min(v / (peak * 1.1), 1.0)); };
  std::string s = fmt::format("<svg width=\"{}\" height=\"{}\" xmlns=\"http://www.w3.org/2000/svg\" font-size=\"11\">", W, H);
  std::string pts = fmt::format("{:.1f},{:.1f} ", x(0), y(0));
  for (const auto& r : in.series->rows) {
    double bytes = 0;
    for (size_t c : cols) bytes += double(r.values[c]);
    const double v = bytes / double(r.end - r.start);
    pts += fmt::format("{:.1f},{:.1f} {:.1f},{:.1f} ", x(double(r.start)), y(v), x(double(r.end)), y(v));
  }
  pts += fmt::format("{:.1f},{:.1f}", x(total), y(0));
  s += fmt::format("<polygon points=\"{}\" fill=\"#1f77b4\" opacity=\"0.7\"/>", pts);
  s += fmt::format("<line x1=\"{}\" x2=\"{}\" y1=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#d62728\" stroke-dasharray=\"6,3\"/>", left, W - right, y(peak), y(peak));
  s += fmt::format("<text x=\"{}\" y=\"{:.1f}\" fill=\"#d62728\">peak {:.0f} B/cycle</text>", left + 4, y(peak) - 4, peak);
  s += fmt::format("<text x=\"4\" y=\"{:.1f}\">B/cycle</text><text x=\"{}\" y=\"{}\" text-anchor=\"end\">{} cycles</text>", y(0), W - right,
                   H - 6, in.series->rows.back().end);
  return s + "</svg>";
}

// Every kernel with MACs on the MXU roofline: x MACs per HBM byte, y MACs
// per cycle, both logarithmic; the roof min(peak, x * bandwidth).
std::string roofline_chart(const nlohmann::json& kernels) {
  if (kernels.empty()) return "<p>The program has no kernel table.</p>";
  const auto& r0 = kernels[0]["roofline"];
  const double peak = r0["peak_macs_per_cycle"], bw = r0["peak_hbm_bytes_per_cycle"], ridge = r0["ridge_macs_per_hbm_byte"];
  if (bw <= 0) return "<p>No memory roof: hbm.model = ideal has no bandwidth limit.</p>";
  double xmin = ridge / 100, xmax = ridge * 10, ymin = peak / 1e4;
  for (const auto& k : kernels) {
    const double i = k["roofline"]["macs_per_hbm_byte"], a = k["roofline"]["achieved_macs_per_cycle"];
    if (i > 0) xmin = std::min(xmin, i / 2), xmax = std::max(xmax, i * 2);
    if (a > 0) ymin = std::min(ymin, a / 2);
  }
  const double W = 600, H = 380, left = 60, right = 20, top = 15, bottom = 40;
  auto x = [&](double v) { return left + (W - left - right) * (std::log10(v) - std::log10(xmin)) / (std::log10(xmax) - std::log10(xmin)); };
  auto y = [&](double v) { return top + (H - top - bottom) * (1 - (std::log10(v) - std::log10(ymin)) / (std::log10(peak * 2) - std::log10(ymin))); };
  std::string s = fmt::format("<svg width=\"{}\" height=\"{}\" xmlns=\"http://www.w3.org/2000/svg\" font-size=\"11\">", W, H);
  s += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#999\"/>", left, top, W - left - right, H - top - bottom);
  for (double d = std::ceil(std::log10(xmin)); d <= std::log10(xmax); d += 1)
    s += fmt::format("<text x=\"{:.1f}\" y=\"{}\" text-anchor=\"middle\">1e{}</text>", x(std::pow(10, d)), H - bottom + 14, int(d));
  for (double d = std::ceil(std::log10(ymin)); d <= std::log10(peak * 2); d += 1)
    s += fmt::format("<text x=\"{}\" y=\"{:.1f}\" text-anchor=\"end\">1e{}</text>", left - 4, y(std::pow(10, d)) + 4, int(d));
  s += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">MACs per HBM byte</text>", (W + left) / 2, H - 6);
  s += fmt::format("<text x=\"12\" y=\"{}\" transform=\"rotate(-90 12 {})\" text-anchor=\"middle\">MACs per cycle</text>", (H - bottom) / 2, (H - bottom) / 2);
  s += fmt::format("<polyline points=\"{:.1f},{:.1f} {:.1f},{:.1f} {:.1f},{:.1f}\" fill=\"none\" stroke=\"#d62728\" stroke-width=\"2\"/>", x(xmin),
                   y(xmin * bw), x(ridge), y(peak), x(xmax), y(peak));
  for (const auto& k : kernels) {
    const double i = k["roofline"]["macs_per_hbm_byte"], a = k["roofline"]["achieved_macs_per_cycle"];
    if (a <= 0) continue;
    const double px = i > 0 ? x(i) : W - right - 4;  // no HBM traffic: at the right edge
    s += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"4\" fill=\"#1f77b4\"><title>{} ({:.1f}% of peak)</title></circle>", px, y(a),
                     esc(k["name"].get<std::string>()), 100 * a / peak);
    s += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\">{}</text>", px + 5, y(a) - 4, k["index"].get<size_t>());
  }
  return s + "</svg>";
}

// Stall cycles by cause, largest first.
std::string stalls_chart(const nlohmann::json& stalls) {
  std::vector<std::pair<std::string, uint64_t>> v;
  for (const auto& [k, n] : stalls.items()) v.push_back({k, n.get<uint64_t>()});
  std::stable_sort(v.begin(), v.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  if (v.size() > 12) v.resize(12);
  if (v.empty() || v[0].second == 0) return "<p>No stalls.</p>";
  const double W = 600, bar = 18, left = 190;
  std::string s = fmt::format("<svg width=\"{}\" height=\"{}\" xmlns=\"http://www.w3.org/2000/svg\" font-size=\"11\">", W, bar * double(v.size()) + 6);
  for (size_t i = 0; i < v.size(); ++i) {
    const double w = (W - left - 80) * double(v[i].second) / double(v[0].second);
    s += fmt::format("<text x=\"{}\" y=\"{:.1f}\" text-anchor=\"end\">{}</text>", left - 6, bar * double(i) + 13, esc(v[i].first));
    s += fmt::format("<rect x=\"{}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{}\" fill=\"#ff7f0e\"/>", left, bar * double(i) + 2, w, bar - 4);
    s += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\">{}</text>", left + w + 4, bar * double(i) + 13, v[i].second);
  }
  return s + "</svg>";
}

// A system's ICI links, busiest first (stats.json's ici section).
std::string links_table(const nlohmann::json& ici) {
  std::vector<const nlohmann::json*> v;
  for (const auto& l : ici["links"]) v.push_back(&l);
  std::stable_sort(v.begin(), v.end(), [](const nlohmann::json* a, const nlohmann::json* b) {
    return (*a)["utilization"].get<double>() > (*b)["utilization"].get<double>();
  });
  std::string h = fmt::format("<p>{}, {} links; {} bytes sent; the busiest at {:.1f}% of its bandwidth ({:.3g} GB/s each way).</p>\n",
                              esc(ici["topology"].get<std::string>()), v.size(), ici["bytes_sent"].get<uint64_t>(),
                              100 * ici["max_link_utilization"].get<double>(), ici["link_bandwidth_bytes_per_s"].get<double>() / 1e9);
  h += "<table><tr><th>from chip</th><th>to chip</th><th>axis</th><th>bytes</th><th>packets</th><th>utilization</th></tr>\n";
  for (size_t i = 0; i < v.size() && i < 15; ++i) {
    const auto& l = *v[i];
    h += fmt::format("<tr><td class=n>{}</td><td class=n>{}</td><td>{}</td><td class=n>{}</td><td class=n>{}</td><td class=n>{:.1f}%</td></tr>\n",
                     l["from"].get<int>(), l["to"].get<int>(), esc(l["axis"].get<std::string>()), l["bytes"].get<uint64_t>(),
                     l["packets"].get<uint64_t>(), 100 * l["utilization"].get<double>());
  }
  return h + "</table>\n";
}

}  // namespace

std::string report_html(const ReportInput& in) {
  const auto& st = in.stats;
  const uint64_t cycles = st["cycles"];
  auto pct = [&](double v) { return fmt::format("{:.1f}%", 100 * v); };
  std::string h = R"(<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>tpusim report</title>
<style>body{font-family:sans-serif;margin:2em;max-width:1000px}table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:3px 8px;text-align:left;font-size:13px}
th{background:#eee}td.n{text-align:right}pre{background:#f6f6f6;padding:1em;font-size:12px;overflow:auto}h2{margin-top:1.5em}</style></head><body>
)";
  const std::string chips = in.chips > 1 ? fmt::format(", {} chips", in.chips) : "";
  h += fmt::format("<h1>tpusim: {} cycles on {}{}</h1>\n", cycles, esc(st["config"].get<std::string>()), chips);
  h += "<table>";
  auto row = [&](const std::string& k, const std::string& v) { h += fmt::format("<tr><th>{}</th><td>{}</td></tr>", k, v); };
  row("status", esc(st["status"].get<std::string>()));
  row("simulated time", fmt::format("{:.3f} us at {:.3g} GHz", st["seconds"].get<double>() * 1e6, st["frequency_hz"].get<double>() / 1e9));
  row("instructions", std::to_string(st["instructions"]["total"].get<uint64_t>()));
  row("MXU MAC utilization", pct(st["mxu"]["mac_utilization"]) + fmt::format(" ({} MACs)", st["mxu"]["macs"].get<uint64_t>()));
  row("HBM bandwidth utilization", pct(st["hbm"]["bandwidth_utilization"]) +
                                       fmt::format(" ({} bytes read, {} written)", st["hbm"]["bytes_read"].get<uint64_t>(),
                                                   st["hbm"]["bytes_written"].get<uint64_t>()));
  h += "</table>\n";

  const auto& ks = st["kernels"];
  std::vector<const nlohmann::json*> top;
  for (const auto& k : ks) top.push_back(&k);
  std::stable_sort(top.begin(), top.end(),
                   [](const nlohmann::json* a, const nlohmann::json* b) { return (*a)["cycles"].get<uint64_t>() > (*b)["cycles"].get<uint64_t>(); });
  h += "<h2>Where the cycles went: kernels</h2>\n";
  if (top.empty()) {
    h += "<p>The program has no kernel table (tpuc writes one; hand-written assembly has none).</p>\n";
  } else {
    if (in.chips > 1) h += "<p>As chip 0 ran them (every chip runs every kernel, on its own part of the data).</p>\n";
    h += "<p>Each kernel from its first instruction to the end of its last; kernels overlap (the next one's loads run during this one). "
         "Bound: what came nearest its peak (docs/stats.md).</p>\n<table><tr><th>#</th><th>kernel</th><th>cycles</th><th>% of run</th>"
         "<th>MXU MACs</th><th>HBM bw</th><th>bound</th><th>of the roofline</th><th>HLO ops</th></tr>\n";
    for (size_t i = 0; i < top.size() && i < 15; ++i) {
      const auto& k = *top[i];
      const double att = k["roofline"]["attainable_macs_per_cycle"], ach = k["roofline"]["achieved_macs_per_cycle"];
      std::string ops;
      for (const auto& o : k["ops"]) ops += esc(o.get<std::string>()) + "<br>";
      h += fmt::format("<tr><td class=n>{}</td><td>{}</td><td class=n>{}</td><td class=n>{}</td><td class=n>{}</td><td class=n>{}</td><td>{}</td>"
                       "<td class=n>{}</td><td>{}</td></tr>\n",
                       k["index"].get<size_t>(), esc(k["name"].get<std::string>()), k["cycles"].get<uint64_t>(),
                       pct(cycles ? k["cycles"].get<double>() / double(cycles) : 0), pct(k["mxu_utilization"]),
                       pct(k["hbm_bandwidth_utilization"]), k["bound"].get<std::string>(), ach > 0 && att > 0 ? pct(ach / att) : "-", ops);
    }
    h += "</table>\n<h2>Where the cycles went: HLO ops</h2>\n<p>Each kernel's cycles shared among the ops it computes by their work.</p>\n"
         "<table><tr><th>HLO op</th><th>cycles</th><th>% of run</th><th>kernels</th></tr>\n";
    const auto& ops = st["ops"];
    for (size_t i = 0; i < ops.size() && i < 15; ++i)
      h += fmt::format("<tr><td>{}</td><td class=n>{:.0f}</td><td class=n>{}</td><td>{}</td></tr>\n", esc(ops[i]["op"].get<std::string>()),
                       ops[i]["cycles"].get<double>(), pct(cycles ? ops[i]["cycles"].get<double>() / double(cycles) : 0), ops[i]["kernels"].dump());
    h += "</table>\n";
  }
  h += fmt::format("<h2>Unit busy fraction over time{}</h2>\n", in.chips > 1 ? ", the mean over the chips" : "") + units_chart(in) + "\n";
  h += fmt::format("<h2>HBM bandwidth against its peak{}</h2>\n", in.chips > 1 ? ", all the chips together" : "") + hbm_chart(in) + "\n";
  if (st.contains("ici")) h += "<h2>ICI links</h2>\n" + links_table(st["ici"]);
  h += "<h2>Roofline (MXU): every kernel with MACs</h2>\n" + roofline_chart(ks) + "\n";
  h += "<h2>Stalls by cause</h2>\n" + stalls_chart(st["stall_cycles_by_cause"]) + "\n";
  if (!in.links.empty()) {
    h += "<h2>Files</h2>\n<ul>";
    for (const auto& [label, path] : in.links) h += fmt::format("<li><a href=\"{}\">{}</a> ({})</li>", esc(path), esc(path), esc(label));
    h += "</ul>\n";
  }
  h += "<h2>Config</h2>\n<pre>" + esc(in.config) + "</pre>\n</body></html>\n";
  return h;
}

}  // namespace tpu::sim
