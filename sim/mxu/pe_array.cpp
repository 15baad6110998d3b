// PE-level path: the weight-stationary array advanced register by register.
//
// PE(k, j) holds weights w[0][k][j] and w[1][k][j]. Element k of a row fed in
// cycle c enters PE(k, 0) in cycle c + k (the input skew) and moves one PE to
// the right per cycle; the partial sum of column j moves one PE down per
// cycle, so PE(k, j) works on that row in cycle c + k + j:
//   p(k, j) = add(k == 0 ? +0 : p(k - 1, j), mul(x(k, j), w[b](k, j)))
// and PE(N-1, j) delivers column j in cycle c + N - 1 + j (the de-skew
// collects the row by c + 2N - 2). Each element carries its row's weight
// buffer b and dtype, so a swap takes effect as a wavefront.
//
// The input registers of a PE row form a shift register, kept as a window
// that slides down a longer buffer (one copy every R cycles instead of a
// shift every cycle); partial sums are updated in place, bottom row first.
#include <algorithm>
#include <deque>

#include "datapath.h"
#include "numerics.h"

namespace tpu::sim {
namespace {

struct Mode {
  int buf = 0;
  bool int8 = false;
  bool operator==(const Mode& o) const { return buf == o.buf && int8 == o.int8; }
};

// Row k's partial sums from row k - 1's (previous cycle) and its inputs;
// the rows never overlap.
__attribute__((target_clones("avx2", "default"))) void pe_plain(float* __restrict p, const float* __restrict above,
                                                                  const float* __restrict x, const float* __restrict w,
                                                                  uint32_t j0, uint32_t j1) {
  for (size_t j = j0, end = size_t(j1) + 1; j < end; ++j) p[j] = above[j] + x[j] * w[j];
}
__attribute__((target_clones("avx2", "default"))) void pe_checked(float* __restrict p, const float* __restrict above,
                                                                    const float* __restrict x, const float* __restrict w,
                                                                    uint32_t j0, uint32_t j1) {
  for (size_t j = j0, end = size_t(j1) + 1; j < end; ++j) p[j] = mxu::add(above[j], mxu::mul(x[j], w[j]));
}
__attribute__((target_clones("avx2", "default"))) void pe_s32(int32_t* __restrict p, const int32_t* __restrict above,
                                                                const int32_t* __restrict x, const int32_t* __restrict w,
                                                                uint32_t j0, uint32_t j1) {
  for (size_t j = j0, end = size_t(j1) + 1; j < end; ++j) p[j] = int32_t(uint32_t(above[j]) + uint32_t(x[j] * w[j]));
}

class PeArray final : public MxuArray {
 public:
  explicit PeArray(uint32_t n)
      : MxuArray(n),
        span_(4 * size_t(n) + n),
        wf_(2, std::vector<float>(size_t(n) * n)),
        wi_(2, std::vector<int32_t>(size_t(n) * n)),
        xf_(size_t(n) * span_),
        xi_(size_t(n) * span_),
        pf_(size_t(n) * n),
        pi_(size_t(n) * n),
        zf_(n),
        zi_(n),
        fed_(ring_size(n), nullptr) {}

  void set_weights(int b, const std::vector<uint32_t>& w) override {
    for (size_t i = 0; i < w.size(); ++i) {
      wf_[size_t(b)][i] = mxu::as_float(w[i]);
      wi_[size_t(b)][i] = int32_t(w[i]);
    }
    min_w_[b] = mxu::min_nonzero_magnitude(w.data(), w.size());
  }

  void feed(uint64_t now, MxuRow& row) override {
    fed_[now & (fed_.size() - 1)] = &row;
    const Mode m{row.buf, row.int8};
    if (changes_.empty() || !(changes_.back().second == m)) changes_.emplace_back(now, m);
    if (!row.int8 && !mxu::flush_free(mxu::min_nonzero_magnitude(row.x, n_), min_w_[row.buf]))
      checked_until_ = now + 2 * uint64_t(n_) - 2;
  }

