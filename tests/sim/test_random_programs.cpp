// Seeded random programs (SPEC section 6): random mixes of scalar, VPU, DMA,
// MXU and sync instructions, with races between units left in on purpose.
// Every run must end (finish or fault with one line, never crash or hang),
// and the fast, PE-level and RTL MXU models must agree exactly: the same
// outputs and cycles, or the same fault. A second fast run must repeat the
// first.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <random>

#include "../../sim/mxu/mxu_unit.h"
#include "harness.h"

using namespace tpu;

namespace {

std::string random_program(std::mt19937_64& rng) {
  auto pick = [&](uint64_t n) { return rng() % n; };
  auto sreg = [&] { return fmt::format("s{}", 1 + pick(12)); };
  auto vreg = [&] { return fmt::format("v{}", pick(8)); };
  std::string p = ".input in, u8[4096], 0\n.output out, u8[4096], 8192\n";
  p += "li s1, 4096\ndma.ld s0, s0, s1, sem0\nwait vpu, sem0, 1\nsignal vpu, sem1, 1\nwait mxu0, sem1, 1\n";
  bool loaded = false;
  const int n = 20 + int(pick(60));
  for (int i = 0; i < n; ++i) {
    switch (pick(12)) {
      case 0:  // an address-like value: usually in range, sometimes not (a fault)
        p += fmt::format("li {}, {}\n", sreg(), pick(10) == 0 ? 300000 : pick(512) * 8);
        break;
      case 1: {
        static const char* ops[] = {"add", "sub", "mul", "and", "or", "xor", "sll", "srl", "sra", "slt", "min", "max"};
        p += fmt::format("{} {}, {}, {}\n", ops[pick(12)], sreg(), sreg(), sreg());
        break;
      }
      case 2: {
        static const char* lds[] = {"vld.f32", "vld.s32", "vld.bf16", "vld.s8", "vst.f32", "vst.s32", "vst.bf16", "vst.s8"};
        p += fmt::format("{} {}, s{}, {}\n", lds[pick(8)], vreg(), 13 + pick(2), pick(64) * 4);
        break;
      }
      case 3: case 4: {
        static const char* ops[] = {"vadd.f32", "vmul.f32", "vmax.f32", "vsub.s32", "vmul.s32", "vand", "vshl", "vcmplt.f32",
                                    "vdiv.f32", "vdiv.s32", "vpow.f32", "vmin.s32"};
        p += fmt::format("{} {}, {}, {}\n", ops[pick(12)], vreg(), vreg(), vreg());
        break;
      }
      case 5: {
        static const char* ops[] = {"vexp.f32", "vtanh.f32", "vrsqrt.f32", "vcvt.s32.f32", "vcvt.f32.s32", "vrnd.bf16",
                                    "vredsum.f32", "vredmax.s32", "vneg.f32", "vsign.s32"};
        p += fmt::format("{} {}, {}\n", ops[pick(10)], vreg(), vreg());
        break;
      }
      case 6:
        p += fmt::format("{} {}, s0, {}\n", pick(2) ? "vlda" : "vsta", vreg(), pick(48));
        break;
      case 7: {  // weights: a load and a swap, in one dtype
        const bool s8 = pick(3) == 0;
        p += fmt::format("li s13, {}\nli s14, {}\nmxu.lw m0, s13, s14, {}\nmxu.swap m0\n", pick(200) * 8, s8 ? 8 : 16,
                         s8 ? "s8" : "bf16");
        p += fmt::format("li s15, {}\n", s8 ? 1 : 0);
        loaded = true;
        break;
      }
      case 8:  // a stream in the weights' dtype (s15 says which: pick the mnemonic to match)
        if (loaded)
          p += fmt::format("li s13, {}\nli s14, {}\nli s12, {}\nli s11, 16\nbeq s15, s0, . + 3\nmxu.mm m0, s13, s14, s11, s12, s8\njmp . + 2\n"
                           "mxu.mma m0, s13, s14, s11, s12, bf16\n",
                           pick(32), pick(100) * 16, pick(20));
        break;
      case 9:
        p += fmt::format("li s10, {}\n{} s13, s14, s10, sem{}\n", 8 * pick(64), pick(2) ? "dma.ld" : "dma.st", 2 + pick(3));
        break;
      case 10: {  // ordering between two units
        static const char* units[] = {"vpu", "mxu0", "dma"};
        const int a = int(pick(3)), b = int(pick(3));
        p += fmt::format("signal {}, sem6, 1\nwait {}, sem6, 1\n", units[a], units[b]);
        break;
      }
      default:
        p += pick(2) ? "nop\n" : fmt::format("li s9, {}\nl{}: addi s8, s8, 1\nloop s9, l{}\n", 1 + pick(4), i, i);
    }
  }
  // Drain every unit, then copy VMEM [0, 4096) out.
  p += "signal mxu0, sem7, 1\nsignal vpu, sem7, 1\nsignal dma, sem7, 1\nwait sc, sem7, 3\n";
  p += "li s1, 8192\nli s2, 4096\ndma.st s1, s0, s2, sem8\nwait sc, sem8, 1\nhalt\n";
  return p;
}

}  // namespace

