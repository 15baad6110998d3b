// Fast path: a row's result is computed when it is fed: column sums in the
// array's row order with the MXU's rounding (numerics.h), vectorised across
// columns. Rows whose products cannot need a flush (flush_free) take a plain
// kernel: a fused multiply-add where the host has one and no product can
// overflow (fma_exact), else multiply-then-add; others take the checked one.
#include <immintrin.h>

#include <algorithm>
#include <cfloat>
#include <cstring>

#include "../mem/zeroed.h"
#include "datapath.h"
#include "numerics.h"

namespace tpu::sim {
namespace {

constexpr uint32_t kBlock = 64;  // output columns kept in registers

// s[0..n) += x[k] * w[k][0..n) for every k, products and sums rounded
// separately (the build disables contraction into FMA). Columns are done in
// blocks so the partial sums stay in vector registers across k.
__attribute__((target_clones("avx2", "default"))) void rows_plain(float* s, const float* x, const float* w, uint32_t n) {
  uint32_t j0 = 0;
  for (; j0 + kBlock <= n; j0 += kBlock) {
    float acc[kBlock];
    for (uint32_t j = 0; j < kBlock; ++j) acc[j] = s[j0 + j];
    for (uint32_t k = 0; k < n; ++k) {
      const float xk = x[k];
      const float* wk = w + size_t(k) * n + j0;
      for (uint32_t j = 0; j < kBlock; ++j) acc[j] = acc[j] + xk * wk[j];
    }
    for (uint32_t j = 0; j < kBlock; ++j) s[j0 + j] = acc[j];
  }
  for (uint32_t k = 0; k < n; ++k)
    for (uint32_t j = j0; j < n; ++j) s[j] = s[j] + x[k] * w[size_t(k) * n + j];
}

// As rows_plain with fused multiply-adds: the same bits when every product
// is exact in f32 (fma_exact), as round(s + x*w) is then round(s + round(x*w)).
// Eight columns a vector, 64 (eight vectors) kept in registers across k.
__attribute__((target("avx2,fma"))) void rows_fma(float* s, const float* x, const float* w, uint32_t n) {
  uint32_t j0 = 0;
  for (; j0 + kBlock <= n; j0 += kBlock) {
    __m256 a[kBlock / 8];
    for (uint32_t v = 0; v < kBlock / 8; ++v) a[v] = _mm256_loadu_ps(s + j0 + 8 * v);
    for (uint32_t k = 0; k < n; ++k) {
      const __m256 xk = _mm256_set1_ps(x[k]);
      const float* wk = w + size_t(k) * n + j0;
      for (uint32_t v = 0; v < kBlock / 8; ++v) a[v] = _mm256_fmadd_ps(xk, _mm256_loadu_ps(wk + 8 * v), a[v]);
    }
    for (uint32_t v = 0; v < kBlock / 8; ++v) _mm256_storeu_ps(s + j0 + 8 * v, a[v]);
  }
  for (; j0 + 8 <= n; j0 += 8) {
    __m256 a = _mm256_loadu_ps(s + j0);
    for (uint32_t k = 0; k < n; ++k) a = _mm256_fmadd_ps(_mm256_set1_ps(x[k]), _mm256_loadu_ps(w + size_t(k) * n + j0), a);
    _mm256_storeu_ps(s + j0, a);
  }
  for (uint32_t k = 0; k < n; ++k)
    for (uint32_t j = j0; j < n; ++j) s[j] = s[j] + x[k] * w[size_t(k) * n + j];  // exact products: as an FMA
}

// Six rows at once, columns j0..j0+15: each weight vector loaded once serves
// six rows (rows_fma loads it for every row); the twelve sums stay in
// registers across k (named, so that the compiler does not spill an array).
__attribute__((target("avx2,fma"))) void tile6_fma(float* const* s, const float* const* x, const float* w, uint32_t n, uint32_t j0) {
  __m256 a0 = _mm256_setzero_ps(), b0 = a0, a1 = a0, b1 = a0, a2 = a0, b2 = a0, a3 = a0, b3 = a0, a4 = a0, b4 = a0, a5 = a0, b5 = a0;
  const float *x0 = x[0], *x1 = x[1], *x2 = x[2], *x3 = x[3], *x4 = x[4], *x5 = x[5];
  const float* wk = w + j0;
  for (uint32_t k = 0; k < n; ++k, wk += n) {
    const __m256 w0 = _mm256_loadu_ps(wk), w1 = _mm256_loadu_ps(wk + 8);
    __m256 v = _mm256_broadcast_ss(x0 + k);
    a0 = _mm256_fmadd_ps(v, w0, a0), b0 = _mm256_fmadd_ps(v, w1, b0);
    v = _mm256_broadcast_ss(x1 + k);
    a1 = _mm256_fmadd_ps(v, w0, a1), b1 = _mm256_fmadd_ps(v, w1, b1);
    v = _mm256_broadcast_ss(x2 + k);
    a2 = _mm256_fmadd_ps(v, w0, a2), b2 = _mm256_fmadd_ps(v, w1, b2);
    v = _mm256_broadcast_ss(x3 + k);
    a3 = _mm256_fmadd_ps(v, w0, a3), b3 = _mm256_fmadd_ps(v, w1, b3);
    v = _mm256_broadcast_ss(x4 + k);
    a4 = _mm256_fmadd_ps(v, w0, a4), b4 = _mm256_fmadd_ps(v, w1, b4);
    v = _mm256_broadcast_ss(x5 + k);
    a5 = _mm256_fmadd_ps(v, w0, a5), b5 = _mm256_fmadd_ps(v, w1, b5);
  }
  _mm256_storeu_ps(s[0] + j0, a0), _mm256_storeu_ps(s[0] + j0 + 8, b0);
  _mm256_storeu_ps(s[1] + j0, a1), _mm256_storeu_ps(s[1] + j0 + 8, b1);
  _mm256_storeu_ps(s[2] + j0, a2), _mm256_storeu_ps(s[2] + j0 + 8, b2);
  _mm256_storeu_ps(s[3] + j0, a3), _mm256_storeu_ps(s[3] + j0 + 8, b3);
  _mm256_storeu_ps(s[4] + j0, a4), _mm256_storeu_ps(s[4] + j0 + 8, b4);
  _mm256_storeu_ps(s[5] + j0, a5), _mm256_storeu_ps(s[5] + j0 + 8, b5);
}

// s[r][0..n) = sum_k x[r][k] * w[k][0..n) for `rows` rows, n a multiple of
// 16: six rows at a time, the rest one by one.
void rows_fma_batch(float* const* s, const float* const* x, const float* w, uint32_t n, uint32_t rows) {
  uint32_t r0 = 0;
  for (; r0 + 6 <= rows; r0 += 6)
    for (uint32_t j0 = 0; j0 < n; j0 += 16) tile6_fma(s + r0, x + r0, w, n, j0);
  for (; r0 < rows; ++r0) {
    std::fill(s[r0], s[r0] + n, 0.0f);
    rows_fma(s[r0], x[r0], w, n);
  }
}

const bool kHostFma = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");

// A row's sums as the array gives them: any NaN the canonical one.
__attribute__((target_clones("avx2", "default"))) void store_canonical(uint32_t* out, const float* sum, size_t n) {
  for (size_t j = 0; j < n; ++j) out[j] = mxu::as_bits(mxu::canonical(sum[j]));
}

// The smallest non-zero magnitude among f32 values given as bits and the
// largest, as bits (above 0x7f800000 for a NaN): built for AVX2 where the
// host has it, as the baseline's SSE2 has no 32-bit unsigned minimum to
// vectorise them with.
struct Magnitudes {
  float min_nonzero;
  uint32_t max_bits;
};
__attribute__((target_clones("avx2", "default"))) Magnitudes magnitudes(const uint32_t* bits, size_t n) {
  uint32_t hi = 0;
  for (size_t i = 0; i < n; ++i) hi = std::max(hi, bits[i] & 0x7fffffffu);
  return {mxu::min_nonzero_magnitude(bits, n), hi};
}

// Whether every product x*w is exact in f32 (so an FMA rounds as mul then
// add): none needs a flush, and none overflows (operands finite, the largest
// product at most FLT_MAX; bf16 products are exact in double).
bool fma_exact(float min_x, uint32_t max_x, float min_w, uint32_t max_w) {
  if (!mxu::flush_free(min_x, min_w) || max_x >= 0x7f800000u || max_w >= 0x7f800000u) return false;
  return double(mxu::as_float(max_x)) * double(mxu::as_float(max_w)) <= double(FLT_MAX);
}

__attribute__((target_clones("avx2", "default"))) void rows_checked(float* s, const float* x, const float* w, uint32_t n) {
  for (uint32_t k = 0; k < n; ++k)
    for (uint32_t j = 0; j < n; ++j) s[j] = mxu::add(s[j], mxu::mul(x[k], w[size_t(k) * n + j]));
}

__attribute__((target_clones("avx2", "default"))) void rows_s32(int32_t* s, const int32_t* x, const int32_t* w, uint32_t n) {
  for (uint32_t k = 0; k < n; ++k)
    for (uint32_t j = 0; j < n; ++j) s[j] = int32_t(uint32_t(s[j]) + uint32_t(x[k] * w[size_t(k) * n + j]));
}

class FastArray final : public MxuArray {
 public:
  explicit FastArray(uint32_t n)
      : MxuArray(n), wf_store_(2 * size_t(n) * n), wi_store_(2 * size_t(n) * n), xf_(n), xi_(n), sf_(n), si_(n) {
    for (size_t b = 0; b < 2; ++b) wf_[b] = wf_store_.data() + b * n * n, wi_[b] = wi_store_.data() + b * n * n;
  }

