// The checks a program asks for (StableHLO's check.expect_*), evaluated on
// two output tensors with the StableHLO interpreter's semantics.
#include <fmt/format.h>

#include <cmath>
#include <cstring>

#include "tpu/isa/program.h"

namespace tpu::isa {
namespace {

struct FloatFormat {
  int bits, mantissa;
};

std::optional<FloatFormat> float_format(Dtype d) {
  switch (d) {
    case Dtype::f16: return FloatFormat{16, 10};
    case Dtype::bf16: return FloatFormat{16, 7};
    case Dtype::f32: return FloatFormat{32, 23};
    case Dtype::f64: return FloatFormat{64, 52};
    default: return std::nullopt;
  }
}

uint64_t load_bits(const std::vector<uint8_t>& b, size_t i, size_t size) {
  uint64_t v = 0;
  for (size_t k = 0; k < size; ++k) v |= uint64_t(b[i * size + k]) << (8 * k);
  return v;
}

int64_t to_integer(uint64_t bits, Dtype d, size_t size) {
  const bool is_signed = d == Dtype::s8 || d == Dtype::s16 || d == Dtype::s32 || d == Dtype::s64;
  if (!is_signed || size == 8) return int64_t(bits);
  const uint64_t sign = uint64_t(1) << (8 * size - 1);
  return int64_t((bits ^ sign) - sign);
}

// Units in the last place between two finite values (StableHLO's check
// dialect): subnormals count as 0 or 1 step from zero, and values of opposite
// signs add their distances from zero.
uint64_t ulp_distance(uint64_t f, uint64_t g, FloatFormat fmt) {
  const uint64_t sign = uint64_t(1) << (fmt.bits - 1);
  const uint64_t z = (uint64_t(1) << fmt.mantissa) - 1;  // the largest subnormal
  auto steps = [&](uint64_t x) {
    const uint64_t a = x & ~sign;
    return z < a ? a - z : (2 * a < z ? 0 : 1);
  };
  const uint64_t a = steps(f), b = steps(g);
  if ((f & sign) != (g & sign)) return a + b;
  return a > b ? a - b : b - a;
}

std::string index_of(size_t flat, const std::vector<uint64_t>& dims) {
  std::vector<uint64_t> idx(dims.size());
  for (size_t d = dims.size(); d-- > 0;) {
    idx[d] = dims[d] ? flat % dims[d] : 0;
    flat = dims[d] ? flat / dims[d] : 0;
  }
  return fmt::format("[{}]", fmt::join(idx, ","));
}

}  // namespace

CheckOutcome evaluate_check(const Check& c, const TensorSymbol& t, const std::vector<uint8_t>& actual,
                            const std::vector<uint8_t>& expected) {
  const size_t size = dtype_size(t.dtype);
  const uint64_t n = t.elements();
  if (actual.size() != n * size || expected.size() != n * size) return {false, "the outputs have the wrong size"};
  const auto ff = float_format(t.dtype);
  uint64_t worst_ulp = 0;
  double worst_abs = 0;
  for (uint64_t i = 0; i < n; ++i) {
    const uint64_t a = load_bits(actual, i, size), e = load_bits(expected, i, size);
    if (!ff) {
      if (a == e) continue;
      return {false, fmt::format("{} (actual) vs {} (expected) at index {}", to_integer(a, t.dtype, size), to_integer(e, t.dtype, size),
                                 index_of(i, t.dims))};
    }
    const double x = float_bits_value(t.dtype, a), y = float_bits_value(t.dtype, e);
    bool ok = false;
    std::string why;
    switch (c.kind) {
      case CheckKind::expect_eq: ok = x == y; break;
      case CheckKind::expect_almost_eq:
        if (std::isnan(x) || std::isnan(y)) ok = std::isnan(x) && std::isnan(y);
        else if (x == y) ok = true;
        else if (!std::isfinite(x) || !std::isfinite(y) || std::signbit(x) != std::signbit(y)) ok = false;
        else ok = std::fabs(x - y) <= c.tolerance, worst_abs = std::max(worst_abs, std::fabs(x - y));
        if (!ok) why = fmt::format(", |difference| {:.6g} > tolerance {}", std::fabs(x - y), c.tolerance);
        break;
      case CheckKind::expect_close:
        if (std::isnan(x) || std::isnan(y)) ok = std::isnan(x) && std::isnan(y);
        else if (!std::isfinite(x) || !std::isfinite(y)) ok = a == e;
        else {
          const uint64_t d = ulp_distance(a, e, *ff);
          worst_ulp = std::max(worst_ulp, d);
          ok = d >= c.min_ulp && d <= c.max_ulp;
          if (!ok) why = fmt::format(", {} ULP (allowed {}..{})", d, c.min_ulp, c.max_ulp);
        }
        break;
    }
    if (!ok)
      return {false, fmt::format("{:.9g} (actual) vs {:.9g} (expected) at index {}{}", x, y, index_of(i, t.dims), why)};
  }
  switch (c.kind) {
    case CheckKind::expect_almost_eq: return {true, fmt::format("max |difference| {:.3g}", worst_abs)};
    case CheckKind::expect_close: return {true, fmt::format("max {} ULP", worst_ulp)};
    default: return {true, fmt::format("{} elements equal", n)};
  }
}

}  // namespace tpu::isa
