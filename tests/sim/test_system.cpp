// Systems of chips joined by ICI: a ring all-reduce written in assembly
// (dma.rcp between neighbours, the VPU adding what arrives) on rings and tori
// of 2 to 64 chips, checked against the host's sum; the links' load against
// their bandwidth; the time of a large all-reduce against the alpha-beta
// model (../docs/system.md); the faults of remote transfers.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <random>

#include "harness.h"

using namespace tpu;
using namespace tpu::test;

namespace {

// A config of `preset` with `chips` chips in `topology` ("" for the preset's
// shape) and the simple HBM model.
sim::MachineConfig system_config(const std::string& preset, uint32_t chips, const std::string& topology = "") {
  std::vector<std::string> set = {"hbm.model=simple", fmt::format("target.chips={}", chips)};
  if (!topology.empty()) {
    const auto s = isa::parse_topology(topology);
    for (int a = 0; a < 3; ++a) set.push_back(fmt::format("ici.{}={}", "xyz"[a], s[size_t(a)]));
  }
  return sim::load_config(preset, set);
}

isa::Program assemble_with(const std::string& source, const sim::MachineConfig& cfg) { return assemble_for(source, cfg.target); }

// A run that moved `bytes` over one link (each way, where both are used):
// at least the link's time, at most 10% more plus `hops` hops and `slack`.
void check_link_time(const SimRun& r, const sim::MachineConfig& cfg, uint64_t bytes, double hops, double slack) {
  const double link = double(bytes) * double(cfg.clock_hz) / double(cfg.ici.link_bandwidth_bytes_per_s);
  INFO(r.cycles << " cycles, the link alone " << link << ", a hop " << cfg.ici_hop_cycles());
  CHECK(double(r.cycles) >= link);
  CHECK(double(r.cycles) <= 1.1 * link + hops * double(cfg.ici_hop_cycles()) + slack);
}

enum class Collective { none, all_gather, all_reduce };

// All-reduce (sum) of row `chip` of X f32[n, n * chunk] over the ring
// 0 -> 1 -> ... -> n-1 -> 0: n - 1 reduce-scatter steps (send a chunk to the
// next chip, add the chunk that arrives from the previous one), then n - 1
// all-gather steps (pass the finished chunks on). Chunks go in `pieces`
// pieces, each sent on as soon as it is added (or has arrived), so the adds
// and the links overlap. Every chip stores the result; chip 0's is the
// output. Each chip's code is its own block, chosen by its `chip` CSR.
// all_gather: only the all-gather of the chunk each chip starts with (as
// the alpha-beta model counts it); none: only the load and the store.
std::string ring_allreduce(uint32_t n, uint64_t chunk, uint32_t lanes, Collective what, uint64_t pieces = 1) {
  const uint64_t cb = chunk * 4, row = n * cb, vb = uint64_t(lanes) * 4, pb = cb / pieces;
  const uint64_t in = 0, out = n * row;    // HBM
  const uint64_t buf = 0, recv = row;      // VMEM: the row, then n - 1 receive slots
  std::string s = fmt::format(".input x, f32[{}, {}], {}\n.output y, f32[{}], {}\n", n, n * chunk, in, n * chunk, out);
  s += "    csrr s1, chip\n";
  for (uint32_t c = 1; c < n; ++c) s += fmt::format("    li s2, {}\n    beq s1, s2, chip{}\n", c, c);
  auto mod = [n](int64_t v) { return uint64_t(((v % n) + n) % n); };
  for (uint32_t c = 0; c < n; ++c) {
    s += fmt::format("chip{}:\n", c);
    s += fmt::format("    li s3, {}\n    li s4, {}\n    li s5, {}\n    dma.ld s4, s3, s5, sem0\n    wait dma, sem0, 1\n",
                     in + c * row, buf, row);
    s += fmt::format("    li s6, {}\n    li s7, {}\n", (c + 1) % n, pb);
    const bool reduce = what == Collective::all_reduce;
    for (uint32_t st = 0; st + 1 < n && reduce; ++st) {  // reduce-scatter
      const uint64_t send = mod(int64_t(c) - st), got = mod(int64_t(c) - st - 1);
      for (uint64_t p = 0; p < pieces; ++p) {
        if (st > 0) s += "    wait dma, sem2, 1\n";  // the piece's sum is in
        s += fmt::format("    li s8, {}\n    li s9, {}\n    dma.rcp s6, s8, s9, s7, sem1\n", recv + st * cb + p * pb,
                         buf + send * cb + p * pb);
      }
      for (uint64_t p = 0; p < pieces; ++p) {
        s += "    wait vpu, sem1, 1\n";
        for (uint64_t v = p * pb; v < (p + 1) * pb; v += vb) {
          const uint64_t a = buf + got * cb + v;
          s += fmt::format("    vld.f32 v0, s0, {}\n    vld.f32 v1, s0, {}\n    vadd.f32 v0, v0, v1\n    vst.f32 v0, s0, {}\n", a,
                           recv + st * cb + v, a);
        }
        s += "    signal vpu, sem2, 1\n";
      }
    }
    const int64_t first = reduce ? int64_t(c) + 1 : int64_t(c);  // the chunk this chip holds whole
    for (uint32_t st = 0; st + 1 < n && what != Collective::none; ++st) {  // all-gather
      const uint64_t k = mod(first - st);
      for (uint64_t p = 0; p < pieces; ++p) {
        if (st > 0) s += "    wait dma, sem3, 1\n";          // the piece has arrived
        else if (reduce && n > 1) s += "    wait dma, sem2, 1\n";  // the piece's sum is in
        s += fmt::format("    li s8, {}\n    dma.rcp s6, s8, s8, s7, sem3\n", buf + k * cb + p * pb);
      }
    }
    if (what != Collective::none) s += fmt::format("    wait dma, sem3, {}\n", pieces);
    s += fmt::format("    li s3, {}\n    dma.st s3, s4, s5, sem4\n    wait sc, sem4, 1\n    halt\n", out);
  }
  return s;
}

struct AllReduce {
  SimRun run;
  std::vector<float> expected;
};

AllReduce run_allreduce(const sim::MachineConfig& cfg, uint64_t chunk, Collective what = Collective::all_reduce, uint64_t pieces = 1) {
  const uint32_t n = uint32_t(cfg.target.chips);
  const uint32_t seed = 1234 + n;
  INFO("seed " << seed);
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> d(-1000, 1000);  // integers: every order of the sum is exact
  std::vector<float> x(size_t(n) * n * chunk);
  for (float& v : x) v = float(d(rng));
  AllReduce r;
  r.expected.assign(size_t(n) * chunk, 0.0f);
  for (size_t e = 0; e < r.expected.size(); ++e)
    for (uint32_t c = 0; c < n; ++c) {
      // all-gather alone: chunk k comes from chip k
      const size_t owner = e / chunk;
      if (what == Collective::all_reduce || (what == Collective::all_gather && c == owner) || (what == Collective::none && c == 0))
        r.expected[e] += x[c * r.expected.size() + e];
    }
  r.run = simulate(assemble_with(ring_allreduce(n, chunk, uint32_t(cfg.target.vpu_lanes), what, pieces), cfg), cfg, {to_bytes(x)});
  return r;
}

void check_allreduce(const sim::MachineConfig& cfg, uint64_t chunk) {
  const AllReduce r = run_allreduce(cfg, chunk);
  INFO(cfg.target.chips << " chips, " << r.run.stats.value("ici", nlohmann::json{}).value("topology", std::string("1")));
  REQUIRE_FALSE(r.run.fault);
  REQUIRE(r.run.outputs.size() == 1);
  CHECK(from_bytes<float>(r.run.outputs[0]) == r.expected);
  const auto& st = r.run.stats;
  REQUIRE(st["chips"] == cfg.target.chips);
  // Every core of every chip sends 2 (n - 1) chunks; a link never carries
  // more than its bandwidth.
  const uint64_t n = cfg.target.chips;
  CHECK(st["ici"]["bytes_delivered"] == 2 * (n - 1) * n * chunk * 4 * cfg.target.cores);
  for (const auto& l : st["ici"]["links"]) CHECK(l["utilization"].get<double>() <= 1.0);
  const double cap = double(cfg.ici.link_bandwidth_bytes_per_s) / double(cfg.clock_hz);
  for (const auto& l : st["ici"]["links"]) CHECK(l["busy_cycles"].get<double>() * cap >= double(l["bytes"].get<uint64_t>()) - 1e-6);
}

}  // namespace

