// The StableHLO reader: every corpus program imports to the same interface
// as its HLO text, both syntaxes of an op mean the same, locations reach
// errors and op locs, checks carry their defaults, and malformed text gives
// one "file:line:col:" error.
#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <regex>

#include "corpus.h"
#include "tpu/compiler/compile.h"
#include "tpu/hlo/stablehlo.h"
#include "tpu/ir/import.h"

namespace {

using namespace tpu;

ir::Function import(const std::string& text, const std::string& file = "t.mlir") {
  return ir::import_hlo(hlo::parse_stablehlo(text, file), file);
}

// The printed IR without locations and parameter names.
std::string body(const ir::Function& f) {
  std::string s = ir::print(f);
  s = std::regex_replace(s, std::regex(R"( loc\("[^"]*"\))"), "");
  return std::regex_replace(s, std::regex(R"(, name="[^"]*")"), "");
}

std::string error_of(const std::string& text) {
  try {
    import(text);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

const char* kModule = R"(module @m {
  func.func public @main(%arg0: tensor<4x8xf32>, %arg1: tensor<8xf32>) -> (tensor<4x8xf32>) {
%BODY%
  }
})";

std::string module(const std::string& lines) { return std::regex_replace(kModule, std::regex("%BODY%"), lines); }

}  // namespace

TEST_CASE("stablehlo: every corpus program imports with the interface of its HLO text") {
  for (const std::string& name : test::corpus_programs()) {
    INFO(name);
    const ir::Function h = compiler::load_module(test::kCorpus + name + "/module.hlo");
    const ir::Function s = compiler::load_module(test::kCorpus + name + "/module.stablehlo.mlir");
    REQUIRE(h.params().size() == s.params().size());
    for (size_t i = 0; i < h.params().size(); ++i) CHECK(h.ops[h.params()[i]].type == s.ops[s.params()[i]].type);
    REQUIRE(h.results.size() == s.results.size());
    for (size_t i = 0; i < h.results.size(); ++i) CHECK(h.ops[h.results[i]].type == s.ops[s.results[i]].type);
    // SPMD programs (sdy.manual_computation): the same devices and tiles.
    CHECK(h.devices == s.devices);
    CHECK(h.param_tiles == s.param_tiles);
    CHECK(h.result_tiles == s.result_tiles);
  }
}

// shard_map as JAX writes it in StableHLO: the manual computation's body
// sees its tiles; collectives in the generic form with dense replica groups
// or Shardy's mesh axes.
TEST_CASE("stablehlo: a manual computation and its collectives import as XLA's HLO text of them does") {
  const ir::Function f = import(R"(module @m attributes {mhlo.num_partitions = 4 : i32} {
  sdy.mesh @mesh = <["i"=4]>
  func.func public @main(%arg0: tensor<16x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"i"}, {}]>}) -> (tensor<64x8xf32>, tensor<4x8xf32>, tensor<16x8xf32>, tensor<16x8xf32>, tensor<16x8xf32>) {
    %0:5 = sdy.manual_computation(%arg0) in_shardings=[<@mesh, [{"i"}, {}]>] out_shardings=[<@mesh, [{"i"}, {}]>, <@mesh, [{"i"}, {}]>, <@mesh, [{"i"}, {}]>, <@mesh, [{"i"}, {}]>, <@mesh, [{"i"}, {}]>] manual_axes={"i"} (%arg1: tensor<4x8xf32>) {
      %1 = "stablehlo.all_gather"(%arg1) <{all_gather_dim = 0 : i64, channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>, replica_groups = dense<[[0, 1, 2, 3]]> : tensor<1x4xi64>, use_global_device_ids}> : (tensor<4x8xf32>) -> tensor<16x8xf32>
      %2 = "stablehlo.reduce_scatter"(%arg1) <{channel_handle = #stablehlo.channel_handle<handle = 2, type = 1>, replica_groups = dense<[[0, 1, 2, 3]]> : tensor<1x4xi64>, scatter_dimension = 0 : i64, use_global_device_ids}> ({
      ^bb0(%a: tensor<f32>, %b: tensor<f32>):
        %m = stablehlo.maximum %a, %b : tensor<f32>
        stablehlo.return %m : tensor<f32>
      }) : (tensor<4x8xf32>) -> tensor<1x8xf32>
      %3 = "stablehlo.all_to_all"(%arg1) <{channel_handle = #stablehlo.channel_handle<handle = 3, type = 1>, concat_dimension = 0 : i64, replica_groups = dense<[[0, 1, 2, 3]]> : tensor<1x4xi64>, split_count = 4 : i64, split_dimension = 0 : i64}> : (tensor<4x8xf32>) -> tensor<4x8xf32>
      %4 = "stablehlo.collective_permute"(%arg1) <{channel_handle = #stablehlo.channel_handle<handle = 4, type = 1>, source_target_pairs = dense<[[0, 1], [1, 2], [2, 3], [3, 0]]> : tensor<4x2xi64>}> : (tensor<4x8xf32>) -> tensor<4x8xf32>
      %5 = "stablehlo.all_reduce"(%arg1) <{channel_handle = #stablehlo.channel_handle<handle = 5, type = 1>, replica_groups = #stablehlo.replica_group_mesh_axes<mesh = @mesh, axes = [#stablehlo.axis_ref<name = "i">]>, use_global_device_ids}> ({
      ^bb0(%a: tensor<f32>, %b: tensor<f32>):
        %s = stablehlo.add %a, %b : tensor<f32>
        stablehlo.return %s : tensor<f32>
      }) : (tensor<4x8xf32>) -> tensor<4x8xf32>
      sdy.return %1, %2, %3, %4, %5 : tensor<16x8xf32>, tensor<1x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>
    } : (tensor<16x8xf32>) -> (tensor<64x8xf32>, tensor<4x8xf32>, tensor<16x8xf32>, tensor<16x8xf32>, tensor<16x8xf32>)
    return %0#0, %0#1, %0#2, %0#3, %0#4 : tensor<64x8xf32>, tensor<4x8xf32>, tensor<16x8xf32>, tensor<16x8xf32>, tensor<16x8xf32>
  }
})");
  CHECK(f.devices == 4);
  CHECK(f.param_tiles == std::vector<std::vector<int64_t>>{{4, 1}});
  CHECK(f.result_tiles == std::vector<std::vector<int64_t>>(5, {4, 1}));
  const std::string t = body(f);
  INFO(t);
  CHECK(t.find("all-gather(%0) {dimension=0, groups=[[0,1,2,3]]} : f32[16,8]") != std::string::npos);
  CHECK(t.find("reduce-scatter(%0) {dimension=0, groups=[[0,1,2,3]], combiner=maximum} : f32[1,8]") != std::string::npos);
  CHECK(t.find("all-to-all(%0) {dimension=0, groups=[[0,1,2,3]]} : f32[4,8]") != std::string::npos);
  CHECK(t.find("collective-permute(%0) {pairs=[[0,1],[1,2],[2,3],[3,0]]} : f32[4,8]") != std::string::npos);
  CHECK(t.find("all-reduce(%0) {groups=[[0,1,2,3]], combiner=add} : f32[4,8]") != std::string::npos);
  // Split and joined along different dimensions: one line, naming it.
  CHECK_THROWS_WITH(import(R"(module @m {
  sdy.mesh @mesh = <["i"=2]>
  func.func public @main(%arg0: tensor<4x4xf32>) -> tensor<4x4xf32> {
    %0 = sdy.manual_computation(%arg0) in_shardings=[<@mesh, [{"i"}, {}]>] out_shardings=[<@mesh, [{"i"}, {}]>] manual_axes={"i"} (%arg1: tensor<2x4xf32>) {
      %1 = "stablehlo.all_to_all"(%arg1) <{concat_dimension = 1 : i64, replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>, split_count = 2 : i64, split_dimension = 0 : i64}> : (tensor<2x4xf32>) -> tensor<1x8xf32>
      sdy.return %1 : tensor<1x8xf32>
    } : (tensor<4x4xf32>) -> tensor<2x8xf32>
    return %0 : tensor<2x8xf32>
  }
})"),
                    Catch::Contains("t.mlir:5:7: unsupported all_to_all with split_dimension and concat_dimension apart"));
}

