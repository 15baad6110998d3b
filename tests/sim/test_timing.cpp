// The timing formulas of docs/timing.md, checked against the simulator on
// the tiny and v5e presets. Each test states its formula in the config's
// parameters. The single-unit formulas are stated for single issue (v5e is
// run with core.issue_width = vpu.issue.width = 1 for them); the issue
// groups of wider machines have their own tests at the end.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <cmath>
#include <cstdio>
#include <map>

#include <unistd.h>

#include "harness.h"
#include "tpu/isa/target.h"

using namespace tpu;
using test::simulate;

namespace {

const char* kPresets[] = {"tiny", "v5e"};

sim::MachineConfig single_issue(const std::string& preset) {
  auto c = test::formula_config(preset);
  c.core.issue_width = 1;
  c.vpu.issue.width = 1;
  return c;
}

// Runs `src` on `preset` with one instruction per cycle per unit.
test::SimRun run1(const std::string& src, const std::string& preset, const sim::SimOptions& o = {}) {
  return simulate(test::assemble_for(src, preset), single_issue(preset), {}, o);
}

uint64_t run_cycles(const std::string& src, const std::string& preset) {
  auto r = run1(src, preset);
  INFO(r.fault.value_or(""));
  REQUIRE_FALSE(r.fault);
  return r.cycles;
}

// The dispatch cycle of every instruction (by pc; the last if repeated),
// from the timeline, on the preset's own issue widths.
// With `config`, on that machine instead; `ends` gets the cycle after each
// instruction's event ends (for a signal: the cycle after its count was added).
std::map<uint32_t, uint64_t> dispatch_cycles(const std::string& src, const std::string& preset, uint64_t* cycles = nullptr,
                                             const sim::MachineConfig* config = nullptr, std::map<uint32_t, uint64_t>* ends = nullptr) {
  sim::SimOptions o;
  // One file per process and call: CTest runs test cases in parallel.
  static int calls = 0;
  o.trace_path = fmt::format("{}/tests/timing_{}_{}_{}.trace.json", TPU_BINARY_DIR, preset, ::getpid(), calls++);
  auto r = config ? simulate(test::assemble_for(src, preset), *config, {}, o) : simulate(src, preset, {}, o);
  INFO(r.fault.value_or(""));
  REQUIRE_FALSE(r.fault);
  if (cycles) *cycles = r.cycles;
  std::map<uint32_t, uint64_t> at;
  const auto trace = nlohmann::json::parse(isa::read_text_file(o.trace_path));
  std::remove(o.trace_path.c_str());
  for (const auto& e : trace["traceEvents"])
    if (e["ph"] == "X" && e["tid"].get<int>() % 100 != 0) {
      const auto pc = e["args"]["pc"].get<uint32_t>();
      at[pc] = e["args"]["start_cycle"].get<uint64_t>();
      if (ends) (*ends)[pc] = at[pc] + e["args"]["cycles"].get<uint64_t>();
    }
  return at;
}

}  // namespace

TEST_CASE("scalar: one instruction per cycle, halt ends the run", "[timing]") {
  for (const char* p : kPresets) {
    INFO(p);
    // k scalar instructions then halt: k + 1 cycles.
    CHECK(run_cycles("halt\n", p) == 1);
    CHECK(run_cycles("li s1, 1\naddi s1, s1, 2\nmul s2, s1, s1\nnop\nhalt\n", p) == 5);
  }
}

TEST_CASE("scalar: a taken branch costs branch_penalty bubbles", "[timing]") {
  for (const char* p : kPresets) {
    INFO(p);
    const uint64_t P = sim::load_config(p).core.branch_penalty;
    for (uint64_t n : {1, 2, 7}) {
      // li; n iterations of (b = 2 body instructions + loop); halt:
      //   n (b + 1) + (n - 1) P + 2
      const std::string src = fmt::format("li s1, {}\ntop: addi s2, s2, 1\nnop\nloop s1, top\nhalt\n", n);
      CHECK(run_cycles(src, p) == n * 3 + (n - 1) * P + 2);
    }
  }
}