TEST_CASE("system: ring all-reduce on rings of 2, 4 and 8 chips", "[system]") {
  for (uint32_t n : {2u, 4u, 8u}) check_allreduce(system_config("tiny", n), 16);
}

TEST_CASE("system: ring all-reduce on 2-D tori (2x2, 4x4, 2x8) and a 3-D torus (2x2x4)", "[system]") {
  check_allreduce(system_config("v5e", 4), 256);
  check_allreduce(system_config("v5e", 16, "4x4"), 128);
  check_allreduce(system_config("v5e", 16, "2x8"), 128);
  check_allreduce(system_config("v4", 16, "2x2x4"), 128);
}

TEST_CASE("system: all-reduce on 16 chips of a mesh (no wrap-around links) and on 64 chips of a 4x4x4 torus", "[system]") {
  auto mesh = system_config("tiny", 16, "4x4");
  mesh.ici.wrap = 0;
  check_allreduce(mesh, 8);
  check_allreduce(system_config("v4", 64), 128);
}

// Sleeping units (docs/timing.md) must change nothing but host time: here
// with ICI signals and remote writes, which arrive on the falling edge.
TEST_CASE("system: units that sleep give the cycles, outputs and statistics of units that run every cycle", "[system]") {
  for (const auto& cfg : {system_config("tiny", 8), system_config("v5e", 4)}) {
    const uint32_t n = uint32_t(cfg.target.chips);
    const isa::Program prog = assemble_with(ring_allreduce(n, 64, uint32_t(cfg.target.vpu_lanes), Collective::all_reduce, 2), cfg);
    std::vector<float> x(size_t(n) * n * 64);
    for (size_t i = 0; i < x.size(); ++i) x[i] = float(int(i % 17) - 8);
    sim::SimOptions awake;
    awake.sleep = false;
    auto slept = simulate(prog, cfg, {to_bytes(x)}), every = simulate(prog, cfg, {to_bytes(x)}, awake);
    INFO(n << " chips of " << cfg.target.name);
    REQUIRE_FALSE(slept.fault);
    CHECK(slept.cycles == every.cycles);
    CHECK(slept.outputs == every.outputs);
    slept.stats.erase("host"), every.stats.erase("host");
    CHECK(slept.stats == every.stats);
  }
}

