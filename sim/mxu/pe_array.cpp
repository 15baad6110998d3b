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

class PeArray final : public MxuArray {
 public:
  explicit PeArray(uint32_t n)
      : MxuArray(n),
        wf_(2, std::vector<float>(size_t(n) * n)),
        wi_(2, std::vector<int32_t>(size_t(n) * n)),
        xf_(size_t(n) * n),
        xi_(size_t(n) * n),
        pf_(size_t(n) * n),
        pi_(size_t(n) * n),
        fed_(2 * size_t(n), nullptr) {}

  void set_weights(int b, const std::vector<uint32_t>& w) override {
    for (size_t i = 0; i < w.size(); ++i) {
      wf_[size_t(b)][i] = mxu::as_float(w[i]);
      wi_[size_t(b)][i] = int32_t(w[i]);
    }
  }

  void feed(uint64_t now, MxuRow& row) override {
    fed_[now % fed_.size()] = &row;
    const Mode m{row.buf, row.int8};
    if (changes_.empty() || !(changes_.back().second == m)) changes_.emplace_back(now, m);
  }

  void step(uint64_t t) override {
    const uint32_t n = n_;
    // Oldest mode change still needed: the one in force at cycle t - 2N.
    while (changes_.size() > 1 && changes_[1].first + 2 * uint64_t(n) <= t) changes_.pop_front();
    for (uint32_t k = n; k-- > 0;) {
      float* xf = &xf_[size_t(k) * n];
      int32_t* xi = &xi_[size_t(k) * n];
      std::move_backward(xf, xf + n - 1, xf + n);
      std::move_backward(xi, xi + n - 1, xi + n);
      const MxuRow* in = row_fed(t, k);
      xf[0] = in && !in->int8 ? mxu::as_float(in->x[k]) : 0.0f;
      xi[0] = in && in->int8 ? int32_t(in->x[k]) : 0;
      // Elements j of row k belong to rows fed in cycle t - k - j; walk the
      // runs of equal mode.
      for (uint32_t j0 = 0; j0 < n;) {
        const uint64_t c0 = t - k - j0;
        const auto& [since, mode] = mode_at(c0);
        const uint32_t j1 = uint32_t(std::min<uint64_t>(n - 1, t - k - std::min(since, t - k)));
        update(k, j0, j1, mode);
        j0 = j1 + 1;
      }
    }
    // Column j leaves the bottom row for the row fed in t - (N - 1) - j.
    for (uint32_t j = 0; j < n; ++j) {
      if (t < uint64_t(n - 1) + j) break;
      MxuRow* r = row_fed(t, n - 1 + j);
      if (!r) continue;
      const size_t at = size_t(n - 1) * n + j;
      r->result[j] = r->int8 ? uint32_t(pi_[at]) : mxu::as_bits(pf_[at]);
    }
  }

 private:
  MxuRow* row_fed(uint64_t t, uint64_t ago) const {
    if (t < ago) return nullptr;
    MxuRow* r = fed_[(t - ago) % fed_.size()];
    return r && r->fed_cycle == t - ago ? r : nullptr;
  }

  const std::pair<uint64_t, Mode>& mode_at(uint64_t c) const {
    static const std::pair<uint64_t, Mode> kDefault{0, Mode{}};
    for (size_t i = changes_.size(); i-- > 0;)
      if (changes_[i].first <= c) return changes_[i];
    return kDefault;
  }

  void update(uint32_t k, uint32_t j0, uint32_t j1, const Mode& m) {
    const uint32_t n = n_;
    const size_t row = size_t(k) * n, above = size_t(k - 1) * n;
    if (m.int8) {
      const int32_t* w = &wi_[size_t(m.buf)][row];
      for (uint32_t j = j0; j <= j1; ++j)
        pi_[row + j] = mxu::add_s32(k == 0 ? 0 : pi_[above + j], mxu::mul_s8(xi_[row + j], w[j]));
      return;
    }
    const float* w = &wf_[size_t(m.buf)][row];
    for (uint32_t j = j0; j <= j1; ++j)
      pf_[row + j] = mxu::add(k == 0 ? 0.0f : pf_[above + j], mxu::mul(xf_[row + j], w[j]));
  }

  std::vector<std::vector<float>> wf_;
  std::vector<std::vector<int32_t>> wi_;
  std::vector<float> xf_;
  std::vector<int32_t> xi_;
  std::vector<float> pf_;
  std::vector<int32_t> pi_;
  std::vector<MxuRow*> fed_;                        // by feed cycle mod 2N
  std::deque<std::pair<uint64_t, Mode>> changes_;  // (first feed cycle, mode)
};

}  // namespace

std::unique_ptr<MxuArray> make_pe_array(uint32_t n) { return std::make_unique<PeArray>(n); }

}  // namespace tpu::sim
