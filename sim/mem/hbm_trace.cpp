#include "tpu/sim/hbm_trace.h"

#include <fmt/format.h>

#include <chrono>
#include <nlohmann/json.hpp>

#include "dram.h"
#include "dram_checker.h"
#include "dram_stats.h"
#include "tpu/isa/error.h"
#include "tpu/isa/file.h"

namespace tpu::sim {

namespace {

struct Line {
  uint64_t addr = 0;
  bool write = false;
  uint64_t cycle = 0;
};

// "0xADDRESS READ|WRITE CYCLE", one a line; blank lines and # comments are skipped.
std::vector<Line> parse_trace(const std::string& path) {
  const std::string text = isa::read_text_file(path);
  std::vector<Line> lines;
  size_t pos = 0, number = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    std::string_view l(text.data() + pos, end - pos);
    pos = end + 1;
    ++number;
    if (const size_t hash = l.find('#'); hash != std::string_view::npos) l = l.substr(0, hash);
    std::vector<std::string_view> words;
    for (size_t i = 0; i < l.size();) {
      while (i < l.size() && std::isspace(static_cast<unsigned char>(l[i]))) ++i;
      const size_t s = i;
      while (i < l.size() && !std::isspace(static_cast<unsigned char>(l[i]))) ++i;
      if (i > s) words.push_back(l.substr(s, i - s));
    }
    if (words.empty()) continue;
    auto fail = [&](const std::string& why) { throw Error(fmt::format("{}:{}: {}", path, number, why)); };
    if (words.size() != 3) fail("expected '0xADDRESS READ|WRITE CYCLE'");
    auto number_of = [&](std::string_view w, int base, const char* what) {
      if (w.empty() || w.size() > (base == 16 ? 16u : 19u)) fail(fmt::format("bad {} '{}'", what, w));
      uint64_t v = 0;
      for (char c : w) {
        const int d = std::isdigit(static_cast<unsigned char>(c)) ? c - '0'
                      : base == 16 && std::isxdigit(static_cast<unsigned char>(c)) ? std::tolower(c) - 'a' + 10
                                                                                  : -1;
        if (d < 0) fail(fmt::format("bad {} '{}'", what, w));
        v = v * uint64_t(base) + uint64_t(d);
      }
      return v;
    };
    std::string_view a = words[0];
    if (a.size() < 3 || a[0] != '0' || (a[1] != 'x' && a[1] != 'X')) fail(fmt::format("bad address '{}' (want 0x...)", a));
    Line ln;
    ln.addr = number_of(a.substr(2), 16, "address");
    if (words[1] == "READ") ln.write = false;
    else if (words[1] == "WRITE") ln.write = true;
    else fail(fmt::format("bad request kind '{}' (READ or WRITE)", words[1]));
    ln.cycle = number_of(words[2], 10, "cycle");
    lines.push_back(ln);
  }
  return lines;
}

}  // namespace

TraceReplayResult replay_hbm_trace(const std::string& path, const isa::MachineConfig& cfg, bool check, uint64_t max_cycles) {
  if (cfg.hbm.model != "detailed")
    throw Error(fmt::format("--hbm-trace replays through the detailed HBM model; this config has hbm.model = '{}' (use "
                            "--set hbm.model=detailed or --config hbm2)",
                            cfg.hbm.model));
  const std::vector<Line> trace = parse_trace(path);
  const uint64_t limit = max_cycles ? max_cycles : ~uint64_t(0);
  for (size_t i = 0; i < trace.size(); ++i)
    if (trace[i].cycle >= limit)
      throw CycleLimit(fmt::format("{}: request {} is at cycle {}, beyond the cycle limit of {}", path, i + 1, trace[i].cycle, limit));
  const auto wall0 = std::chrono::steady_clock::now();
  const isa::DramParams& p = cfg.hbm.detailed;
  dram::Dram mem(p);
  dram::TimingChecker checker(p);
  if (check) mem.set_listener(&checker);
  std::vector<dram::Completion> done;
  size_t next = 0;
  uint64_t cycle = 0, last_done = 0, completed = 0;
  // Requests enter in file order, at most one a cycle, never before their
  // cycle, holding back the rest while the controller cannot take them.
  while (next < trace.size() || !mem.idle()) {
    mem.tick(cycle, done);
    for (const auto& c : done) last_done = std::max(last_done, c.cycle);
    completed += done.size();
    done.clear();
    if (check && checker.violation()) throw std::logic_error("internal error: " + *checker.violation());
    bool fed = false;
    if (next < trace.size() && trace[next].cycle <= cycle && mem.will_accept(trace[next].addr, trace[next].write)) {
      mem.add(next, trace[next].addr, trace[next].write, cycle + 1);
      ++next;
      fed = true;
    }
    uint64_t after = cycle + 1;
    if (!fed) {  // nothing changes until the memory or the trace's next cycle says so
      uint64_t t = mem.next_event(after);
      if (next < trace.size() && trace[next].cycle > cycle) t = std::min(t, trace[next].cycle);
      after = std::max(after, t);
    }
    cycle = after;
    if (cycle >= limit) throw CycleLimit(fmt::format("{}: the replay reached the cycle limit of {}", path, limit));
  }
  TraceReplayResult r;
  r.requests = trace.size();
  r.drain_cycles = trace.empty() ? 0 : last_done;
  r.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
  nlohmann::json hbm = dram::stats_json(mem, r.drain_cycles);
  hbm["model"] = "detailed";
  hbm["device"] = p.preset;
  hbm["drain_cycles"] = r.drain_cycles;
  hbm["drain_ns"] = double(r.drain_cycles) * p.tck_ps / 1000.0;
  hbm["checker"] = check ? (checker.violation() ? "violation" : "passed") : "off";
  hbm["checked_commands"] = checker.commands();
  nlohmann::json j = {{"status", "finished"},
                      {"mode", "hbm-trace"},
                      {"trace", path},
                      {"hbm", hbm},
                      {"host",
                       {{"wall_seconds", r.wall_seconds},
                        {"requests_per_second", r.wall_seconds > 0 ? double(completed) / r.wall_seconds : 0.0}}}};
  r.stats_json = j.dump(2) + "\n";
  return r;
}

}  // namespace tpu::sim
