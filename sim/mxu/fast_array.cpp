// Fast path: a row's result is computed when it is fed: column sums in the
// array's row order with the MXU's rounding (numerics.h), vectorised across
// columns.
#include <algorithm>

#include "datapath.h"
#include "numerics.h"

namespace tpu::sim {
namespace {

// s[j] = add(s[j], mul(x, w[j])) for j < n, written so that it vectorises.
__attribute__((target_clones("avx2", "default"))) void mac_row_f32(float* s, float x, const float* w, uint32_t n) {
  for (uint32_t j = 0; j < n; ++j) s[j] = mxu::add(s[j], mxu::mul(x, w[j]));
}

__attribute__((target_clones("avx2", "default"))) void mac_row_s32(int32_t* s, int32_t x, const int32_t* w, uint32_t n) {
  for (uint32_t j = 0; j < n; ++j) s[j] = int32_t(uint32_t(s[j]) + uint32_t(x * w[j]));
}

class FastArray final : public MxuArray {
 public:
  explicit FastArray(uint32_t n) : MxuArray(n), wf_(2, std::vector<float>(size_t(n) * n)), wi_(wf_.size(), std::vector<int32_t>(size_t(n) * n)), sf_(n), si_(n) {}

  void set_weights(int b, const std::vector<uint32_t>& w) override {
    for (size_t i = 0; i < w.size(); ++i) {
      wf_[size_t(b)][i] = mxu::as_float(w[i]);
      wi_[size_t(b)][i] = int32_t(w[i]);
    }
  }

  void feed(uint64_t, MxuRow& row) override {
    const size_t b = size_t(row.buf);
    if (row.int8) {
      std::fill(si_.begin(), si_.end(), 0);
      for (uint32_t k = 0; k < n_; ++k) mac_row_s32(si_.data(), int32_t(row.x[k]), &wi_[b][size_t(k) * n_], n_);
      for (uint32_t j = 0; j < n_; ++j) row.result[j] = uint32_t(si_[j]);
      return;
    }
    std::fill(sf_.begin(), sf_.end(), 0.0f);
    for (uint32_t k = 0; k < n_; ++k) mac_row_f32(sf_.data(), mxu::as_float(row.x[k]), &wf_[b][size_t(k) * n_], n_);
    for (uint32_t j = 0; j < n_; ++j) row.result[j] = mxu::as_bits(sf_[j]);
  }

  void step(uint64_t) override {}

 private:
  std::vector<std::vector<float>> wf_;
  std::vector<std::vector<int32_t>> wi_;
  std::vector<float> sf_;
  std::vector<int32_t> si_;
};

}  // namespace

std::unique_ptr<MxuArray> make_fast_array(uint32_t n) { return std::make_unique<FastArray>(n); }

}  // namespace tpu::sim
