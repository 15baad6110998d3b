// Fast path: a row's result is computed when it is fed: column sums in the
// array's row order with the MXU's rounding (numerics.h), vectorised across
// columns. Rows whose products cannot need a flush (flush_free) take a plain
// multiply-then-add kernel; others take the checked one.
#include <algorithm>

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
      : MxuArray(n), wf_(2, std::vector<float>(size_t(n) * n)), wi_(2, std::vector<int32_t>(size_t(n) * n)), xf_(n), xi_(n), sf_(n), si_(n) {}

  void set_weights(int b, const std::vector<uint32_t>& w) override {
    for (size_t i = 0; i < w.size(); ++i) {
      wf_[size_t(b)][i] = mxu::as_float(w[i]);
      wi_[size_t(b)][i] = int32_t(w[i]);
    }
    min_w_[b] = mxu::min_nonzero_magnitude(w.data(), w.size());
  }

  void feed(uint64_t, MxuRow& row) override {
    const size_t b = size_t(row.buf);
    if (row.int8) {
      for (uint32_t k = 0; k < n_; ++k) xi_[k] = int32_t(row.x[k]);
      std::fill(si_.begin(), si_.end(), 0);
      rows_s32(si_.data(), xi_.data(), wi_[b].data(), n_);
      for (uint32_t j = 0; j < n_; ++j) row.result[j] = uint32_t(si_[j]);
      return;
    }
    for (uint32_t k = 0; k < n_; ++k) xf_[k] = mxu::as_float(row.x[k]);
    std::fill(sf_.begin(), sf_.end(), 0.0f);
    if (mxu::flush_free(mxu::min_nonzero_magnitude(row.x.data(), n_), min_w_[b]))
      rows_plain(sf_.data(), xf_.data(), wf_[b].data(), n_);
    else
      rows_checked(sf_.data(), xf_.data(), wf_[b].data(), n_);
    for (uint32_t j = 0; j < n_; ++j) row.result[j] = mxu::as_bits(mxu::canonical(sf_[j]));
  }

  void step(uint64_t) override {}

 private:
  std::vector<std::vector<float>> wf_;
  std::vector<std::vector<int32_t>> wi_;
  float min_w_[2] = {0, 0};
  std::vector<float> xf_;
  std::vector<int32_t> xi_;
  std::vector<float> sf_;
  std::vector<int32_t> si_;
};

}  // namespace

std::unique_ptr<MxuArray> make_fast_array(uint32_t n) { return std::make_unique<FastArray>(n); }

}  // namespace tpu::sim
