// Faults are the program's: each ends the run with one clear line naming
// the unit and the pc, never a crash.
#include <catch2/catch.hpp>

#include "harness.h"

using namespace tpu;

namespace {

std::string fault_of(const std::string& src, const sim::SimOptions& o = {}, sim::RunStatus status = sim::RunStatus::fault) {
  auto r = test::simulate(src, "tiny", {}, o);
  REQUIRE(r.fault);
  CHECK(r.stats.value("status", "") == sim::status_name(status));
  CHECK(r.fault->find('\n') == std::string::npos);
  return *r.fault;
}

}  // namespace

TEST_CASE("illegal instructions and running off the end", "[faults]") {
  CHECK(fault_of("nop\n.inst 0xff00000000000000\nhalt\n") == "core 0 scalar: illegal instruction 0xff00000000000000 at pc 1");
  CHECK(fault_of("nop\n") == "core 0 scalar: pc 1 runs past the end of the program (1 instructions; missing halt?)");
  CHECK(fault_of("jmp . + 5\n") == "core 0 scalar: pc 0: branch target 5 is outside the program (0..1)");
}

TEST_CASE("out-of-range and misaligned addresses", "[faults]") {
  CHECK(fault_of("li s1, 262144\nvld.f32 v0, s1, 0\nhalt\n").find("core 0 vpu: pc 1: vld.f32: VMEM access of 32 bytes at 0x40000 is outside VMEM") == 0);
  CHECK(fault_of("li s1, 2\nvld.f32 v0, s1, 0\nhalt\n") == "core 0 vpu: pc 1: vld.f32: VMEM address 0x2 is not 4-byte aligned");
  CHECK(fault_of("li s1, 1\nlds s2, s1, 0\nhalt\n") == "core 0 scalar: pc 1: SMEM address 0x1 is not 8-byte aligned");
  CHECK(fault_of("li s1, 16\nlih s1, 1\ndma.ld s0, s1, s1, sem0\nhalt\n").find("core 0 dma: pc 2: dma.ld: row 0: HBM access of") == 0);
  CHECK(fault_of("li s1, 16\nlih s1, 1\nli s2, 8\ndma.lds s1, s0, s2, sem0\nhalt\n").find("core 0 dma: pc 3: dma.lds: row 0: SMEM access of") == 0);
  CHECK(fault_of("li s1, 4096\nvlda v0, s1, 0\nhalt\n") == "core 0 vpu: pc 1: vlda: accumulator row 4096 is outside 0..2047");
}

TEST_CASE("MXU protocol errors", "[faults]") {
  CHECK(fault_of("li s1, 1\nmxu.mm m0, s0, s0, s0, s1, bf16\nhalt\n") ==
        "core 0 mxu0: pc 1: mxu.mm before any weights were loaded and swapped in");
  CHECK(fault_of("li s1, 1\nmxu.lw m0, s0, s1, s8\nmxu.swap m0\nmxu.mm m0, s0, s0, s0, s1, bf16\nhalt\n") ==
        "core 0 mxu0: pc 3: mxu.mm streams bf16 inputs through s8 weights");
  CHECK(fault_of("mxu.swap m1\nhalt\n") == "core 0 scalar: pc 0: mxu.swap names mxu1, but the target has 1 MXU(s) per core");
  CHECK(fault_of("li s1, 2048\nli s2, 1\nmxu.lw m0, s0, s0, s8\nmxu.swap m0\nmxu.mm m0, s1, s0, s0, s2, s8\nhalt\n") ==
        "core 0 mxu0: pc 4: mxu.mm writes accumulator rows 2048..2048, outside 0..2047");
  CHECK(fault_of("li s1, 1\ndma.rcp s1, s0, s0, s1, sem0\nhalt\n").find("dma.rcp: chip 1 does not exist (the system has 1)") != std::string::npos);
}

TEST_CASE("deadlocks name the waiting units", "[faults]") {
  CHECK(fault_of("wait sc, sem4, 1\nhalt\n", {}, sim::RunStatus::deadlock) == "deadlock at cycle 1: no unit can make progress; core 0: scalar at pc 0");
  const std::string f = fault_of("wait vpu, sem1, 2\nvli v0, 0\nwait sc, sem2, 1\nhalt\n", {}, sim::RunStatus::deadlock);
  CHECK(f.find("deadlock at cycle") == 0);
  CHECK(f.find("vpu pc 0: wait sem1 >= 2 (it is 0)") != std::string::npos);
  CHECK(f.find("scalar at pc 2") != std::string::npos);
}

TEST_CASE("the cycle limit", "[faults]") {
  sim::SimOptions o;
  o.max_cycles = 100;
  CHECK(fault_of("top: jmp top\n", o, sim::RunStatus::cycle_limit) == "cycle limit of 100 reached (core 0 scalar at pc 0)");
}

TEST_CASE("a program for another target is refused", "[faults]") {
  auto p = test::assemble_for("halt\n", "tiny");
  auto r = test::simulate(p, sim::load_config("v5e"), {});
  REQUIRE(r.fault);
  CHECK(r.fault->find("error: the program was compiled for target 'tiny', this machine is 'v5e'") == 0);
  CHECK(r.fault->find("mxu_dim 8 vs 128") != std::string::npos);
}

TEST_CASE("the RTL MXU runs only for the array sizes it was built for", "[faults]") {
  sim::SimOptions o;
  o.rtl_mxu = true;
  auto r = test::simulate(test::assemble_for("halt\n", "v5e"), sim::load_config("v5e"), {}, o);
  REQUIRE(r.fault);
  CHECK(r.fault->find("--mxu=rtl: the RTL MXU is built for N = ") != std::string::npos);
  CHECK(r.fault->find("the target has N = 128") != std::string::npos);
}
