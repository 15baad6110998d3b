// Lane arithmetic of the VPU: IEEE f32 and two's-complement s32, with the
// corner cases XLA defines (NaN-propagating max/min, x / 0 = -1 for s32,
// saturating f32 -> s32).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

namespace tpu::sim::lanes {

inline float f(uint32_t b) {
  float x;
  std::memcpy(&x, &b, 4);
  return x;
}
inline uint32_t bits(float x) {
  uint32_t b;
  std::memcpy(&b, &x, 4);
  return b;
}
inline int32_t s(uint32_t b) { return int32_t(b); }

inline float fmax_nan(float a, float b) {
  if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<float>::quiet_NaN();
  if (a == b) return std::signbit(a) ? b : a;
  return a > b ? a : b;
}
inline float fmin_nan(float a, float b) {
  if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<float>::quiet_NaN();
  if (a == b) return std::signbit(a) ? a : b;
  return a < b ? a : b;
}
inline int32_t sdiv(int32_t a, int32_t b) {
  if (b == 0) return -1;
  if (a == std::numeric_limits<int32_t>::min() && b == -1) return a;
  return a / b;
}
inline int32_t f32_to_s32(float x) {
  if (std::isnan(x)) return 0;
  if (x >= 2147483648.0f) return std::numeric_limits<int32_t>::max();
  if (x < -2147483648.0f) return std::numeric_limits<int32_t>::min();
  return int32_t(x);
}
inline float fsign(float x) {
  if (std::isnan(x) || x == 0) return x;
  return x > 0 ? 1.0f : -1.0f;
}
inline uint32_t shl(uint32_t a, uint32_t n) { return n > 31 ? 0 : a << n; }
inline uint32_t shr(uint32_t a, uint32_t n) { return n > 31 ? 0 : a >> n; }
inline uint32_t sra(uint32_t a, uint32_t n) { return uint32_t(int32_t(a) >> (n > 31 ? 31 : n)); }

}  // namespace tpu::sim::lanes
