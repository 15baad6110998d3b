// tpuc without the simulator: the IR text format, the verifier, the
// importer's errors, each pass keeping the meaning of every corpus program
// (checked with the interpreter), and the kernel plan (fusion, tiling).
#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <random>
#include <set>
#include <sstream>

#include "tpu/asm/assembler.h"
#include "tpu/compiler/codegen.h"
#include "tpu/compiler/compile.h"
#include "tpu/compiler/passes.h"
#include "tpu/ir/import.h"
#include "tpu/ir/interp.h"
#include "tpu/isa/npy.h"
#include "corpus.h"

namespace {

using namespace tpu;
using ir::DType;
using ir::Tensor;

using test::corpus_programs;
using test::kCorpus;

double rel_error(const Tensor& got, const Tensor& ref) { return ir::compare(got, ref).relative; }

Tensor tensor(DType dt, std::vector<int64_t> dims, std::vector<double> v) {
  Tensor t;
  t.type = {dt, std::move(dims)}, t.v = std::move(v);
  return t;
}
Tensor tensor(DType dt, std::vector<double> v) {  // 1-D
  const int64_t n = int64_t(v.size());
  return tensor(dt, {n}, std::move(v));
}

TEST_CASE("ir: every corpus and hand-written program imports, prints and parses back identically") {
  std::vector<std::string> paths;
  for (const auto& name : corpus_programs()) paths.push_back(kCorpus + name + "/module.hlo");
  for (const auto& e : std::filesystem::directory_iterator(std::string(TPU_SOURCE_DIR) + "/tests/compiler/hlo"))  // and the hand-written ones
    paths.push_back(e.path().string());
  CHECK(paths.size() >= 12 + 20);  // the corpus and the folder were found
  for (const auto& path : paths) {
    INFO(path);
    const ir::Function f = compiler::load_module(path);
    const std::string text = ir::print(f);
    const ir::Function g = ir::parse(text, "roundtrip.ir");
    CHECK(ir::print(g) == text);
    // And after the whole pipeline.
    ir::Function h = f;
    for (const auto& p : compiler::ir_pipeline(ir::Precision::highest)) h = p.run(h);
    CHECK(ir::print(ir::parse(ir::print(h), "lowered.ir")) == ir::print(h));
  }
}

TEST_CASE("ir: parse errors and verifier errors name the line and the problem") {
  auto err = [](const std::string& text) {
    try {
      ir::parse(text, "t.ir");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const std::string head = "func @main {\n  %0 = parameter() {index=0} : f32[2,3]\n";
  CHECK(err(head + "  %1 = add(%0, %2) : f32[2,3]\n  return %1\n}\n").find("t.ir:3: %2 is not defined") != std::string::npos);
  CHECK(err(head + "  %1 = add(%0, %0) : f32[3,2]\n  return %1\n}\n").find("t.ir:3:") != std::string::npos);
  CHECK(err(head + "  %1 = frobnicate(%0) : f32[2,3]\n  return %1\n}\n").find("unknown operation 'frobnicate'") != std::string::npos);
  CHECK(err(head + "  %1 = transpose(%0) {dims=[0,0]} : f32[2,3]\n  return %1\n}\n").find("not a permutation") != std::string::npos);
  CHECK(err(head + "  %1 = dot(%0, %0) {lhs_contract=[1], rhs_contract=[1]} : f32[2,2]\n  return %1\n}\n") == "no error");
  CHECK(err(head + "  %1 = dot(%0, %0) {lhs_contract=[1], rhs_contract=[0]} : f32[2,3]\n  return %1\n}\n").find("contracting dimensions differ") != std::string::npos);
  CHECK(err(head + "  %1 = exponential(%0) : f32[2,3]\n").find("expected") != std::string::npos);  // truncated
  CHECK(err("func @main {\n  %0 = parameter() {index=0} : s32[4]\n  %1 = tanh(%0) : s32[4]\n  return %1\n}\n").find("needs a float type") != std::string::npos);
  CHECK(err("func @main {\n  %0 = parameter() {index=1} : s32[4]\n  return %0\n}\n").find("parameter 0 is missing") != std::string::npos);
}

// A 2x4 mesh numbers its devices row-major, axis 0 the most significant:
// device d sits at (d / 4, d % 4).
TEST_CASE("ir: a mesh numbers devices row-major along its axes") {
  const ir::Mesh m{{2, 4}};
  CHECK(m.count(0) == 1);
  CHECK(m.count(1) == 2);
  CHECK(m.count(2) == 4);
  CHECK(m.count(3) == 8);
  CHECK(m.coord(6, 0) == 1);
  CHECK(m.coord(6, 1) == 2);
  CHECK(m.index(6, 3) == 6);
  CHECK(m.index(6, 1) == 1);
  CHECK(m.index(6, 2) == 2);
  // Along axis 1: the rows of the mesh; along axis 0: its columns.
  CHECK(m.groups(2) == std::vector<std::vector<int64_t>>{{0, 1, 2, 3}, {4, 5, 6, 7}});
  CHECK(m.groups(1) == std::vector<std::vector<int64_t>>{{0, 4}, {1, 5}, {2, 6}, {3, 7}});
  CHECK(m.groups(3) == std::vector<std::vector<int64_t>>{{0, 1, 2, 3, 4, 5, 6, 7}});
  // f32[8,8] split [axis 0, axis 1]: device d holds tile d; split [axis 1,
  // axis 0] (2x4 tiles transposed to 4x2): device (i, j) holds tile (j, i),
  // number 2j + i; split over axis 1 alone: (i, j) holds tile j, for both i.
  CHECK(m.tiles({1, 2}) == std::vector<int64_t>{2, 4});
  CHECK(m.tile_of({1, 2}).empty());
  CHECK(m.tiles({2, 1}) == std::vector<int64_t>{4, 2});
  CHECK(m.tile_of({2, 1}) == std::vector<int64_t>{0, 2, 4, 6, 1, 3, 5, 7});
  CHECK(m.tile_of({2, 0}) == std::vector<int64_t>{0, 1, 2, 3, 0, 1, 2, 3});
}

TEST_CASE("import: unsupported HLO stops with file:line: unsupported <what>") {
  auto err = [](const std::string& body) {
    const std::string text = "HloModule m\n\nENTRY main {\n" + body + "}\n";
    try {
      ir::import_hlo(hlo::parse(text, "m.hlo"), "m.hlo");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK(err("  p = f32[4]{0} parameter(0)\n  ROOT c = f32[4]{0} cbrt(p)\n") == "m.hlo:5: unsupported cbrt");
  CHECK(err("  p = f64[4]{0} parameter(0)\n  ROOT c = f64[4]{0} negate(p)\n").find("m.hlo:4: unsupported element type f64") == 0);
  CHECK(err("  p = f32[4]{0} parameter(0)\n  ROOT c = f32[4]{0} custom-call(p), custom_call_target=\"foo\"\n") ==
        "m.hlo:5: unsupported custom-call \"foo\"");
  CHECK(err("  p = f32[4]{0} parameter(0)\n  ROOT c = f32[5]{0} negate(p)\n").find("m.hlo:5:") == 0);
  CHECK(err("  p = f32[4]{0} parameter(0)\n  ROOT c = f32[4]{0} all-reduce(p), replica_groups={{0,1}}, to_apply=x\n")
            .find("m.hlo:5: unsupported all-reduce across devices") == 0);
  // A tuple shape that promises more values than its producer gives.
  const std::string short_tuple =
      "HloModule m\n\nf {\n  p = f32[4]{0} parameter(0)\n  ROOT q = f32[4]{0} negate(p)\n}\n\nENTRY main {\n"
      "  x = f32[4]{0} parameter(0)\n  c = (f32[4]{0}, f32[4]{0}) call(x), to_apply=f\n"
      "  ROOT g = f32[4]{0} get-tuple-element(c), index=1\n}\n";
  CHECK_THROWS_WITH(ir::import_hlo(hlo::parse(short_tuple, "t.hlo"), "t.hlo"), "t.hlo:10: c: its shape (f32[4], f32[4]) declares 2 value(s), the call computes 1");
  const std::string pmap = ir::print(compiler::load_module(kCorpus + "matmul_f32/module.hlo"));
  CHECK(!pmap.empty());
  // shard_map over 4 devices: every device's program, its split parameter
  // and result, and the psum as an all-reduce over the 4 (docs/ir.md).
  const ir::Function spmd = compiler::load_module(kCorpus + "pmap_psum_4/module.hlo");
  CHECK(spmd.devices == 4);
  CHECK(spmd.param_tiles.at(0) == std::vector<int64_t>{4, 1, 1});
  CHECK(spmd.ops[spmd.params()[0]].type.str() == "f32[1,16,32]");
  CHECK(spmd.param_global_type(0).str() == "f32[4,16,32]");
  CHECK((spmd.param_tiles.size() < 2 || spmd.param_tiles[1].empty()));
  CHECK(spmd.result_tiles.at(0) == std::vector<int64_t>{4, 1, 1});
  int reduces = 0;
  for (const auto& op : spmd.ops)
    if (op.kind == ir::OpKind::all_reduce) {
      ++reduces;
      CHECK(op.groups == std::vector<std::vector<int64_t>>{{0, 1, 2, 3}});
      CHECK(op.combiner == ir::Combiner::add);
    }
  CHECK(reduces == 1);
  CHECK(ir::print(ir::parse(ir::print(spmd), "p.ir")) == ir::print(spmd));
}

// The gather or scatter ops of an imported function and their lowering
// (lower-gather-scatter), each to be checked against direct loops: the op's
// semantics in the interpreter and the one-hot dots that replace it.
std::vector<std::pair<const char*, ir::Function>> indexed_forms(const ir::Function& f) {
  ir::Function lowered = compiler::lower_gather_scatter(f);
  for (const auto& op : lowered.ops) CHECK((op.kind != ir::OpKind::gather && op.kind != ir::OpKind::scatter));
  return {{"as imported", f}, {"lowered", std::move(lowered)}};
}

TEST_CASE("gather along one dimension is exact, with XLA's clamping") {
  // Embedding rows (ids out of range clamp), take_along_axis with batching
  // dimensions, and a gather that keeps the indexed dimension (size 1) and
  // slices another: the IR as imported and lowered, interpreted, against
  // direct loops.
  const std::string text =
      "HloModule m\n\nENTRY main {\n"
      "  t = f32[7,5]{1,0} parameter(0)\n  ids = s32[2,3,1]{2,1,0} parameter(1)\n"
      "  lg = f32[3,7]{1,0} parameter(2)\n  lab = s32[3,1,1]{2,1,0} parameter(3)\n"
      "  e = f32[2,3,5]{2,1,0} gather(t, ids), offset_dims={2}, collapsed_slice_dims={0}, start_index_map={0}, index_vector_dim=2, slice_sizes={1,5}\n"
      "  p = f32[3,1]{1,0} gather(lg, lab), offset_dims={}, collapsed_slice_dims={1}, start_index_map={1}, operand_batching_dims={0}, start_indices_batching_dims={0}, index_vector_dim=2, slice_sizes={1,1}\n"
      "  k = f32[2,3,1,4]{3,2,1,0} gather(t, ids), offset_dims={2,3}, collapsed_slice_dims={}, start_index_map={0}, index_vector_dim=2, slice_sizes={1,4}\n"
      "  ROOT r = (f32[2,3,5]{2,1,0}, f32[3,1]{1,0}, f32[2,3,1,4]{3,2,1,0}) tuple(e, p, k)\n}\n";
  const ir::Function f = ir::import_hlo(hlo::parse(text, "m.hlo"), "m.hlo");
  std::vector<double> t(35), lg(21);
  for (size_t i = 0; i < t.size(); ++i) t[i] = double(float(0.1 * double(i) - 1.7 + 1e-7 * double(i * i)));  // f32 values not exact in bf16
  for (size_t i = 0; i < lg.size(); ++i) lg[i] = double(float(std::sin(double(i)) * 3.3));
  const std::vector<double> ids = {0, 6, -4, 3, 9, 2}, lab = {4, 0, 6};
  for (const auto& [form, fn] : indexed_forms(f)) {
    INFO(form);
    const auto out = ir::interpret(fn, {tensor(ir::DType::f32, {7, 5}, t), tensor(ir::DType::s32, {2, 3, 1}, ids),
                                        tensor(ir::DType::f32, {3, 7}, lg), tensor(ir::DType::s32, {3, 1, 1}, lab)});
    for (size_t g = 0; g < 6; ++g) {
      const size_t row = size_t(std::clamp<double>(ids[g], 0, 6));
      for (size_t c = 0; c < 5; ++c) CHECK(out[0].v[g * 5 + c] == t[row * 5 + c]);
      for (size_t c = 0; c < 4; ++c) CHECK(out[2].v[g * 4 + c] == t[row * 5 + c]);
    }
    for (size_t b = 0; b < 3; ++b) CHECK(out[1].v[b] == lg[b * 7 + size_t(lab[b])]);
  }
}

TEST_CASE("import: argmax/argmin reductions are recognised by what their region computes") {
  auto module = [](const std::string& tie) {  // JAX's argmax region; `tie` breaks equal values by index
    return "HloModule m\n\nr {\n  a = f32[] parameter(0)\n  i = s32[] parameter(1)\n  b = f32[] parameter(2)\n  j = s32[] parameter(3)\n"
           "  gt = pred[] compare(a, b), direction=GT\n  nan = pred[] compare(a, a), direction=NE\n  o = pred[] or(gt, nan)\n"
           "  v = f32[] select(o, a, b)\n  eq = pred[] compare(a, b), direction=EQ\n  lt = pred[] compare(i, j), direction=" + tie + "\n"
           "  an = pred[] and(eq, lt)\n  o2 = pred[] or(o, an)\n  k = s32[] select(o2, i, j)\n  ROOT t = (f32[], s32[]) tuple(v, k)\n}\n\n"
           "ENTRY main {\n  x = f32[3,4]{1,0} parameter(0)\n  io = s32[3,4]{1,0} iota(), iota_dimension=1\n"
           "  ninf = f32[] constant(-inf)\n  z = s32[] constant(0)\n"
           "  red = (f32[3]{0}, s32[3]{0}) reduce(x, io, ninf, z), dimensions={1}, to_apply=r\n"
           "  ROOT idx = s32[3]{0} get-tuple-element(red), index=1\n}\n";
  };
  const ir::Function f = ir::import_hlo(hlo::parse(module("LT"), "m.hlo"), "m.hlo");
  ir::Tensor x;
  x.type = {ir::DType::f32, {3, 4}};
  x.v = {1, 3, 3, 2, NAN, 5, NAN, 1, -INFINITY, -INFINITY, -INFINITY, -INFINITY};
  const auto out = ir::interpret(f, {x});
  CHECK(out[0].v == std::vector<double>{1, 0, 0});  // the first maximum; the first NaN; all -inf: index 0
  // Ties broken towards the larger index are not JAX's argmax: refused.
  try {
    ir::import_hlo(hlo::parse(module("GT"), "m.hlo"), "m.hlo");
    FAIL("imported");
  } catch (const Error& e) {
    CHECK(std::string(e.what()).find(": unsupported reduce of (values, indices) whose to_apply (r) is not an argmax or argmin") != std::string::npos);
  }
}

namespace {
size_t count_kind(const ir::Function& f, ir::OpKind k) {
  size_t n = 0;
  for (const auto& op : f.ops) n += op.kind == k;
  return n;
}
}  // namespace

// sort becomes a bitonic network of the IR's ops (import_hlo.cpp); here
// against std::stable_sort: f32 keys in IEEE 754's total order (NaN
// greatest, -0 before +0), descending, with the positions as payload; s32
// keys ascending with an f32 payload; lengths 5 and 7.
TEST_CASE("import: sort with payloads, total order and several dimensions matches std::stable_sort") {
  const ir::Function f = compiler::load_module(std::string(TPU_SOURCE_DIR) + "/tests/compiler/hlo/sort_topk.hlo");
  const double nan = std::numeric_limits<double>::quiet_NaN();
  std::vector<double> x(5 * 3 * 4), k(2 * 7 * 3);
  const double pool[] = {1.5, -0.0, 0.0, nan, -2.0, 1.5, INFINITY, -INFINITY, 3.25, 0.0, -nan};
  for (size_t i = 0; i < x.size(); ++i) x[i] = pool[(i * 7 + i / 5) % 11];
  for (size_t i = 0; i < k.size(); ++i) k[i] = double(int64_t((i * 5) % 9) - 4);
  const auto out = ir::interpret(f, {tensor(DType::f32, {5, 3, 4}, x), tensor(DType::s32, {2, 7, 3}, k)});
  REQUIRE(out.size() == 2);
  auto key = [](double v) {  // the total order as an integer
    const float fv = float(v);
    int32_t b;
    std::memcpy(&b, &fv, 4);
    return b < 0 ? b ^ 0x7fffffff : b;
  };
  for (int64_t c = 0; c < 12; ++c) {  // (dimension 1, dimension 2) of x
    std::vector<int64_t> order = {0, 1, 2, 3, 4};
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return key(x[size_t(a * 12 + c)]) > key(x[size_t(b * 12 + c)]); });
    for (int64_t i = 0; i < 5; ++i) CHECK(out[0].v[size_t(i * 12 + c)] == double(order[size_t(i)]));
  }
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t c = 0; c < 3; ++c) {
      std::vector<double> col;
      for (int64_t i = 0; i < 7; ++i) col.push_back(k[size_t((b * 7 + i) * 3 + c)]);
      std::stable_sort(col.begin(), col.end());
      for (int64_t i = 0; i < 7; ++i) CHECK(out[1].v[size_t((b * 7 + i) * 3 + c)] == col[size_t(i)]);
    }
}

TEST_CASE("IR while: loops stay loops in the IR, unroll-loops unrolls short counted ones and fixes dynamic slices with known starts") {
  const std::string loop =
      "HloModule m\n\nbody {\n  p = (s32[], f32[3]{0}) parameter(0)\n  i = s32[] get-tuple-element(p), index=0\n"
      "  x = f32[3]{0} get-tuple-element(p), index=1\n  two = f32[] constant(2)\n  tb = f32[3]{0} broadcast(two), dimensions={}\n"
      "  y = f32[3]{0} multiply(x, tb)\n  one = s32[] constant(1)\n  j = s32[] add(i, one)\n  ROOT r = (s32[], f32[3]{0}) tuple(j, y)\n}\n\n"
      "cond {\n  p = (s32[], f32[3]{0}) parameter(0)\n  i = s32[] get-tuple-element(p), index=0\n  n = s32[] constant(5)\n"
      "  ROOT lt = pred[] compare(i, n), direction=LT\n}\n\n"
      "ENTRY main {\n  x = f32[3]{0} parameter(0)\n  z = s32[] constant(0)\n  t = (s32[], f32[3]{0}) tuple(z, x)\n"
      "  w = (s32[], f32[3]{0}) while(t), condition=cond, body=body\n  y = f32[3]{0} get-tuple-element(w), index=1\n"
      "  k = s32[] constant(7)\n  s = f32[2]{0} dynamic-slice(y, k), dynamic_slice_sizes={2}\n"
      "  u = f32[1]{0} slice(x), slice={[0:1]}\n  m = s32[] constant(-3)\n  d = f32[3]{0} dynamic-update-slice(y, u, m)\n"
      "  ROOT r = (f32[3]{0}, f32[2]{0}, f32[3]{0}) tuple(y, s, d)\n}\n";
  const ir::Function f = ir::import_hlo(hlo::parse(loop, "m.hlo"), "m.hlo");
  CHECK(count_kind(f, ir::OpKind::while_) == 1);  // the body is imported once
  CHECK(ir::print(ir::parse(ir::print(f), "f.ir")) == ir::print(f));
  ir::Tensor x;
  x.type = {ir::DType::f32, {3}}, x.v = {1, -2, 0.5};
  const ir::Function u = compiler::unroll_loops(f);
  CHECK(count_kind(u, ir::OpKind::while_) == 0);
  CHECK(count_kind(u, ir::OpKind::multiply) == 5);
  for (const ir::Function* g : {&f, &u}) {
    const auto out = ir::interpret(*g, {x});
    CHECK(out[0].v == std::vector<double>{32, -64, 16});  // five doublings
    CHECK(out[1].v == std::vector<double>{-64, 16});      // start 7 clamps to 1
    CHECK(out[2].v == std::vector<double>{1, -64, 16});   // start -3 clamps to 0
  }
  // A loop whose trip count depends on an input: the interpreter runs it,
  // unroll-loops cannot.
  const std::string data_dep =
      "HloModule m\n\nbody {\n  p = (f32[]) parameter(0)\n  x = f32[] get-tuple-element(p), index=0\n  h = f32[] constant(0.5)\n"
      "  y = f32[] multiply(x, h)\n  ROOT r = (f32[]) tuple(y)\n}\n\ncond {\n  p = (f32[]) parameter(0)\n"
      "  x = f32[] get-tuple-element(p), index=0\n  one = f32[] constant(1)\n  ROOT gt = pred[] compare(x, one), direction=GT\n}\n\n"
      "ENTRY main {\n  x = f32[] parameter(0)\n  t = (f32[]) tuple(x)\n  w = (f32[]) while(t), condition=cond, body=body\n"
      "  ROOT y = f32[] get-tuple-element(w), index=0\n}\n";
  const ir::Function d = ir::import_hlo(hlo::parse(data_dep, "m.hlo"), "m.hlo");
  CHECK(ir::print(ir::parse(ir::print(d), "d.ir")) == ir::print(d));
  for (const auto& [in, want] : std::vector<std::pair<double, double>>{{37, 0.578125}, {1, 1}, {2, 1}, {-4, -4}}) {
    ir::Tensor s;
    s.type.dtype = ir::DType::f32, s.v = {in};
    CHECK(ir::interpret(d, {s})[0].v[0] == want);  // halved until <= 1: zero trips for 1 and -4, one for 2
  }
  CHECK(count_kind(compiler::unroll_loops(d), ir::OpKind::while_) == 1);  // it stays a loop
}

// hoist-loop-invariants (tests/compiler/while/invariant.mlir; its values
// against the interpreter in test_e2e.cpp): what does not change from trip
// to trip is computed once, before the loop, and read as state.
TEST_CASE("IR while: hoist-loop-invariants moves the work that does not change from trip to trip out of the body") {
  ir::Function f = compiler::load_module(std::string(TPU_SOURCE_DIR) + "/tests/compiler/while/invariant.mlir");
  f = compiler::run_pipeline(f, compiler::ir_pipeline(ir::Precision::highest));
  const auto w = std::find_if(f.ops.begin(), f.ops.end(), [](const ir::Op& o) { return o.kind == ir::OpKind::while_; });
  REQUIRE(w != f.ops.end());
  const ir::Function& body = w->regions[1];
  // Outside: transpose(w) / 32 and its three bf16 parts, and 2 b.
  CHECK(count_kind(f, ir::OpKind::transpose) == 1);
  CHECK(count_kind(f, ir::OpKind::multiply) == 2);
  CHECK(w->operands.size() == 4 + 3 + 1);  // the state as written, then the parts and 2 b
  // Inside: the dots (six passes) on the state's parts, x's parts, both
  // pads (pad(b) reads the same every trip but is twice b's size).
  CHECK(count_kind(body, ir::OpKind::transpose) == 0);
  CHECK(count_kind(body, ir::OpKind::multiply) == 0);
  CHECK(count_kind(body, ir::OpKind::dot) == 6);
  CHECK(count_kind(body, ir::OpKind::pad) == 2);
  size_t weight_converts = 0;
  for (const ir::Op& o : body.ops) weight_converts += o.kind == ir::OpKind::convert && o.type.dims == std::vector<int64_t>{128, 128};
  CHECK(weight_converts == 0);
}

TEST_CASE("IR while: the verifier checks the regions' signatures") {
  const std::string good =
      "func @main {\n  %0 = parameter() {index=0} : f32[2]\n  %1 = constant() {value=[0]} : s32[]\n"
      "  %2 = while(%1, %0) {condition=func @c {\n      %0 = parameter() {index=0} : s32[]\n      %1 = parameter() {index=1} : f32[2]\n"
      "      %2 = constant() {value=[3]} : s32[]\n      %3 = compare(%0, %2) {direction=LT} : pred[]\n      return %3\n    }, "
      "body=func @b {\n      %0 = parameter() {index=0} : s32[]\n      %1 = parameter() {index=1} : f32[2]\n"
      "      %2 = constant() {value=[1]} : s32[]\n      %3 = add(%0, %2) : s32[]\n      %4 = add(%1, %1) : f32[2]\n      return %3, %4\n"
      "    }} : (s32[], f32[2])\n  %3 = get-tuple-element(%2) {index=1} : f32[2]\n  return %3\n}\n";
  const ir::Function f = ir::parse(good, "g.ir");
  CHECK(ir::print(f) == good);
  ir::Tensor x;
  x.type = {ir::DType::f32, {2}}, x.v = {1, -3};
  CHECK(ir::interpret(f, {x})[0].v == std::vector<double>{8, -24});
  auto refused = [](std::string text, const char* from, const char* to, const char* why) {
    text.replace(text.find(from), std::string(from).size(), to);
    try {
      ir::parse(text, "bad.ir");
      FAIL("parsed");
    } catch (const Error& e) {
      INFO(e.what());
      CHECK(std::string(e.what()).find(why) != std::string::npos);
    }
  };
  refused(good, "return %3, %4", "return %3", "body must return the state's types in order");
  refused(good, "return %3\n    }, ", "return %2\n    }, ", "condition must return one pred[]");
  refused(good, "      %1 = parameter() {index=1} : f32[2]\n      %2 = constant() {value=[3]}",
          "      %1 = parameter() {index=1} : f32[3]\n      %2 = constant() {value=[3]}", "condition parameter 1 is f32[3]");
  refused(good, "(%2) {index=1}", "(%2) {index=2}", "index out of range");
  refused(good, "(%2) {index=1}", "(%1) {index=1}", "not a while loop's");
  refused(good, ": (s32[], f32[2])", ": (s32[])", "its types must be its operands'");
  // An endless loop ends with an error after the interpreter's 1,000,000 trips.
  std::string endless = good;
  endless.replace(endless.find("{direction=LT}"), 14, "{direction=NE}");
  endless.replace(endless.find("{value=[3]}"), 11, "{value=[-1]}");
  try {
    ir::interpret(ir::parse(endless, "e.ir"), {x});
    FAIL("ended");
  } catch (const Error& e) {
    CHECK(std::string(e.what()).find("the while loop runs more than 1000000 trips") != std::string::npos);
  }
}

TEST_CASE("import: remainder and round-nearest-afz match C's fmod and round") {
  const std::string text =
      "HloModule m\n\nENTRY main {\n  x = f32[12]{0} parameter(0)\n  y = f32[12]{0} parameter(1)\n  i = s32[12]{0} parameter(2)\n"
      "  j = s32[12]{0} parameter(3)\n  r = f32[12]{0} remainder(x, y)\n  ri = s32[12]{0} remainder(i, j)\n"
      "  a = f32[12]{0} round-nearest-afz(x)\n  ROOT t = (f32[12]{0}, s32[12]{0}, f32[12]{0}) tuple(r, ri, a)\n}\n";
  const ir::Function f = ir::import_hlo(hlo::parse(text, "m.hlo"), "m.hlo");
  const std::vector<double> x = {5.5, -5.5, 2.5, -2.5, 0.5, -0.5, double(0.49999997f), 7, -7.25, 1e6 + 0.5, 8388609, -0.0};
  const std::vector<double> y = {2, 2, -2, -2, double(0.3f), double(0.3f), 1, 3, 2.5, 3, 5, 1};
  const std::vector<double> i = {7, -7, 7, -7, 0, 5, 13, -13, 2, 100, -1, 3}, j = {3, 3, -3, -3, 4, 5, 4, 4, 7, 7, 2, -2};
  const auto out = ir::interpret(f, {tensor(ir::DType::f32, x), tensor(ir::DType::f32, y), tensor(ir::DType::s32, i), tensor(ir::DType::s32, j)});
  for (size_t k = 0; k < x.size(); ++k) {
    INFO("x " << x[k] << " y " << y[k]);
    CHECK(float(out[0].v[k]) == std::fmod(float(x[k]), float(y[k])));
    CHECK(out[1].v[k] == double(int32_t(i[k]) % int32_t(j[k])));
    CHECK(float(out[2].v[k]) == std::round(float(x[k])));
  }
}

// u32 (JAX's PRNG keys and random bits): the interpreter's unsigned
// semantics, and lower-unsigned rewriting them into signed ops and bitcasts
// without changing a value.
TEST_CASE("import: u32 values compare, convert and reinterpret as XLA's unsigned type, and lower-unsigned keeps them") {
  const std::string text =
      "HloModule m\n\nENTRY main {\n  a = u32[8]{0} parameter(0)\n  b = u32[8]{0} parameter(1)\n  x = f32[8]{0} parameter(2)\n"
      "  lt = pred[8]{0} compare(a, b), direction=LT\n  mx = u32[8]{0} maximum(a, b)\n  fa = f32[8]{0} convert(a)\n"
      "  ua = u32[8]{0} convert(x)\n  sa = s32[8]{0} convert(a)\n  ba = f32[8]{0} bitcast-convert(a)\n"
      "  sr = u32[8]{0} shift-right-logical(a, b)\n  cl = u32[8]{0} clamp(b, a, mx)\n"
      "  ROOT t = (pred[8]{0}, u32[8]{0}, f32[8]{0}, u32[8]{0}, s32[8]{0}, f32[8]{0}, u32[8]{0}, u32[8]{0}) tuple(lt, mx, fa, ua, sa, ba, sr, cl)\n}\n";
  const ir::Function f = ir::import_hlo(hlo::parse(text, "m.hlo"), "m.hlo");
  CHECK(ir::print(ir::parse(ir::print(f), "u.ir")) == ir::print(f));
  const std::vector<double> a = {0, 1, 2147483648.0, 4294967295.0, 16777217, 4294967040.0, 3, 2147483647};
  const std::vector<double> b = {4294967295.0, 0, 1, 4294967294.0, 3, 2147483648.0, 40, 2147483648.0};
  const std::vector<double> x = {-1, 3.7, 2147483648.0, 4294967296.0, 1e10, NAN, 0.5, 4294967040.0};
  const std::vector<Tensor> in = {tensor(DType::u32, a), tensor(DType::u32, b), tensor(DType::f32, x)};
  const auto out = ir::interpret(f, in);
  for (size_t k = 0; k < a.size(); ++k) {
    INFO("a " << a[k] << " b " << b[k] << " x " << x[k]);
    const uint32_t ua = uint32_t(a[k]), ub = uint32_t(b[k]);
    CHECK(out[0].v[k] == double(ua < ub));
    CHECK(out[1].v[k] == double(std::max(ua, ub)));
    CHECK(float(out[2].v[k]) == float(ua));  // one rounding: 16777217 -> 16777216, 2^32 - 1 -> 2^32
    const double want_u = std::isnan(x[k]) || x[k] <= 0 ? 0 : x[k] >= 4294967295.0 ? 4294967295.0 : std::trunc(x[k]);
    CHECK(out[3].v[k] == want_u);
    CHECK(out[4].v[k] == double(int32_t(ua)));
    float fb;
    std::memcpy(&fb, &ua, 4);
    CHECK((std::isnan(fb) ? std::isnan(out[5].v[k]) : float(out[5].v[k]) == fb));
    CHECK(out[6].v[k] == double(ub >= 32 ? 0u : ua >> ub));
    CHECK(out[7].v[k] == double(std::min(std::max(ua, ub), std::max(ua, ub))));
  }
  // After lower-unsigned only bit-level ops touch u32 values, and every value is the same.
  const ir::Function low = compiler::lower_unsigned(f);
  for (const auto& op : low.ops)
    if (op.type.dtype == DType::u32)
      CHECK((op.kind != ir::OpKind::maximum && op.kind != ir::OpKind::minimum && op.kind != ir::OpKind::clamp && op.kind != ir::OpKind::convert));
  const auto lowered = ir::interpret(low, in);
  for (size_t r = 0; r < out.size(); ++r)
    for (size_t k = 0; k < a.size(); ++k) {
      INFO("result " << r << " element " << k);
      CHECK((std::isnan(out[r].v[k]) ? std::isnan(lowered[r].v[k]) : lowered[r].v[k] == out[r].v[k]));
    }
  // What the VPU cannot do on unsigned values is refused with the line.
  const std::string dot =
      "HloModule m\n\nENTRY main {\n  a = u32[2,2]{1,0} parameter(0)\n"
      "  ROOT d = u32[2,2]{1,0} dot(a, a), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n}\n";
  CHECK_THROWS_WITH(compiler::lower_unsigned(ir::import_hlo(hlo::parse(dot, "d.hlo"), "d.hlo")), "d.hlo:5 d: unsupported dot of u32 values");
}

// x[arange(n), labels] and x[arange(b)[:, None], arange(t), labels]: index
// components that count along the index batch become batching dimensions.
TEST_CASE("gather and scatter with counting index components (x[arange(n), labels])") {
  const std::string text =
      "HloModule m\n\nadd {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT s = f32[] add(a, b)\n}\n\nENTRY main {\n"
      "  x = f32[2,4,5]{2,1,0} parameter(0)\n  lab = s32[2,4]{1,0} parameter(1)\n  u = f32[2,4]{1,0} parameter(2)\n"
      "  ib = s32[2,4,1]{2,1,0} iota(), iota_dimension=0\n  it = s32[2,4,1]{2,1,0} iota(), iota_dimension=1\n"
      "  l = s32[2,4,1]{2,1,0} reshape(lab)\n  idx = s32[2,4,3]{2,1,0} concatenate(it, l, ib), dimensions={2}\n"
      "  g = f32[2,4]{1,0} gather(x, idx), offset_dims={}, collapsed_slice_dims={0,1,2}, start_index_map={1,2,0}, index_vector_dim=2, slice_sizes={1,1,1}\n"
      "  z = f32[] constant(0)\n  zs = f32[2,4,5]{2,1,0} broadcast(z), dimensions={}\n"
      "  s = f32[2,4,5]{2,1,0} scatter(zs, idx, u), update_window_dims={}, inserted_window_dims={0,1,2}, scatter_dims_to_operand_dims={1,2,0}, index_vector_dim=2, to_apply=add\n"
      "  ROOT t = (f32[2,4]{1,0}, f32[2,4,5]{2,1,0}) tuple(g, s)\n}\n";
  const ir::Function f = ir::import_hlo(hlo::parse(text, "m.hlo"), "m.hlo");
  std::vector<double> xv, uv;
  for (int k = 0; k < 40; ++k) xv.push_back(k * 0.5 - 3);
  for (int k = 0; k < 8; ++k) uv.push_back(k + 1);
  const ir::Tensor x = tensor(DType::f32, {2, 4, 5}, xv), lab = tensor(DType::s32, {2, 4}, {3, 0, 4, 9, -2, 1, 1, 2}),
                   u = tensor(DType::f32, {2, 4}, uv);
  for (const auto& [form, fn] : indexed_forms(f)) {
    const auto out = ir::interpret(fn, {x, lab, u});
    for (int b = 0; b < 2; ++b)
      for (int t = 0; t < 4; ++t) {
        const int l = int(lab.v[size_t(b * 4 + t)]), clamped = std::clamp(l, 0, 4);
        INFO(form << ": b " << b << " t " << t << " label " << l);
        CHECK(out[0].v[size_t(b * 4 + t)] == x.v[size_t((b * 4 + t) * 5 + clamped)]);  // gather clamps
        for (int c = 0; c < 5; ++c)  // scatter drops what is out of range
          CHECK(out[1].v[size_t((b * 4 + t) * 5 + c)] == (c == l ? u.v[size_t(b * 4 + t)] : 0.0));
      }
  }
  // Two data-dependent components, x[b, lab, lab]: one index over the two dimensions.
  std::string two = text;
  two.replace(two.find("iota(), iota_dimension=1"), 24, "reshape(lab)");
  for (const auto& [form, fn] : indexed_forms(ir::import_hlo(hlo::parse(two, "m.hlo"), "m.hlo"))) {
    const auto out = ir::interpret(fn, {x, lab, u});
    for (int b = 0; b < 2; ++b)
      for (int t = 0; t < 4; ++t) {
        const int l = int(lab.v[size_t(b * 4 + t)]);
        INFO(form << ": b " << b << " t " << t << " label " << l);
        CHECK(out[0].v[size_t(b * 4 + t)] == x.v[size_t((b * 4 + std::clamp(l, 0, 3)) * 5 + std::clamp(l, 0, 4))]);
        for (int r = 0; r < 4; ++r)
          for (int c = 0; c < 5; ++c) {
            double want = 0;
            for (int q = 0; q < 4; ++q)
              if (int(lab.v[size_t(b * 4 + q)]) == r && r == c) want += u.v[size_t(b * 4 + q)];
            CHECK(out[1].v[size_t((b * 4 + r) * 5 + c)] == want);
          }
      }
  }
}

// lax.cond and lax.switch: every branch computed, the result selected.
TEST_CASE("import: conditional selects its branch by predicate or index (out of range: the last)") {
  const ir::Function f = compiler::load_module(std::string(TPU_SOURCE_DIR) + "/tests/compiler/hlo/cond_switch.hlo");
  for (double s : {1.5, -2.0})
    for (double k : {0.0, 1.0, 2.0, 7.0, -1.0}) {
      INFO("s " << s << " k " << k);
      std::vector<double> xv;
      for (int e = 0; e < 32; ++e) xv.push_back(double(float(e * 0.25 - 4)));
      const Tensor tx = tensor(DType::f32, {4, 8}, xv);
      const auto out = ir::interpret(f, {tensor(DType::f32, {}, {s}), tx, tensor(DType::s32, {}, {k})});
      for (int e = 0; e < 32; ++e) {
        const float x = float(tx.v[size_t(e)]);
        CHECK(float(out[0].v[size_t(e)]) == (s > 0 ? x * float(s) : -x));
        const int b = k >= 0 && k < 3 ? int(k) : 2;
        const float w = b == 0 ? std::tanh(x) : b == 1 ? std::exp(x) : std::fabs(x);
        CHECK(float(out[1].v[size_t(e)]) == w - x);  // plus the constant-false cond: -x
      }
      CHECK(float(out[2].v[0]) == (s > 0 ? float(s) : std::exp(float(s))));
    }
}

TEST_CASE("scatter into one dimension adds or assigns, dropping indices out of range") {
  const std::string text =
      "HloModule m\n\nadd {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT s = f32[] add(a, b)\n}\n\n"
      "set {\n  a = f32[] parameter(0)\n  ROOT b = f32[] parameter(1)\n}\n\nENTRY main {\n"
      "  base = f32[5,3]{1,0} parameter(0)\n  ids = s32[4,1]{1,0} parameter(1)\n  upd = f32[4,3]{1,0} parameter(2)\n"
      "  lg = f32[2,5]{1,0} parameter(3)\n  lab = s32[2,1,1]{2,1,0} parameter(4)\n  g = f32[2,1]{1,0} parameter(5)\n"
      "  e = f32[5,3]{1,0} scatter(base, ids, upd), update_window_dims={1}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add\n"
      "  t = f32[2,5]{1,0} scatter(lg, lab, g), update_window_dims={}, inserted_window_dims={1}, scatter_dims_to_operand_dims={1}, input_batching_dims={0}, scatter_indices_batching_dims={0}, index_vector_dim=2, to_apply=add\n"
      "  s = f32[5,3]{1,0} scatter(base, ids, upd), update_window_dims={1}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=set\n"
      "  ROOT r = (f32[5,3]{1,0}, f32[2,5]{1,0}, f32[5,3]{1,0}) tuple(e, t, s)\n}\n";
  const ir::Function f = ir::import_hlo(hlo::parse(text, "m.hlo"), "m.hlo");
  std::vector<double> base(15), upd(12), lg(10);
  for (size_t i = 0; i < base.size(); ++i) base[i] = double(i) - 7.5;
  for (size_t i = 0; i < upd.size(); ++i) upd[i] = double(float(0.37 * double(i) + 0.01));  // not exact in bf16
  for (size_t i = 0; i < lg.size(); ++i) lg[i] = double(i) * 0.5;
  const std::vector<double> ids = {1, 4, 1, 7}, lab = {3, 0}, g = {2.5, -1.25};  // 1 twice; 7 is out of range
  std::vector<double> add = base, set = base, t = lg;
  for (size_t k = 0; k < 4; ++k) {
    if (ids[k] < 0 || ids[k] >= 5) continue;
    for (size_t c = 0; c < 3; ++c) {
      add[size_t(ids[k]) * 3 + c] = double(float(add[size_t(ids[k]) * 3 + c] + upd[k * 3 + c]));
      set[size_t(ids[k]) * 3 + c] = upd[k * 3 + c];  // the last update of a row wins
    }
  }
  for (size_t b = 0; b < 2; ++b) t[b * 5 + size_t(lab[b])] += g[b];
  for (const auto& [form, fn] : indexed_forms(f)) {
    INFO(form);
    const auto out = ir::interpret(fn, {tensor(ir::DType::f32, {5, 3}, base), tensor(ir::DType::s32, {4, 1}, ids), tensor(ir::DType::f32, {4, 3}, upd),
                                        tensor(ir::DType::f32, {2, 5}, lg), tensor(ir::DType::s32, {2, 1, 1}, lab), tensor(ir::DType::f32, {2, 1}, g)});
    for (size_t k = 0; k < add.size(); ++k) CHECK(std::fabs(out[0].v[k] - add[k]) <= 1e-6 * std::fabs(add[k]) + 1e-7);
    CHECK(out[1].v == t);
    CHECK(out[2].v == set);
  }
}

TEST_CASE("import: sine and cosine become range reduction and polynomials accurate to f32") {
  // x over [-1e4, 1e4] (denser near 0) and special values; the rewritten
  // IR, run by the interpreter, against the C library in double.
  std::vector<double> xs;
  for (int k = -20000; k <= 20000; ++k) xs.push_back(k * 1e-3);
  for (int k = -10000; k <= 10000; k += 7) xs.push_back(k * 1.0001);
  for (double& v : xs) v = double(float(v));
  const size_t n = xs.size();
  const std::string text = fmt::format(
      "HloModule m\n\nENTRY main {{\n  x = f32[{0}]{{0}} parameter(0)\n  s = f32[{0}]{{0}} sine(x)\n"
      "  c = f32[{0}]{{0}} cosine(x)\n  ROOT t = (f32[{0}]{{0}}, f32[{0}]{{0}}) tuple(s, c)\n}}\n",
      n);
  const ir::Function f = ir::import_hlo(hlo::parse(text, "m.hlo"), "m.hlo");
  const ir::Type t{ir::DType::f32, {int64_t(n)}};
  ir::Tensor in;
  in.type = t, in.v = xs;
  const auto out = ir::interpret(f, {in});
  double es = 0, ec = 0;
  for (size_t i = 0; i < n; ++i) {
    es = std::max(es, std::fabs(out[0].v[i] - std::sin(xs[i])));
    ec = std::max(ec, std::fabs(out[1].v[i] - std::cos(xs[i])));
  }
  INFO("max abs error: sin " << es << ", cos " << ec);
  CHECK(es < 3e-7);
  CHECK(ec < 3e-7);
  in.v.assign(n, INFINITY);
  const auto special = ir::interpret(f, {in});
  CHECK(std::isnan(special[0].v[0]));
  CHECK(std::isnan(special[1].v[0]));
}

TEST_CASE("interpreter: every corpus program matches XLA's outputs") {
  for (const auto& name : corpus_programs()) {
    INFO(name);
    const ir::Function f = compiler::load_module(kCorpus + name + "/module.hlo");
    const auto out = ir::interpret(f, test::load_corpus(name).inputs);
    for (size_t i = 0; i < out.size(); ++i) {
      const Tensor ref = ir::from_npy(isa::read_npy(fmt::format("{}{}/out{}.npy", kCorpus, name, i)), out[i].type, "ref");
      CHECK(rel_error(out[i], ref) <= 1e-6);
    }
  }
}

TEST_CASE("passes: each pass keeps every corpus program's meaning") {
  for (const auto& name : corpus_programs()) {
    ir::Function f = compiler::load_module(kCorpus + name + "/module.hlo");
    const auto in = test::load_corpus(name).inputs;
    const auto want = ir::interpret(f, in);
    for (const auto& pass : compiler::ir_pipeline(ir::Precision::highest)) {
      f = pass.run(f);
      const auto got = ir::interpret(f, in);
      INFO(name << " after " << pass.name);
      REQUIRE(got.size() == want.size());
      for (size_t i = 0; i < got.size(); ++i) CHECK(rel_error(got[i], want[i]) <= 1e-5);
    }
  }
}

TEST_CASE("passes: what each pass leaves behind") {
  auto count = [](const ir::Function& f, ir::OpKind k) {
    return std::count_if(f.ops.begin(), f.ops.end(), [&](const ir::Op& o) { return o.kind == k; });
  };
  const ir::Function conv = compiler::load_module(kCorpus + "lenet/module.hlo");
  const ir::Function lowered = compiler::lower_reduce_window(compiler::lower_convolution(compiler::canonicalize(conv)));
  CHECK(count(lowered, ir::OpKind::convolution) == 0);
  CHECK(count(lowered, ir::OpKind::reduce_window) == 0);
  CHECK(count(lowered, ir::OpKind::dot) == 3);  // two im2col convolutions and the dense layer
  // f32 dots become 1, 3 or 6 bf16 passes.
  const ir::Function mm = compiler::canonicalize_dot(compiler::load_module(kCorpus + "matmul_f32/module.hlo"));
  CHECK(count(compiler::split_f32_dots(mm, ir::Precision::default_), ir::OpKind::dot) == 1);
  CHECK(count(compiler::split_f32_dots(mm, ir::Precision::high), ir::OpKind::dot) == 3);
  CHECK(count(compiler::split_f32_dots(mm, ir::Precision::highest), ir::OpKind::dot) == 6);
  for (const auto& op : compiler::split_f32_dots(mm, ir::Precision::highest).ops)
    if (op.kind == ir::OpKind::dot) CHECK(op.type.dtype == DType::f32);
  // An operand converted from s8 or bf16 is one bf16 part, from f16 two:
  // every product of the parts, fewer passes where they are fewer.
  for (auto [from, high, highest] : {std::tuple{DType::s8, 2, 3}, {DType::bf16, 2, 3}, {DType::f16, 3, 6}}) {
    ir::Function f;
    ir::Op pa, pw, ca, d;
    pa.kind = ir::OpKind::parameter, pa.index = 0, pa.type = {from, {4, 8}};
    pw.kind = ir::OpKind::parameter, pw.index = 1, pw.type = {DType::f32, {8, 3}};
    const int a = f.add(pa), w = f.add(pw);
    ca.kind = ir::OpKind::convert, ca.operands = {a}, ca.type = {DType::f32, {4, 8}};
    d.kind = ir::OpKind::dot, d.operands = {f.add(ca), w}, d.lhs_contract = {1}, d.rhs_contract = {0}, d.type = {DType::f32, {4, 3}};
    f.results = {f.add(d)};
    INFO(ir::dtype_name(from) << " x f32");
    CHECK(count(compiler::split_f32_dots(f, ir::Precision::high), ir::OpKind::dot) == high);
    CHECK(count(compiler::split_f32_dots(f, ir::Precision::highest), ir::OpKind::dot) == highest);
  }
  // Canonical reductions are 2-D.
  const ir::Function red = compiler::canonicalize_reduce(compiler::load_module(kCorpus + "reductions/module.hlo"));
  for (const auto& op : red.ops)
    if (op.kind == ir::OpKind::reduce) CHECK(red.ops[op.operands[0]].type.dims.size() == 2);
}

// arg-reduce (XLA's reduce of (values, indices) with an argmax or argmin
// comparator): against a reference written as a set rule, not a running
// comparison: among the values and the init pair, if any is NaN the smallest
// index of a NaN, else the smallest index of the extreme. lower-arg-reduce
// keeps every result.
TEST_CASE("passes: arg-reduce and lower-arg-reduce against the argmax / argmin rule") {
  const uint32_t seed = 20261203;
  INFO("seed " << seed);
  std::mt19937 rng(seed);
  for (DType dt : {DType::f32, DType::s32})
    for (ir::Combiner c : {ir::Combiner::maximum, ir::Combiner::minimum})
      for (int64_t dim : {0, 1}) {
        const int64_t R = 5, C = 7;
        std::vector<double> v(R * C), idx(R * C);
        for (int64_t k = 0; k < R * C; ++k) {
          v[k] = double(int(rng() % 4));  // ties
          if (dt == DType::f32 && rng() % 9 == 0) v[k] = std::nan("");
          idx[k] = double(int(rng() % 50) - 10);
        }
        const double init_v = dt == DType::f32 && c == ir::Combiner::maximum ? -INFINITY : double(int(rng() % 4)), init_i = 3;
        ir::Function f;
        ir::Op p;
        p.kind = ir::OpKind::parameter, p.index = 0, p.type = {dt, {R, C}};
        const int x = f.add(p);
        p.index = 1, p.type = {DType::s32, {R, C}};
        const int ix = f.add(p);
        p.index = 2, p.type = {dt, {}};
        const int iv = f.add(p);
        p.index = 3, p.type = {DType::s32, {}};
        const int ii = f.add(p);
        ir::Op a;
        a.kind = ir::OpKind::arg_reduce, a.operands = {x, ix, iv, ii}, a.dims = {dim}, a.combiner = c;
        a.type = {DType::s32, {dim == 0 ? C : R}};
        f.results = {f.add(a)};
        ir::verify(f);
        CHECK(ir::print(ir::parse(ir::print(f), "a.ir")) == ir::print(f));
        std::vector<Tensor> in(4);
        in[0].type = {dt, {R, C}}, in[0].v = v;
        in[1].type = {DType::s32, {R, C}}, in[1].v = idx;
        in[2].type = {dt, {}}, in[2].v = {init_v};
        in[3].type = {DType::s32, {}}, in[3].v = {init_i};
        const ir::Function g = compiler::lower_arg_reduce(f);
        for (const auto& op : g.ops) CHECK(op.kind != ir::OpKind::arg_reduce);
        const auto got = ir::interpret(f, in), lowered = ir::interpret(g, in);
        for (int64_t o = 0; o < (dim == 0 ? C : R); ++o) {
          std::vector<std::pair<double, double>> cand = {{init_v, init_i}};
          for (int64_t k = 0; k < (dim == 0 ? R : C); ++k) {
            const int64_t e = dim == 0 ? k * C + o : o * C + k;
            cand.push_back({v[e], idx[e]});
          }
          bool nan = false;
          double m = cand[0].first;
          for (auto [val, i] : cand) nan |= std::isnan(val), m = c == ir::Combiner::maximum ? std::max(m, val) : std::min(m, val);
          double want = INFINITY;
          for (auto [val, i] : cand)
            if (nan ? std::isnan(val) : val == m) want = std::min(want, i);
          INFO(ir::dtype_name(dt) << " " << (c == ir::Combiner::maximum ? "argmax" : "argmin") << " over dim " << dim << ", output " << o);
          CHECK(got[0].v[size_t(o)] == want);
          CHECK(lowered[0].v[size_t(o)] == want);
        }
      }
}

TEST_CASE("passes: legalize-math writes the math functions in the VPU's ops to their documented accuracy") {
  // x over each function's useful range, plus the values is-finite tells apart.
  std::vector<double> xs;
  for (int k = 0; k <= 400; ++k) xs.push_back(-20 + 0.1 * k);
  for (double v : {1e-6, -1e-6, 3e-9, -2e-12, 0.5, -0.999, 1e30, -1e30}) xs.push_back(v);
  const double inf = std::numeric_limits<double>::infinity();
  struct Case {
    ir::OpKind kind;
    double (*ref)(double);
    double tol;  // absolute, in units of max(1, |ref|), or of |ref| where relative
    bool relative = false;
  };
  const Case cases[] = {
      {ir::OpKind::erf, [](double x) { return std::erf(x); }, 3e-7},
      {ir::OpKind::sine, [](double x) { return std::sin(x); }, 2e-6},
      {ir::OpKind::cosine, [](double x) { return std::cos(x); }, 2e-6},
      {ir::OpKind::exponential_minus_one, [](double x) { return std::expm1(x); }, 4e-7, true},  // |x| << 1 keeps its digits
      {ir::OpKind::log_plus_one, [](double x) { return std::log1p(x); }, 4e-7, true},
      {ir::OpKind::round_nearest_afz, [](double x) { return std::round(x); }, 0},  // exact, halves included
  };
  for (const Case& c : cases) {
    INFO(ir::op_name(c.kind));
    std::vector<double> in;
    for (double x : xs) {
      const bool finite_domain = c.kind == ir::OpKind::log_plus_one ? x > -1 && x < 1e6 : c.kind == ir::OpKind::exponential_minus_one ? x < 80 : std::fabs(x) <= 20;
      if (finite_domain) in.push_back(double(float(x)));
    }
    ir::Function f;
    ir::Op p;
    p.kind = ir::OpKind::parameter, p.type = {DType::f32, {int64_t(in.size())}};
    const int x = f.add(p);
    ir::Op u;
    u.kind = c.kind, u.operands = {x}, u.type = p.type;
    f.results = {f.add(u)};
    ir::verify(f);
    const ir::Function g = compiler::legalize_math(f);
    ir::verify(g);
    for (const auto& op : g.ops) CHECK(op.kind != c.kind);
    const auto got = ir::interpret(g, {Tensor{p.type, in}});
    for (size_t i = 0; i < in.size(); ++i) {
      const double want = c.ref(in[i]);
      INFO("x = " << in[i] << ": " << got[0].v[i] << " against " << want);
      CHECK(std::fabs(got[0].v[i] - want) <= c.tol * (c.relative ? std::fabs(want) : std::max(1.0, std::fabs(want))));
    }
  }
  // remainder: C's fmod, exactly, while the quotient is below 2^24; the
  // signs of zeros, infinities and NaN as C's.
  {
    ir::Function f;
    ir::Op p;
    std::vector<double> xs2, ys2;
    for (int k = 0; k < 200; ++k) xs2.push_back(double(float(-50 + 0.5 * k + 0.013 * k))), ys2.push_back(double(float(0.03 + 0.07 * (k % 17) - (k % 3 == 0 ? 1.3 : 0))));
    const double edges[][2] = {{0.0, 3}, {-0.0, 3}, {-6, 3}, {6, -3}, {7.5, inf}, {-7.5, -inf}, {inf, 2}, {inf, inf}, {1, 0}, {std::nan(""), 1},
                               {1e-30, 3e-31}, {-1e-38, 3e-39}, {4000000, 0.3}, {0.3, 0.1}, {-1, 0.1}, {100, 0.01}};
    for (const auto& [a, d] : edges) xs2.push_back(double(float(a))), ys2.push_back(double(float(d)));
    p.kind = ir::OpKind::parameter, p.type = {DType::f32, {int64_t(xs2.size())}};
    const int x = f.add(p);
    p.index = 1;
    const int y = f.add(p);
    ir::Op r;
    r.kind = ir::OpKind::remainder, r.operands = {x, y}, r.type = p.type;
    f.results = {f.add(r)};
    const auto got = ir::interpret(compiler::legalize_math(f), {Tensor{p.type, xs2}, Tensor{p.type, ys2}});
    for (size_t i = 0; i < xs2.size(); ++i) {
      INFO("fmod(" << xs2[i] << ", " << ys2[i] << ")");
      const double want = double(std::fmod(float(xs2[i]), float(ys2[i])));
      if (std::isnan(want)) CHECK(std::isnan(got[0].v[i]));
      else CHECK((got[0].v[i] == want && std::signbit(got[0].v[i]) == std::signbit(want)));
    }
  }
  // is-finite: exact, on infinities, NaN and the largest floats.
  ir::Function f;
  ir::Op p;
  const std::vector<double> in = {0, 1, -3.4e38, 3.4e38, inf, -inf, std::nan("")};
  p.kind = ir::OpKind::parameter, p.type = {DType::f32, {int64_t(in.size())}};
  const int x = f.add(p);
  ir::Op u;
  u.kind = ir::OpKind::is_finite, u.operands = {x}, u.type = {DType::pred, p.type.dims};
  f.results = {f.add(u)};
  const auto got = ir::interpret(compiler::legalize_math(f), {Tensor{p.type, in}});
  CHECK(got[0].v == std::vector<double>{1, 1, 1, 1, 0, 0, 0});
}

TEST_CASE("passes: the pass manager verifies after every pass and the back end takes only the form the passes leave") {
  const ir::Function f = compiler::load_module(kCorpus + "lenet/module.hlo");
  // A pass that leaves a result of the wrong type is named.
  compiler::Pass broken{"break-a-type", [](const ir::Function& g) {
                          ir::Function h = g;
                          h.ops.back().type.dims.push_back(3);
                          return h;
                        }};
  try {
    compiler::run_pipeline(f, {compiler::ir_pipeline(std::nullopt).front(), broken});
    FAIL("no error");
  } catch (const std::logic_error& e) {
    CHECK(std::string(e.what()).find("internal error: pass break-a-type left an invalid function") != std::string::npos);
  }
  // Convolutions before lowering, f32 dots before splitting, 3-D reductions
  // before canonicalize-reduce: each is named.
  auto refusal = [](const ir::Function& g) {
    try {
      compiler::check_backend_form(g);
    } catch (const std::logic_error& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  CHECK(refusal(f).find("convolution reaches the back end") != std::string::npos);
  const ir::Function mm = compiler::canonicalize_dot(compiler::load_module(kCorpus + "matmul_f32/module.hlo"));
  CHECK(refusal(mm).find("dot reaches the back end of f32 x f32 -> f32") != std::string::npos);
  CHECK(refusal(compiler::load_module(kCorpus + "reductions/module.hlo")).find("reduce reaches the back end") != std::string::npos);
  // What the pipeline leaves, for every corpus program and precision.
  for (const auto& name : corpus_programs())
    for (auto precision : {std::optional<ir::Precision>{}, std::optional<ir::Precision>{ir::Precision::highest}}) {
      INFO(name);
      CHECK(refusal(compiler::run_pipeline(compiler::load_module(kCorpus + name + "/module.hlo"), compiler::ir_pipeline(precision))) ==
            "accepted");
    }
}

TEST_CASE("compile: the dump hook sees every pass, then the kernel plan") {
  std::vector<std::string> seen;
  compiler::CompileOptions o;
  o.machine = isa::load_config("tiny");
  o.dump = [&](const std::string& pass, const std::string& text) {
    seen.push_back(pass);
    CHECK(!text.empty());
  };
  compiler::compile(compiler::load_module(kCorpus + "softmax/module.hlo"), o);
  std::vector<std::string> want;
  for (const auto& pass : compiler::ir_pipeline(std::nullopt)) want.push_back(pass.name);
  want.push_back("kernel plan");
  CHECK(seen == want);
}

TEST_CASE("plan: fusion puts bias and activation in the matmul epilogue and tiles to the MXU") {
  ir::Function f = compiler::load_module(kCorpus + "mlp_f32/module.hlo");
  compiler::CompileOptions o;
  o.machine = isa::load_config("tiny");
  const auto c = compiler::compile(f, o);
  INFO(c.plan);
  // x@w1 + b1, relu, bf16 rounding for the next dot: one matmul kernel; the
  // second layer's bias in its epilogue too.
  CHECK(c.plan.find("matmul -> %") != std::string::npos);
  CHECK(c.plan.find("ops [add maximum convert]") != std::string::npos);
  CHECK(c.plan.find("ops [add]") != std::string::npos);
  CHECK(c.assembly.find("# matmul B x M x K x N = 1 x 32 x 256 x 512: 1 pass(es) on 1 MXU(s); 64 column tiles of 8, K padded to 256 (32 steps)") != std::string::npos);
  // Every kernel is commented with the HLO it came from.
  CHECK(c.assembly.find("from tests/corpus/mlp_f32/module.hlo") == std::string::npos);
  CHECK(c.assembly.find("module.hlo:6 dot_general.2") != std::string::npos);
}

// A program whose live values outgrow HBM says by how much and names them,
// largest first: here the two parameters and two links of a chain of dots
// (4 x 8 KiB) against 24 KiB of HBM.
TEST_CASE("plan: a program that does not fit in HBM names what is live at its peak") {
  std::string text = "func @main {\n  %0 = parameter() {index=0} : bf16[64,64]\n  %1 = parameter() {index=1} : bf16[64,64]\n";
  for (int v = 2; v < 8; v += 2)
    text += fmt::format("  %{} = dot(%{}, %1) {{lhs_contract=[1], rhs_contract=[0]}} : f32[64,64]\n  %{} = convert(%{}) : bf16[64,64]\n",
                        v, v == 2 ? 0 : v - 1, v + 1, v);
  text += "  return %7\n}\n";
  compiler::CompileOptions o;
  o.machine = isa::load_config("tiny", {"target.hbm_bytes=24576"});
  try {
    compiler::compile(ir::parse(text, "chain.ir"), o);
    FAIL("no error");
  } catch (const Error& e) {
    const std::string what = e.what();
    INFO(what);
    CHECK(what.find("the program needs 32768 bytes of HBM, the target has 24576 (8192 too many); 32768 bytes are live in kernel 1:") == 0);
    CHECK(what.find("%5 bf16[64,64]") != std::string::npos);
    CHECK(what.find("\n") == std::string::npos);
  }
}

// tpuc builds the program as instructions and writes its listing from them:
// the listing assembles back to the same program, on one core and on two.
TEST_CASE("codegen: the listing assembles to the program") {
  for (const char* preset : {"tiny", "v4"}) {
    for (const char* name : {"mlp_f32", "pmap_psum_4"}) {
      INFO(preset << " " << name);
      compiler::CompileOptions o;
      o.machine = isa::load_config(preset);
      const auto c = compiler::compile(compiler::load_module(kCorpus + name + "/module.hlo"), o);
      const auto r = as::assemble(c.assembly, "listing.s");
      INFO((r.errors.empty() ? "" : r.errors.front().render()));
      REQUIRE(r.errors.empty());
      CHECK(*r.program == c.program);
      CHECK(c.assembly.find("    # kernel 0: ") != std::string::npos);
    }
  }
}

// tests/compiler/hlo/held_registers.hlo: kernels whose code needs many
// constants (splats, s8 sign extension, predicate conversion, logical
// shifts of s8). Each kernel loads each constant into a register once and
// holds it: no `vli` repeats a value or a register within a kernel, so the
// per-vector code has none.
TEST_CASE("codegen: a kernel loads each vector constant once and holds it") {
  compiler::CompileOptions o;
  o.machine = isa::load_config("v5e");
  const auto c = compiler::compile(compiler::load_module(std::string(TPU_SOURCE_DIR) + "/tests/compiler/hlo/held_registers.hlo"), o);
  std::set<std::string> values, regs;
  size_t vli = 0;
  std::istringstream in(c.assembly);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(".in_kernel", 0) == 0 || line.find("# kernel ") != std::string::npos) values.clear(), regs.clear();
    std::istringstream w(line);
    std::string op, reg, value;
    if (!(w >> op) || op != "vli") continue;
    w >> reg >> value;
    INFO(line);
    CHECK(values.insert(value).second);
    CHECK(regs.insert(reg).second);
    ++vli;
  }
  CHECK(vli >= 12);  // 8 splats, the logical shift's mask, the s8 shift, the predicate's 1, the shift count
}

}  // namespace

// The IR's gather and scatter in their general form (XLA's semantics), which
// only the interpreter runs: a start index over two dimensions picking 2x2
// windows, clamped so that the window fits; a scatter by multiply whose
// windows that do not fit are dropped. Against direct loops.
TEST_CASE("ir: gather and scatter follow XLA's semantics in general form") {
  const std::string text =
      "func @main {\n"
      "  %0 = parameter() {index=0} : f32[4,5]\n"
      "  %1 = parameter() {index=1} : s32[3,2]\n"
      "  %2 = gather(%0, %1) {offset_dims=[1,2], collapsed_slice_dims=[], start_index_map=[1,0], operand_batching_dims=[], "
      "start_indices_batching_dims=[], index_vector_dim=1, slice_sizes=[2,2]} : f32[3,2,2]\n"
      "  %3 = parameter() {index=2} : f32[3,2,2]\n"
      "  %4 = scatter(%0, %1, %3) {update_window_dims=[1,2], inserted_window_dims=[], scatter_dims_to_operand_dims=[1,0], "
      "input_batching_dims=[], scatter_indices_batching_dims=[], index_vector_dim=1, combiner=multiply} : f32[4,5]\n"
      "  return %2, %4\n}\n";
  const ir::Function f = ir::parse(text, "g.ir");
  CHECK(ir::print(ir::parse(ir::print(f), "p.ir")) == ir::print(f));
  std::vector<double> x(20), u(12);
  for (size_t i = 0; i < x.size(); ++i) x[i] = double(i) + 1;
  for (size_t i = 0; i < u.size(); ++i) u[i] = double(i % 3) + 2;
  const std::vector<double> ids = {1, 2, 9, -3, 4, 0};  // (column, row) pairs; (9, -3) clamps to (3, 0), (4, 0) to (3, 0) in gather
  const auto out = ir::interpret(f, {tensor(DType::f32, {4, 5}, x), tensor(DType::s32, {3, 2}, ids), tensor(DType::f32, {3, 2, 2}, u)});
  std::vector<double> want = x;
  for (size_t b = 0; b < 3; ++b) {
    const int64_t col = int64_t(ids[2 * b]), row = int64_t(ids[2 * b + 1]);
    const int64_t gc = std::clamp<int64_t>(col, 0, 3), gr = std::clamp<int64_t>(row, 0, 2);
    const bool fits = col >= 0 && col <= 3 && row >= 0 && row <= 2;
    for (int64_t i = 0; i < 2; ++i)
      for (int64_t j = 0; j < 2; ++j) {
        CHECK(out[0].v[size_t(b * 4 + i * 2 + j)] == x[size_t((gr + i) * 5 + gc + j)]);
        if (fits) want[size_t((row + i) * 5 + col + j)] *= u[size_t(b * 4 + i * 2 + j)];
      }
  }
  CHECK(out[1].v == want);
  // The lowering takes indexed dimensions of one element; the verifier, well-formed ops only.
  CHECK_THROWS_WITH(compiler::lower_gather_scatter(f), "<ir>: unsupported gather with a start index over several dimensions, not all of them collapsed");
  std::string bad = text;
  bad.replace(bad.find("slice_sizes=[2,2]"), 17, "slice_sizes=[2,6]");
  CHECK_THROWS_WITH(ir::parse(bad, "g.ir"), "g.ir:4: <ir>: gather slice sizes out of range (collapsed and batching dimensions take 1)");
  bad = text;
  bad.replace(bad.find("combiner=multiply"), 17, "combiner=replace");
  CHECK_NOTHROW(ir::parse(bad, "g.ir"));
  bad.replace(bad.find("f32[3,2,2]\n  %4"), 10, "f32[4,2,2]");
  CHECK_THROWS_WITH(ir::parse(bad, "g.ir"), "g.ir:6: <ir>: scatter updates f32[4,2,2] do not match the indices s32[3,2]");
}

// x[i, j] and x.at[i, j].add(u) / .set(u): start indices over several
// dimensions (with a batching dimension, and a window dimension kept),
// random shapes and indices partly out of range; the lowering (one index
// over the product of the indexed dimensions) against the interpreter's
// XLA semantics, exactly.
TEST_CASE("gather and scatter over several indexed dimensions: the lowering against XLA's semantics") {
  const uint32_t seed = 20261204;
  INFO("seed " << seed);
  std::mt19937 rng(seed);
  auto pick = [&](int lo, int hi) { return int64_t(std::uniform_int_distribution<int>(lo, hi)(rng)); };
  for (int trial = 0; trial < 40; ++trial) {
    // operand [b, n0, w, n1] (b batching, n0 and n1 indexed, w kept); indices [b, g, 2]
    const int64_t b = pick(1, 3), n0 = pick(1, 5), w = pick(1, 4), n1 = pick(1, 6), g = pick(1, 5);
    const bool batched = pick(0, 1), swap = pick(0, 1);
    const std::string comb = pick(0, 1) && !batched ? "replace" : "add";  // the lowering replaces without batching dimensions
    const std::string map = swap ? "[3,1]" : "[1,3]", ob = batched ? "[0]" : "[]", ib = batched ? "[0]" : "[]";
    const std::string gout = batched ? fmt::format("f32[{},{},{}]", b, g, w) : fmt::format("f32[{},{},{},{}]", b, g, b, w);
    const std::string text = fmt::format(
        "func @main {{\n"
        "  %0 = parameter() {{index=0}} : f32[{0},{1},{2},{3}]\n"
        "  %1 = parameter() {{index=1}} : s32[{0},{4},2]\n"
        "  %2 = gather(%0, %1) {{offset_dims={5}, collapsed_slice_dims=[1,3], start_index_map={6}, operand_batching_dims={7}, "
        "start_indices_batching_dims={8}, index_vector_dim=2, slice_sizes={9}}} : {10}\n"
        "  %3 = parameter() {{index=2}} : {10}\n"
        "  %4 = scatter(%0, %1, %3) {{update_window_dims={5}, inserted_window_dims=[1,3], scatter_dims_to_operand_dims={6}, "
        "input_batching_dims={7}, scatter_indices_batching_dims={8}, index_vector_dim=2, combiner={11}}} : f32[{0},{1},{2},{3}]\n"
        "  return %2, %4\n}}\n",
        b, n0, w, n1, g, batched ? "[2]" : "[2,3]", map, ob, ib, batched ? "[1,1,{},1]" : "[{},1,{},1]", gout, comb);
    std::string t = text;
    const size_t at = t.find("slice_sizes=[") + 13;
    t.replace(at, t.find(']', at) - at, batched ? fmt::format("1,1,{},1", w) : fmt::format("{},1,{},1", b, w));
    INFO("trial " << trial << "\n" << t);
    const ir::Function f = ir::parse(t, "g.ir");
    std::vector<double> x(size_t(b * n0 * w * n1)), ids(size_t(b * g * 2)), u;
    for (double& v : x) v = double(float(std::normal_distribution<double>(0, 1)(rng)));  // f32 values, not bf16
    for (size_t k = 0; k < ids.size(); ++k) ids[k] = double(pick(-1, int(k % 2 == size_t(swap) ? n0 : n1)));
    const ir::Type ut = f.ops[3].type;
    u.resize(size_t(ut.elements()));
    for (double& v : u) v = double(pick(-8, 8)) / 4;  // sums exact in f32 whatever their order
    const std::vector<Tensor> in = {tensor(DType::f32, {b, n0, w, n1}, x), tensor(DType::s32, {b, g, 2}, ids), tensor(DType::f32, ut.dims, u)};
    const auto want = ir::interpret(f, in);
    const auto got = ir::interpret(compiler::lower_gather_scatter(f), in);
    CHECK(got[0].v == want[0].v);
    CHECK(got[1].v == want[1].v);
  }
}
