// The MXU's two paths on seeded random command streams: the PE-level array
// and the fast path must give identical accumulators and identical cycle
// counts, and both must equal a sequential reference of the numerics rules
// (written here independently of sim/mxu/numerics.h).
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <cfloat>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <random>

#include "../../sim/mxu/mxu_unit.h"
#include "harness.h"

using namespace tpu;

namespace {

constexpr uint64_t kBlob = 8192;     // VMEM bytes of random operands
constexpr uint64_t kAccRows = 48;    // accumulator rows the streams write
constexpr uint64_t kOut = 16384;     // VMEM address of the read-out

uint16_t special_bf16(std::mt19937_64& rng) {
  static const uint16_t kSpecial[] = {0x0000, 0x8000, 0x7f80, 0xff80, 0x7fc0, 0x0001, 0x807f, 0x7f7f,
                                      0xff7f, 0x0080, 0x8080, 0x1f80, 0x2000, 0x6000, 0x5f80, 0x3f80};
  if (rng() % 4 == 0) return kSpecial[rng() % 16];
  std::normal_distribution<float> d(0.0f, 2.0f);
  return test::bf16_round(d(rng));
}

float f32(uint32_t b) {
  float x;
  std::memcpy(&x, &b, 4);
  return x;
}
uint32_t bits(float x) {
  uint32_t b;
  std::memcpy(&b, &x, 4);
  return b;
}
// Reference rules (SPEC section 5 as docs/timing.md words them).
float ref_operand(uint16_t b) {
  uint32_t u = uint32_t(b) << 16;
  if ((u & 0x7f800000u) == 0) u &= 0x80000000u;
  return f32(u);
}
float ref_flush(float x) {
  if (std::isnan(x)) return f32(0x7fc00000u);
  if (x != 0 && std::fabs(x) < FLT_MIN) return std::signbit(x) ? -0.0f : 0.0f;
  return x;
}
float ref_mul(float a, float b) {
  const long double p = (long double)a * (long double)b;
  if (std::isnan(p)) return f32(0x7fc00000u);
  if (p != 0 && std::fabs(p) < (long double)FLT_MIN) return std::signbit(p) ? -0.0f : 0.0f;
  return float(p);
}
float ref_add(float a, float b) { return ref_flush(a + b); }

struct Gen {
  uint32_t n;
  std::mt19937_64 rng;
  std::string text;
  // Reference state.
  std::vector<uint8_t> vmem;
  std::vector<uint32_t> w[2];
  bool w_int8[2] = {false, false};
  int active = -1;
  bool shadow_loaded = false;
  std::vector<uint32_t> acc;
  // 0: operands from special_bf16; else finite normal bf16 values of
  // magnitude about 2^-55, 1 or 2^58..2^max_exp: products near the flush
  // bound and near (or, from 2^64, past) the overflow bound, sums that
  // overflow or cancel.
  int max_exp = 0;

  Gen(uint32_t n_, uint64_t seed, int max_exp_ = 0) : n(n_), rng(seed), vmem(kBlob), acc(kAccRows * n_, 0), max_exp(max_exp_) {
    w[0].assign(size_t(n) * n, 0);
    w[1].assign(size_t(n) * n, 0);
  }

  uint16_t value() {
    if (max_exp == 0) return special_bf16(rng);
    static const int kLow[] = {-55, -2, 58};
    const int band = int(rng() % 3), lo = kLow[band], hi = band == 0 ? -50 : band == 1 ? 2 : max_exp;
    const int e = lo + int(rng() % uint64_t(hi - lo + 1));
    return uint16_t((rng() % 2) << 15 | uint32_t(e + 127) << 7 | uint32_t(rng() % 128));
  }

  uint32_t operand(uint64_t addr, bool int8) const {
    if (int8) return uint32_t(int32_t(int8_t(vmem[addr])));
    return bits(ref_operand(uint16_t(vmem[addr] | vmem[addr + 1] << 8)));
  }