TEST_CASE("stablehlo: the pretty and the generic form of an op import alike") {
  const std::pair<const char*, const char*> forms[] = {
      {"%0 = stablehlo.broadcast_in_dim %arg1, dims = [1] : (tensor<8xf32>) -> tensor<4x8xf32>\n"
       "%1 = stablehlo.add %arg0, %0 : tensor<4x8xf32>\n return %1 : tensor<4x8xf32>",
       "%0 = \"stablehlo.broadcast_in_dim\"(%arg1) <{broadcast_dimensions = array<i64: 1>}> : (tensor<8xf32>) -> tensor<4x8xf32>\n"
       "%1 = \"stablehlo.add\"(%arg0, %0) : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>\n \"func.return\"(%1) : (tensor<4x8xf32>) -> ()"},
      {"%0 = stablehlo.transpose %arg0, dims = [1, 0] : (tensor<4x8xf32>) -> tensor<8x4xf32>\n"
       "%1 = stablehlo.reverse %0, dims = [0] : tensor<8x4xf32>\n"
       "%2 = stablehlo.reshape %1 : (tensor<8x4xf32>) -> tensor<4x8xf32>\n return %2 : tensor<4x8xf32>",
       "%0 = \"stablehlo.transpose\"(%arg0) <{permutation = array<i64: 1, 0>}> : (tensor<4x8xf32>) -> tensor<8x4xf32>\n"
       "%1 = \"stablehlo.reverse\"(%0) <{dimensions = array<i64: 0>}> : (tensor<8x4xf32>) -> tensor<8x4xf32>\n"
       "%2 = \"stablehlo.reshape\"(%1) : (tensor<8x4xf32>) -> tensor<4x8xf32>\n return %2 : tensor<4x8xf32>"},
      {"%0 = stablehlo.slice %arg0 [0:4, 0:8:2] : (tensor<4x8xf32>) -> tensor<4x4xf32>\n"
       "%1 = stablehlo.concatenate %0, %0, dim = 1 : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x8xf32>\n return %1 : tensor<4x8xf32>",
       "%0 = \"stablehlo.slice\"(%arg0) <{limit_indices = array<i64: 4, 8>, start_indices = array<i64: 0, 0>, strides = array<i64: 1, 2>}> : "
       "(tensor<4x8xf32>) -> tensor<4x4xf32>\n"
       "%1 = \"stablehlo.concatenate\"(%0, %0) <{dimension = 1 : i64}> : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x8xf32>\n"
       " return %1 : tensor<4x8xf32>"},
      {"%c = stablehlo.constant dense<0.000000e+00> : tensor<f32>\n"
       "%0 = stablehlo.reduce(%arg0 init: %c) applies stablehlo.add across dimensions = [0] : (tensor<4x8xf32>, tensor<f32>) -> tensor<8xf32>\n"
       "%1 = stablehlo.compare GT, %0, %arg1, FLOAT : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xi1>\n"
       "%2 = stablehlo.select %1, %0, %arg1 : tensor<8xi1>, tensor<8xf32>\n"
       "%3 = stablehlo.broadcast_in_dim %2, dims = [1] : (tensor<8xf32>) -> tensor<4x8xf32>\n return %3 : tensor<4x8xf32>",
       "%c = \"stablehlo.constant\"() <{value = dense<0.000000e+00> : tensor<f32>}> : () -> tensor<f32>\n"
       "%0 = \"stablehlo.reduce\"(%arg0, %c) <{dimensions = array<i64: 0>}> ({\n^bb0(%a: tensor<f32>, %b: tensor<f32>):\n"
       "  %s = \"stablehlo.add\"(%a, %b) : (tensor<f32>, tensor<f32>) -> tensor<f32>\n  \"stablehlo.return\"(%s) : (tensor<f32>) -> ()\n"
       "}) : (tensor<4x8xf32>, tensor<f32>) -> tensor<8xf32>\n"
       "%1 = \"stablehlo.compare\"(%0, %arg1) <{compare_type = #stablehlo<comparison_type FLOAT>, comparison_direction = "
       "#stablehlo<comparison_direction GT>}> : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xi1>\n"
       "%2 = \"stablehlo.select\"(%1, %0, %arg1) : (tensor<8xi1>, tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>\n"
       "%3 = \"stablehlo.broadcast_in_dim\"(%2) <{broadcast_dimensions = array<i64: 1>}> : (tensor<8xf32>) -> tensor<4x8xf32>\n"
       " return %3 : tensor<4x8xf32>"},
  };
  for (const auto& [pretty, generic] : forms) {
    INFO(pretty);
    CHECK(body(import(module(pretty))) == body(import(module(generic))));
  }
}

