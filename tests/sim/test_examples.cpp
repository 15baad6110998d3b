// The hand-written programs of examples/asm on tiny and v5e: outputs against
// references computed here, the fast path against the PE-level path, and
// the same run twice.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <cmath>
#include <map>
#include <random>

#include "harness.h"
#include "../../sim/mxu/mxu_unit.h"
#include "tpu/isa/target.h"

using namespace tpu;
using test::from_bytes;
using test::to_bytes;

namespace {

const char* kPresets[] = {"tiny", "v5e"};

struct Case {
  std::string name;
  std::string source;
  std::vector<std::vector<uint8_t>> inputs;
  std::vector<std::vector<uint8_t>> expected;  // exact bytes
};

std::vector<uint16_t> random_bf16(size_t n, std::mt19937_64& rng) {
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<uint16_t> v(n);
  for (auto& x : v) x = test::bf16_round(d(rng));
  return v;
}

// The MXU's sum for one output: products added in k order, as numerics.h says.
// Inputs here are normal numbers, so the flush rules never apply and plain
// f32 arithmetic is the reference.
std::vector<float> matmul_ref(const std::vector<uint16_t>& x, const std::vector<uint16_t>& w, size_t n) {
  std::vector<float> y(n * n);
  for (size_t i = 0; i < n; ++i)
    for (size_t j = 0; j < n; ++j) {
      float s = 0.0f;
      for (size_t k = 0; k < n; ++k) s = s + test::bf16_value(x[i * n + k]) * test::bf16_value(w[k * n + j]);
      y[i * n + j] = s;
    }
  return y;
}

// Cycle counts are part of the contract (examples/asm/README.md): a change
// here needs a reason in the commit that makes it.
uint64_t expected_cycles(const std::string& name, const std::string& preset) {
  static const std::map<std::string, std::pair<uint64_t, uint64_t>> kCycles = {
      {"matmul_bf16", {203, 1545}},
      {"matmul_bias_relu", {233, 1960}},
      {"reduce_sum", {160, 825}},
      {"dma_copy", {8677, 2788}},
  };
  const auto& [tiny, v5e] = kCycles.at(name);
  return preset == "tiny" ? tiny : v5e;
}

void run_case(const Case& c, const std::string& preset) {
  INFO(c.name << " on " << preset);
  const auto program = test::assemble_for(c.source, preset);
  const auto cfg = test::formula_config(preset);
  sim::SimOptions fast, pe;
  pe.pe_level_mxu = true;
  auto a = test::simulate(program, cfg, c.inputs, fast);
  auto b = test::simulate(program, cfg, c.inputs, fast);
  auto p = test::simulate(program, cfg, c.inputs, pe);
  INFO(a.fault.value_or("") << p.fault.value_or(""));
  REQUIRE_FALSE(a.fault);
  REQUIRE_FALSE(p.fault);
  REQUIRE(a.outputs.size() == c.expected.size());
  for (size_t i = 0; i < c.expected.size(); ++i) {
    INFO("output " << i);
    CHECK(a.outputs[i] == c.expected[i]);
  }
  CHECK(a.outputs == b.outputs);
  CHECK(a.cycles == b.cycles);
  CHECK(p.outputs == a.outputs);
  CHECK(p.cycles == a.cycles);
  if (sim::rtl_mxu_available(uint32_t(cfg.target.mxu_dim))) {  // the Verilated RTL in the MXU's place
    sim::SimOptions rtl;
    rtl.rtl_mxu = true;
    auto v = test::simulate(program, cfg, c.inputs, rtl);
    INFO(v.fault.value_or(""));
    REQUIRE_FALSE(v.fault);
    CHECK(v.outputs == a.outputs);
    CHECK(v.cycles == a.cycles);
  }
  CHECK(a.cycles == expected_cycles(c.name, preset));
}

}  // namespace

TEST_CASE("example matmul_bf16", "[examples]") {
  std::mt19937_64 rng(test::test_seed(11));
  for (const char* p : kPresets) {
    const size_t n = sim::load_config(p).target.mxu_dim;
    Case c;
    c.name = "matmul_bf16";
    c.source = test::read_source("examples/asm/matmul_bf16.s");
    auto x = random_bf16(n * n, rng), w = random_bf16(n * n, rng);
    c.inputs = {to_bytes(x), to_bytes(w)};
    c.expected = {to_bytes(matmul_ref(x, w, n))};
    run_case(c, p);
  }
}

