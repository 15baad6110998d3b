// tpusim as a user runs it: outputs, stats, VCD (opened by GTKWave's own
// parser when vcd2fst is installed), the Perfetto trace, and bad input.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "../../sim/mxu/mxu_unit.h"
#include "harness.h"
#include "tpu/isa/npy.h"

using namespace tpu;
namespace fs = std::filesystem;

namespace {

const std::string kBin = std::string(TPU_BINARY_DIR) + "/bin/";

struct Cmd {
  int status;
  std::string out, err;
};

Cmd run(const std::string& args, const fs::path& dir) {
  const std::string cmd = fmt::format("cd {} && {} > out.txt 2> err.txt", dir.string(), args);
  Cmd c;
  c.status = std::system(cmd.c_str());
  c.out = isa::read_text_file((dir / "out.txt").string());
  c.err = isa::read_text_file((dir / "err.txt").string());
  return c;
}

fs::path workdir(const std::string& name) {
  fs::path d = fs::path(TPU_BINARY_DIR) / "tests" / "cli_work" / name;
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

// Builds matmul_bias_relu for tiny with inputs in dir.
void prepare(const fs::path& dir) {
  REQUIRE(run(fmt::format("{}tpu-as {}/examples/asm/matmul_bias_relu.s --config tiny -o prog.tpu", kBin, TPU_SOURCE_DIR), dir).status == 0);
  std::vector<uint16_t> x(64), w(64);
  for (size_t i = 0; i < 64; ++i) x[i] = test::bf16_round(float(i % 7) - 3), w[i] = test::bf16_round(float(i % 5) * 0.5f);
  std::vector<float> b(8, 0.25f);
  isa::write_npy((dir / "x.npy").string(), {"<u2", {8, 8}, test::to_bytes(x)});
  isa::write_npy((dir / "w.npy").string(), {"<u2", {8, 8}, test::to_bytes(w)});
  isa::write_npy((dir / "b.npy").string(), {"<f4", {8}, test::to_bytes(b)});
}

// A minimal VCD reader: definitions, then time stamps that never decrease
// and value changes of defined identifiers only.
void check_vcd(const std::string& path, std::set<std::string>& names) {
  std::ifstream in(path);
  std::string tok;
  std::map<std::string, int> ids;
  std::vector<std::string> scope;
  bool defs_done = false;
  long long last_time = -1;
  int changes = 0;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    if (!defs_done) {
      std::string w;
      ls >> w;
      if (w == "$scope") {
        std::string kind, name;
        ls >> kind >> name;
        scope.push_back(name);
      } else if (w == "$upscope") {
        REQUIRE_FALSE(scope.empty());
        scope.pop_back();
      } else if (w == "$var") {
        std::string type, id, name;
        int width;
        ls >> type >> width >> id >> name;
        ids[id] = width;
        std::string full;
        for (const auto& s : scope) full += s + ".";
        names.insert(full + name);
      } else if (w == "$enddefinitions") {
        defs_done = true;
        REQUIRE(scope.empty());
      }
      continue;
    }
    if (line.empty()) continue;
    if (line[0] == '#') {
      const long long t = std::stoll(line.substr(1));
      REQUIRE(t >= last_time);
      last_time = t;
    } else if (line[0] == 'b') {
      const auto sp = line.find(' ');
      REQUIRE(sp != std::string::npos);
      REQUIRE(ids.count(line.substr(sp + 1)));
      REQUIRE(line.find_first_not_of("01", 1) == sp);
      ++changes;
    } else {
      REQUIRE((line[0] == '0' || line[0] == '1'));
      REQUIRE(ids.count(line.substr(1)));
      ++changes;
    }
  }
  REQUIRE(defs_done);
  CHECK(changes > 10);
}

}  // namespace