TEST_CASE("system: a large all-gather and all-reduce take the alpha-beta model's time within 10%", "[system]") {
  // Ring of 4 v5e chips: T = (n - 1)/n S/B + (n - 1) alpha for the
  // all-gather, twice that for the all-reduce (REFERENCE: ASTRA-sim's
  // analytical model), B one link's bytes per cycle, alpha a hop's cycles.
  // The collective's time is the run's less that of the same load and
  // store without it.
  const auto cfg = system_config("v5e", 4, "4");
  const uint64_t chunk = 64 * 1024, pieces = 8;  // 256 KiB a chunk, S = 1 MiB
  const double n = 4, S = double(4 * chunk * 4);
  const double B = double(cfg.ici.link_bandwidth_bytes_per_s) / double(cfg.clock_hz), alpha = double(cfg.ici_hop_cycles());
  const double gather = (n - 1) / n * S / B + (n - 1) * alpha;
  const AllReduce base = run_allreduce(cfg, chunk, Collective::none);
  REQUIRE_FALSE(base.run.fault);
  CHECK(from_bytes<float>(base.run.outputs[0]) == base.expected);
  // The all-gather passes whole chunks on, as the model counts it; the
  // all-reduce sends pieces, so the adds overlap the links.
  for (Collective what : {Collective::all_gather, Collective::all_reduce}) {
    const AllReduce r = run_allreduce(cfg, chunk, what, what == Collective::all_reduce ? pieces : 1);
    REQUIRE_FALSE(r.run.fault);
    CHECK(from_bytes<float>(r.run.outputs[0]) == r.expected);
    const double model = what == Collective::all_reduce ? 2 * gather : gather;
    const double took = double(r.run.cycles - base.run.cycles);
    INFO((what == Collective::all_reduce ? "all-reduce" : "all-gather") << ": " << took << " cycles, model " << model);
    CHECK(std::abs(took - model) < 0.10 * model);
    CHECK(r.run.stats["ici"]["max_link_utilization"].get<double>() <= 1.0);
  }
}