  void lw(bool int8, bool transpose) {
    const uint64_t eb = int8 ? 1 : 2, row = n * eb, stride = row * (1 + rng() % 2);
    const uint64_t src = (rng() % ((kBlob - (n - 1) * stride - row) / eb)) * eb;
    text += fmt::format("li s1, {}\nli s2, {}\nmxu.{} m0, s1, s2, {}\n", src, stride, transpose ? "lwt" : "lw", int8 ? "s8" : "bf16");
    const int b = active < 0 ? 0 : 1 - active;
    for (uint32_t i = 0; i < n; ++i)
      for (uint32_t j = 0; j < n; ++j) {
        const uint32_t v = operand(src + i * stride + j * eb, int8);
        (transpose ? w[b][size_t(j) * n + i] : w[b][size_t(i) * n + j]) = v;
      }
    w_int8[b] = int8;
    shadow_loaded = true;
  }

  void swap() {
    text += "mxu.swap m0\n";
    active = active < 0 ? 0 : 1 - active;
    shadow_loaded = false;
  }

  void mm(bool accumulate) {
    const bool int8 = w_int8[active];
    const uint64_t eb = int8 ? 1 : 2, row = n * eb, stride = row * (1 + rng() % 2);
    const uint64_t rows = rng() % (3 * n + 1);
    const uint64_t acc_row = rng() % (kAccRows - rows + 1);
    const uint64_t src = rows == 0 ? 0 : (rng() % ((kBlob - (rows - 1) * stride - row) / eb)) * eb;
    text += fmt::format("li s3, {}\nli s4, {}\nli s5, {}\nli s6, {}\nmxu.{} m0, s3, s4, s5, s6, {}\n", acc_row, src, stride,
                        rows, accumulate ? "mma" : "mm", int8 ? "s8" : "bf16");
    for (uint64_t r = 0; r < rows; ++r) {
      uint32_t* a = &acc[(acc_row + r) * n];
      for (uint32_t j = 0; j < n; ++j) {
        uint32_t result;
        if (int8) {
          uint32_t s = 0;
          for (uint32_t k = 0; k < n; ++k) s += uint32_t(int32_t(operand(src + r * stride + k * eb, true)) * int32_t(w[active][size_t(k) * n + j]));
          result = s;
          a[j] = accumulate ? a[j] + result : result;
        } else {
          float s = 0.0f;
          for (uint32_t k = 0; k < n; ++k)
            s = ref_add(s, ref_mul(f32(operand(src + r * stride + k * eb, false)), f32(w[active][size_t(k) * n + j])));
          a[j] = bits(accumulate ? ref_add(ref_flush(f32(a[j])), s) : s);
        }
      }
    }
  }