  void set_weights(int b, const std::vector<uint32_t>& w) override {
    compute_pending();
    // The bits as f32 (bf16 weights); as s32 (s8 weights) when an int8 row comes.
    std::memcpy(wf_[size_t(b)], w.data(), w.size() * sizeof(float));
    wi_stale_[b] = true;
    const Magnitudes m = magnitudes(w.data(), w.size());
    min_w_[b] = m.min_nonzero, max_w_[b] = m.max_bits;
  }

  void feed(uint64_t, MxuRow& row) override {
    const size_t b = size_t(row.buf);
    if (row.int8) {
      if (wi_stale_[b]) std::memcpy(wi_[b], wf_[b], size_t(n_) * n_ * sizeof(int32_t)), wi_stale_[b] = false;
      for (uint32_t k = 0; k < n_; ++k) xi_[k] = int32_t(row.x[k]);
      std::fill(si_.begin(), si_.end(), 0);
      rows_s32(si_.data(), xi_.data(), wi_[b], n_);
      for (uint32_t j = 0; j < n_; ++j) row.result[j] = uint32_t(si_[j]);
      return;
    }
    const Magnitudes mx = magnitudes(row.x, n_);
    const float min_x = mx.min_nonzero;
    if (kHostFma && fma_exact(min_x, mx.max_bits, min_w_[b], max_w_[b])) {
      if (n_ % 16 == 0) {  // later, with the rows fed after it (complete())
        if (!pending_.empty() && pending_.front()->buf != row.buf) compute_pending();
        row.pending = true;
        pending_.push_back(&row);
        return;
      }
      for (uint32_t k = 0; k < n_; ++k) xf_[k] = mxu::as_float(row.x[k]);
      std::fill(sf_.begin(), sf_.end(), 0.0f);
      rows_fma(sf_.data(), xf_.data(), wf_[b], n_);
      store_canonical(row.result, sf_.data(), n_);
      return;
    }
    for (uint32_t k = 0; k < n_; ++k) xf_[k] = mxu::as_float(row.x[k]);
    std::fill(sf_.begin(), sf_.end(), 0.0f);
    if (mxu::flush_free(min_x, min_w_[b]))
      rows_plain(sf_.data(), xf_.data(), wf_[b], n_);
    else
      rows_checked(sf_.data(), xf_.data(), wf_[b], n_);
    store_canonical(row.result, sf_.data(), n_);
  }