TEST_CASE("system: the chip CSRs, and faults and deadlocks that name the chip", "[system]") {
  const auto cfg = system_config("tiny", 4);
  // Chip c signals chip 0 c times: chip 0 waits for 1 + 2 + 3 of them
  // (had every chip read 0 from its `chip` CSR, chip 0 would wait forever).
  const std::string csr = "    csrr s1, chip\n    beq s1, s0, root\nagain:\n    dma.rsig s0, sem1, 1\n    addi s1, s1, -1\n"
                          "    bne s1, s0, again\n    halt\nroot:\n    csrr s2, nchips\n    li s3, 4\n    bne s2, s3, root\n"
                          "    wait sc, sem1, 6\n    halt\n";
  auto r = simulate(assemble_with(csr, cfg), cfg, {});
  CHECK(r.fault.value_or("") == "");
  // A copy to a chip that does not exist.
  r = simulate(assemble_with("    li s1, 9\n    li s2, 64\n    dma.rcp s1, s0, s0, s2, sem0\n    halt\n", cfg), cfg, {});
  REQUIRE(r.fault);
  CHECK_THAT(*r.fault, Catch::Contains("dma.rcp: chip 9 does not exist (the system has 4)"));
  CHECK_THAT(*r.fault, Catch::StartsWith("chip 0: ") || Catch::Contains("chip 1: "));
  // Past the end of the other chip's VMEM.
  r = simulate(assemble_with(fmt::format("    li s1, 1\n    li s2, 64\n    li s3, {}\n    dma.rcp s1, s3, s0, s2, sem0\n    halt\n",
                                         cfg.target.vmem_bytes - 32),
                             cfg),
               cfg, {});
  REQUIRE(r.fault);
  CHECK_THAT(*r.fault, Catch::Contains("chip 1's VMEM"));
  // Chip 3 waits for a signal chip 2 never sends: the deadlock names chip 3.
  r = simulate(assemble_with("    csrr s1, chip\n    li s2, 3\n    bne s1, s2, end\n    wait sc, sem5, 1\nend:\n    halt\n", cfg), cfg, {});
  REQUIRE(r.fault);
  CHECK_THAT(*r.fault, Catch::Contains("deadlock") && Catch::Contains("chip 3 core 0: scalar"));
  // dma.rsig releases it.
  r = simulate(assemble_with("    csrr s1, chip\n    li s2, 3\n    li s4, 2\n    beq s1, s4, send\n    bne s1, s2, end\n"
                             "    wait sc, sem5, 1\n    jmp end\nsend:\n    dma.rsig s2, sem5, 1\nend:\n    halt\n",
                             cfg),
               cfg, {});
  CHECK(r.fault.value_or("") == "");
}