  // A random valid stream: loads, swaps and streams in an order the MXU accepts.
  std::string program(std::vector<uint8_t>& blob_out) {
    for (auto& b : vmem) b = uint8_t(rng());
    for (uint64_t i = 0; i + 1 < kBlob; i += 2) {
      const uint16_t v = value();
      if (rng() % 3) vmem[i] = uint8_t(v), vmem[i + 1] = uint8_t(v >> 8);
    }
    blob_out = vmem;
    text = fmt::format(".input blob, u8[{}], 0\n.output acc, u32[{}, {}], {}\n", kBlob, kAccRows, n, kOut);
    text += fmt::format("li s1, {}\ndma.ld s0, s0, s1, sem0\nwait mxu0, sem0, 1\n", kBlob);
    lw(rng() % 3 == 0, rng() % 4 == 0);
    swap();
    const int steps = 4 + int(rng() % 10);
    for (int i = 0; i < steps; ++i) {
      const uint64_t r = rng() % 10;
      if (r < 5) mm(rng() % 2 == 0);
      else if (r < 7 && !shadow_loaded) lw(rng() % 3 == 0, rng() % 4 == 0);
      else if (r < 9 && shadow_loaded) swap();
      else text += "nop\n";
    }
    text += "signal mxu0, sem1, 1\nwait vpu, sem1, 1\n";
    text += fmt::format("li s7, 0\nli s8, {}\nli s9, {}\nout: vlda v0, s7, 0\nvst.s32 v0, s8, 0\naddi s7, s7, 1\naddi s8, s8, {}\nloop s9, out\n",
                        kOut, kAccRows, n * 4);
    text += fmt::format("signal vpu, sem2, 1\nwait dma, sem2, 1\nli s10, {}\nli s11, {}\ndma.st s11, s11, s10, sem3\nwait sc, sem3, 1\nhalt\n",
                        kAccRows * n * 4, kOut);
    return text;
  }
};

sim::MachineConfig config_for(uint32_t n) {
  sim::MachineConfig cfg = sim::load_config("tiny");
  cfg.target.name = fmt::format("mxu{}", n);
  cfg.target.mxu_dim = n;
  cfg.target.vpu_lanes = n;
  return cfg;
}

// One random stream through the fast, PE-level and (where built) RTL MXUs,
// against the reference; `record` also replays it through the RTL lockstep
// harness.
void check_stream(uint32_t n, uint64_t s, int max_exp, bool record, int trial) {
  const auto cfg = config_for(n);
  {
    {
      INFO("N " << n << ", stream seed " << s << ", max_exp " << max_exp);
      Gen g(n, s, max_exp);
      std::vector<uint8_t> blob;
      const std::string src = g.program(blob);
      as::AssembleOptions o;
      o.target = cfg.target;
      auto a = as::assemble(src, "stream.s", o);
      REQUIRE(a.program);
      sim::SimOptions fast, pe;
      pe.pe_level_mxu = true;
      auto rf = test::simulate(*a.program, cfg, {blob}, fast);
      auto rp = test::simulate(*a.program, cfg, {blob}, pe);
      if (sim::rtl_mxu_available(n)) {  // and the Verilated RTL, inside the whole program
        sim::SimOptions rtl;
        rtl.rtl_mxu = true;
        auto rr = test::simulate(*a.program, cfg, {blob}, rtl);
        INFO(rr.fault.value_or(""));
        REQUIRE_FALSE(rr.fault);
        CHECK(rr.cycles == rf.cycles);
        CHECK(rr.outputs == rf.outputs);
      }
      INFO(rf.fault.value_or("") << rp.fault.value_or(""));
      REQUIRE_FALSE(rf.fault);
      REQUIRE_FALSE(rp.fault);
      CHECK(rf.cycles == rp.cycles);
      REQUIRE(rf.outputs[0] == rp.outputs[0]);
      // The stream this program gives MXU 0, replayed through the RTL lockstep harness.
      const std::string harness = fmt::format("{}/bin/mxu_lockstep_{}", TPU_BINARY_DIR, n);
      if (record && std::filesystem::exists(harness)) {
        sim::SimOptions rec;
        rec.record_mxu_path = fmt::format("{}/tests/mxu_stream_{}_{}.txt", TPU_BINARY_DIR, n, trial);
        REQUIRE_FALSE(test::simulate(*a.program, cfg, {blob}, rec).fault);
        const std::string cmd = fmt::format("{} --stream {} > {}.log 2>&1", harness, rec.record_mxu_path, rec.record_mxu_path);
        INFO(cmd);
        CHECK(std::system(cmd.c_str()) == 0);
      }
      const auto got = test::from_bytes<uint32_t>(rf.outputs[0]);
      for (size_t i = 0; i < got.size(); ++i) {
        INFO("accumulator word " << i);
        REQUIRE(got[i] == g.acc[i]);
      }
    }
  }
}

}  // namespace

TEST_CASE("PE-level, fast and RTL MXUs agree with each other and the reference on random streams", "[mxu]") {
  const uint64_t seed = test::test_seed(2026);
  for (uint32_t n : {1u, 3u, 8u, 16u})
    for (int trial = 0; trial < 12; ++trial) check_stream(n, seed * 1000 + n * 100 + uint64_t(trial), 0, trial < 3, trial);
}

// Finite operands only, so that the fast path's fused multiply-add kernels
// run (where no product can overflow: up to 2^63 x 2^63) and its fallback is
// tried at the edge (2^64 x 2^64 overflows).
TEST_CASE("PE-level, fast and RTL MXUs agree on products near the flush and overflow bounds", "[mxu]") {
  const uint64_t seed = test::test_seed(2027);
  for (uint32_t n : {8u, 16u})
    for (int trial = 0; trial < 12; ++trial) check_stream(n, seed * 1000 + n * 100 + uint64_t(trial), trial % 2 ? 64 : 63, false, trial);
}