TEST_CASE("stablehlo: dense literals in list, splat and hex forms") {
  const std::string splat = module("%c = stablehlo.constant dense<2.500000e-01> : tensor<4x8xf32>\n"
                                   "%0 = stablehlo.add %arg0, %c : tensor<4x8xf32>\n return %0 : tensor<4x8xf32>");
  const std::string hex_splat = module("%c = stablehlo.constant dense<\"0x0000803E\"> : tensor<4x8xf32>\n"
                                       "%0 = stablehlo.add %arg0, %c : tensor<4x8xf32>\n return %0 : tensor<4x8xf32>");
  const std::string bits = module("%c = stablehlo.constant dense<0x3E800000> : tensor<4x8xf32>\n"
                                  "%0 = stablehlo.add %arg0, %c : tensor<4x8xf32>\n return %0 : tensor<4x8xf32>");
  CHECK(body(import(splat)) == body(import(hex_splat)));
  CHECK(body(import(splat)) == body(import(bits)));
  const ir::Function f = import(module("%c = stablehlo.constant dense<[[1, -2], [3, 4]]> : tensor<2x2xi32>\n"
                                       "%h = stablehlo.constant dense<\"0x01000000FEFFFFFF0300000004000000\"> : tensor<2x2xi32>\n"
                                       "%e = stablehlo.add %c, %h : tensor<2x2xi32>\n"
                                       "%0 = stablehlo.add %arg0, %arg0 : tensor<4x8xf32>\n return %0 : tensor<4x8xf32>"));
  CHECK(f.results.size() == 1);
}