  void complete(MxuRow& row) override {
    if (row.pending) compute_pending();
  }

  void step(uint64_t) override {}

 private:
  // The rows fed since the last batch (all with one weight buffer, every
  // product exact), computed together: the sums of each row are those of
  // feed()'s kernels, in the same order.
  void compute_pending() {
    const size_t rows = pending_.size();
    if (rows == 0) return;
    if (bx_.size() < rows * n_) bx_.resize(rows * n_), bs_.resize(rows * n_);  // grown, never shrunk: no refilling
    xp_.resize(rows), sp_.resize(rows);
    for (size_t r = 0; r < rows; ++r) {
      xp_[r] = bx_.data() + r * n_, sp_[r] = bs_.data() + r * n_;
      std::memcpy(xp_[r], pending_[r]->x, n_ * sizeof(float));
    }
    rows_fma_batch(sp_.data(), xp_.data(), wf_[size_t(pending_.front()->buf)], n_, uint32_t(rows));
    for (size_t r = 0; r < rows; ++r) {
      store_canonical(pending_[r]->result, sp_[r], n_);
      pending_[r]->pending = false;
    }
    pending_.clear();
  }

  std::vector<MxuRow*> pending_;
  std::vector<float> bx_, bs_;
  std::vector<float*> xp_, sp_;
  Zeroed<float> wf_store_;  // both weight buffers, as f32
  Zeroed<int32_t> wi_store_;  // and as s32
  float* wf_[2];
  int32_t* wi_[2];
  bool wi_stale_[2] = {false, false};
  float min_w_[2] = {0, 0};
  uint32_t max_w_[2] = {0, 0};
  std::vector<float> xf_;
  std::vector<int32_t> xi_;
  std::vector<float> sf_;
  std::vector<int32_t> si_;
};

}  // namespace

std::unique_ptr<MxuArray> make_fast_array(uint32_t n) { return std::make_unique<FastArray>(n); }

}  // namespace tpu::sim