TEST_CASE("scalar: signal and wait on the scalar unit", "[timing]") {
  for (const char* p : kPresets) {
    // signal at 0 is visible at 1, where the wait is granted; halt at 2.
    CHECK(run_cycles("signal sc, sem3, 2\nwait sc, sem3, 2\nhalt\n", p) == 3);
  }
}

TEST_CASE("dma: bursts through the simple HBM model", "[timing]") {
  for (const char* p : kPresets) {
    INFO(p);
    const auto cfg = test::formula_config(p);
    const uint64_t Bb = cfg.dma.burst_bytes;
    for (uint64_t S : {uint64_t(1), Bb, Bb + 1, uint64_t(4096), uint64_t(65536)}) {
      INFO("bytes " << S);
      // li at 0, dma.ld issued at 1, dispatched at 2, burst i requested at
      // 3 + i; the transfer lands at C (docs/timing.md's HBM formula); the
      // scalar's wait is granted then and halt issues at C + 1.
      const uint64_t done = test::dma_landing_cycle(cfg, 3, S);
      const std::string src = fmt::format("li s1, {}\ndma.ld s0, s0, s1, sem0\nwait sc, sem0, 1\nhalt\n", S);
      auto r = run1(src, p);
      REQUIRE_FALSE(r.fault);
      CHECK(r.cycles == done + 2);
      CHECK(r.stats["hbm"]["bytes_read"] == S);
    }
  }
}

// tpuc's cost model (MachineConfig::dma_latency_cycles) against the
// simulator: a lone load dispatched in cycle d lets the instruction waiting
// for it dispatch about d + bytes/bandwidth + latency, on every preset with
// the simple and the ideal HBM model.
TEST_CASE("dma: the compiler's DMA latency estimate matches a lone transfer", "[timing]") {
  for (const char* p : {"tiny", "v1", "v4", "v5e"})
    for (const char* model : {"simple", "ideal"}) {
      INFO(p << " " << model);
      const auto cfg = sim::load_config(p, {fmt::format("hbm.model={}", model)});
      const uint64_t S = 512;
      const std::string src = fmt::format("li s1, {}\ndma.ld s0, s0, s1, sem0\nwait sc, sem0, 1\nhalt\n", S);
      uint64_t cycles = 0;
      const auto at = dispatch_cycles(src, p, &cycles, &cfg);
      const uint64_t halt = cycles - 1;  // the instruction after the wait (the run ends the cycle after halt)
      const double peak = cfg.hbm_peak_bytes_per_s(), clock = double(cfg.clock_hz);
      const double bytes_per_cycle = peak > 0 ? peak / clock : double(cfg.dma.burst_bytes) * cfg.dma.bursts_per_cycle;
      const double bursts = std::ceil(double(S) / cfg.dma.burst_bytes) / cfg.dma.bursts_per_cycle;
      const double estimate = double(at.at(1)) + std::max(double(S) / bytes_per_cycle, bursts) + cfg.dma_latency_cycles();
      CAPTURE(at.at(1), halt, estimate);
      CHECK(std::abs(double(halt) - estimate) <= 1.5);
    }
}

TEST_CASE("mxu: weight load, swap and a stream of M rows", "[timing]") {
  for (const char* p : kPresets) {
    INFO(p);
    const uint64_t N = sim::load_config(p).target.mxu_dim;
    for (uint64_t M : {uint64_t(1), N, 3 * N + 1}) {
      INFO("rows " << M);
      // Issue: 4 x li, lw 4, swap 5, mm 6, signal 7, wait 8. lw dispatches
      // at 5 and reads rows 5 .. 5 + N - 1; swap at 5 + N; mm at 6 + N feeds
      // row i at 6 + N + i and writes it to the accumulators 2N - 1 later; the
      // last write W = 6 + N + M - 1 + 2N - 1; signal at W, halt at W + 1:
      //   cycles = 3N + M + 6
      const std::string src = fmt::format(
          "li s1, 0\nli s2, {}\nli s3, {}\nli s4, 0\nmxu.lw m0, s1, s2, bf16\nmxu.swap m0\n"
          "mxu.mm m0, s4, s1, s2, s3, bf16\nsignal mxu0, sem0, 1\nwait sc, sem0, 1\nhalt\n",
          2 * N, M);
      auto r = run1(src, p);
      REQUIRE_FALSE(r.fault);
      CHECK(r.cycles == 3 * N + M + 6);
      CHECK(r.stats["mxu"]["macs"] == M * N * N);
      // The PE-level path, which here starts streaming before the first 2N
      // cycles have passed, keeps the same time.
      sim::SimOptions pe;
      pe.pe_level_mxu = true;
      CHECK(run1(src, p, pe).cycles == r.cycles);
    }
  }
}

