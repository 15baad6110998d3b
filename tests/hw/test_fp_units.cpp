// The Verilated MXU multiplier and adder against the model's numerics
// (sim/mxu/numerics.h), bit for bit, on seeded random and special operands.
#include <catch2/catch.hpp>

#include <cstdio>
#include <random>

#include "../../sim/mxu/numerics.h"
#if TPU_HAVE_RTL_FP
#include "Vmxu_bf16_mul.h"
#include "Vmxu_f32_add.h"
#endif

using namespace tpu::sim;

namespace {

// Operands that reach the interesting cases: specials, equal or adjacent
// exponents (cancellation), exponent sums near the flush and overflow limits.
[[maybe_unused]] uint32_t interesting_f32(std::mt19937_64& rng) {
  static const uint32_t kSpecial[] = {0x00000000, 0x80000000, 0x7f800000, 0xff800000, 0x7fc00000, 0x7f800001,
                                      0x00000001, 0x807fffff, 0x00800000, 0x80800000, 0x7f7fffff, 0xff7fffff,
                                      0x00800001, 0x3f800000, 0xbf800000, 0x00ffffff};
  const uint64_t r = rng();
  switch (r % 6) {
    case 0: return kSpecial[(r >> 8) % 16];
    case 1: return uint32_t(rng()) & 0x81ffffffu;  // tiny exponents: flushes
    case 2: return (uint32_t(rng()) & 0x807fffffu) | ((0x7d + uint32_t(rng() % 3)) << 23);  // near each other
    default: return uint32_t(rng());
  }
}

[[maybe_unused]] uint16_t interesting_bf16(std::mt19937_64& rng) {
  const uint64_t r = rng();
  if (r % 4 == 0) return uint16_t((r >> 8) & 0x807f) | uint16_t(((r >> 20) % 2 ? 0x20 + (r >> 24) % 8 : 0xff - (r >> 24) % 3) << 7);
  if (r % 4 == 1) return uint16_t((r >> 8) & 0x80ff) | uint16_t((0x3e + (r >> 24) % 4) << 7);  // exponent sums near 2^-126 .. 2^0
  return uint16_t(r >> 16);
}

}  // namespace

TEST_CASE("RTL f32 adder equals the model's add bit for bit", "[rtl]") {
#if !TPU_HAVE_RTL_FP
  WARN("SKIPPED: built without Verilator");
#else
  const uint64_t seed = 0xadd;
  std::printf("seed %llu\n", static_cast<unsigned long long>(seed));
  std::mt19937_64 rng(seed);
  Vmxu_f32_add dut;
  int mismatches = 0;
  for (int i = 0; i < 2000000; ++i) {
    uint32_t a = interesting_f32(rng), b = interesting_f32(rng);
    if (i % 3 == 0) b = (a ^ 0x80000000u) + uint32_t(rng() % 5) - 2;  // near-total cancellation
    dut.a_i = a;
    dut.b_i = b;
    dut.eval();
    const uint32_t want = mxu::as_bits(mxu::add(mxu::daz(mxu::as_float(a)), mxu::daz(mxu::as_float(b))));
    if (dut.s_o != want && mismatches++ == 0)
      std::printf("first mismatch: a %08x b %08x rtl %08x model %08x\n", a, b, dut.s_o, want);
  }
  CHECK(mismatches == 0);
#endif
}

TEST_CASE("RTL bf16 multiplier equals the model's mul bit for bit", "[rtl]") {
#if !TPU_HAVE_RTL_FP
  WARN("SKIPPED: built without Verilator");
#else
  const uint64_t seed = 0xb16;
  std::printf("seed %llu\n", static_cast<unsigned long long>(seed));
  std::mt19937_64 rng(seed);
  Vmxu_bf16_mul dut;
  int mismatches = 0;
  for (int i = 0; i < 2000000; ++i) {
    const uint16_t a = interesting_bf16(rng), b = interesting_bf16(rng);
    dut.a_i = a;
    dut.b_i = b;
    dut.eval();
    const uint32_t want = mxu::as_bits(mxu::mul(mxu::bf16_operand(a), mxu::bf16_operand(b)));
    if (dut.p_o != want && mismatches++ == 0)
      std::printf("first mismatch: a %04x b %04x rtl %08x model %08x\n", a, b, dut.p_o, want);
  }
  CHECK(mismatches == 0);
#endif
}
