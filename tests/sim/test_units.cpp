// Unit-level tests that need no simulation: VPU lane semantics, the MXU
// numerics, and config validation.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <limits>

#include "../../sim/mxu/numerics.h"
#include "../../sim/vpu/vpu.h"
#include "harness.h"

using namespace tpu;
using namespace tpu::sim;

namespace {

uint32_t fb(float x) {
  uint32_t b;
  std::memcpy(&b, &x, 4);
  return b;
}
float bf(uint32_t b) {
  float x;
  std::memcpy(&x, &b, 4);
  return x;
}

struct Vpu4 {
  std::vector<uint32_t> regs = std::vector<uint32_t>(32 * 4, 0);
  SparseMemory vmem{4096};
  Accumulators acc{16, 4};
  VpuContext ctx{4, regs, vmem, acc, {}};

  void set(int r, std::vector<uint32_t> v) { std::copy(v.begin(), v.end(), ctx.reg(uint64_t(r))); }
  std::vector<uint32_t> get(int r) { return std::vector<uint32_t>(ctx.reg(uint64_t(r)), ctx.reg(uint64_t(r)) + 4); }
  bool exec(const std::string& text) {
    auto p = as::assemble(".target \"t\", chips=1, cores=1, mxus_per_core=1, mxu_dim=4, vpu_lanes=4, vmem_bytes=4096, "
                          "acc_rows=16, smem_bytes=64, hbm_bytes=4096\n" + text + "\n", "t.s");
    REQUIRE(p.program);
    Issued is;
    is.insn = *isa::decode(p.program->code[0]);
    const auto& ops = isa::format_spec(isa::spec(is.insn.op).format).operands;
    for (size_t i = 0; i < ops.size(); ++i) is.v[i] = uint64_t(is.insn[i]);  // scalar registers read as their number here
    return vpu_execute(ctx, is);
  }
};

}  // namespace

TEST_CASE("every VPU instruction has semantics and a latency class, and no other has one", "[vpu]") {
  std::vector<uint32_t> regs(32 * 4, 0);
  SparseMemory vmem(1 << 16);
  Accumulators acc(4, 4);
  for (const auto& s : isa::instructions()) {
    INFO(s.mnemonic);
    CHECK((s.unit == isa::ExecUnit::Vpu) == (s.vpu_class != isa::VpuClass::None));
    VpuContext ctx{4, regs, vmem, acc, {}};
    Issued is;
    is.insn.op = s.op;
    if (s.unit == isa::ExecUnit::Vpu) CHECK_NOTHROW(vpu_execute(ctx, is));
    else CHECK_THROWS(vpu_execute(ctx, is));
  }
}

TEST_CASE("VPU f32 arithmetic follows IEEE and XLA's corner cases", "[vpu]") {
  Vpu4 v;
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  v.set(1, {fb(1.5f), fb(-0.0f), fb(nan), fb(inf)});
  v.set(2, {fb(2.0f), fb(0.0f), fb(1.0f), fb(-inf)});
  REQUIRE(v.exec("vmax.f32 v3, v1, v2"));
  auto r = v.get(3);
  CHECK(bf(r[0]) == 2.0f);
  CHECK(r[1] == fb(0.0f));  // max(-0, +0) = +0
  CHECK(std::isnan(bf(r[2])));
  CHECK(bf(r[3]) == inf);
  REQUIRE(v.exec("vmin.f32 v3, v1, v2"));
  CHECK(v.get(3)[1] == fb(-0.0f));
  REQUIRE(v.exec("vadd.f32 v3, v1, v2"));
  CHECK(std::isnan(bf(v.get(3)[3])));  // inf + -inf
  v.set(4, {fb(2.5f), fb(-2.5f), fb(3.5f), fb(-0.4f)});
  REQUIRE(v.exec("vround.f32 v5, v4"));
  CHECK(v.get(5) == std::vector<uint32_t>{fb(2.0f), fb(-2.0f), fb(4.0f), fb(-0.0f)});
  REQUIRE(v.exec("vsign.f32 v5, v4"));
  CHECK(v.get(5) == std::vector<uint32_t>{fb(1.0f), fb(-1.0f), fb(1.0f), fb(-1.0f)});
  v.set(6, {fb(nan), fb(3e9f), fb(-3e9f), fb(-7.9f)});
  REQUIRE(v.exec("vcvt.s32.f32 v7, v6"));
  CHECK(v.get(7) == std::vector<uint32_t>{0u, 0x7fffffffu, 0x80000000u, uint32_t(-7)});
  v.set(8, {fb(1.00390625f), fb(1.01171875f), fb(nan), fb(-inf)});
  REQUIRE(v.exec("vrnd.bf16 v9, v8"));  // ties to even at bf16 precision
  CHECK(v.get(9)[0] == fb(1.0f));
  CHECK(v.get(9)[1] == fb(1.015625f));
  CHECK(std::isnan(bf(v.get(9)[2])));
  REQUIRE(v.exec("vlogistic.f32 v10, v4"));
  CHECK(bf(v.get(10)[0]) == Approx(1.0 / (1.0 + std::exp(-2.5))));
}