TEST_CASE("mxu: the next weights load while the current ones compute", "[timing]") {
  for (const char* p : kPresets) {
    INFO(p);
    const uint64_t N = sim::load_config(p).target.mxu_dim;
    for (uint64_t M : {uint64_t(2), N, 2 * N + 3}) {
      INFO("rows " << M);
      // lw A at 5 (ready 5 + N), swap at 5 + N, lw B at 6 + N (ready 6 + 2N),
      // mm 1 at 7 + N, swap 2 at max(8 + N, 6 + 2N), mm 2 at
      // max(swap 2 + 1, 7 + N + M), last write W = mm 2 + M + 2N - 2:
      //   cycles = W + 2
      const uint64_t swap2 = std::max(8 + N, 6 + 2 * N);
      const uint64_t mm2 = std::max(swap2 + 1, 7 + N + M);
      const uint64_t W = mm2 + M + 2 * N - 2;
      const std::string src = fmt::format(
          "li s1, 0\nli s2, {}\nli s3, {}\nli s4, 0\nmxu.lw m0, s1, s2, bf16\nmxu.swap m0\nmxu.lw m0, s1, s2, bf16\n"
          "mxu.mm m0, s4, s1, s2, s3, bf16\nmxu.swap m0\nmxu.mma m0, s4, s1, s2, s3, bf16\nsignal mxu0, sem0, 1\n"
          "wait sc, sem0, 1\nhalt\n",
          2 * N, M);
      auto r = run1(src, p);
      REQUIRE_FALSE(r.fault);
      CHECK(r.cycles == W + 2);
    }
  }
}

TEST_CASE("vpu: dependent instructions wait for their latency", "[timing]") {
  for (const char* p : kPresets) {
    INFO(p);
    const auto& lat = sim::load_config(p).vpu.latency;
    for (uint64_t k : {1, 3, 5}) {
      // vli at 1 (ready 1 + a); add j dispatches at 1 + j a; the last result
      // is ready at R = 1 + (k + 1) a; signal at R - 1, halt at R:
      //   cycles = (k + 1) a + 2
      std::string src = "vli v0, 0x3f800000\n";
      for (uint64_t j = 1; j <= k; ++j) src += fmt::format("vadd.f32 v{}, v{}, v{}\n", j, j - 1, j - 1);
      src += "signal vpu, sem0, 1\nwait sc, sem0, 1\nhalt\n";
      CHECK(run_cycles(src, p) == (k + 1) * lat.alu + 2);
    }
    // Independent instructions dispatch back to back: vli at 1..4, the last
    // ready at 4 + a. The signal arrives at 5 and may go once every result
    // is due by the next cycle (3 + a); the scalar's wait, issued at 5, is
    // granted in the signal's cycle and halt follows:
    //   cycles = max(5, 3 + a) + 2
    const uint64_t a = lat.alu;
    CHECK(run_cycles("vli v0, 1\nvli v1, 2\nvli v2, 3\nvli v3, 4\nsignal vpu, sem0, 1\nwait sc, sem0, 1\nhalt\n", p) ==
          std::max<uint64_t>(5, 3 + a) + 2);
  }
}

TEST_CASE("a full queue stalls the scalar unit", "[timing]") {
  const auto cfg = sim::load_config("tiny");
  const uint64_t Q = cfg.core.queue_depth;
  // The VPU waits on a semaphore nobody signals until the scalar unit does,
  // after pushing Q + 4 vli: the queue holds Q (the head is taken out of the
  // queue when examined, so Q + 1 fit), then the scalar unit stalls.
  std::string src = "wait vpu, sem0, 1\n";
  for (uint64_t i = 0; i < Q + 4; ++i) src += "vli v0, 0\n";
  src += "signal sc, sem0, 1\nhalt\n";
  auto r = simulate(src, "tiny");
  // Deadlock: the scalar unit is stuck behind the full queue before it reaches the signal.
  REQUIRE(r.fault);
  CHECK(r.fault->find("deadlock") != std::string::npos);
  CHECK(r.stats["stall_cycles_by_cause"].contains("scalar.queue_full.vpu"));
}

