#include "tpu/sim/simulator.h"

#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "../obs/event_log.h"
#include "../obs/profiler.h"
#include "../obs/report.h"
#include "../obs/trace_writer.h"
#include "system.h"
#include "tpu/isa/file.h"

namespace tpu::sim {

const char* status_name(RunStatus s) {
  switch (s) {
    case RunStatus::finished: return "finished";
    case RunStatus::cycle_limit: return "cycle_limit";
    case RunStatus::fault: return "fault";
    case RunStatus::deadlock: return "deadlock";
    case RunStatus::interrupted: return "interrupted";
  }
  return "?";
}

std::string target_mismatch(const isa::Target& program, const isa::Target& machine) {
  std::vector<std::string> diffs;
  for (const auto& f : isa::target_fields())
    if (program.*f.member != machine.*f.member)
      diffs.push_back(fmt::format("{} {} vs {}", f.key, program.*f.member, machine.*f.member));
  if (diffs.empty()) return {};
  if (program.name == machine.name)  // the same preset, changed by --set or a config file on one side
    return fmt::format("the program was compiled for another variant of target '{}' ({}): run it with the --config and --set "
                       "tpuc had, or recompile",
                       program.name, fmt::join(diffs, ", "));
  return fmt::format("the program was compiled for target '{}', this machine is '{}' ({}): recompile for it",
                     program.name, machine.name, fmt::join(diffs, ", "));
}

Simulator::Simulator(MachineConfig config, isa::Program program, SimOptions options)
    : config_(std::move(config)), program_(std::move(program)), options_(std::move(options)) {
  if (auto why = target_mismatch(program_.target, config_.target); !why.empty()) throw Error(why);
  if (!options_.rtl_trace_path.empty() && !options_.rtl_mxu) throw Error("--rtl-trace needs --mxu=rtl");
  if (options_.rtl_mxu && !rtl_mxu_available(uint32_t(config_.target.mxu_dim)))
    throw Error(fmt::format("--mxu=rtl: the RTL MXU is built for N = {} only, the target has N = {} (configure with "
                            "-DTPU_RTL_SIZES=\"{}\" to add it)",
                            rtl_mxu_sizes(), config_.target.mxu_dim, config_.target.mxu_dim));
}

Simulator::~Simulator() = default;

namespace {

nlohmann::json unit_json(const UnitStats& s, uint64_t cycles) {
  nlohmann::json stalls = nlohmann::json::object();
  for (const auto& [cause, n] : s.stalls) stalls[cause] = n;
  return {{"busy_cycles", s.busy_cycles},
          {"busy_fraction", cycles ? double(s.busy_cycles) / double(cycles) : 0.0},
          {"stall_cycles", s.stall_cycles},
          {"stalls", stalls},
          {"instructions", s.instructions}};
}

// stats.json (docs/stats.md); kernels and ops come from the profiler (chip
// 0's). With several chips, units are keyed by chip, the totals are the
// system's, and "per_chip" and "ici" describe each chip and link.
nlohmann::json stats_json(const MachineConfig& cfg, const System& sys, nlohmann::json kernels, nlohmann::json ops, RunStatus status,
                          uint64_t cycles, double wall) {
  using nlohmann::json;
  const size_t nchips = sys.chips.size();
  json units = json::object();
  json by_class = {{"scalar", 0}, {"sync", 0}, {"dma", 0}, {"mxu", 0}, {"vpu", 0}};
  json stalls = json::object();
  json per_chip = json::array();
  uint64_t macs = 0, total = 0, rd = 0, wr = 0;
  auto add_stalls = [&](const std::string& unit, const UnitStats& s) {
    for (const auto& [cause, n] : s.stalls) stalls[unit + "." + cause] = stalls.value(unit + "." + cause, uint64_t(0)) + n;
  };
  for (const auto& chip : sys.chips) {
    const std::string cp = nchips > 1 ? fmt::format("chip{}.", chip->index) : "";
    uint64_t chip_macs = 0;
    for (const auto& c : chip->cores) {
      const std::string p = fmt::format("{}core{}.", cp, c->index);
      units[p + "scalar"] = unit_json(c->scalar.stats(), cycles);
      units[p + "dma"] = unit_json(c->dma.stats(), cycles);
      units[p + "vpu"] = unit_json(c->vpu.stats(), cycles);
      add_stalls("scalar", c->scalar.stats());
      add_stalls("dma", c->dma.stats());
      add_stalls("vpu", c->vpu.stats());
      for (size_t m = 0; m < c->mxus.size(); ++m) {
        json u = unit_json(c->mxus[m]->unit_stats(), cycles);
        u["macs"] = c->mxus[m]->macs();
        u["mac_utilization"] = cycles ? double(c->mxus[m]->macs()) / (double(cycles) * double(cfg.target.mxu_dim * cfg.target.mxu_dim)) : 0.0;
        units[fmt::format("{}mxu{}", p, m)] = u;
        add_stalls("mxu", c->mxus[m]->unit_stats());
        chip_macs += c->mxus[m]->macs();
      }
      const auto& k = c->scalar.issued_by_class();
      const char* names[] = {"scalar", "sync", "dma", "mxu", "vpu"};
      for (size_t i = 0; i < k.size(); ++i) {
        by_class[names[i]] = by_class[names[i]].get<uint64_t>() + k[i];
        total += k[i];
      }
    }
    macs += chip_macs;
    rd += chip->hbm.bytes_read(), wr += chip->hbm.bytes_written();
    per_chip.push_back({{"chip", chip->index},
                        {"finish_cycle", chip->finish_cycle()},
                        {"macs", chip_macs},
                        {"hbm_bytes_read", chip->hbm.bytes_read()},
                        {"hbm_bytes_written", chip->hbm.bytes_written()}});
  }
  const double n = double(cfg.target.mxu_dim);
  const double peak_macs = double(cycles) * n * n * double(cfg.target.mxus_per_core * cfg.target.cores * nchips);
  const double bytes_per_cycle = cfg.hbm_peak_bytes_per_s() / double(cfg.clock_hz) * double(nchips);  // 0: ideal, no limit
  json j = {
      {"status", status_name(status)},
      {"config", cfg.target.name},
      {"chips", nchips},
      {"cycles", cycles},
      {"frequency_hz", cfg.clock_hz},
      {"seconds", double(cycles) / double(cfg.clock_hz)},
      {"instructions", {{"total", total}, {"by_class", by_class}}},
      {"units", units},
      {"stall_cycles_by_cause", stalls},
      {"mxu", {{"macs", macs}, {"mac_utilization", peak_macs > 0 ? double(macs) / peak_macs : 0.0}}},
      {"hbm",
       {{"model", cfg.hbm.model},
        {"bytes_read", rd},
        {"bytes_written", wr},
        {"peak_bandwidth_bytes_per_s", cfg.hbm_peak_bytes_per_s()},
        {"bandwidth_utilization", cycles && bytes_per_cycle > 0 ? double(rd + wr) / (double(cycles) * bytes_per_cycle) : 0.0}}},
      {"host", {{"wall_seconds", wall}, {"simulated_cycles_per_second", wall > 0 ? double(cycles) / wall : 0.0}}},
      {"kernels", std::move(kernels)},
      {"ops", std::move(ops)},
  };
  if (nchips > 1) {
    j["per_chip"] = per_chip;
    const double link_bytes_per_cycle = double(cfg.ici.link_bandwidth_bytes_per_s) / double(cfg.clock_hz);
    json links = json::array();
    double busiest = 0;
    uint64_t link_bytes = 0;
    for (const auto& l : sys.ici.link_stats()) {
      const double u = cycles ? double(l.bytes) / (double(cycles) * link_bytes_per_cycle) : 0.0;
      busiest = std::max(busiest, u);
      link_bytes += l.bytes;
      links.push_back({{"from", l.from}, {"to", l.to}, {"axis", "xyz"[l.dim] + std::string(l.dir > 0 ? "+" : "-")},
                       {"bytes", l.bytes}, {"packets", l.packets}, {"busy_cycles", l.busy_cycles}, {"utilization", u}});
    }
    j["ici"] = {{"topology", sys.ici.topology()},
                {"link_bandwidth_bytes_per_s", cfg.ici.link_bandwidth_bytes_per_s},
                {"hop_latency_cycles", cfg.ici_hop_cycles()},
                {"bytes_sent", link_bytes},
                {"bytes_delivered", sys.ici.bytes_delivered()},
                {"max_link_utilization", busiest},
                {"links", links}};
  }
  json noc;
  sys.chips[0]->hbm.timing().add_stats(j["hbm"], noc, cycles);
  if (!noc.is_null()) j["noc"] = noc;
  return j;
}

// The heaviest kernels and ops, as tpusim --profile prints them.
std::string profile_table(const nlohmann::json& kernels, const nlohmann::json& ops, uint64_t total, size_t top) {
  if (kernels.empty()) return {};
  std::vector<const nlohmann::json*> ks;
  for (const auto& k : kernels) ks.push_back(&k);
  std::stable_sort(ks.begin(), ks.end(), [](const nlohmann::json* a, const nlohmann::json* b) { return (*a)["cycles"].get<uint64_t>() > (*b)["cycles"].get<uint64_t>(); });
  auto pct = [&](double c) { return total ? 100.0 * c / double(total) : 0.0; };
  std::string s = fmt::format("{:>4} {:>10} {:>6} {:>6} {:>6} {:>8}  {}\n", "kern", "cycles", "%run", "MXU%", "HBM%", "bound", "kernel (first op)");
  for (size_t i = 0; i < ks.size() && i < top; ++i) {
    const auto& k = *ks[i];
    const std::string op = k["ops"].empty() ? "" : k["ops"][0].get<std::string>();
    s += fmt::format("{:>4} {:>10} {:>5.1f}% {:>5.1f}% {:>5.1f}% {:>8}  {} ({})\n", k["index"].get<size_t>(), k["cycles"].get<uint64_t>(),
                     pct(k["cycles"].get<double>()), 100 * k["mxu_utilization"].get<double>(),
                     100 * k["hbm_bandwidth_utilization"].get<double>(), k["bound"].get<std::string>(), k["name"].get<std::string>(), op);
  }
  s += fmt::format("\n{:>10} {:>6}  {}\n", "cycles", "%run", "HLO op (cycles shared by work within each kernel)");
  for (size_t i = 0; i < ops.size() && i < top; ++i)
    s += fmt::format("{:>10.0f} {:>5.1f}%  {}\n", ops[i]["cycles"].get<double>(), pct(ops[i]["cycles"].get<double>()),
                     ops[i]["op"].get<std::string>());
  return s + "(kernels overlap in time: the next kernel's loads run during this one)\n";
}

// The system's time series: the chip's own on one chip; on several, every
// chip's columns as "chipK.<column>" (or, with `sum`, each column summed
// over the chips). Every chip cuts the same rows: they all end every cycle
// together.
TimeSeries system_series(const System& sys, bool sum) {
  const TimeSeries& first = sys.chips[0]->series();
  if (sys.chips.size() == 1) return first;
  TimeSeries s;
  s.every = first.every;
  for (const auto& c : sys.chips) {
    if (c->series().rows.size() != first.rows.size()) throw std::logic_error("internal error: the chips' time series differ in rows");
    if (!sum)
      for (const auto& col : c->series().columns) s.columns.push_back(fmt::format("chip{}.{}", c->index, col));
  }
  if (sum) s.columns = first.columns;
  for (size_t r = 0; r < first.rows.size(); ++r) {
    TimeSeries::Row row{first.rows[r].start, first.rows[r].end, {}};
    if (sum) row.values.assign(first.columns.size(), 0);
    for (const auto& c : sys.chips) {
      const auto& v = c->series().rows[r].values;
      if (sum)
        for (size_t k = 0; k < v.size(); ++k) row.values[k] += v[k];
      else
        row.values.insert(row.values.end(), v.begin(), v.end());
    }
    s.rows.push_back(std::move(row));
  }
  return s;
}

// DIR/index.html, linking the run's other files by paths relative to DIR.
void write_report(const SimOptions& options, const MachineConfig& config, const System& sys, const nlohmann::json& stats) {
  namespace fs = std::filesystem;
  ReportInput in;
  in.stats = stats;
  in.config = config.to_json();
  const TimeSeries series = system_series(sys, true);
  in.series = &series;
  in.chips = int(sys.chips.size());
  in.peak_hbm_bytes_per_cycle = config.hbm_peak_bytes_per_s() / double(config.clock_hz);
  auto link = [&](const char* label, const std::string& path) {
    if (path.empty()) return;
    std::error_code ec;
    const fs::path rel = fs::relative(fs::absolute(path, ec), fs::absolute(options.report_dir, ec), ec);
    in.links.push_back({label, ec || rel.empty() ? path : rel.string()});
  };
  link("statistics", options.report_stats_path);
  link("time series", options.intervals_path);
  link("timeline: open in ui.perfetto.dev", options.trace_path);
  link("waveforms: gtkwave FILE.vcd FILE.vcd.gtkw", options.vcd_path);
  if (!options.vcd_path.empty()) link("GTKWave save file", options.vcd_path + ".gtkw");
  isa::write_file((fs::path(options.report_dir) / "index.html").string(), report_html(in));
}

}  // namespace

RunResult Simulator::run(const std::vector<std::vector<uint8_t>>& inputs) {
  DecodedProgram dp;
  dp.words = program_.code;
  for (uint64_t w : program_.code) dp.insns.push_back(isa::decode(w));

  sc_core::sc_report_handler::set_actions(sc_core::SC_INFO, sc_core::SC_DO_NOTHING);
  sc_core::sc_report_handler::set_actions(sc_core::SC_WARNING, sc_core::SC_DO_NOTHING);
  // An error inside a process reaches the caller as an exception, printed once by the tool, not on stdout.
  sc_core::sc_report_handler::set_actions(sc_core::SC_ERROR, sc_core::SC_THROW);
  sc_core::sc_report_handler::set_actions(sc_core::SC_FATAL, sc_core::SC_THROW);
  RunControl rc(sc_core::sc_time(1, sc_core::SC_NS), options_.memory_budget);
  rc.set_units_sleep(options_.sleep);
  const uint64_t acc_bytes = config_.target.chips * config_.target.cores * config_.target.acc_rows * config_.target.mxu_dim * 4;
  if (!rc.budget().take(acc_bytes))
    throw Error(fmt::format("the accumulators of this machine take {} of host memory, more than the budget of {}",
                            MemoryBudget::text(acc_bytes), MemoryBudget::text(options_.memory_budget)));
  std::unique_ptr<TraceWriter> trace;
  if (!options_.trace_path.empty())
    trace = std::make_unique<TraceWriter>(options_.trace_path, program_, config_.clock_hz, int(config_.target.chips),
                                          int(config_.target.cores), int(config_.target.mxus_per_core), options_.trace_start,
                                          options_.trace_end);
  Profiler profiler(program_, config_);
  std::unique_ptr<EventLog> events;
  if (!options_.log_units.empty()) events = std::make_unique<EventLog>(program_, options_.log_units);
  FanOut sinks;
  sinks.add(trace.get());
  if (!program_.kernels.empty()) sinks.add(&profiler);
  sinks.add(events.get());
  System sys("system", config_, dp, options_, rc, sinks.get(), trace.get());  // the other chips: the trace only
  Chip& chip = *sys.chips[0];

  // Every chip gets the program's data, and every input whole or its tile
  // of it; an output is gathered from the chips' tiles, or is chip 0's.
  const auto ins = program_.inputs();
  if (inputs.size() != ins.size())
    throw Error(fmt::format("the program takes {} input(s), {} given", ins.size(), inputs.size()));
  for (size_t i = 0; i < ins.size(); ++i)
    if (inputs[i].size() != ins[i]->bytes())
      throw Error(fmt::format("input {} ('{}') has {} bytes, expected {}", i, ins[i]->name, inputs[i].size(), ins[i]->bytes()));
  std::vector<uint8_t> tile;
  for (auto& c : sys.chips) {
    SparseMemory& mem = c->hbm.memory();
    for (const auto& d : program_.data) mem.write(d.hbm_addr, d.bytes.data(), d.bytes.size());
    for (size_t i = 0; i < ins.size(); ++i) {
      if (ins[i]->tiles.empty()) {
        mem.write(ins[i]->hbm_addr, inputs[i].data(), inputs[i].size());
        continue;
      }
      tile.resize(ins[i]->local_bytes());
      isa::copy_tile(*ins[i], uint64_t(c->index), inputs[i].data(), tile.data(), true);
      mem.write(ins[i]->hbm_addr, tile.data(), tile.size());
    }
  }
  SparseMemory& hbm = chip.hbm.memory();

  std::ofstream record;
  if (!options_.record_mxu_path.empty()) {
    if (options_.rtl_mxu) throw Error("--record-mxu records the model's MXU: drop --mxu=rtl");
    record.open(options_.record_mxu_path, std::ios::trunc);
    if (!record) throw Error(fmt::format("{}: cannot open for writing", options_.record_mxu_path));
    record << "tpusim-mxu-stream 1 n=" << config_.target.mxu_dim << "\n";
    dynamic_cast<Mxu&>(*chip.cores[0]->mxus[0]).record_commands(&record);
  }

  // The time series: --stats-interval's fixed rows, or rows for the trace's
  // counters and the report that widen as the run grows.
  const uint64_t every = options_.stats_interval ? options_.stats_interval : (trace || !options_.report_dir.empty()) ? kTraceCounterInterval : 0;
  if (every)
    for (auto& c : sys.chips) c->attach_series(every, options_.stats_interval > 0);

  std::unique_ptr<VcdWriter> vcd;
  if (!options_.vcd_path.empty()) {
    vcd = std::make_unique<VcdWriter>(options_.vcd_path, config_.clock_hz, options_.vcd_start, options_.vcd_end,
                                      options_.fst ? VcdWriter::Format::fst : VcdWriter::Format::vcd);
    sys.attach_vcd(vcd.get());
  }

  const auto t0 = std::chrono::steady_clock::now();
  sc_core::sc_start();
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (sys.progress_shown()) std::fputc('\n', stderr);

  RunResult r;
  r.fault = rc.fault_message();
  r.status = rc.status();
  r.cycles = sys.done() ? sys.end_cycle() : rc.cycle() + 1;
  if (!r.fault && !sys.done()) throw std::logic_error("internal error: the simulation stopped before the program finished");
  for (auto& c : sys.chips)
    for (auto& core : c->cores) core->settle(r.cycles - 1);
  for (const auto* o : program_.outputs()) {
    std::vector<uint8_t> bytes(o->bytes());
    if (o->tiles.empty()) {
      hbm.read(o->hbm_addr, bytes.data(), bytes.size());
    } else {
      for (auto& c : sys.chips) {
        tile.resize(o->local_bytes());
        c->hbm.memory().read(o->hbm_addr, tile.data(), tile.size());
        isa::copy_tile(*o, uint64_t(c->index), tile.data(), bytes.data(), false);
      }
    }
    r.outputs.push_back(std::move(bytes));
  }
  for (auto& c : sys.chips) c->finish_series(r.cycles);
  if (!options_.intervals_path.empty()) {
    const TimeSeries s = system_series(sys, false);
    std::string csv = "cycle_start,cycle_end," + fmt::format("{}", fmt::join(s.columns, ",")) + "\n";
    for (const auto& row : s.rows) csv += fmt::format("{},{},{}\n", row.start, row.end, fmt::join(row.values, ","));
    isa::write_file(options_.intervals_path, csv);
  }
  nlohmann::json stats = stats_json(config_, sys, profiler.kernels_json(), profiler.ops_json(), r.status, r.cycles, wall);
  if (program_.hbm_peak != 0) stats["hbm"]["program_peak_bytes"] = program_.hbm_peak;  // as tpuc assigned it
  r.stats_json = stats.dump(2) + "\n";
  if (!options_.report_dir.empty()) write_report(options_, config_, sys, stats);
  r.profile = profile_table(stats["kernels"], stats["ops"], r.cycles, 10);
  if (vcd) vcd->close(r.cycles);
  if (trace) {
    trace->kernels(stats["kernels"]);
    trace->finish();
  }
  if (record.is_open()) {
    record.close();
    if (!record) throw Error(fmt::format("{}: write error", options_.record_mxu_path));
  }
  return r;
}

}  // namespace tpu::sim
