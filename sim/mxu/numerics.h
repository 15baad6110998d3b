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

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstddef>
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

// The rules as branch-free bit operations, so that loops over them vectorise.

// A subnormal becomes a signed zero; NaN becomes the canonical NaN.
inline float flush(float x) {
  uint32_t b = as_bits(x);
  const uint32_t exp = b & 0x7f800000u;
  b = exp == 0 ? (b & 0x80000000u) : b;
  b = (exp == 0x7f800000u && (b & 0x007fffffu) != 0) ? kCanonicalNaN : b;
  return as_float(b);
}

// A stored f32 entering an addition (the accumulator's old value): a
// subnormal counts as a signed zero.
inline float daz(float x) {
  const uint32_t b = as_bits(x);
  return as_float((b & 0x7f800000u) == 0 ? (b & 0x80000000u) : b);
}

// A bf16 operand (its 16-bit pattern) as the array sees it.
inline float bf16_operand(uint16_t b) { return daz(as_float(uint32_t(b) << 16)); }

// With bf16 operands the f32 product is exact whenever the exact product is
// at least FLT_MIN (16 significant bits); below FLT_MIN the exact product is
// either a multiple of 2^-149 (exact as a subnormal) or below 2^-134, so the
// rounded product is below FLT_MIN exactly when the exact one is.
inline float mul(float a, float b) { return flush(a * b); }
inline float add(float a, float b) { return flush(a + b); }

// Canonicalising NaN once at the end of a chain of adds gives the same bits
// as doing it after every operation: a NaN stays a NaN through add and mul.
inline float canonical(float x) {
  const uint32_t b = as_bits(x);
  return as_float((b & 0x7fffffffu) > 0x7f800000u ? kCanonicalNaN : b);
}

// The smallest non-zero magnitude among f32 values given as bits (infinity
// if none).
inline float min_nonzero_magnitude(const uint32_t* bits, size_t n) {
  // The least of |x| - 1 as unsigned (a zero wraps to the largest), plus 1:
  // a plain minimum, which vectorises.
  uint32_t m = 0x7f800000u - 1;
  for (size_t i = 0; i < n; ++i) m = std::min(m, (bits[i] & 0x7fffffffu) - 1);
  return as_float(m + 1);
}

// When every non-zero product has magnitude at least 2^-111, each product is
// a multiple of at least 2^-126 (16 significant bits), so every partial sum
// is zero or at least FLT_MIN in magnitude: no product or sum can need a
// flush, and plain f32 multiply-then-add is bit-exact with mul()/add().
inline bool flush_free(float min_x, float min_w) { return double(min_x) * double(min_w) >= 0x1p-111; }

inline int32_t mul_s8(int32_t a, int32_t b) { return a * b; }  // |a*b| <= 2^14
inline int32_t add_s32(int32_t a, int32_t b) { return int32_t(uint32_t(a) + uint32_t(b)); }

}  // namespace tpu::sim::mxu