TEST_CASE("stablehlo: locations reach op locs, listings and errors") {
  const std::string file = std::string(TPU_SOURCE_DIR) + "/tests/stablehlo/locations/gelu_mlp.mlir";
  const ir::Function f = compiler::load_module(file);
  bool dot = false, erf = false;
  for (const auto& op : f.ops) {
    dot |= op.kind == ir::OpKind::dot && op.loc.find("(/home/user/model.py:21)") != std::string::npos;
    erf |= op.loc.find("gelu_mlp.mlir:17 %2 (/home/user/model.py:14)") != std::string::npos;  // the callee's frame of a call site
  }
  CHECK(dot);
  CHECK(erf);
  const std::string fft = "#loc1 = loc(\"/src/train.py\":7:3)\n" +
                          module("%0 = \"stablehlo.fft\"(%arg0) <{fft_type = #stablehlo<fft_type FFT>, fft_length = array<i64: 8>}>\n"
                                 "  : (tensor<4x8xf32>) -> tensor<4x8xf32> loc(#loc1)\n"
                                 " return %0 : tensor<4x8xf32>");
  CHECK(error_of(fft) == "t.mlir:4:1: unsupported operation stablehlo.fft (/src/train.py:7)");
}

TEST_CASE("stablehlo: HLO metadata gives the source line too") {
  const char* text = R"(HloModule m
ENTRY main {
  x = f32[4] parameter(0)
  ROOT y = f32[4] fft(x), fft_type=FFT, fft_length={4}, metadata={op_name="jit(f)/fft" source_file="/src/f.py" source_line=12}
})";
  CHECK_THROWS_WITH(ir::import_hlo(hlo::parse(text, "m.hlo"), "m.hlo"), "m.hlo:4: unsupported fft (/src/f.py:12)");
}

