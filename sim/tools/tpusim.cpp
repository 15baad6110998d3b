// tpusim PROG.tpu [--config CFG] --inputs A.npy ... --outputs DIR [--stats FILE.json]
//        [--vcd FILE.vcd [--vcd-window START:END]] [--trace FILE.json] [--max-cycles N] [--mxu fast|pe]
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <csignal>
#include <cstdlib>

#include <filesystem>
#include <iostream>
#include <systemc>

#include "cli_common.h"
#include "tpu/isa/npy.h"
#include "tpu/sim/hbm_trace.h"
#include "tpu/sim/simulator.h"

namespace {

// Set by SIGINT/SIGTERM: the run stops at the next check, and stats, trace
// and VCD are written as for any other end.
volatile std::sig_atomic_t g_interrupted = 0;
extern "C" void on_interrupt(int) { g_interrupted = 1; }

// The unsigned number s starts with and the characters it takes (0 if none).
std::pair<uint64_t, size_t> leading_number(const std::string& s) {
  if (s.empty() || !std::isdigit(static_cast<unsigned char>(s[0]))) return {0, 0};
  try {
    size_t used = 0;
    const uint64_t v = std::stoull(s, &used);
    return {v, used};
  } catch (const std::exception&) {  // out of range
    return {0, 0};
  }
}

uint64_t parse_cycles(const char* flag, const std::string& s) {
  const auto [v, used] = leading_number(s);
  if (used == 0 || used != s.size()) throw tpu::cli::UsageError(fmt::format("{} '{}' is not a cycle count (0..2^64-1)", flag, s));
  return v;
}

// "8G", "512M", "64K" or a number of bytes.
uint64_t parse_bytes(const char* flag, const std::string& s) {
  const auto [v, used] = leading_number(s);
  const std::string unit = s.substr(used);
  const int shift = unit.empty() ? 0 : unit == "K" ? 10 : unit == "M" ? 20 : unit == "G" ? 30 : -1;
  if (used == 0 || shift < 0 || v == 0 || v > (UINT64_MAX >> shift))
    throw tpu::cli::UsageError(fmt::format("{} '{}' is not a size (bytes, or a number with K, M or G)", flag, s));
  return v << shift;
}

std::pair<uint64_t, uint64_t> parse_window(const char* flag, const std::string& w) {
  const auto colon = w.find(':');
  if (colon == std::string::npos) throw tpu::cli::UsageError(fmt::format("{} '{}' is not START:END", flag, w));
  auto num = [&](const std::string& s, uint64_t dflt) -> uint64_t {
    if (s.empty()) return dflt;
    const auto [v, used] = leading_number(s);
    if (used == 0 || used != s.size()) throw tpu::cli::UsageError(fmt::format("{} '{}': '{}' is not a cycle number", flag, w, s));
    return v;
  };
  const uint64_t a = num(w.substr(0, colon), 0), b = num(w.substr(colon + 1), UINT64_MAX);
  if (a >= b) throw tpu::cli::UsageError(fmt::format("{} '{}': START must be below END", flag, w));
  return {a, b};
}

}  // namespace

// SystemC prints its banner on stdout before sc_main unless told not to; our
// own main says so first, then hands over to SystemC, which calls sc_main.
int main(int argc, char* argv[]) {
  setenv("SYSTEMC_DISABLE_COPYRIGHT_MESSAGE", "1", 0);
  return sc_core::sc_elab_and_sim(argc, argv);
}