TEST_CASE("mxu: a weight load commits once the stream that used its buffer has drained", "[timing]") {
  for (const char* p : kPresets) {
    INFO(p);
    const uint64_t N = sim::load_config(p).target.mxu_dim;
    for (uint64_t M : {uint64_t(2), N + 5, 3 * N}) {
      INFO("rows " << M);
      // pc 4 lw, 5 swap, 6 lw, 7 mm (buffer 0), 8 swap, 9 mm (buffer 1),
      // 10 lw into buffer 0: its last row commits at t + N - 1, which must
      // not precede mm 7's last accumulator write, mm7 + M - 1 + 2N - 1:
      //   lw10 = max(mm9 + 1, mm7 + M + N - 1)
      const std::string src = fmt::format(
          "li s1, 0\nli s2, {}\nli s3, {}\nli s4, 0\nmxu.lw m0, s1, s2, bf16\nmxu.swap m0\nmxu.lw m0, s1, s2, bf16\n"
          "mxu.mm m0, s4, s1, s2, s3, bf16\nmxu.swap m0\nmxu.mm m0, s4, s1, s2, s3, bf16\nmxu.lw m0, s1, s2, bf16\n"
          "signal mxu0, sem0, 1\nwait sc, sem0, 1\nhalt\n",
          2 * N, M);
      const auto at = dispatch_cycles(src, p);
      CHECK(at.at(10) == std::max(at.at(9) + 1, at.at(7) + M + N - 1));
    }
  }
}

TEST_CASE("a signal on the DMA queue counts when the transfers before it land, and does not hold up the next", "[timing]") {
  for (const char* p : kPresets) {
    INFO(p);
    const auto cfg = single_issue(p);
    const uint64_t S = 4096;
    // pc 0 li, 1 dma.ld (S bytes, lands in `done` as in the test above),
    // 2 signal dma, 3 dma.ld (another S bytes), 4 wait sc on the signal's
    // semaphore: the second transfer dispatches in the cycle after the
    // signal, and the count is added in the cycle the first one lands.
    const std::string src = fmt::format(
        "li s1, {}\ndma.ld s0, s0, s1, sem0\nsignal dma, sem1, 1\ndma.ld s1, s1, s1, sem2\nwait sc, sem1, 1\nhalt\n", S);
    std::map<uint32_t, uint64_t> ends;
    const auto at = dispatch_cycles(src, p, nullptr, &cfg, &ends);
    CHECK(at.at(2) == at.at(1) + 1);
    CHECK(at.at(3) == at.at(2) + 1);
    CHECK(ends.at(2) == test::dma_landing_cycle(cfg, 3, S) + 1);
    CHECK(ends.at(3) > ends.at(2));
  }
}

