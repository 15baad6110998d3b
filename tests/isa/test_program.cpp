// The .tpu format: what the writer produces the loader reads back; anything
// else is rejected with an Error, never undefined behaviour.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <random>
#include <functional>
#include <nlohmann/json.hpp>
#include <set>

#include "tpu/isa/file.h"
#include "tpu/isa/isa.h"
#include "tpu/isa/machine.h"
#include "tpu/isa/program.h"

using namespace tpu::isa;

namespace {

Program sample_program() {
  Program p;
  p.target = load_target("tiny");
  Instruction add;
  add.op = Opcode::ADDI;
  add[0] = 1;
  add[1] = 0;
  add[2] = -5;
  Instruction halt;
  halt.op = Opcode::HALT;
  p.code = {encode(add), encode(halt)};
  p.data.push_back({0x1000, {1, 2, 3, 4, 5}});
  p.data.push_back({0x2000, std::vector<uint8_t>(100, 7)});
  p.symbols.push_back({SymbolKind::Input, "x", Dtype::f32, {8, 8}, 0x0, {}, {}});
  p.symbols.push_back({SymbolKind::Output, "y", Dtype::bf16, {8}, 0x100, {}, {}});
  p.symbols.push_back({SymbolKind::Constant, "w", Dtype::s8, {}, 0x1000, {}, {}});
  return p;
}

}  // namespace

TEST_CASE("save and load round-trip", "[program]") {
  const Program p = sample_program();
  const auto bytes = save(p);
  const Program q = load(bytes.data(), bytes.size());
  CHECK(q == p);
  CHECK(save(q) == bytes);
  CHECK(q.inputs().size() == 1);
  CHECK(q.outputs().size() == 1);
  CHECK(q.symbols[0].bytes() == 256);
}

TEST_CASE("every truncation of a valid file is rejected", "[program]") {
  const auto bytes = save(sample_program());
  for (size_t n = 0; n < bytes.size(); ++n) {
    INFO("length " << n);
    CHECK_THROWS_AS(load(bytes.data(), n), tpu::Error);
  }
}

TEST_CASE("corrupted files load cleanly or are rejected, never crash", "[program]") {
  const auto good = save(sample_program());
  const uint64_t seed = 77;
  std::mt19937_64 rng(seed);
  INFO("seed " << seed);
  int rejected = 0;
  for (int trial = 0; trial < 20000; ++trial) {
    auto bytes = good;
    int flips = 1 + int(rng() % 4);
    for (int f = 0; f < flips; ++f) bytes[rng() % bytes.size()] ^= uint8_t(1u << (rng() % 8));
    try {
      Program p = load(bytes.data(), bytes.size());
      CHECK(save(p) == bytes);  // whatever loads is canonical
    } catch (const tpu::Error&) {
      ++rejected;
    }
  }
  CHECK(rejected > 0);
}

TEST_CASE("the loader names what is wrong", "[program]") {
  auto bytes = save(sample_program());
  auto expect_error = [](std::vector<uint8_t> b, const std::string& needle) {
    try {
      load(b.data(), b.size());
      FAIL("accepted");
    } catch (const tpu::Error& e) {
      INFO(e.what());
      CHECK(std::string(e.what()).find(needle) != std::string::npos);
    }
  };
  {
    auto b = bytes;
    b[0] = 'X';
    expect_error(b, "bad magic");
  }
  {
    auto b = bytes;
    b[8] = 9;
    expect_error(b, "version 9.0 is not supported");
  }
  {
    auto b = bytes;
    b.push_back(0);
    expect_error(b, "after the last section");
  }
  {
    Program p = sample_program();
    p.symbols[0].dims = {1u << 30, 1u << 30};
    CHECK_THROWS_WITH(save(p), Catch::Contains("does not fit in HBM"));
  }
  {
    Program p = sample_program();
    p.data[1].hbm_addr = 0x1002;
    CHECK_THROWS_WITH(save(p), Catch::Contains("overlap"));
  }
  {
    Program p = sample_program();
    p.symbols[1].name = "x";
    CHECK_THROWS_WITH(save(p), Catch::Contains("defined twice"));
  }
  {
    Program p = sample_program();
    p.target.mxu_dim = 0;
    CHECK_THROWS_WITH(save(p), Catch::Contains("target.mxu_dim = 0"));
  }
}