TEST_CASE("stablehlo: checks become results of @main, with the interpreter's defaults") {
  const char* text = R"(module {
  func.func @main() -> tensor<4xf32> {
    %0 = call @inputs() : () -> tensor<4xf32>
    %1 = call @expected() : () -> tensor<4xf32>
    %2 = stablehlo.abs %0 : tensor<4xf32>
    stablehlo.custom_call @check.expect_close(%2, %1) {has_side_effect = true} : (tensor<4xf32>, tensor<4xf32>) -> ()
    stablehlo.custom_call @check.expect_almost_eq(%2, %1) {has_side_effect = true} : (tensor<4xf32>, tensor<4xf32>) -> ()
    check.expect_close %2, %1, max_ulp_difference = 5 : tensor<4xf32>, tensor<4xf32>
    check.expect_eq_const %2, dense<[1.0, 2.0, 3.0, 4.0]> : tensor<4xf32>
    return %2 : tensor<4xf32>
  }
  func.func private @inputs() -> tensor<4xf32> {
    %c = stablehlo.constant dense<[1.0, -2.0, 3.0, -4.0]> : tensor<4xf32>
    return %c : tensor<4xf32>
  }
  func.func private @expected() -> tensor<4xf32> {
    %c = stablehlo.constant dense<[1.0, 2.0, 3.0, 4.0]> : tensor<4xf32>
    return %c : tensor<4xf32>
  }
})";
  const ir::Function f = import(text);
  REQUIRE(f.results.size() == 9);  // the program's own, then two per check
  REQUIRE(f.checks.size() == 4);
  CHECK(f.checks[0].kind == isa::CheckKind::expect_close);
  CHECK((f.checks[0].actual == 1 && f.checks[0].expected == 2 && f.checks[0].min_ulp == 0 && f.checks[0].max_ulp == 3));
  CHECK((f.checks[1].kind == isa::CheckKind::expect_almost_eq && f.checks[1].tolerance == 1e-3));
  CHECK((f.checks[2].max_ulp == 5 && f.checks[2].actual == 5));
  CHECK((f.checks[3].kind == isa::CheckKind::expect_eq && f.checks[3].expected == 8));
  bool opaque = false;  // @inputs() stays runtime data
  for (const auto& op : f.ops) opaque |= op.kind == ir::OpKind::constant && op.opaque;
  CHECK(opaque);
}

TEST_CASE("stablehlo: malformed and unsupported text gives one file:line:col line") {
  const std::pair<std::string, std::string> cases[] = {
      {module("%0 = stablehlo.add %arg0, %nope : tensor<4x8xf32>\n return %0 : tensor<4x8xf32>"), "t.mlir:3:1: stablehlo.add: %nope is not defined before its use"},
      {module("%0 = stablehlo.add %arg0, %arg0 : tensor<4x8xf32>"), "a block without a return"},
      {module("%0 = stablehlo.frobnicate %arg0 : tensor<4x8xf32>\n return %0 : tensor<4x8xf32>"), "t.mlir:3:1: unknown operation stablehlo.frobnicate"},
      {module("%0 = stablehlo.cbrt %arg0 : tensor<4x8xf32>\n return %0 : tensor<4x8xf32>"), "t.mlir:3:1: unsupported operation stablehlo.cbrt"},
      {module("%0 = \"stablehlo.transpose\"(%arg0) <{permutation = array<i64: 1, 0>, wobble = 3 : i64}> : (tensor<4x8xf32>) -> tensor<8x4xf32>\n return %0 : tensor<8x4xf32>"),
       "unsupported attribute wobble of stablehlo.transpose"},
      {module("%0 = stablehlo.add %arg0, %arg0 : tensor<?x8xf32>\n return %0 : tensor<4x8xf32>"), "unsupported dynamic dimension"},
      {module("%0 = stablehlo.add %arg0, %arg0 : tensor<4x8xf32>\n return %0 : tensor<4x8xf32>").substr(0, 120), "t.mlir:"},
      {std::string(5000, '[') , "t.mlir:1:1: unsupported top-level operation"},
      {"module { func.func @main() -> tensor<f32> { %c = stablehlo.constant dense<" + std::string(300, '[') + "1" + std::string(300, ']') +
           "> : tensor<f32>\n return %c : tensor<f32> } }",
       "nest too deep"},
      {"func.func @main() -> tensor<f32> {\n %c = stablehlo.constant dense<1.0> : tensor<f32>\n return %c : tensor<f32>\n}\n"
       "func.func @t() {\n %c = stablehlo.constant dense<1.0> : tensor<f32>\n check.expect_eq_const %c, dense<1.0> : tensor<f32>\n func.return\n}",
       "t.mlir:7:2: unsupported a check in @t, which the program's entry @main does not run"},
      {"func.func @a(%x: tensor<f32>) {\n func.return\n}\nfunc.func @b() {\n func.return\n}", "no function @main (or a single public function) to run"},
  };
  for (const auto& [text, want] : cases) {
    INFO(text.substr(0, 200));
    const std::string e = error_of(text);
    CHECK_THAT(e, Catch::Contains(want));
    CHECK(e.find('\n') == std::string::npos);
  }
}