TEST_CASE("example matmul_bias_relu", "[examples]") {
  std::mt19937_64 rng(test::test_seed(12));
  for (const char* p : kPresets) {
    const size_t n = sim::load_config(p).target.mxu_dim;
    Case c;
    c.name = "matmul_bias_relu";
    c.source = test::read_source("examples/asm/matmul_bias_relu.s");
    auto x = random_bf16(n * n, rng), w = random_bf16(n * n, rng);
    std::vector<float> b(n);
    std::normal_distribution<float> d(0.0f, 1.0f);
    for (auto& v : b) v = d(rng);
    auto y = matmul_ref(x, w, n);
    for (size_t i = 0; i < n; ++i)
      for (size_t j = 0; j < n; ++j) y[i * n + j] = std::max(y[i * n + j] + b[j], 0.0f);
    c.inputs = {to_bytes(x), to_bytes(w), to_bytes(b)};
    c.expected = {to_bytes(y)};
    run_case(c, p);
  }
}

TEST_CASE("example reduce_sum", "[examples]") {
  std::mt19937_64 rng(test::test_seed(13));
  for (const char* p : kPresets) {
    const size_t l = sim::load_config(p).target.vpu_lanes;
    Case c;
    c.name = "reduce_sum";
    c.source = test::read_source("examples/asm/reduce_sum.s");
    std::vector<float> x(l * l);
    std::normal_distribution<float> d(0.0f, 1.0f);
    for (auto& v : x) v = d(rng);
    std::vector<float> cols(l, 0.0f);
    for (size_t r = 0; r < l; ++r)
      for (size_t k = 0; k < l; ++k) cols[k] = cols[k] + x[r * l + k];
    // The VPU's pairwise tree over lanes (docs/isa.md, vredsum.f32).
    std::vector<float> t = cols;
    for (size_t n = t.size(); n > 1; n = (n + 1) / 2)
      for (size_t k = 0; k < n / 2 + n % 2; ++k) t[k] = 2 * k + 1 < n ? t[2 * k] + t[2 * k + 1] : t[2 * k];
    c.inputs = {to_bytes(x)};
    c.expected = {to_bytes(cols), to_bytes(std::vector<float>{t[0]})};
    run_case(c, p);
  }
}

TEST_CASE("example dma_copy", "[examples]") {
  std::mt19937_64 rng(test::test_seed(14));
  for (const char* p : kPresets) {
    Case c;
    c.name = "dma_copy";
    c.source = test::read_source("examples/asm/dma_copy.s");
    std::vector<uint8_t> src(65536);
    for (auto& v : src) v = uint8_t(rng());
    c.inputs = {src};
    c.expected = {src};
    run_case(c, p);
  }
}

TEST_CASE("matmul_bf16: each instruction in the timeline takes its documented time", "[examples]") {
  std::mt19937_64 rng(test::test_seed(15));
  for (const char* p : kPresets) {
    INFO(p);
    const auto cfg = test::formula_config(p);
    const uint64_t n = cfg.target.mxu_dim;
    auto x = random_bf16(n * n, rng), w = random_bf16(n * n, rng);
    sim::SimOptions o;
    o.trace_path = std::string(TPU_BINARY_DIR) + "/tests/matmul_bf16_" + p + ".trace.json";
    auto r = test::simulate(test::assemble_for(test::read_source("examples/asm/matmul_bf16.s"), p), cfg, {to_bytes(x), to_bytes(w)}, o);
    REQUIRE_FALSE(r.fault);
    auto trace = nlohmann::json::parse(isa::read_text_file(o.trace_path));
    std::map<std::string, std::vector<std::pair<uint64_t, uint64_t>>> slices;  // mnemonic -> (start, cycles)
    for (const auto& e : trace["traceEvents"])
      if (e["ph"] == "X" && e["tid"].get<int>() % 100 != 0)  // not the scalar unit (lanes: tid unit + 100 x lane)
        slices[e["name"].get<std::string>()].emplace_back(e["args"]["start_cycle"], e["args"]["cycles"]);
    // MXU: a weight load reads N rows; a stream of N rows completes in N + 2N - 1.
    CHECK(slices["mxu.lw"].at(0).second == n);
    CHECK(slices["mxu.mm"].at(0).second == n + 2 * n - 1);
    // VPU: each instruction's slice is its class latency.
    for (const auto& s : slices["vlda"]) CHECK(s.second == cfg.vpu.latency.load);
    for (const auto& s : slices["vst.f32"]) CHECK(s.second == cfg.vpu.latency.store);
    // DMA: the first load, dispatched at d into an idle HBM, sends burst i at
    // d + 1 + i; it lands at done = ceil(free / bw) + H (docs/timing.md).
    const auto [d, cycles] = slices["dma.ld"].at(0);
    const uint64_t done = test::dma_landing_cycle(cfg, d + 1, n * n * 2);
    CHECK(d + cycles == done + 1);
  }
}