TEST_CASE("checks: version 1.1 with a CHKS section, 1.0 without", "[program]") {
  Program p = sample_program();
  CHECK(save(p)[10] == 0);  // no checks: version 1.0, byte for byte as before
  p.symbols.push_back({SymbolKind::Output, "y_ref", Dtype::bf16, {8}, 0x200, {}, {}});
  p.checks.push_back({CheckKind::expect_close, 0, 1, 0, 0, 3});
  p.checks.push_back({CheckKind::expect_almost_eq, 1, 0, 1e-3, 0, 0});
  const auto bytes = save(p);
  CHECK(bytes[10] == 1);
  const Program q = load(bytes.data(), bytes.size());
  CHECK(q == p);
  CHECK(save(q) == bytes);
  for (size_t n = 0; n < bytes.size(); ++n) CHECK_THROWS_AS(load(bytes.data(), n), tpu::Error);
  auto bad = [&](Check c, const std::string& why) {
    Program r = p;
    r.checks = {c};
    CHECK_THROWS_WITH(save(r), Catch::Contains(why));
  };
  bad({CheckKind::expect_eq, 0, 2, 0, 0, 0}, "compares outputs 0 and 2; the program has 2");
  bad({CheckKind::expect_close, 0, 1, 0, 4, 3}, "min above max");
  bad({CheckKind::expect_eq, 0, 1, 0.5, 0, 0}, "only expect_almost_eq has one");
  bad({CheckKind::expect_almost_eq, 0, 1, -1, 0, 0}, "a finite value >= 0");
  Program ints = p;
  ints.symbols[1].dtype = ints.symbols[3].dtype = Dtype::s32;
  ints.checks = {{CheckKind::expect_close, 0, 1, 0, 0, 3}};
  CHECK_THROWS_WITH(save(ints), Catch::Contains("needs float outputs"));
  auto corrupt = bytes;
  corrupt[bytes.size() - 33] = 9;  // the last check's kind (33 bytes a check)
  CHECK_THROWS_WITH(load(corrupt.data(), corrupt.size()), Catch::Contains("CHKS section"));
}

TEST_CASE("kernels: a KERN section maps every pc to a kernel and its HLO ops", "[program]") {
  Program p = sample_program();
  p.kernels = {{"kernel 0: matmul -> %3 f32[8,8]", {{"m.mlir:4 %0 (model.py:9)", 512}, {"m.mlir:5 %1", 64}}}, {"kernel 1: copy", {}}};
  p.kernel_of = {1, kNoKernel};
  const auto bytes = save(p);
  CHECK(bytes[10] == 1);
  const Program q = load(bytes.data(), bytes.size());
  CHECK(q == p);
  CHECK(save(q) == bytes);
  for (size_t n = 0; n < bytes.size(); ++n) CHECK_THROWS_AS(load(bytes.data(), n), tpu::Error);
  p.checks.push_back({CheckKind::expect_eq, 0, 0, 0, 0, 0});  // CHKS and KERN together, in that order
  const auto both = save(p);
  CHECK(load(both.data(), both.size()) == p);
  Program bad = p;
  bad.kernel_of = {0};
  CHECK_THROWS_WITH(save(bad), Catch::Contains("1 instructions have a kernel, the program has 2"));
  bad.kernel_of = {0, 2};
  CHECK_THROWS_WITH(save(bad), Catch::Contains("instruction 1 belongs to kernel 2; there are 2"));
  bad = p;
  bad.kernels[0].name = "a \"quoted\" name";
  CHECK_THROWS_WITH(save(bad), Catch::Contains("not printable text"));
  bad = p;
  bad.kernels.clear();
  CHECK_THROWS_WITH(save(bad), Catch::Contains("0 kernels"));
}