TEST_CASE("VPU s32 arithmetic wraps and follows XLA's division rules", "[vpu]") {
  Vpu4 v;
  v.set(1, {0x80000000u, 7u, uint32_t(-7), 5u});
  v.set(2, {uint32_t(-1), 0u, 2u, 40u});
  REQUIRE(v.exec("vdiv.s32 v3, v1, v2"));
  CHECK(v.get(3) == std::vector<uint32_t>{0x80000000u, uint32_t(-1), uint32_t(-3), 0u});
  REQUIRE(v.exec("vshl v3, v1, v2"));
  CHECK(v.get(3)[3] == 0u);  // shift by 40
  REQUIRE(v.exec("vsra v3, v1, v2"));  // shift counts outside 0..31 shift by 31
  CHECK(v.get(3)[0] == 0xffffffffu);
  CHECK(v.get(3)[3] == 0u);
  REQUIRE(v.exec("vabs.s32 v3, v1"));
  CHECK(v.get(3)[0] == 0x80000000u);
  REQUIRE(v.exec("vclamp.s32 v4, v2, v1, v2"));  // clamp v1 to [v2, v2]
  CHECK(v.get(4) == v.get(2));
}

TEST_CASE("VPU reductions, selects and memory", "[vpu]") {
  Vpu4 v;
  v.set(1, {fb(1e8f), fb(1.0f), fb(-1e8f), fb(1.0f)});
  REQUIRE(v.exec("vredsum.f32 v2, v1"));  // (1e8 + 1) + (-1e8 + 1) in f32
  CHECK(bf(v.get(2)[0]) == (1e8f + 1.0f) + (-1e8f + 1.0f));
  CHECK(v.get(2)[3] == v.get(2)[0]);
  v.set(3, {1u, 0u, 5u, 0u});
  REQUIRE(v.exec("vsel v4, v3, v1, v2"));
  CHECK(v.get(4)[0] == fb(1e8f));
  CHECK(v.get(4)[1] == v.get(2)[1]);
  REQUIRE(v.exec("vst.bf16 v1, s0, 8"));
  REQUIRE(v.exec("vld.bf16 v5, s0, 8"));
  CHECK(bf(v.get(5)[1]) == 1.0f);
  v.set(6, {uint32_t(-1), 127u, 128u, 300u});
  REQUIRE(v.exec("vst.s8 v6, s0, 64"));
  REQUIRE(v.exec("vld.s8 v7, s0, 64"));
  CHECK(v.get(7) == std::vector<uint32_t>{uint32_t(-1), 127u, uint32_t(-128), 44u});
  CHECK_FALSE(v.exec("vld.f32 v1, s0, 4092"));
  CHECK(v.ctx.error.find("outside VMEM") != std::string::npos);
  REQUIRE(v.exec("vsta v6, s0, 3"));
  REQUIRE(v.exec("vlda v8, s0, 3"));
  CHECK(v.get(8) == v.get(6));
}

