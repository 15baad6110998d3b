// The timing formulas of docs/timing.md, checked against the simulator on
// the tiny and v5e presets. Each test states its formula in the config's
// parameters.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "harness.h"

using namespace tpu;
using test::simulate;

namespace {

const char* kPresets[] = {"tiny", "v5e"};

uint64_t run_cycles(const std::string& src, const std::string& preset) {
  auto r = simulate(src, preset);
  INFO(r.fault.value_or(""));
  REQUIRE_FALSE(r.fault);
  return r.cycles;
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
    const auto cfg = sim::load_config(p);
    const uint64_t Bb = cfg.dma.burst_bytes;
    for (uint64_t S : {uint64_t(1), Bb, Bb + 1, uint64_t(4096), uint64_t(65536)}) {
      INFO("bytes " << S);
      // li at 0, dma.ld issued at 1, dispatched at 2, burst i requested at
      // 3 + i; the transfer lands at C (docs/timing.md's HBM formula); the
      // scalar's wait is granted then and halt issues at C + 1.
      const uint64_t done = test::dma_landing_cycle(cfg, 3, S);
      const std::string src = fmt::format("li s1, {}\ndma.ld s0, s0, s1, sem0\nwait sc, sem0, 1\nhalt\n", S);
      auto r = simulate(src, p);
      REQUIRE_FALSE(r.fault);
      CHECK(r.cycles == done + 2);
      CHECK(r.stats["hbm"]["bytes_read"] == S);
    }
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
      auto r = simulate(src, p);
      REQUIRE_FALSE(r.fault);
      CHECK(r.cycles == 3 * N + M + 6);
      CHECK(r.stats["mxu"]["macs"] == M * N * N);
      // The PE-level path, which here starts streaming before the first 2N
      // cycles have passed, keeps the same time.
      sim::SimOptions pe;
      pe.pe_level_mxu = true;
      CHECK(simulate(src, p, {}, pe).cycles == r.cycles);
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
      auto r = simulate(src, p);
      REQUIRE_FALSE(r.fault);
      CHECK(r.cycles == W + 2);
    }
  }
}

TEST_CASE("vpu: dependent instructions wait for their latency", "[timing]") {
  for (const char* p : kPresets) {
    INFO(p);
    const auto& lat = sim::load_config(p).vpu;
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