TEST_CASE("tiles: version 1.2 with a TILE section splits tensors over the chips", "[program]") {
  Program p = sample_program();
  p.target.chips = 4;
  p.symbols[0].tiles = {2, 2};  // x f32[8, 8]: a 4x4 tile per chip
  CHECK(p.symbols[0].local_dims() == std::vector<uint64_t>{4, 4});
  CHECK(p.symbols[0].local_bytes() == 64);
  auto bytes = save(p);
  CHECK(bytes[10] == 2);  // minor version
  const Program q = load(bytes.data(), bytes.size());
  CHECK(q == p);
  CHECK(save(q) == bytes);
  // Chip 3's tile is rows 4..7, columns 4..7; and back.
  std::vector<float> x(64), t(16), back(64, 0.0f);
  for (size_t k = 0; k < 64; ++k) x[k] = float(k);
  for (uint64_t chip = 0; chip < 4; ++chip) {
    copy_tile(p.symbols[0], chip, reinterpret_cast<const uint8_t*>(x.data()), reinterpret_cast<uint8_t*>(t.data()), true);
    const size_t r0 = chip / 2 * 4, c0 = chip % 2 * 4;
    for (size_t r = 0; r < 4; ++r)
      for (size_t c = 0; c < 4; ++c) CHECK(t[r * 4 + c] == x[(r0 + r) * 8 + c0 + c]);
    copy_tile(p.symbols[0], chip, reinterpret_cast<const uint8_t*>(t.data()), reinterpret_cast<uint8_t*>(back.data()), false);
  }
  CHECK(back == x);
  for (size_t n = 0; n < bytes.size(); ++n) CHECK_THROWS_AS(load(bytes.data(), n), tpu::Error);
  // Tiles that do not divide a dimension, or do not match the chips.
  Program bad = p;
  bad.symbols[0].tiles = {3, 1};
  CHECK_THROWS_WITH(save(bad), Catch::Contains("3 tiles do not divide dimension 0 of 8"));
  bad.symbols[0].tiles = {2, 1};
  CHECK_THROWS_WITH(save(bad), Catch::Contains("symbol 'x' has 2 tiles, the target has 4 chip(s)"));
  bad.symbols[0].tiles = {4};
  CHECK_THROWS_WITH(save(bad), Catch::Contains("symbol 'x' has 1 tiles for rank 2"));
  // A TILE section in a file that says 1.1.
  bytes[10] = 1;
  CHECK_THROWS_WITH(load(bytes.data(), bytes.size()), Catch::Contains("a TILE section needs version 1.2"));
}

// TMAP (version 1.4): chips that hold the same tile (a value split over
// some axes of a mesh, whole along the others).
TEST_CASE("tiles: version 1.4 with a TMAP section gives several chips one tile", "[program]") {
  Program p = sample_program();
  p.target.chips = 4;
  p.symbols[0].tiles = {2, 1};         // x f32[8, 8]: rows 0..3 and 4..7
  p.symbols[0].tile_of = {0, 0, 1, 1};  // chips 0 and 1 hold the first, 2 and 3 the second
  auto bytes = save(p);
  CHECK(bytes[10] == 4);  // minor version
  const Program q = load(bytes.data(), bytes.size());
  CHECK(q == p);
  CHECK(save(q) == bytes);
  std::vector<float> x(64), t(32);
  for (size_t k = 0; k < 64; ++k) x[k] = float(k);
  for (uint64_t chip = 0; chip < 4; ++chip) {
    copy_tile(p.symbols[0], chip, reinterpret_cast<const uint8_t*>(x.data()), reinterpret_cast<uint8_t*>(t.data()), true);
    CHECK(t[0] == x[chip / 2 * 32]);
    CHECK(t[31] == x[chip / 2 * 32 + 31]);
  }
  for (size_t n = 0; n < bytes.size(); ++n) CHECK_THROWS_AS(load(bytes.data(), n), tpu::Error);
  Program bad = p;
  bad.symbols[0].tile_of = {0, 0, 0, 0};
  CHECK_THROWS_WITH(save(bad), Catch::Contains("symbol 'x': a tile no chip holds"));
  bad.symbols[0].tile_of = {0, 1, 2, 1};
  CHECK_THROWS_WITH(save(bad), Catch::Contains("symbol 'x': tile 2 of 2"));
  bad.symbols[0].tile_of = {0, 1};
  CHECK_THROWS_WITH(save(bad), Catch::Contains("symbol 'x' maps 2 chips to tiles, the target has 4"));
  bytes[10] = 3;
  CHECK_THROWS_WITH(load(bytes.data(), bytes.size()), Catch::Contains("a TMAP section needs version 1.4"));
}