TEST_CASE("signals on the MXU and VPU queues do not hold up what follows", "[timing]") {
  for (const char* p : kPresets) {
    INFO(p);
    const auto cfg = sim::load_config(p);
    const uint64_t N = cfg.target.mxu_dim, M = N + 5;
    // pc 4 lw, 5 swap, 6 mm, 7 signal, 8 lw: the signal leaves the queue in
    // the cycle after the stream starts and the next load follows it; the
    // count still arrives with the last accumulator write W = mm + M + 2N - 2,
    // where the scalar unit's wait is granted: cycles = W + 2.
    const std::string src = fmt::format(
        "li s1, 0\nli s2, {}\nli s3, {}\nli s4, 0\nmxu.lw m0, s1, s2, bf16\nmxu.swap m0\n"
        "mxu.mm m0, s4, s1, s2, s3, bf16\nsignal mxu0, sem0, 1\nmxu.lw m0, s1, s2, bf16\nwait sc, sem0, 1\nhalt\n",
        2 * N, M);
    uint64_t cycles = 0;
    auto at = dispatch_cycles(src, p, &cycles);
    CHECK(at.at(7) == at.at(6) + 1);
    CHECK(at.at(8) == at.at(7) + 1);
    CHECK(cycles == at.at(6) + M + 2 * N);
    // VPU: pc 0 vli, 1 vexp (transcendental latency T), 2 signal, 3 vli. The
    // vli after the signal dispatches next; the count arrives when vexp's
    // result is in its last cycle, 1 + T - 1, and the wait is granted then.
    const uint64_t T = cfg.vpu.latency.transcendental;
    at = dispatch_cycles("vli v0, 0\nvexp.f32 v1, v0\nsignal vpu, sem0, 1\nvli v2, 0\nwait sc, sem0, 1\nhalt\n", p, &cycles);
    const uint64_t vexp = at.at(1);
    CHECK(at.at(3) == at.at(2) + 1);
    CHECK(at.at(2) < vexp + T - 1);
    CHECK(cycles == vexp + T - 1 + 2);
  }
}

TEST_CASE("issue groups: the scalar unit issues up to core.issue_width instructions a cycle", "[timing]") {
  const auto cfg = sim::load_config("v5e");
  const uint64_t W = cfg.core.issue_width;
  REQUIRE(W == 4);
  // k independent instructions and halt: ceil((k + 1) / W) cycles.
  for (uint64_t k : {0, 3, 4, 9}) {
    std::string src;
    for (uint64_t i = 0; i < k; ++i) src += fmt::format("li s{}, {}\n", i + 1, i);
    CHECK(test::simulate(src + "halt\n", "v5e").cycles == (k + 1 + W - 1) / W);
  }
  // An instruction naming a register written earlier in its group waits a
  // cycle: li s1 | addi s2 | addi s3, halt.
  CHECK(test::simulate("li s1, 1\naddi s2, s1, 1\naddi s3, s2, 1\nhalt\n", "v5e").cycles == 3);
  // A taken jump ends its group: jmp | (bubbles) | halt.
  CHECK(test::simulate("jmp . + 2\nli s1, 1\nhalt\n", "v5e").cycles == 2 + cfg.core.branch_penalty);
}

TEST_CASE("issue groups: the VPU dispatches within its ALU, load and store slots", "[timing]") {
  const auto cfg = sim::load_config("v5e");
  const auto& is = cfg.vpu.issue;
  REQUIRE((is.width == 4 && is.alu == 2 && is.load == 1 && is.store == 1));
  // The VPU waits until everything is queued (pc 0), then:
  //   g:     vld                          (a second vld needs the load slot)
  //   g + 1: vld, vst, vadd, vmul         (width 4: load, store, 2 ALU)
  //   g + 2: vexp, vlda                   (vsta shares the accumulator port)
  //   g + 3: vsta                         (the store slot is then taken)
  //   g + 4: vst v0                       (v0, loaded at g, is ready at g + 3)
  const std::string src =
      "wait vpu, sem0, 1\nvld.f32 v0, s0, 0\nvld.f32 v1, s0, 512\nvst.f32 v2, s0, 1024\nvadd.f32 v3, v4, v5\n"
      "vmul.f32 v6, v4, v5\nvexp.f32 v7, v4\nvlda v8, s0, 0\nvsta v9, s0, 1\nvst.f32 v0, s0, 2048\n"
      "signal sc, sem0, 1\nsignal vpu, sem1, 1\nwait sc, sem1, 1\nhalt\n";
  const auto at = dispatch_cycles(src, "v5e");
  const uint64_t g = at.at(1);
  // Scalar groups: {wait vpu, vld, vld, vst} at 0, {vadd, vmul, vexp, vlda}
  // at 1, {vsta, vst, signal sc, signal vpu} at 2: the grant comes in 2.
  CHECK(g == 3);
  for (uint32_t pc : {2, 3, 4, 5}) CHECK(at.at(pc) == g + 1);
  for (uint32_t pc : {6, 7}) CHECK(at.at(pc) == g + 2);
  CHECK(at.at(8) == g + 3);
  CHECK(at.at(9) == g + 4);
}
