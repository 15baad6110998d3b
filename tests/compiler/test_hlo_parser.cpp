// The HLO text parser on every program of tests/corpus (real JAX output) and
// on malformed text.
#include <catch2/catch.hpp>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>

#include "tpu/hlo/hlo.h"
#include "tpu/isa/target.h"

using namespace tpu;
namespace fs = std::filesystem;

TEST_CASE("every corpus module parses into well-formed computations", "[hlo]") {
  int modules = 0;
  for (const auto& dir : fs::directory_iterator(fs::path(TPU_SOURCE_DIR) / "tests" / "corpus")) {
    if (!dir.is_directory()) continue;
    const std::string path = (dir.path() / "module.hlo").string();
    INFO(path);
    const hlo::Module m = hlo::parse(isa::read_text_file(path), path);
    ++modules;
    REQUIRE(m.entry());
    std::set<std::string> computations;
    for (const auto& c : m.computations) computations.insert(c.name);
    for (const auto& c : m.computations) {
      REQUIRE(c.root());
      std::set<std::string> defined;
      for (const auto& in : c.instructions) {
        INFO(c.name << ": " << in.name << " = " << in.opcode);
        for (const auto& op : in.operands) CHECK(defined.count(op));
        for (const char* key : {"to_apply", "calls"})
          if (const std::string* callee = in.attribute(key)) CHECK(computations.count(*callee));
        defined.insert(in.name);
      }
    }
    // The entry's parameters are the manifest's arguments in order, except
    // that jax.jit drops arguments the function never uses (int8_mlp_requant
    // has 5 arguments and 4 parameters): a subsequence, matched by shape.
    const auto manifest = nlohmann::json::parse(isa::read_text_file((dir.path() / "manifest.json").string()));
    std::vector<const hlo::Instruction*> params;
    for (const auto& in : m.entry()->instructions)
      if (in.opcode == "parameter") {
        const size_t index = std::stoul(in.literal);
        if (params.size() <= index) params.resize(index + 1, nullptr);
        params[index] = &in;
      }
    size_t arg = 0;
    for (const auto* p : params) {
      REQUIRE(p);
      while (arg < manifest["args"].size() && manifest["args"][arg]["shape"].get<std::vector<int64_t>>() != p->shape.dims) ++arg;
      CHECK(arg < manifest["args"].size());
      ++arg;
    }
  }
  CHECK(modules >= 12);
}

TEST_CASE("instructions, shapes and attributes of mlp_f32", "[hlo]") {
  const std::string path = std::string(TPU_SOURCE_DIR) + "/tests/corpus/mlp_f32/module.hlo";
  const hlo::Module m = hlo::parse(isa::read_text_file(path), path);
  CHECK(m.name == "jit__lambda");
  const hlo::Computation& e = *m.entry();
  CHECK(e.name == "main.1");
  const hlo::Instruction* dot = e.find("dot_general.2");
  REQUIRE(dot);
  CHECK(dot->opcode == "dot");
  CHECK(dot->shape.dtype == "f32");
  CHECK(dot->shape.dims == std::vector<int64_t>{32, 512});
  CHECK(dot->shape.layout == std::vector<int64_t>{1, 0});
  CHECK(dot->operands == std::vector<std::string>{"x.1", "w1.1"});
  REQUIRE(dot->attribute("lhs_contracting_dims"));
  CHECK(hlo::parse_int_list(*dot->attribute("lhs_contracting_dims"), *dot) == std::vector<int64_t>{1});
  const hlo::Instruction* c = e.find("constant.1");
  REQUIRE(c);
  CHECK(c->literal == "0");
  CHECK(c->shape.dims.empty());
  CHECK(e.root()->name == "add.15");
}

TEST_CASE("tuples, nested attribute values and strings", "[hlo]") {
  const auto m = hlo::parse(
      "HloModule m, entry_computation_layout={(f32[2]{0})->(f32[2]{0}, s32[])}\n"
      "r {\n a = f32[] parameter(0)\n b = f32[] parameter(1)\n ROOT c = f32[] add(a, b)\n}\n"
      "ENTRY e {\n p = f32[2]{0} parameter(0), sharding={devices=[4,1]<=[4]}, frontend_attributes={k=\"a, {b}\"}\n"
      " z = f32[] constant(-inf)\n s = f32[] reduce(p, z), dimensions={0}, to_apply=r\n"
      " i = s32[] constant(3)\n ROOT t = (f32[2]{0}, s32[]) tuple(p, i)\n}\n",
      "t.hlo");
  const auto& e = *m.entry();
  CHECK(e.root()->shape.tuple);
  CHECK(e.root()->shape.elements.size() == 2);
  CHECK(*e.find("p")->attribute("sharding") == "{devices=[4,1]<=[4]}");
  CHECK(*e.find("p")->attribute("frontend_attributes") == "{k=\"a, {b}\"}");
  CHECK(e.find("z")->literal == "-inf");
  CHECK(*e.find("s")->attribute("to_apply") == "r");
  CHECK(m.attributes.at(0).first == "entry_computation_layout");
}

TEST_CASE("the older text style: % names and computation signatures", "[hlo]") {
  const auto m = hlo::parse(
      "HloModule m\n\n%r.1 (a: f32[], b: f32[]) -> f32[] {\n  %a = f32[] parameter(0)\n  %b = f32[] parameter(1)\n"
      "  ROOT %c = f32[] add(f32[] %a, f32[] %b)\n}\n\n"
      "ENTRY %e (p: f32[2]) -> f32[] {\n  %p = f32[2]{0} parameter(0)\n  %z = f32[] constant(0)\n"
      "  ROOT %s = f32[] reduce(f32[2]{0} %p, f32[] %z), dimensions={0}, to_apply=%r.1\n}\n",
      "old.hlo");
  REQUIRE(m.computations.size() == 2);
  const hlo::Computation* r = m.find(*m.entry()->find("s")->attribute("to_apply"));
  REQUIRE(r != nullptr);
  CHECK(r->root()->opcode == "add");
  CHECK(m.entry()->root()->operands.size() == 2);
}

TEST_CASE("malformed HLO is one line with file and line", "[hlo]") {
  auto err = [](const std::string& text) {
    try {
      hlo::parse(text, "bad.hlo");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  CHECK(err("HloModule m\nENTRY e {\n a = f32[2 parameter(0)\n}\n") == "bad.hlo:3: expected ']', found 'parameter(0)'");
  CHECK(err("HloModule m\nENTRY e {\n a = f32[2]{0} parameter(0), x={1\n}\n") == "bad.hlo:3: missing '}'");
  CHECK(err("HloModule m\nr {\n a = f32[] parameter(0)\n}\n") == "bad.hlo: no ENTRY computation");
  CHECK(err("HloModule m\nENTRY e {\n a = f32[?] parameter(0)\n}\n") == "bad.hlo:3: dynamic dimensions are not supported (TPUs want static shapes)");
  CHECK(err("HloModule m\nENTRY e {\n a = f32[] parameter(0) junk\n}\n") == "bad.hlo:3: unexpected 'junk' after the instruction");
  CHECK(err("HloModule m\nENTRY e {\n}\n") == "bad.hlo:3: computation 'e' is empty");
}