// HEAP (version 1.3): the HBM the program uses, [0, hbm_peak), holds every
// symbol and data segment and fits the target.
TEST_CASE("peak HBM: saved in version 1.3, checked against symbols, data and target", "[program]") {
  Program p = sample_program();
  p.hbm_peak = 0x2000 + 100;  // the end of the highest data segment
  auto bytes = save(p);
  CHECK(bytes[10] == 3);
  const Program q = load(bytes.data(), bytes.size());
  CHECK(q.hbm_peak == 0x2064);
  CHECK(save(q) == bytes);
  for (size_t n = 0; n < bytes.size(); ++n) CHECK_THROWS_AS(load(bytes.data(), n), tpu::Error);
  Program bad = p;
  bad.hbm_peak = 0x2000;
  CHECK_THROWS_WITH(save(bad), Catch::Contains("data segment at 0x2000 lies above the peak HBM of 8192 bytes"));
  bad.hbm_peak = 0x100;
  CHECK_THROWS_WITH(save(bad), Catch::Contains("symbol 'x' (256 bytes at 0x0) lies above the peak HBM of 256 bytes") ||
                                   Catch::Contains("symbol 'y'"));
  bad.hbm_peak = p.target.hbm_bytes + 1;
  CHECK_THROWS_WITH(save(bad), Catch::Contains("exceeds the target's"));
  // A HEAP section in a file that says 1.2.
  bytes[10] = 2;
  CHECK_THROWS_WITH(load(bytes.data(), bytes.size()), Catch::Contains("a HEAP section needs version 1.3"));
}

TEST_CASE("checks: StableHLO's semantics for each kind", "[program]") {
  const TensorSymbol t{SymbolKind::Output, "y", Dtype::f32, {4}, 0, {}, {}};
  auto bytes = [](std::vector<float> v) {
    std::vector<uint8_t> b(v.size() * 4);
    std::memcpy(b.data(), v.data(), b.size());
    return b;
  };
  const float one_up = std::nextafter(1.0f, 2.0f), three_up = std::nextafter(std::nextafter(one_up, 2.0f), 2.0f);
  const float nan = std::nanf("");
  const Check close{CheckKind::expect_close, 0, 1, 0, 0, 1}, eq{CheckKind::expect_eq, 0, 1, 0, 0, 0},
      almost{CheckKind::expect_almost_eq, 0, 1, 1e-3, 0, 0};
  CHECK(evaluate_check(close, t, bytes({1, -0.0f, nan, INFINITY}), bytes({one_up, 0.0f, nan, INFINITY})).pass);
  CHECK_FALSE(evaluate_check(close, t, bytes({1, 0, 0, 0}), bytes({three_up, 0, 0, 0})).pass);
  CHECK_FALSE(evaluate_check(close, t, bytes({1, 0, 0, INFINITY}), bytes({1, 0, 0, -INFINITY})).pass);
  // Opposite signs add their distances from zero: the smallest normal is 1 step from 0.
  const float tiny = std::numeric_limits<float>::min();
  CHECK(evaluate_check(close, t, bytes({tiny, 0, 0, 0}), bytes({0, 0, 0, 0})).pass);
  CHECK_FALSE(evaluate_check(close, t, bytes({tiny, 0, 0, 0}), bytes({-tiny, 0, 0, 0})).pass);
  CHECK(evaluate_check(eq, t, bytes({-0.0f, 1, 2, 3}), bytes({0.0f, 1, 2, 3})).pass);
  CHECK_FALSE(evaluate_check(eq, t, bytes({nan, 1, 2, 3}), bytes({nan, 1, 2, 3})).pass);
  CHECK(evaluate_check(almost, t, bytes({1.0005f, nan, 0, 5}), bytes({1, nan, 0, 5})).pass);
  const auto o = evaluate_check(almost, t, bytes({1, 2, 3, 4.01f}), bytes({1, 2, 3, 4}));
  CHECK_FALSE(o.pass);
  CHECK_THAT(o.detail, Catch::Contains("at index [3]"));
  const TensorSymbol ti{SymbolKind::Output, "k", Dtype::s8, {2, 2}, 0, {}, {}};
  const auto oi = evaluate_check(eq, ti, {1, 2, 3, 0xFF}, {1, 2, 3, 0xFE});
  CHECK_FALSE(oi.pass);
  CHECK(oi.detail == "-1 (actual) vs -2 (expected) at index [1,1]");
}

TEST_CASE("presets load and validate", "[target]") {
  for (const auto& name : preset_names()) {
    INFO(name);
    Target t = load_target(name);
    CHECK(t.name == name);
    CHECK_NOTHROW(validate(t));
  }
  CHECK(load_target("v5e").mxu_dim == 128);
  CHECK(load_target("v5e").mxus_per_core == 4);
  CHECK(load_target("tiny").mxu_dim == 8);
  CHECK_THROWS_WITH(load_target("nope"), Catch::Contains("unknown preset 'nope'"));
  CHECK_THROWS_WITH(target_from_json("{\"name\":\"x\",\"target\":{}}", "cfg"), Catch::Contains("target.chips is missing"));
  CHECK_THROWS_WITH(target_from_json("{", "cfg"), Catch::Contains("not valid JSON"));
}