TEST_CASE("MXU numerics: flushes, exact products, canonical NaN", "[mxu]") {
  using namespace tpu::sim::mxu;
  CHECK(as_bits(bf16_operand(0x0001)) == 0u);           // subnormal operand -> +0
  CHECK(as_bits(bf16_operand(0x8001)) == 0x80000000u);  // -> -0
  CHECK(as_bits(mul(as_float(0x1f800000u), as_float(0x1f800000u))) == 0u);  // 2^-64 * 2^-64 underflows to +0
  CHECK(as_bits(mul(-as_float(0x20000000u), as_float(0x1f000000u))) == 0x80000000u);
  CHECK(as_bits(mul(as_float(0x7f800000u), 0.0f)) == kCanonicalNaN);
  // 2^-63 * 2^-63 = 2^-126 exactly = FLT_MIN: kept.
  CHECK(mul(as_float(0x20000000u), as_float(0x20000000u)) == FLT_MIN);
  // 1.5 * 2^-64 * 1.328125 * 2^-63 = 0.99609375 * 2^-126: below FLT_MIN, flushed.
  CHECK(as_bits(mul(as_float(0x1fc00000u), as_float(0x202a0000u))) == 0u);
  // The largest product of bf16 significands below 2 (151/128 * 217/128)
  // just under FLT_MIN is flushed too.
  CHECK(as_bits(mul(as_float(0x1f970000u), as_float(0x20590000u))) == 0u);
  CHECK(as_bits(add(FLT_MIN, -FLT_MIN * 0.5f)) == 0u);  // a subnormal sum flushes
  CHECK(as_bits(add(as_float(0x7fc12345u), 1.0f)) == kCanonicalNaN);
  CHECK(as_bits(daz(FLT_MIN / 4)) == 0u);
}