TEST_CASE("tpusim writes outputs, stats, the resolved config, a VCD and a trace", "[cli]") {
  const fs::path dir = workdir("full");
  prepare(dir);
  auto c = run(fmt::format("{}tpusim prog.tpu --inputs x.npy w.npy b.npy --outputs out --stats out/stats.json "
                           "--vcd out/run.vcd --trace out/trace.json",
                           kBin),
               dir);
  INFO(c.err);
  REQUIRE(c.status == 0);
  CHECK(c.out.find("tpusim: 233 cycles") == 0);
  CHECK(fs::exists(dir / "out/out0.npy"));
  auto y = isa::read_npy((dir / "out/out0.npy").string());
  CHECK(y.descr == "<f4");
  CHECK(y.shape == std::vector<uint64_t>{8, 8});

  auto stats = nlohmann::json::parse(isa::read_text_file((dir / "out/stats.json").string()));
  for (const char* k : {"cycles", "frequency_hz", "seconds", "units", "instructions", "stall_cycles_by_cause", "host"})
    CHECK(stats.contains(k));
  CHECK(stats["cycles"] == 233);
  CHECK(stats["mxu"]["macs"] == 8 * 8 * 8);
  CHECK(stats["mxu"].contains("mac_utilization"));
  for (const char* k : {"bytes_read", "bytes_written", "bandwidth_utilization"}) CHECK(stats["hbm"].contains(k));
  CHECK(stats["hbm"]["bytes_read"] == 2 * 128 + 32);
  CHECK(stats["hbm"]["bytes_written"] == 256);
  CHECK(stats["units"]["core0.mxu0"]["busy_cycles"].get<uint64_t>() > 0);
  CHECK(stats["units"]["core0.vpu"].contains("busy_fraction"));
  CHECK(stats["instructions"]["by_class"]["mxu"] == 3);
  CHECK(stats["host"]["simulated_cycles_per_second"].get<double>() > 0);
  auto cfg = nlohmann::json::parse(isa::read_text_file((dir / "out/stats.config.json").string()));
  CHECK(cfg["name"] == "tiny");
  CHECK(cfg["target"]["mxu_dim"] == 8);

  std::set<std::string> names;
  check_vcd((dir / "out/run.vcd").string(), names);
  for (const char* n : {"tpu.core0.scalar.pc", "tpu.core0.dma.queue", "tpu.core0.mxu0.streaming", "tpu.core0.vpu.state",
                        "tpu.core0.sems.sem3", "tpu.hbm.bytes_read"})
    CHECK(names.count(n));
  CHECK(isa::read_text_file((dir / "out/run.vcd.gtkw").string()).find("-core0.mxu0") != std::string::npos);
  if (fs::exists("/usr/bin/vcd2fst")) {
    auto v = run("vcd2fst out/run.vcd out/run.fst", dir);
    INFO(v.err);
    CHECK(v.status == 0);
    CHECK(fs::file_size(dir / "out/run.fst") > 0);
  }

  auto trace = nlohmann::json::parse(isa::read_text_file((dir / "out/trace.json").string()));
  std::map<int, std::string> tracks;
  std::map<int, int> events;
  for (const auto& e : trace["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "thread_name" && e["tid"].get<int>() < 100) tracks[e["tid"].get<int>()] = e["args"]["name"];
    if (e["ph"] == "X") {
      ++events[e["tid"].get<int>() % 100];  // a unit's lanes: tid unit + 100 x lane
      CHECK(e["args"].contains("text"));
      CHECK(e["args"].contains("pc"));
    }
  }
  CHECK(tracks == std::map<int, std::string>{{0, "scalar"}, {1, "dma"}, {2, "vpu"}, {8, "mxu0"}, {50, "kernels"}});
  for (int t : {0, 1, 2, 8}) CHECK(events[t] > 0);
}

TEST_CASE("waveform time stamps are exact at any clock, with a cycle counter and state names", "[cli]") {
  const fs::path dir = workdir("wavetime");
  prepare(dir);
  // 1.5 GHz: a cycle is 666.67 ps; each stamp is its own cycle's time, rounded, so the last is cycles x 10^12 / 1.5e9.
  REQUIRE(run(fmt::format("{}tpusim prog.tpu --inputs x.npy w.npy b.npy --set clock_hz=1.5e9 --vcd w.vcd --stats s.json -q", kBin), dir).status == 0);
  const auto stats = nlohmann::json::parse(isa::read_text_file((dir / "s.json").string()));
  const uint64_t cycles = stats["cycles"];
  const std::string v = isa::read_text_file((dir / "w.vcd").string());
  const uint64_t last = std::stoull(v.substr(v.rfind("\n#") + 2));
  CHECK(last == (cycles * 2000 + 1) / 3);  // cycles x 10^12 / 1.5e9, rounded
  CHECK(v.find(" cycle [63:0] $end") != std::string::npos);
  CHECK(v.find("#667\n") != std::string::npos);  // cycle 1
  const std::string g = isa::read_text_file((dir / "w.vcd.gtkw").string());
  CHECK(g.find("^1 w.vcd.states\ntpu.core0.vpu.state[1:0]") != std::string::npos);
  CHECK(isa::read_text_file((dir / "w.vcd.states").string()) == "0 idle\n1 busy\n2 stalled\n3 blocked\n");
  CHECK(run(fmt::format("{}tpusim prog.tpu --inputs x.npy w.npy b.npy --vcd a.vcd --fst a.fst", kBin), dir).status != 0);
}

// Skips (before it checks anything) without gtkwave's fst2vcd or in a build
// without an FST writer.
TEST_CASE("FST waveforms have the VCD's time stamps", "[cli]") {
  if (!fs::exists("/usr/bin/fst2vcd")) {
    WARN("SKIPPED: no /usr/bin/fst2vcd (gtkwave)");
    return;
  }
  const fs::path dir = workdir("wavefst");
  prepare(dir);
  const auto f = run(fmt::format("{}tpusim prog.tpu --inputs x.npy w.npy b.npy --set clock_hz=1.5e9 --fst w.fst --stats s.json -q", kBin), dir);
  if (f.status != 0 && f.err.find("no FST writer") != std::string::npos) {
    WARN("SKIPPED: this build has no FST writer");
    return;
  }
  REQUIRE(f.status == 0);
  CHECK(fs::file_size(dir / "w.fst") > 0);
  const uint64_t cycles = nlohmann::json::parse(isa::read_text_file((dir / "s.json").string()))["cycles"];
  auto r = run("fst2vcd w.fst", dir);
  REQUIRE(r.status == 0);
  const std::string& b = r.out;
  CHECK(std::stoull(b.substr(b.rfind("\n#") + 2)) == (cycles * 2000 + 1) / 3);
}

TEST_CASE("a VCD window keeps only those cycles", "[cli]") {
  const fs::path dir = workdir("window");
  prepare(dir);
  REQUIRE(run(fmt::format("{}tpusim prog.tpu --inputs x.npy w.npy b.npy --vcd w.vcd --vcd-window 100:150", kBin), dir).status == 0);
  const std::string v = isa::read_text_file((dir / "w.vcd").string());
  // tiny runs at 1 GHz: one cycle is 1000 ps.
  CHECK(v.find("\n#100000\n") != std::string::npos);
  CHECK(v.find("\n#99000\n") == std::string::npos);
  CHECK(v.find("\n#150000\n") != std::string::npos);  // the closing stamp
  CHECK(v.find("\n#151000\n") == std::string::npos);
}

TEST_CASE("bad invocations fail with one line", "[cli]") {
  const fs::path dir = workdir("bad");
  prepare(dir);
  auto expect = [&](const std::string& args, const std::string& needle) {
    auto c = run(kBin + "tpusim " + args, dir);
    INFO(args << "\n" << c.err);
    CHECK(c.status != 0);
    CHECK(c.err.find(needle) != std::string::npos);
    CHECK(std::count(c.err.begin(), c.err.end(), '\n') == 1);
  };
  expect("prog.tpu --inputs x.npy", "takes 3 input(s) (x, w, b), 1 given");
  expect("prog.tpu --inputs x.npy b.npy w.npy", "b.npy: dtype '<f4' does not match input 'w' of dtype bf16");
  expect("prog.tpu --inputs x.npy w.npy x.npy", "x.npy: dtype '<u2' does not match input 'b' of dtype f32");
  expect("prog.tpu --inputs x.npy w.npy b.npy --config v5e", "compiled for target 'tiny', this machine is 'v5e'");
  expect("prog.tpu --inputs x.npy w.npy b.npy --config nope", "unknown preset 'nope'");
  expect("prog.tpu --inputs x.npy w.npy b.npy --vcd a.vcd --vcd-window 9:3", "START must be below END");
  expect("prog.tpu --mxu=magic", "--mxu");
  expect("missing.tpu", "missing.tpu: cannot open file");
  expect("x.npy", "not a .tpu program");
  expect("prog.tpu --inputs prog.tpu w.npy b.npy", "not a .npy file");
  expect("prog.tpu --inputs x.npy w.npy b.npy --topology 2x2", "the ICI topology 2x2 holds 4 chips, target.chips = 1");
  expect("prog.tpu --inputs x.npy w.npy b.npy --topology 2y2", "topology '2y2' is not of the form X, XxY or XxYxZ");
  expect("prog.tpu --inputs x.npy w.npy b.npy --set target.chips=4", "compiled for another variant of target 'tiny' (chips 1 vs 4)");
  // What was meant, where it is close to a name tpusim knows.
  expect("prog.tpu --inptus x.npy w.npy b.npy", "unknown option '--inptus' (did you mean '--inputs'?)");
  expect("prog.tpu --inputs x.npy w.npy b.npy --config tiyn", "unknown preset 'tiyn' (did you mean 'tiny'?");
  expect("prog.tpu --inputs x.npy w.npy b.npy --set hbm.simple.latency_nss=1", "(did you mean 'hbm.simple.latency_ns'?)");
  expect("prog.tpu extra.npy", "unexpected argument 'extra.npy'");
  isa::write_file((dir / "m.hlo").string(), "HloModule m\n\nENTRY main {\n  ROOT p = f32[4]{0} parameter(0)\n}\n");
  expect("m.hlo", "it reads as HLO or StableHLO text: compile it with tpuc first");
}

// A program assembled for a preset with a target parameter changed runs
// on that target without --config or --set.
TEST_CASE("tpusim adopts the target a program records", "[cli]") {
  const fs::path dir = workdir("adopt");
  prepare(dir);
  REQUIRE(run(fmt::format("{}tpu-as {}/examples/asm/matmul_bias_relu.s --config tiny --set target.hbm_bytes=134217728 -o big.tpu", kBin,
                          TPU_SOURCE_DIR),
              dir)
              .status == 0);
  const auto c = run(fmt::format("{}tpusim big.tpu --inputs x.npy w.npy b.npy --stats s.json -q", kBin), dir);
  INFO(c.err);
  REQUIRE(c.status == 0);
  const auto cfg = nlohmann::json::parse(isa::read_text_file((dir / "s.config.json").string()));
  CHECK(cfg["target"]["hbm_bytes"] == 134217728);
  // A --config given is taken as it is: tiny's own target is another variant.
  CHECK(run(fmt::format("{}tpusim big.tpu --inputs x.npy w.npy b.npy --config tiny -q", kBin), dir).status != 0);
}

TEST_CASE("tpusim runs a program for four chips on the topology it is given", "[cli]") {
  const fs::path dir = workdir("system");
  // Chip c adds c + 1 to semaphore 1 of chip 0, which waits for all of it.
  isa::write_file((dir / "sys.s").string(),
                  "    csrr s1, chip\n    beq s1, s0, root\n    addi s2, s1, 0\nagain:\n    dma.rsig s0, sem1, 1\n"
                  "    addi s2, s2, -1\n    bne s2, s0, again\n    halt\nroot:\n    wait sc, sem1, 6\n    halt\n");
  REQUIRE(run(fmt::format("{}tpu-as sys.s --config tiny --set target.chips=4 -o sys.tpu", kBin), dir).status == 0);
  for (const char* topo : {"", " --topology 4", " --topology 2x2"}) {
    auto c = run(fmt::format("{}tpusim sys.tpu --stats s.json{}", kBin, topo), dir);
    INFO(topo << c.err);
    REQUIRE(c.status == 0);
    const auto st = nlohmann::json::parse(isa::read_text_file((dir / "s.json").string()));
    CHECK(st["chips"] == 4);
    CHECK(st["per_chip"].size() == 4);
    CHECK(st["ici"]["topology"] == (std::string(topo) == " --topology 2x2" ? "2x2 mesh" : "4 torus"));
  }
  // The timeline has a process per chip (each chip's instructions on it),
  // the waveforms a scope per chip.
  auto c = run(fmt::format("{}tpusim sys.tpu --trace t.json --vcd w.vcd", kBin), dir);
  INFO(c.err);
  REQUIRE(c.status == 0);
  const auto t = nlohmann::json::parse(isa::read_text_file((dir / "t.json").string()));
  std::map<int, std::string> procs;
  std::map<int, int> events;
  for (const auto& e : t["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "process_name") procs[e["pid"].get<int>()] = e["args"]["name"];
    if (e["ph"] == "X" && e["cat"] == "scalar") ++events[e["pid"].get<int>()];
  }
  CHECK(procs == std::map<int, std::string>{{0, "chip0 core0"}, {1, "chip1 core0"}, {2, "chip2 core0"}, {3, "chip3 core0"}});
  for (int k = 1; k < 4; ++k) CHECK(events[k] >= 3 + 3 * k);  // csrr, beq, addi, then k + 1 rounds of dma.rsig, addi, bne
  const std::string vcd = isa::read_text_file((dir / "w.vcd").string());
  for (int k = 0; k < 4; ++k) CHECK(vcd.find(fmt::format("$scope module chip{} $end", k)) != std::string::npos);
  // The time series has every chip's columns, each adding up to its unit's
  // busy cycles in stats.json; the report covers the system and its links.
  c = run(fmt::format("{}tpusim sys.tpu --stats s.json --stats-interval 16 --report r", kBin), dir);
  INFO(c.err);
  REQUIRE(c.status == 0);
  const auto st = nlohmann::json::parse(isa::read_text_file((dir / "s.json").string()));
  std::istringstream csv(isa::read_text_file((dir / "s.intervals.csv").string()));
  std::string line;
  std::getline(csv, line);
  std::vector<std::string> cols;
  for (std::istringstream h(line); std::getline(h, line, ',');) cols.push_back(line);
  std::vector<uint64_t> sums(cols.size(), 0);
  size_t rows = 0;
  while (std::getline(csv, line)) {
    std::istringstream r(line);
    for (size_t k = 0; k < cols.size() && std::getline(r, line, ','); ++k) sums[k] += std::stoull(line);
    ++rows;
  }
  CHECK(rows == (st["cycles"].get<uint64_t>() + 15) / 16);
  for (int k = 0; k < 4; ++k) {
    const std::string unit = fmt::format("chip{}.core0.scalar", k);
    const auto at = std::find(cols.begin(), cols.end(), unit + ".busy_cycles");
    REQUIRE(at != cols.end());
    CHECK(sums[size_t(at - cols.begin())] == st["units"][unit]["busy_cycles"].get<uint64_t>());
  }
  const std::string html = isa::read_text_file((dir / "r/index.html").string());
  CHECK(html.find(", 4 chips</h1>") != std::string::npos);
  CHECK(html.find("<h2>ICI links</h2>") != std::string::npos);
}

TEST_CASE("tpusim with the RTL MXU writes the same outputs and its own waveform", "[cli]") {
  if (!sim::rtl_mxu_available(8)) {
    WARN("SKIPPED: this build has no Verilated 8x8 MXU");
    return;
  }
  const fs::path dir = workdir("rtl");
  prepare(dir);
  auto fast = run(fmt::format("{}tpusim prog.tpu --inputs x.npy w.npy b.npy --outputs fast", kBin), dir);
  auto rtl = run(fmt::format("{}tpusim prog.tpu --inputs x.npy w.npy b.npy --outputs rtl --mxu rtl --vcd rtl/model.vcd "
                             "--rtl-trace rtl/mxu.vcd",
                             kBin),
                 dir);
  INFO(rtl.err);
  REQUIRE(rtl.status == 0);
  CHECK(rtl.out == fmt::format("{}", fast.out).replace(fast.out.find("fast"), 4, "rtl"));
  CHECK(isa::read_npy((dir / "rtl/out0.npy").string()).data == isa::read_npy((dir / "fast/out0.npy").string()).data);
  const std::string v = isa::read_text_file((dir / "rtl/mxu.vcd").string());
  CHECK(v.find("$timescale 1ps $end") != std::string::npos);
  CHECK(v.find("acc_we_o") != std::string::npos);
  CHECK(v.find("\n#232000\n") != std::string::npos);  // cycle 232 at 1 ns per cycle, as in model.vcd
  auto bad = run(fmt::format("{}tpusim prog.tpu --inputs x.npy w.npy b.npy --rtl-trace t.vcd", kBin), dir);
  CHECK(bad.status != 0);
  CHECK(bad.err.find("--rtl-trace needs --mxu=rtl") != std::string::npos);
}