TEST_CASE("the config's parameter table: every key of a config is in it once, its range holds, its defaults are v5e's", "[target]") {
  const MachineConfig d, v5e = load_config("v5e");
  std::set<std::string> keys;
  for (const ConfigField& f : config_fields()) {
    INFO(f.key);
    CHECK(keys.insert(f.key).second);
    CHECK(f.get(d) == f.get(v5e));  // MachineConfig{} is the default preset
    CHECK(f.min <= f.get(d));
    CHECK(f.get(d) <= f.max);
    MachineConfig c = d;  // set and get reach the same member, and only it
    f.set(c, f.min);
    CHECK(f.get(c) == f.min);
    for (const ConfigField& g : config_fields())
      if (&g != &f) CHECK(g.get(c) == g.get(d));
  }
  // Every number of the resolved config outside target and hbm.detailed is a table key, and the reverse.
  std::set<std::string> leaves;
  std::function<void(const nlohmann::json&, const std::string&)> walk = [&](const nlohmann::json& j, const std::string& path) {
    for (const auto& [k, v] : j.items()) {
      const std::string key = path.empty() ? k : path + "." + k;
      if (v.is_object()) walk(v, key);
      else if (v.is_number() && key.rfind("target.", 0) != 0 && key.rfind("hbm.detailed.", 0) != 0) leaves.insert(key);
    }
  };
  walk(nlohmann::json::parse(v5e.to_json()), "");
  CHECK(leaves == keys);
}

// A config file with "base": the preset's values, the file's over them
// (sections key by key), bases of bases relative to the file.
TEST_CASE("a config file inherits from its base", "[target]") {
  const std::string dir = (std::filesystem::temp_directory_path() / "tpusim_config_base").string();
  std::filesystem::create_directories(dir);
  write_file(dir + "/a.json", R"({"base": "v5e", "name": "v5e-64", "target": {"mxu_dim": 64, "vpu_lanes": 64}})");
  write_file(dir + "/b.json", R"({"base": "a.json", "clock_hz": 1200000000})");
  write_file(dir + "/loop.json", R"({"base": "loop.json"})");
  write_file(dir + "/typo.json", R"({"base": "v5ee"})");
  const MachineConfig v5e = load_config("v5e"), b = load_config(dir + "/b.json");
  CHECK(b.target.name == "v5e-64");
  CHECK(b.target.mxu_dim == 64);
  CHECK(b.target.vpu_lanes == 64);
  CHECK(b.target.hbm_bytes == v5e.target.hbm_bytes);
  CHECK(b.clock_hz == 1200000000ull);
  CHECK(b.hbm.model == v5e.hbm.model);
  CHECK(load_config(dir + "/b.json", {"clock_hz=1e9"}).clock_hz == 1000000000ull);
  CHECK_THROWS_WITH(load_config(dir + "/loop.json"), Catch::Contains("more than 8 bases"));
  CHECK_THROWS_WITH(load_config(dir + "/typo.json"), Catch::Contains("base 'v5ee' is not a preset (did you mean 'v5e'?)"));
}

TEST_CASE("config settings (KEY=VALUE) change one parameter before validation", "[target]") {
  const MachineConfig base = load_config("tiny");
  const MachineConfig c = load_config("tiny", {"hbm.simple.latency_ns=7", "hbm.simple.bandwidth_bytes_per_s=1.6e12", "hbm.model=simple"});
  CHECK(c.hbm.simple.latency_ns == 7);
  CHECK(c.hbm.simple.bandwidth_bytes_per_s == 1600000000000ull);
  CHECK(c.clock_hz == base.clock_hz);
  CHECK(load_config("tiny", {"target.mxu_dim=4", "target.vpu_lanes=4"}).target.mxu_dim == 4);
  CHECK_THROWS_WITH(load_config("tiny", {"hbm.typo=1"}), Catch::Contains("the config has no parameter 'hbm.typo'"));
  CHECK_THROWS_WITH(load_config("tiny", {"vpu=1"}), Catch::Contains("'vpu' is a section"));
  CHECK_THROWS_WITH(load_config("tiny", {"clock_hz"}), Catch::Contains("is not KEY=VALUE"));
  CHECK_THROWS_WITH(load_config("tiny", {"core.queue_depth=0"}), Catch::Contains("core.queue_depth = 0 is outside 1..1024"));
  CHECK_THROWS_WITH(load_config("tiny", {"hbm.simple.latency_ns=fast"}), Catch::Contains("hbm.simple.latency_ns must be a non-negative integer"));
}
