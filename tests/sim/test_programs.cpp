// Programs that exercise what the examples do not: every scalar ALU
// operation, 2-D DMA, transposes, several MXUs at once, and several cores.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <random>

#include "harness.h"

using namespace tpu;
using test::from_bytes;
using test::to_bytes;

TEST_CASE("scalar ALU results, read out through the VPU", "[programs]") {
  // Each result (s3) is broadcast into a vector and stored to VMEM row i, then DMAed out.
  const std::vector<std::pair<std::string, int32_t>> ops = {
      {"li s1, -7\nli s2, 3\nadd s3, s1, s2", -4},     {"li s1, -7\nli s2, 3\nsub s3, s1, s2", -10},
      {"li s1, -7\nli s2, 3\nmul s3, s1, s2", -21},    {"li s1, 12\nli s2, 10\nand s3, s1, s2", 8},
      {"li s1, 12\nli s2, 10\nor s3, s1, s2", 14},     {"li s1, 12\nli s2, 10\nxor s3, s1, s2", 6},
      {"li s1, 3\nli s2, 4\nsll s3, s1, s2", 48},      {"li s1, -16\nli s2, 2\nsra s3, s1, s2", -4},
      {"li s1, -16\nli s2, 60\nsrl s3, s1, s2", 15},   {"li s1, -1\nli s2, 1\nslt s3, s1, s2", 1},
      {"li s1, -1\nli s2, 1\nsltu s3, s1, s2", 0},     {"li s1, 5\nli s2, 5\nseq s3, s1, s2", 1},
      {"li s1, -5\nli s2, 2\nmin s3, s1, s2", -5},     {"li s1, -5\nli s2, 2\nmax s3, s1, s2", 2},
      {"li s1, 9\naddi s3, s1, -10", -1},              {"li s1, 9\nmuli s3, s1, -3", -27},
      {"li s1, 0xff\nandi s3, s1, 0x0f", 15},          {"li s1, 1\nori s3, s1, 6", 7},
      {"li s1, 5\nxori s3, s1, -1", -6},               {"li s1, 1\nslli s3, s1, 31", INT32_MIN},
      {"li s1, -1\nsrli s3, s1, 33", 0x7fffffff},      {"li s1, -8\nsrai s3, s1, 1", -4},
      {"li s1, 4\nslti s3, s1, 5", 1},                 {"li s3, 1\nlih s3, 2\nsrli s3, s3, 32", 2},
      {"li s1, 77\nsts s1, s0, 16\nlds s3, s0, 16", 77}, {"li s3, 4\ntop@: addi s4, s4, 2\nloop s3, top@\nadd s3, s4, s0", 8},
      {"li s1, 1\nli s2, 2\nblt s1, s2, t@\nli s3, 5\njmp e@\nt@: li s3, 6\ne@: nop", 6},
      {"li s1, 1\nli s2, 2\nbgeu s1, s2, t@\nli s3, 5\njmp e@\nt@: li s3, 6\ne@: nop", 5},
      {"csrr s3, ncores", 1},
  };
  std::string src = fmt::format(".output r, s32[{}, 8], 0\n", ops.size());
  for (size_t i = 0; i < ops.size(); ++i) {
    std::string body = ops[i].first;  // '@' makes its labels unique per block
    for (size_t at; (at = body.find('@')) != std::string::npos;) body.replace(at, 1, fmt::format("_{}", i));
    src += body + "\n" + fmt::format("li s5, {}\nvbcast v0, s3\nvst.s32 v0, s5, 0\nli s4, 0\n", i * 32);
  }
  src += fmt::format("signal vpu, sem0, 1\nwait dma, sem0, 1\nli s6, {}\ndma.st s0, s0, s6, sem1\nwait sc, sem1, 1\nhalt\n", ops.size() * 32);
  auto r = test::simulate(src, "tiny");
  INFO(src);
  REQUIRE_FALSE(r.fault);
  const auto got = from_bytes<int32_t>(r.outputs[0]);
  for (size_t i = 0; i < ops.size(); ++i) {
    INFO(ops[i].first);
    CHECK(got[i * 8] == ops[i].second);
    CHECK(got[i * 8 + 7] == ops[i].second);
  }
}

TEST_CASE("2-D DMA gathers and scatters strided rows", "[programs]") {
  // Take the 4 x 16-byte block at column 8 of a 16 x 64-byte matrix (every
  // other row), pack it in VMEM, and scatter it to a 4 x 32-byte-stride output.
  const std::string src = R"(
.input m, u8[16, 64], 0
.output o, u8[4, 32], 4096
    li s1, 0            # VMEM destination
    li s2, 8            # HBM source: row 0, column 8
    li s3, 4            # rows
    li s4, 16           # bytes per row
    li s5, 16           # VMEM stride (packed)
    li s6, 128          # HBM stride: every other row
    dma.ld2d s1, s2, s3, s4, s5, s6, sem0
    wait dma, sem0, 1
    li s7, 4096
    li s8, 32
    dma.st2d s7, s1, s3, s4, s8, s5, sem1
    wait sc, sem1, 1
    halt
)";
  std::vector<uint8_t> m(16 * 64);
  for (size_t i = 0; i < m.size(); ++i) m[i] = uint8_t(i * 7 + 3);
  auto r = test::simulate(src, "tiny", {m});
  REQUIRE_FALSE(r.fault);
  for (size_t row = 0; row < 4; ++row)
    for (size_t b = 0; b < 32; ++b) {
      INFO("row " << row << " byte " << b);
      CHECK(r.outputs[0][row * 32 + b] == (b < 16 ? m[(2 * row) * 64 + 8 + b] : 0));
    }
}