TEST_CASE("system: tiled inputs go to their chips and tiled outputs are gathered", "[system]") {
  // x f32[4, 16] in 2 x 2 tiles of 2 x 8 over 4 tiny chips (8 lanes): each
  // chip doubles its tile; y has x's tiling, z is chip 0's whole copy of w.
  const auto cfg = system_config("tiny", 4);
  const std::string src =
      ".input x, f32[4, 16], 0, tiles [2, 2]\n.input w, s32[8], 64\n"
      ".output y, f32[4, 16], 128, tiles [2, 2]\n.output z, s32[8], 64\n"
      "    li s1, 64\n    dma.ld s0, s0, s1, sem0\n    wait vpu, sem0, 1\n"
      "    vld.f32 v0, s0, 0\n    vadd.f32 v0, v0, v0\n    vst.f32 v0, s0, 0\n"
      "    vld.f32 v1, s0, 32\n    vadd.f32 v1, v1, v1\n    vst.f32 v1, s0, 32\n"
      "    signal vpu, sem1, 1\n    wait dma, sem1, 1\n    li s2, 128\n    dma.st s2, s0, s1, sem2\n    wait sc, sem2, 1\n    halt\n";
  std::vector<float> x(64);
  std::vector<int32_t> w(8);
  const uint32_t seed = 77;
  INFO("seed " << seed);
  std::mt19937 rng(seed);
  for (float& v : x) v = float(int(rng() % 2001) - 1000) / 8.0f;
  for (int32_t& v : w) v = int32_t(rng());
  const auto r = simulate(assemble_with(src, cfg), cfg, {to_bytes(x), to_bytes(w)});
  REQUIRE(r.fault.value_or("") == "");
  std::vector<float> y2(64);
  for (size_t k = 0; k < 64; ++k) y2[k] = 2 * x[k];
  CHECK(from_bytes<float>(r.outputs[0]) == y2);
  CHECK(from_bytes<int32_t>(r.outputs[1]) == w);
  CHECK(r.stats["per_chip"][3]["hbm_bytes_read"] == 64);
}

// dma.rst: chip c writes its tile of x into chip c + 1's HBM (the tile of
// y there), over ICI, written by that chip's DMA engine; each chip waits
// for the write it receives. Gathered, y is x turned by one tile. A large
// one takes the link's time; past the end of the other chip's HBM is a
// fault naming it.
TEST_CASE("system: dma.rst writes another chip's HBM", "[system]") {
  const auto cfg = system_config("tiny", 4);
  const std::string src =
      ".input x, f32[32], 0, tiles [4]\n.output y, f32[32], 256, tiles [4]\n"
      "    li s1, 32\n    dma.ld s0, s0, s1, sem0\n    wait dma, sem0, 1\n"
      "    csrr s2, chip\n    addi s3, s2, 1\n    li s4, 4\n    bne s3, s4, go\n    li s3, 0\ngo:\n"
      "    li s5, 256\n    dma.rst s3, s5, s0, s1, sem3\n    wait sc, sem3, 1\n    halt\n";
  std::vector<float> x(32);
  for (size_t k = 0; k < x.size(); ++k) x[k] = float(k) * 1.5f - 7.0f;
  const auto r = simulate(assemble_with(src, cfg), cfg, {to_bytes(x)});
  REQUIRE(r.fault.value_or("") == "");
  std::vector<float> want(32);
  for (size_t k = 0; k < 32; ++k) want[(k + 8) % 32] = x[k];
  CHECK(from_bytes<float>(r.outputs[0]) == want);
  for (int c = 0; c < 4; ++c) CHECK(r.stats["per_chip"][size_t(c)]["hbm_bytes_written"] == 32);
  CHECK(r.stats["ici"]["bytes_delivered"] == 4 * 32);

  // 64 KiB from chip 0 to chip 1 of a ring of 2: the link's time and a hop.
  const auto two = system_config("tiny", 2);
  const uint64_t bytes = 65536;
  const auto big = simulate(assemble_with(fmt::format("    csrr s2, chip\n    bne s2, s0, recv\n    li s1, {}\n    li s3, 1\n"
                                                      "    dma.rst s3, s0, s0, s1, sem3\n    halt\nrecv:\n    wait sc, sem3, 1\n    halt\n",
                                                      bytes),
                                          two),
                            two, {});
  REQUIRE(big.fault.value_or("") == "");
  check_link_time(big, two, bytes, 1, 200);
  CHECK(big.stats["per_chip"][1]["hbm_bytes_written"] == bytes);

  const auto bad = simulate(assemble_with(fmt::format("    li s1, 1\n    li s2, 64\n    li s3, {}\n    dma.rst s1, s3, s0, s2, sem0\n    halt\n",
                                                      cfg.target.hbm_bytes - 32),
                                          cfg),
                            cfg, {});
  REQUIRE(bad.fault);
  CHECK_THAT(*bad.fault, Catch::Contains("dma.rst") && Catch::Contains("chip 1's HBM"));
}