TEST_CASE("random programs end cleanly and every MXU model agrees", "[random]") {
  const uint64_t seed = test::test_seed(99);
  std::mt19937_64 rng(seed);
  const auto cfg = sim::load_config("tiny");
  int finished = 0, faulted = 0;
  for (int trial = 0; trial < 40; ++trial) {
    const std::string src = random_program(rng);
    INFO("trial " << trial << "\n" << src);
    const isa::Program program = test::assemble_for(src, cfg.target);
    std::vector<uint8_t> in(4096);
    for (auto& b : in) b = uint8_t(rng());
    sim::SimOptions fast, pe, rtl;
    fast.max_cycles = pe.max_cycles = rtl.max_cycles = 200000;
    pe.pe_level_mxu = true;
    rtl.rtl_mxu = true;
    const auto rf = test::simulate(program, cfg, {in}, fast);
    const auto rf2 = test::simulate(program, cfg, {in}, fast);
    const auto rp = test::simulate(program, cfg, {in}, pe);
    sim::SimOptions awake = fast;  // units that never sleep: the same run
    awake.sleep = false;
    auto ra = test::simulate(program, cfg, {in}, awake), rs = rf;
    CHECK(ra.fault == rf.fault);
    CHECK(ra.cycles == rf.cycles);
    CHECK(ra.outputs == rf.outputs);
    ra.stats.erase("host"), rs.stats.erase("host");
    // A fault stops the run within its cycle: whether the units evaluated
    // after it count that cycle depends on SystemC's order, asleep or not.
    if (!rf.fault) CHECK(ra.stats == rs.stats);
    CHECK(rf.fault == rf2.fault);
    CHECK(rf.outputs == rf2.outputs);
    CHECK(rf.cycles == rf2.cycles);
    CHECK(rp.fault == rf.fault);
    CHECK(rp.outputs == rf.outputs);
    CHECK(rp.cycles == rf.cycles);
    if (sim::rtl_mxu_available(uint32_t(cfg.target.mxu_dim))) {
      const auto rr = test::simulate(program, cfg, {in}, rtl);
      INFO("model: " << rf.fault.value_or("no fault") << "\nrtl: " << rr.fault.value_or("no fault"));
      CHECK(rr.fault == rf.fault);
      CHECK(rr.outputs == rf.outputs);
      CHECK(rr.cycles == rf.cycles);
    }
    if (rf.fault) {
      CHECK(rf.fault->find('\n') == std::string::npos);
      ++faulted;
    } else {
      ++finished;
    }
  }
  std::printf("%d finished, %d faulted\n", finished, faulted);
  CHECK(finished > 5);
}