TEST_CASE("dma.lds brings a value from HBM to the scalar unit, which loops on it", "[programs]") {
  // n (an s64 in HBM) -> SMEM -> s2; the scalar unit adds 1..n (zero trips
  // for n <= 0) and the sum goes back through a vector register to HBM.
  const std::string src = R"(
.input n, s32[2], 0
.output sum, s32[8], 64
    li s1, 8
    li s9, 16
    dma.lds s9, s0, s1, sem0
    wait sc, sem0, 1
    lds s2, s0, 16
    li s3, 0
    li s4, 1
top: blt s2, s4, done
    add s3, s3, s4
    addi s4, s4, 1
    jmp top
done: vbcast v0, s3
    li s5, 64
    vst.s32 v0, s5, 0
    signal vpu, sem1, 1
    wait dma, sem1, 1
    li s6, 32
    dma.st s5, s5, s6, sem2
    wait sc, sem2, 1
    halt
)";
  for (const int32_t n : {-3, 0, 1, 5, 100}) {
    INFO("n = " << n);
    const std::vector<int32_t> in = {n, n < 0 ? -1 : 0};  // the 64-bit word n, little-endian
    auto r = test::simulate(src, "tiny", {to_bytes(in)});
    REQUIRE_FALSE(r.fault);
    const auto out = from_bytes<int32_t>(r.outputs[0]);
    for (int32_t v : out) CHECK(v == (n > 0 ? n * (n + 1) / 2 : 0));
  }
  // dma.lds moves its bytes on dma.ld's timing (docs/timing.md, DMA).
  uint64_t cycles[2];
  for (int k = 0; k < 2; ++k) {
    auto r = test::simulate(fmt::format("li s1, 256\n{} s0, s0, s1, sem0\nwait sc, sem0, 1\nhalt\n", k ? "dma.lds" : "dma.ld"), "tiny");
    REQUIRE_FALSE(r.fault);
    cycles[k] = r.cycles;
  }
  CHECK(cycles[1] == cycles[0]);
}

TEST_CASE("vxpose transposes an L x L block and occupies the VPU for L cycles", "[programs]") {
  const std::string src = R"(
.input a, s32[8, 8], 0
.output t, s32[8, 8], 256
    li s1, 256
    dma.ld s0, s0, s1, sem0
    wait vpu, sem0, 1
    li s2, 256
    vxpose s2, s0
    signal vpu, sem1, 1
    wait dma, sem1, 1
    dma.st s2, s2, s1, sem2
    wait sc, sem2, 1
    halt
)";
  std::vector<int32_t> a(64);
  for (int i = 0; i < 64; ++i) a[size_t(i)] = i * 3 - 50;
  sim::SimOptions o;
  o.trace_path = std::string(TPU_BINARY_DIR) + "/tests/vxpose.trace.json";
  auto r = test::simulate(src, "tiny", {to_bytes(a)}, o);
  REQUIRE_FALSE(r.fault);
  const auto t = from_bytes<int32_t>(r.outputs[0]);
  for (int i = 0; i < 8; ++i)
    for (int j = 0; j < 8; ++j) CHECK(t[size_t(i * 8 + j)] == a[size_t(j * 8 + i)]);
  auto trace = nlohmann::json::parse(isa::read_text_file(o.trace_path));
  int seen = 0;
  for (const auto& e : trace["traceEvents"])
    if (e["ph"] == "X" && e["name"] == "vxpose" && e["tid"].get<int>() % 100 == 2) {  // the VPU's tracks
      CHECK(e["args"]["cycles"] == 8);
      ++seen;
    }
  CHECK(seen == 1);
}

