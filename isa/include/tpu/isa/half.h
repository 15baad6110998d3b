// The narrow floats, bit patterns in, bit patterns out: the one definition
// the VPU's loads, stores and rounding, the IR's constants, the interpreter
// and the file tools use.
//
// bf16 is the top half of an f32: f32 -> bf16 rounds to nearest, ties to
// even (overflow to infinity); a NaN stays a NaN, quiet, with its sign.
//
// IEEE 754 binary16 (f16):
// f16 -> f32 is exact (every f16, subnormals included, is an f32).
// f32 -> f16 rounds to nearest, ties to even: magnitudes from 65520 up
// become infinity, those below 2^-14 become subnormals (multiples of 2^-24),
// those at or below 2^-25 zero (with their sign); a NaN stays a NaN, quiet,
// with its sign and the top bits of its payload.
#pragma once

#include <cstdint>

namespace tpu::isa {

inline uint16_t f32_bits_to_bf16(uint32_t b) {
  if ((b & 0x7fffffffu) > 0x7f800000u) return uint16_t((b >> 16) | 0x40);
  return uint16_t((b + 0x7fffu + ((b >> 16) & 1)) >> 16);
}
inline uint32_t round_f32_bits_to_bf16(uint32_t b) { return uint32_t(f32_bits_to_bf16(b)) << 16; }

inline uint32_t f16_to_f32_bits(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  const uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0x1f) return sign | 0x7f800000u | (m << 13);
  if (e != 0) return sign | ((e + 112) << 23) | (m << 13);
  if (m == 0) return sign;
  // A subnormal m * 2^-24: shift the leading one into the hidden bit.
  int shift = 0;
  uint32_t mm = m;
  while ((mm & 0x400u) == 0) mm <<= 1, ++shift;
  return sign | (uint32_t(113 - shift) << 23) | ((mm & 0x3ffu) << 13);
}

inline uint16_t f32_bits_to_f16(uint32_t b) {
  const uint16_t sign = uint16_t((b >> 16) & 0x8000u);
  const uint32_t a = b & 0x7fffffffu;
  if (a > 0x7f800000u) return uint16_t(sign | 0x7e00u | ((a >> 13) & 0x3ffu));  // NaN, quiet
  if (a >= 0x477ff000u) return uint16_t(sign | 0x7c00u);                          // >= 65520: infinity
  if (a >= 0x38800000u) {                                                        // normal: >= 2^-14
    const uint32_t r = a - 0x38000000u;                                          // exponent rebiased 127 -> 15
    return uint16_t(sign | ((r + 0x0fffu + ((r >> 13) & 1u)) >> 13));
  }
  if (a <= 0x33000000u) return sign;  // <= 2^-25: the tie at 2^-25 goes to the even 0
  // Subnormal: the value in units of 2^-24, rounded to nearest even.
  const uint32_t mant = (a & 0x7fffffu) | 0x800000u;
  const int shift = 126 - int(a >> 23);  // 14..24
  const uint32_t q = mant >> shift, rem = mant & ((1u << shift) - 1), half = 1u << (shift - 1);
  return uint16_t(sign | (q + ((rem > half || (rem == half && (q & 1u))) ? 1u : 0u)));
}

// f32 bits rounded to f16 precision and range, as f32 bits.
inline uint32_t round_f32_bits_to_f16(uint32_t b) { return f16_to_f32_bits(f32_bits_to_f16(b)); }

}  // namespace tpu::isa