int sc_main(int argc, char* argv[]) {
  CLI::App app{"tpusim: run a .tpu program on the cycle-accurate SystemC model of a TPU; a program's own checks "
               "(StableHLO check.expect_*) are evaluated after the run, one line each, exit 5 if any fails"};
  app.name("tpusim");
  std::string program_path, config, outputs_dir, stats_path, vcd_path, vcd_window, trace_path, trace_window, rtl_trace, record_mxu,
      stats_interval, report_dir, fst_path, mxu = "fast";
  std::vector<std::string> inputs, settings, log_units;
  std::string print_config, hbm_trace;
  bool no_check = false;
  std::string max_cycles = std::to_string(tpu::sim::kDefaultMaxCycles);
  std::string memory_budget = fmt::format("{}G", tpu::sim::kDefaultMemoryBudget >> 30);
  bool quiet = false, profile = false;
  app.add_option("program", program_path, "program (.tpu)");
  app.add_option("--set", settings,
                 "KEY=VALUE: change one parameter of the machine (hbm.simple.bandwidth_bytes_per_s=1.6e12); repeatable; a target "
                 "parameter must match the program's (give tpuc the same --set)")
      ->allow_extra_args(false);
  app.add_option("--hbm-trace", hbm_trace,
                 "replay a memory trace (DRAMsim3's format: 0xADDR READ|WRITE CYCLE) through the config's detailed HBM model "
                 "alone, with the timing checker; --stats gets the figures (docs/memory.md)");
  app.add_flag("--no-dram-check", no_check,
               "do not check every DRAM command against the device's timing rules (the detailed HBM model and --hbm-trace; "
               "faster)");
  std::string topology;
  app.add_option("--topology", topology,
                 "the system's grid of chips, X, XxY or XxYxZ (ring, 2-D or 3-D torus; a mesh with --set ici.wrap=0); its chips "
                 "must be the program's (default: the preset's shape for the program's chip count; docs/system.md)");
  app.add_option("--print-config", print_config, "print the resolved config of a preset or file (with any --set) and exit");
  app.add_option("--config", config,
                 "machine: a preset (tiny, v1, v4, v5e) or a config file; its target must be the program's "
                 "(default: the target the program was compiled for: its preset with the target parameters it records)");
  app.add_option("--inputs", inputs, "one .npy per ENTRY parameter, in order")->expected(0, -1);
  app.add_option("--outputs", outputs_dir, "directory for out0.npy, out1.npy, ... (created if missing)");
  app.add_option("--stats", stats_path, "statistics (JSON); the resolved config is written beside it as *.config.json");
  app.add_option("--vcd", vcd_path, "waveforms (VCD); a GTKWave save file grouping them by unit goes to FILE.gtkw (FILE: the whole VCD path)");
  app.add_option("--fst", fst_path, "waveforms as FST (GTKWave's compressed format) instead of a VCD, with the same .gtkw");
  app.add_option("--vcd-window", vcd_window, "only cycles START:END of the waveforms (either may be empty)");
  app.add_option("--trace", trace_path, "instruction timeline as Chrome/Perfetto trace-event JSON");
  app.add_option("--trace-window", trace_window, "only instructions overlapping cycles START:END in the trace (either may be empty)");
  app.add_option("--log-units", log_units,
                 "log every instruction of these units (scalar, dma, vpu, mxu0, ..., or all; comma-separated) as debug lines "
                 "with their cycles")
      ->delimiter(',');
  app.add_option("--report", report_dir,
                 "DIR/index.html: one page with the totals, where the cycles went by kernel and HLO op, unit busy fractions "
                 "over time, HBM bandwidth, a roofline and stalls (with the stats beside it, DIR/stats.json)");
  app.add_option("--stats-interval", stats_interval,
                 "with --stats F.json: a time series every N cycles in F.intervals.csv (busy cycles per unit, MACs, HBM bytes; "
                 "its rows add up to the totals)");
  app.add_option("--max-cycles", max_cycles,
                 fmt::format("stop with an error (exit 3) after N cycles; 0: no limit (default {}; with --hbm-trace, memory "
                             "cycles, default {})",
                             tpu::sim::kDefaultMaxCycles, tpu::sim::kDefaultTraceMaxCycles));
  app.add_option("--memory-budget", memory_budget,
                 "host memory the simulated memories may fill (8G, 512M, ...); a program touching more stops with exit 3 "
                 "(default " + memory_budget + ")");
  app.add_option("--mxu", mxu,
                 "MXU model: fast (whole rows at once), pe (every PE register every cycle) or rtl (the Verilated RTL "
                 "of hw/, for the array sizes it was built for)")
      ->check(CLI::IsMember({"fast", "pe", "rtl"}));
  app.add_option("--rtl-trace", rtl_trace, "with --mxu=rtl: the RTL's own waveform (VCD), on the time base of --vcd");
  app.add_option("--record-mxu", record_mxu,
                 "core 0 MXU 0's command stream (chip 0's) with the VMEM rows it reads, for the RTL lockstep harness");
  app.add_flag("-q,--quiet", quiet, "print nothing on success");
  app.add_flag("--profile", profile,
               "print the 10 kernels and HLO ops that took the most cycles (stats.json has all of them: docs/stats.md)");
  if (int rc = tpu::cli::parse(app, argc, argv); rc >= 0) return rc;

  return tpu::cli::run([&] {
    if (!topology.empty()) {
      const auto shape = tpu::isa::parse_topology(topology);
      for (int a = 0; a < 3; ++a) settings.push_back(fmt::format("ici.{}={}", "xyz"[a], shape[size_t(a)]));
    }
    if (!print_config.empty()) {
      std::cout << tpu::sim::load_config(print_config, settings).to_json();
      return 0;
    }
    if (!hbm_trace.empty()) {
      if (!program_path.empty()) throw tpu::cli::UsageError("give a program or --hbm-trace, not both");
      const tpu::sim::MachineConfig cfg = tpu::sim::load_config(config.empty() ? "hbm2" : config, settings);
      const bool limit_given = app.count("--max-cycles") > 0;
      tpu::sim::TraceReplayResult r;
      try {
        r = tpu::sim::replay_hbm_trace(hbm_trace, cfg, !no_check,
                                       limit_given ? parse_cycles("--max-cycles", max_cycles) : tpu::sim::kDefaultTraceMaxCycles);
      } catch (const tpu::sim::CycleLimit& e) {
        spdlog::error("{}; --max-cycles N raises the limit, 0 removes it", e.what());
        return 3;
      }
      if (!stats_path.empty()) tpu::isa::write_file(stats_path, r.stats_json);
      if (!quiet)
        std::cout << fmt::format("tpusim: {} requests drained in {} memory cycles ({:.1f} ns) on {}\n", r.requests, r.drain_cycles,
                                 double(r.drain_cycles) * cfg.hbm.detailed.tck_ps / 1000.0, cfg.target.name);
      return 0;
    }
    if (program_path.empty()) throw tpu::cli::UsageError("program is required (or --hbm-trace TRACE)");
    tpu::isa::Program program = tpu::isa::load_file(program_path);
    if (config.empty() && !tpu::isa::preset_text(program.target.name))
      throw tpu::cli::UsageError(fmt::format("{} was compiled for target '{}', which is not a preset: give the config tpuc had "
                                             "with --config FILE",
                                             program_path, program.target.name));
    // The program's chips unless --set says otherwise; without --config,
    // its whole target (a preset varied with tpuc --set target.KEY=...).
    const bool adopt = config.empty();
    if (config.empty()) config = program.target.name;
    std::optional<tpu::isa::Target> base;
    try {
      base = tpu::isa::load_target(config);
    } catch (const std::runtime_error&) {  // load_config reports it below
    }
    for (const auto& f : tpu::isa::target_fields()) {
      const std::string key = fmt::format("target.{}=", f.key);
      const bool set = std::any_of(settings.begin(), settings.end(), [&](const std::string& s) { return s.rfind(key, 0) == 0; });
      if (base && !set && (adopt || std::string_view(f.key) == "chips") && (*base).*f.member != program.target.*f.member)
        settings.push_back(fmt::format("{}{}", key, program.target.*f.member));
    }
    tpu::sim::MachineConfig cfg = tpu::sim::load_config(config, settings);

    const auto ins = program.inputs();
    if (inputs.size() != ins.size())
      throw tpu::cli::UsageError(fmt::format("{} takes {} input(s) ({}), {} given with --inputs", program_path, ins.size(),
                                   [&] {
                                     std::vector<std::string> n;
                                     for (auto* s : ins) n.push_back(s->name);
                                     return fmt::format("{}", fmt::join(n, ", "));
                                   }(),
                                   inputs.size()));
    std::vector<std::vector<uint8_t>> in_bytes;
    for (size_t i = 0; i < ins.size(); ++i)
      in_bytes.push_back(tpu::isa::npy_to_tensor(tpu::isa::read_npy(inputs[i]), *ins[i], inputs[i]));

    // The flags' combinations, then the output locations (created up front,
    // so a bad path fails before the run).
    tpu::sim::SimOptions opts;
    opts.pe_level_mxu = mxu == "pe";
    opts.rtl_mxu = mxu == "rtl";
    opts.rtl_trace_path = rtl_trace;
    opts.dram_check = !no_check;
    opts.record_mxu_path = record_mxu;
    opts.max_cycles = parse_cycles("--max-cycles", max_cycles);
    opts.memory_budget = parse_bytes("--memory-budget", memory_budget);
    if (!fst_path.empty() && !vcd_path.empty()) throw tpu::cli::UsageError("give one of --vcd and --fst");
    if (!fst_path.empty()) vcd_path = fst_path, opts.fst = true;
    if (!vcd_window.empty() && vcd_path.empty()) throw tpu::cli::UsageError("--vcd-window needs --vcd FILE or --fst FILE");
    if (!vcd_window.empty()) std::tie(opts.vcd_start, opts.vcd_end) = parse_window("--vcd-window", vcd_window);
    if (!trace_window.empty() && trace_path.empty()) throw tpu::cli::UsageError("--trace-window needs --trace FILE");
    if (!trace_window.empty()) std::tie(opts.trace_start, opts.trace_end) = parse_window("--trace-window", trace_window);
    if (!report_dir.empty() && stats_path.empty()) stats_path = (std::filesystem::path(report_dir) / "stats.json").string();
    if (!stats_interval.empty() && stats_path.empty()) throw tpu::cli::UsageError("--stats-interval needs --stats FILE.json");
    if (!stats_interval.empty()) {
      opts.stats_interval = parse_cycles("--stats-interval", stats_interval);
      if (opts.stats_interval == 0) throw tpu::cli::UsageError("--stats-interval must be at least 1 cycle");
      std::filesystem::path p(stats_path);
      opts.intervals_path = (p.parent_path() / (p.stem().string() + ".intervals.csv")).string();
    }
    opts.interrupt = &g_interrupted;
    opts.vcd_path = vcd_path;
    opts.trace_path = trace_path;
    opts.report_dir = report_dir;
    opts.report_stats_path = stats_path;
    opts.progress = !quiet && isatty(STDERR_FILENO);
    if (auto why = tpu::sim::check_log_units(log_units); !why.empty()) throw tpu::cli::UsageError(why);
    opts.log_units = log_units;
    if (!log_units.empty() && spdlog::get_level() > spdlog::level::debug) spdlog::set_level(spdlog::level::debug);
    spdlog::info("{}: {} instructions, {} inputs, {} outputs, {} checks, {} kernels; machine {} at {:.3g} GHz", program_path,
                 program.code.size(), program.inputs().size(), program.outputs().size(), program.checks.size(), program.kernels.size(),
                 cfg.target.name, double(cfg.clock_hz) / 1e9);

    if (!outputs_dir.empty()) std::filesystem::create_directories(outputs_dir);
    if (!report_dir.empty()) std::filesystem::create_directories(report_dir);
    for (const std::string* f : {&stats_path, &vcd_path, &trace_path, &rtl_trace, &record_mxu})
      if (!f->empty() && std::filesystem::path(*f).has_parent_path())
        std::filesystem::create_directories(std::filesystem::path(*f).parent_path());

    std::signal(SIGINT, on_interrupt);
    std::signal(SIGTERM, on_interrupt);
    tpu::sim::Simulator sim(cfg, program, opts);
    tpu::sim::RunResult r = sim.run(in_bytes);

    if (!stats_path.empty()) {
      tpu::isa::write_file(stats_path, r.stats_json);
      std::filesystem::path p(stats_path);
      tpu::isa::write_file((p.parent_path() / (p.stem().string() + ".config.json")).string(), cfg.to_json());
    }
    if (r.status == tpu::sim::RunStatus::interrupted) {
      spdlog::error("{}", *r.fault);
      return 130;
    }
    if (r.fault) {
      const bool limit = r.status == tpu::sim::RunStatus::cycle_limit;
      spdlog::error("{}{}", *r.fault, limit ? "; --max-cycles N raises the limit, 0 removes it" : "");
      return 3;
    }
    // The program's own checks (StableHLO check.expect_*), before the
    // outputs are handed over: one line each.
    const auto outs = program.outputs();
    size_t failed = 0;
    for (size_t k = 0; k < program.checks.size(); ++k) {
      const tpu::isa::Check& c = program.checks[k];
      const auto o = tpu::isa::evaluate_check(c, *outs[c.actual], r.outputs[c.actual], r.outputs[c.expected]);
      failed += !o.pass;
      std::cout << fmt::format("check {} {} {} vs {}: {} ({})\n", k, tpu::isa::check_kind_name(c.kind), outs[c.actual]->name,
                               outs[c.expected]->name, o.pass ? "PASS" : "FAIL", o.detail);
    }
    if (!outputs_dir.empty())
      for (size_t i = 0; i < outs.size(); ++i)
        tpu::isa::write_npy((std::filesystem::path(outputs_dir) / fmt::format("out{}.npy", i)).string(),
                            tpu::isa::tensor_to_npy(*outs[i], std::move(r.outputs[i])));
    if (profile)
      std::cout << (r.profile.empty() ? std::string("tpusim: the program has no kernel table (tpuc writes one; tpu-as only with .kernel)\n")
                                      : r.profile);
    if (!quiet)
      std::cout << fmt::format("tpusim: {} cycles ({:.3f} us at {:.3g} GHz on {}){}\n", r.cycles,
                               double(r.cycles) / double(cfg.clock_hz) * 1e6, double(cfg.clock_hz) / 1e9, cfg.target.name,
                               outputs_dir.empty() ? "" : ", outputs in " + outputs_dir);
    if (failed) {
      spdlog::error("{} of {} checks failed", failed, program.checks.size());
      return 5;
    }
    return 0;
  });
}
