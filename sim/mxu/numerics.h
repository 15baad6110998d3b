// MXU arithmetic (SPEC section 5), shared by the PE-level path, the fast path
// and, bit for bit, the RTL.
//
// bf16 mode: operands are bf16 widened to f32 exactly; subnormal operands
// count as zero (with their sign). A product becomes a signed zero when its
// exact magnitude is below FLT_MIN (2^-126); otherwise it is exact in f32
// (8-bit x 8-bit significands), or infinite on overflow.
// Each addition is IEEE f32 round-to-nearest-even, and a sum whose magnitude
// is below FLT_MIN becomes a signed zero (for sums of normal numbers the
// exact result is then a multiple of 2^-149, so flushing after IEEE rounding
// equals flushing the exact sum). Any NaN result is the canonical quiet NaN
// 0x7fc00000.
//
// s8 mode: s8 x s8 products in s32, sums wrap in s32.
#pragma once

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>

namespace tpu::sim::mxu {

inline constexpr uint32_t kCanonicalNaN = 0x7fc00000u;

inline float as_float(uint32_t b) {
  float x;
  std::memcpy(&x, &b, 4);
  return x;
}
inline uint32_t as_bits(float x) {
  uint32_t b;
  std::memcpy(&b, &x, 4);
  return b;
}

// A bf16 operand (its 16-bit pattern) as the array sees it.
inline float bf16_operand(uint16_t b) {
  uint32_t bits = uint32_t(b) << 16;
  if ((bits & 0x7f800000u) == 0) bits &= 0x80000000u;  // subnormal -> signed zero
  return as_float(bits);
}

// A stored f32 entering an addition (the accumulator's old value): a
// subnormal counts as a signed zero.
inline float daz(float x) { return std::fabs(x) < FLT_MIN ? (std::signbit(x) ? -0.0f : 0.0f) : x; }

// With bf16 operands the f32 product is exact whenever the exact product is
// at least FLT_MIN (16 significant bits); below FLT_MIN the exact product is
// either a multiple of 2^-149 (exact as a subnormal) or below 2^-134, so the
// rounded product is below FLT_MIN exactly when the exact one is.
inline float mul(float a, float b) {
  const float p = a * b;
  if (std::isnan(p)) return as_float(kCanonicalNaN);
  if (std::fabs(p) < FLT_MIN) return std::signbit(p) ? -0.0f : 0.0f;
  return p;
}

inline float add(float a, float b) {
  const float s = a + b;
  if (std::isnan(s)) return as_float(kCanonicalNaN);
  if (std::fabs(s) < FLT_MIN) return std::signbit(s) ? -0.0f : 0.0f;
  return s;
}

inline int32_t mul_s8(int32_t a, int32_t b) { return a * b; }  // |a*b| <= 2^14
inline int32_t add_s32(int32_t a, int32_t b) { return int32_t(uint32_t(a) + uint32_t(b)); }

}  // namespace tpu::sim::mxu