TEST_CASE("four MXUs work at once on v5e", "[programs]") {
  // Each MXU multiplies its own x tile by the shared w; results land in
  // disjoint accumulator ranges. Four tiles take about as long as one.
  const std::string body = R"(
.equ N, target.mxu_dim
.equ T16, N * N * 2
.input  x, bf16[4, N, N], 0
.input  w, bf16[N, N], 4 * T16
.output y, f32[4, N, N], 5 * T16
    li s1, 5 * T16
    dma.ld s0, s0, s1, sem0
    wait sc, sem0, 1
    li s2, 4 * T16
    li s3, N * 2
    li s4, N
)";
  // MXU m writes accumulator rows m * 128 .. m * 128 + N - 1.
  std::string src = body;
  for (int m = 0; m < 4; ++m)
    src += fmt::format("li s5, {}\nli s6, {} * T16\nmxu.lw m{}, s2, s3, bf16\nmxu.swap m{}\nmxu.mm m{}, s5, s6, s3, s4, bf16\nsignal mxu{}, sem1, 1\n",
                       m * 128, m, m, m, m, m);
  src += "wait vpu, sem1, 4\n";
  for (int m = 0; m < 4; ++m)
    src += fmt::format("li s7, {}\nli s8, 5 * T16 + {} * N * N * 4\nli s9, N\nout{}: vlda v0, s7, 0\nvst.f32 v0, s8, 0\naddi s7, s7, 1\naddi s8, s8, N * 4\nloop s9, out{}\n",
                       m * 128, m, m, m);
  src += "signal vpu, sem2, 1\nwait dma, sem2, 1\nli s11, 5 * T16\nli s12, 4 * N * N * 4\ndma.st s11, s11, s12, sem3\nwait sc, sem3, 1\nhalt\n";
  const size_t n = 128;
  std::mt19937_64 rng(test::test_seed(21));
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<uint16_t> x(4 * n * n), w(n * n);
  for (auto& v : x) v = test::bf16_round(d(rng));
  for (auto& v : w) v = test::bf16_round(d(rng));
  auto r = test::simulate(src, "v5e", {to_bytes(x), to_bytes(w)});
  REQUIRE_FALSE(r.fault);
  const auto y = from_bytes<float>(r.outputs[0]);
  for (size_t m = 0; m < 4; ++m)
    for (size_t i = 0; i < n; i += 31)
      for (size_t j = 0; j < n; j += 17) {
        float s = 0.0f;
        for (size_t k = 0; k < n; ++k) s = s + test::bf16_value(x[m * n * n + i * n + k]) * test::bf16_value(w[k * n + j]);
        CHECK(y[m * n * n + i * n + j] == s);
      }
  uint64_t busy = 0;
  for (int m = 0; m < 4; ++m) busy += r.stats["units"][fmt::format("core0.mxu{}", m)]["busy_cycles"].get<uint64_t>();
  CHECK(r.stats["mxu"]["macs"] == 4 * n * n * n);
  // The four streams overlap: together they are busy far longer than the
  // span from the first weight load to the last accumulator write.
  CHECK(busy > 3 * (3 * n));
}

TEST_CASE("dma.csig signals another core once this core's transfers have landed", "[programs]") {
  // v4: core 1 stores a row of 1s to HBM and signals core 0 behind the
  // store; core 0 waits, reads that row back, adds 10 and stores it as row
  // 0. Row 0 is 11 only if the signal came after core 1's store landed.
  const std::string src = R"(
.output ids, s32[2, 128], 0
    csrr s1, core
    li s3, 512
    bne s1, s0, one
    wait sc, sem2, 1
    dma.ld s0, s3, s3, sem0
    wait vpu, sem0, 1
    vld.s32 v0, s0, 0
    li s4, 10
    vbcast v1, s4
    vadd.s32 v0, v0, v1
    vst.s32 v0, s0, 0
    signal vpu, sem1, 1
    wait dma, sem1, 1
    dma.st s0, s0, s3, sem3
    wait sc, sem3, 1
    halt
one:
    vbcast v0, s1
    vst.s32 v0, s3, 0
    signal vpu, sem0, 1
    wait dma, sem0, 1
    dma.st s3, s3, s3, sem1
    dma.csig s0, sem2, 1
    wait sc, sem1, 1
    halt
)";
  auto r = test::simulate(src, "v4");
  REQUIRE_FALSE(r.fault);
  const auto ids = from_bytes<int32_t>(r.outputs[0]);
  CHECK(ids[0] == 11);
  CHECK(ids[127] == 11);
  CHECK(ids[128] == 1);
  // A core the chip does not have is a fault that names it.
  auto bad = test::simulate("li s1, 2\ndma.csig s1, sem0, 1\nhalt\n", "v4");
  REQUIRE(bad.fault);
  CHECK(bad.fault->find("core 2 does not exist") != std::string::npos);
}

TEST_CASE("every core of a multi-core chip runs the program", "[programs]") {
  // v4 has two cores: each writes its core index to its own output row.
  const std::string src = R"(
.output ids, s32[2, 128], 0
    csrr s1, core
    vbcast v0, s1
    li s2, 512
    mul s2, s2, s1
    vst.s32 v0, s2, 0
    signal vpu, sem0, 1
    wait dma, sem0, 1
    li s3, 512
    dma.st s2, s2, s3, sem1
    wait sc, sem1, 1
    halt
)";
  auto r = test::simulate(src, "v4");
  REQUIRE_FALSE(r.fault);
  const auto ids = from_bytes<int32_t>(r.outputs[0]);
  CHECK(ids[0] == 0);
  CHECK(ids[127] == 0);
  CHECK(ids[128] == 1);
  CHECK(ids[255] == 1);
  CHECK(r.stats["units"].contains("core1.scalar"));
}