  void step(uint64_t t) override {
    const uint32_t n = n_;
    // Oldest mode change still needed: the one in force at cycle t - 2N.
    while (changes_.size() > 1 && changes_[1].first + 2 * uint64_t(n) <= t) changes_.pop_front();
    // Slide every input shift register one PE to the right.
    if (pos_ == 0) {
      for (uint32_t k = 0; k < n; ++k) {
        std::copy_n(&xf_[k * span_], n, &xf_[k * span_ + span_ - n]);
        std::copy_n(&xi_[k * span_], n, &xi_[k * span_ + span_ - n]);
      }
      pos_ = span_ - n;
    }
    --pos_;
    const bool checked = t <= checked_until_;
    for (uint32_t k = n; k-- > 0;) {
      const MxuRow* in = row_fed(t, k);
      xf_[k * span_ + pos_] = in && !in->int8 ? mxu::as_float(in->x[k]) : 0.0f;
      xi_[k * span_ + pos_] = in && in->int8 ? int32_t(in->x[k]) : 0;
      // Elements j of row k belong to rows fed in cycle t - k - j; walk the
      // runs of equal mode.
      for (uint32_t j0 = 0; j0 < n;) {
        if (t < uint64_t(k) + j0) {  // before the first cycle: nothing was ever fed here
          update(k, j0, n - 1, Mode{}, checked);
          break;
        }
        const auto& [since, mode] = mode_at(t - k - j0);
        const uint32_t j1 = uint32_t(std::min<uint64_t>(n - 1, t - k - since));
        update(k, j0, j1, mode, checked);
        j0 = j1 + 1;
      }
    }
    // Column j leaves the bottom row for the row fed in t - (N - 1) - j.
    for (uint32_t j = 0; j < n; ++j) {
      if (t < uint64_t(n - 1) + j) break;
      MxuRow* r = row_fed(t, n - 1 + j);
      if (!r) continue;
      const size_t at = size_t(n - 1) * n + j;
      r->result[j] = r->int8 ? uint32_t(pi_[at]) : mxu::as_bits(mxu::canonical(pf_[at]));
    }
  }

 private:
  // Rows fed in the last 2N cycles, by feed cycle modulo a power of two.
  static size_t ring_size(uint32_t n) {
    size_t r = 1;
    while (r < 2 * size_t(n)) r <<= 1;
    return r;
  }

  MxuRow* row_fed(uint64_t t, uint64_t ago) const {
    if (t < ago) return nullptr;
    MxuRow* r = fed_[(t - ago) & (fed_.size() - 1)];
    return r && r->fed_cycle == t - ago ? r : nullptr;
  }

  const std::pair<uint64_t, Mode>& mode_at(uint64_t c) const {
    static const std::pair<uint64_t, Mode> kDefault{0, Mode{}};
    for (size_t i = changes_.size(); i-- > 0;)
      if (changes_[i].first <= c) return changes_[i];
    return kDefault;
  }

  void update(uint32_t k, uint32_t j0, uint32_t j1, const Mode& m, bool checked) {
    const size_t row = size_t(k) * n_;
    const size_t x = k * span_ + pos_;
    if (m.int8) {
      pe_s32(&pi_[row], k == 0 ? zi_.data() : &pi_[row - n_], &xi_[x], &wi_[size_t(m.buf)][row], j0, j1);
      return;
    }
    const float* above = k == 0 ? zf_.data() : &pf_[row - n_];
    if (checked)
      pe_checked(&pf_[row], above, &xf_[x], &wf_[size_t(m.buf)][row], j0, j1);
    else
      pe_plain(&pf_[row], above, &xf_[x], &wf_[size_t(m.buf)][row], j0, j1);
  }

  const size_t span_;  // length of each input shift-register buffer
  size_t pos_ = 0;     // PE(k, j)'s input is x[k * span_ + pos_ + j]
  std::vector<std::vector<float>> wf_;
  std::vector<std::vector<int32_t>> wi_;
  float min_w_[2] = {0, 0};
  std::vector<float> xf_;
  std::vector<int32_t> xi_;
  std::vector<float> pf_;
  std::vector<int32_t> pi_;
  std::vector<float> zf_;    // the +0 partial sums entering row 0
  std::vector<int32_t> zi_;
  std::vector<MxuRow*> fed_;                        // see ring_size
  std::deque<std::pair<uint64_t, Mode>> changes_;  // (first feed cycle, mode)
  uint64_t checked_until_ = 0;                      // rows needing flush checks are in the array until then
};

}  // namespace

std::unique_ptr<MxuArray> make_pe_array(uint32_t n) { return std::make_unique<PeArray>(n); }

}  // namespace tpu::sim