// Copies to both neighbours of a ring go out at once: chip 0 of a ring of
// 4 sends 64 KiB to chip 1 (over +x) and then 64 KiB to chip 3 (over -x).
// The router has an injection queue per link, so the second copy does not
// wait behind the first: both take one link's time and a hop, not two.
TEST_CASE("system: copies to the two neighbours of a ring use both links at once", "[system]") {
  const auto cfg = system_config("tiny", 4);
  const uint64_t bytes = 65536;
  const auto r = simulate(assemble_with(fmt::format("    csrr s2, chip\n    bne s2, s0, recv\n    li s1, {}\n    li s3, 1\n    li s4, 3\n"
                                                    "    dma.rcp s3, s0, s0, s1, sem3\n    dma.rcp s4, s0, s0, s1, sem3\n    halt\n"
                                                    "recv:\n    li s5, 2\n    beq s2, s5, done\n    wait sc, sem3, 1\ndone:\n    halt\n",
                                                    bytes),
                                        cfg),
                          cfg, {});
  REQUIRE(r.fault.value_or("") == "");
  check_link_time(r, cfg, bytes, 1, 200);
  uint64_t sent = 0;
  for (const auto& l : r.stats["ici"]["links"])
    if (l["from"] == 0) sent += l["bytes"].get<uint64_t>();
  CHECK(sent == 2 * bytes);
}

// dma.rld: chip c reads chip c + 1's tile of x from that chip's HBM (its
// DMA engine reads it and sends it back) and stores it as its tile of y.
// Gathered, y is x turned back by one tile. A large read takes the link's
// time (the request is one small packet); a range past the end of the
// other chip's HBM is a fault naming it.
TEST_CASE("system: dma.rld reads another chip's HBM", "[system]") {
  const auto cfg = system_config("tiny", 4);
  const std::string src =
      ".input x, f32[32], 0, tiles [4]\n.output y, f32[32], 256, tiles [4]\n"
      "    csrr s2, chip\n    addi s3, s2, 1\n    li s4, 4\n    bne s3, s4, go\n    li s3, 0\ngo:\n"
      "    li s1, 32\n    dma.rld s3, s0, s0, s1, sem3\n    wait dma, sem3, 1\n"
      "    li s5, 256\n    dma.st s5, s0, s1, sem4\n    wait sc, sem4, 1\n    halt\n";
  std::vector<float> x(32);
  for (size_t k = 0; k < x.size(); ++k) x[k] = float(k) * 0.25f + 3.0f;
  const auto r = simulate(assemble_with(src, cfg), cfg, {to_bytes(x)});
  REQUIRE(r.fault.value_or("") == "");
  std::vector<float> want(32);
  for (size_t k = 0; k < 32; ++k) want[k] = x[(k + 8) % 32];
  CHECK(from_bytes<float>(r.outputs[0]) == want);
  for (int c = 0; c < 4; ++c) CHECK(r.stats["per_chip"][size_t(c)]["hbm_bytes_read"] == 32);

  const auto two = system_config("tiny", 2);
  const uint64_t bytes = 65536;
  const auto big = simulate(assemble_with(fmt::format("    csrr s2, chip\n    bne s2, s0, end\n    li s1, {}\n    li s3, 1\n"
                                                      "    dma.rld s3, s0, s0, s1, sem3\n    wait sc, sem3, 1\nend:\n    halt\n",
                                                      bytes),
                                          two),
                            two, {});
  REQUIRE(big.fault.value_or("") == "");
  check_link_time(big, two, bytes, 2, 300);
  CHECK(big.stats["per_chip"][1]["hbm_bytes_read"] == bytes);

  const auto bad = simulate(assemble_with(fmt::format("    li s1, 1\n    li s2, 64\n    li s3, {}\n    dma.rld s1, s0, s3, s2, sem0\n    halt\n",
                                                      cfg.target.hbm_bytes - 32),
                                          cfg),
                            cfg, {});
  REQUIRE(bad.fault);
  CHECK_THAT(*bad.fault, Catch::Contains("dma.rld") && Catch::Contains("chip 1's HBM"));
}