TEST_CASE("configs: presets load, every parameter is checked", "[config]") {
  for (const auto& name : isa::preset_names()) {
    auto c = load_config(name);
    CHECK(c.target.name == name);
    CHECK(config_from_json(c.to_json(), "round trip").to_json() == c.to_json());
  }
  const auto v5e = load_config("v5e");
  CHECK(v5e.hbm.model == "detailed");
  CHECK(v5e.hbm_bytes_per_cycle_fp() == 546 * 1024);  // the simple model's 819 GB/s at 1.5 GHz
  CHECK(v5e.hbm_latency_cycles() == 150);
  // The detailed model's peak: 16 channels x 16 bytes x 2 beats at 1.6 GHz (tCK 0.625 ns).
  CHECK(v5e.hbm_peak_bytes_per_s() == Approx(16 * 16 * 2 * 1.6e9));
  CHECK(load_config("v4").hbm_peak_bytes_per_s() == Approx(32 * 16 * 2 / 0.833e-9));
  CHECK(load_config("hbm3").hbm_peak_bytes_per_s() == Approx(32 * 4 * 4 / 0.625e-9));
  CHECK(load_config("hbm2").hbm.detailed.capacity_bytes() == (uint64_t(8) << 30));
  // A preset's resolved text with one piece replaced.
  auto edited = [](const std::string& preset, const std::string& from, const std::string& to) {
    std::string t = load_config(preset).to_json();
    const auto at = t.find(from);
    REQUIRE(at != std::string::npos);
    return t.replace(at, from.size(), to);
  };
  auto bad = [&](const std::string& from, const std::string& to) { return edited("tiny", from, to); };
  CHECK_THROWS_WITH(config_from_json(bad("\"queue_depth\": 8", "\"queue_depth\": 0"), "c.json"),
                    "c.json: core.queue_depth = 0 is outside 1..1024");
  CHECK_THROWS_WITH(config_from_json(bad("\"model\": \"simple\"", "\"model\": \"magic\""), "c.json"),
                    "c.json: hbm.model = 'magic' is not one of: detailed, ideal, simple");
  // The detailed model's device is checked too; a preset fills what a config leaves out.
  auto bad5 = [&](const std::string& from, const std::string& to) { return edited("v5e", from, to); };
  CHECK_THROWS_WITH(config_from_json(bad5("\"channels\": 16", "\"channels\": 12"), "c.json"),
                    "c.json: hbm.detailed: organisation.channels = 12 is not a power of two");
  CHECK_THROWS_WITH(config_from_json(bad5("\"rorabgbachco\"", "\"rorabgbachro\""), "c.json"),
                    Catch::Contains("address_mapping = 'rorabgbachro' must name each of ro ra bg ba ch co once"));
  CHECK_THROWS_WITH(config_from_json(bad5("\"preset\": \"hbm2e\"", "\"preset\": \"hbm9\""), "c.json"),
                    Catch::Contains("hbm.detailed.preset = 'hbm9' is not a device preset"));
  CHECK_THROWS_WITH(load_config("v5e", {"hbm.detailed.organisation.rows=1024"}),
                    Catch::Contains("less than target.hbm_bytes"));
  CHECK(load_config("v5e", {"hbm.detailed.timing.CL=30"}).hbm.detailed.CL == 30);
  CHECK_THROWS_WITH(config_from_json(bad("\"alu\": 2", "\"alu\": 2, \"typo\": 1"), "c.json"),
                    "c.json: vpu.latency.typo is not a known parameter");
  CHECK_THROWS_WITH(config_from_json(bad("\"burst_bytes\": 64", "\"burst_bytes\": -1"), "c.json"),
                    "c.json: dma.burst_bytes must be a non-negative integer");
  CHECK_THROWS_WITH(config_from_json(bad("\"bursts_per_cycle\": 1", "\"bursts_per_cycle\": 0"), "c.json"),
                    "c.json: dma.bursts_per_cycle = 0 is outside 1..64");
  CHECK_THROWS_WITH(config_from_json(bad(",\n    \"bursts_per_cycle\": 1", ""), "c.json"), "c.json: dma.bursts_per_cycle is missing");
  // Systems of chips: the preset's shape for the count, or the one given (docs/system.md).
  CHECK(config_from_json(bad("\"chips\": 1", "\"chips\": 2"), "c.json").ici_shape() == std::array<uint32_t, 3>{2, 1, 1});
  CHECK(load_config("v5e", {"target.chips=16"}).ici_shape() == std::array<uint32_t, 3>{4, 4, 1});
  CHECK(load_config("v5e", {"target.chips=8"}).ici_shape() == std::array<uint32_t, 3>{4, 2, 1});
  CHECK(load_config("v4", {"target.chips=64"}).ici_shape() == std::array<uint32_t, 3>{4, 4, 4});
  CHECK(load_config("v4", {"target.chips=4"}).ici_shape() == std::array<uint32_t, 3>{2, 2, 1});
  CHECK(load_config("tiny", {"target.chips=12"}).ici_shape() == std::array<uint32_t, 3>{12, 1, 1});
  CHECK(load_config("v5e", {"target.chips=12"}).ici_shape() == std::array<uint32_t, 3>{4, 3, 1});
  CHECK_THROWS_WITH(load_config("v5e", {"target.chips=4", "ici.x=2", "ici.y=4", "ici.z=1"}),
                    Catch::EndsWith(": the ICI topology 2x4 holds 8 chips, target.chips = 4"));
  CHECK_THROWS_WITH(load_config("v5e", {"ici.x=1"}), Catch::Contains("ici.x, ici.y and ici.z are all 0"));
  CHECK(parse_topology("2x4") == std::array<uint32_t, 3>{2, 4, 1});
  CHECK(parse_topology("4x4x4") == std::array<uint32_t, 3>{4, 4, 4});
  for (const char* t : {"", "x", "2x", "0", "2x2x2x2", "4097", "2*2", "-1"})
    CHECK_THROWS_WITH(parse_topology(t), Catch::Contains("is not of the form X, XxY or XxYxZ"));
}
