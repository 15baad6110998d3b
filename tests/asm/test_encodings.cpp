// Encoding tests in the style of LLVM's MC tests: each .s file under
// tests/asm/ carries the expected word beside every instruction
// (`# ENC: 0x...`), and every instruction of the table round-trips through
// text.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <filesystem>
#include <random>
#include <regex>

#include "tpu/asm/assembler.h"
#include "tpu/isa/isa.h"

using namespace tpu;

namespace {

std::string render(const std::vector<as::Diagnostic>& errs) {
  std::string s;
  for (const auto& d : errs) s += d.render();
  return s;
}

}  // namespace

TEST_CASE("encodings in tests/asm/*.s match their ENC comments", "[asm]") {
  const std::filesystem::path dir = std::filesystem::path(TPU_SOURCE_DIR) / "tests" / "asm";
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".s") continue;
    ++files;
    const std::string path = entry.path().string();
    INFO(path);
    const std::string text = isa::read_text_file(path);
    auto result = as::assemble(text, path);
    INFO(render(result.errors));
    REQUIRE(result.program);
    const std::regex enc(R"(#\s*ENC:\s*(0x[0-9a-fA-F]{16}))");
    size_t index = 0;
    int line_no = 0;
    std::istringstream lines(text);
    for (std::string line; std::getline(lines, line);) {
      ++line_no;
      std::smatch m;
      if (!std::regex_search(line, m, enc)) continue;
      INFO("line " << line_no << ": " << line);
      REQUIRE(index < result.program->code.size());
      CHECK(fmt::format("{:#018x}", result.program->code[index]) == m[1].str());
      ++index;
    }
    CHECK(index == result.program->code.size());
  }
  CHECK(files >= 2);
}

TEST_CASE("every instruction of the table assembles from its disassembly", "[asm]") {
  const uint64_t seed = 4242;
  std::mt19937_64 rng(seed);
  INFO("seed " << seed);
  for (const auto& s : isa::instructions()) {
    const auto& ops = isa::format_spec(s.format).operands;
    for (int trial = 0; trial < 20; ++trial) {
      isa::Instruction insn;
      insn.op = s.op;
      for (size_t i = 0; i < ops.size(); ++i) {
        const auto k = ops[i].kind;
        if (int n = isa::register_count(k)) {
          insn[i] = int64_t(rng() % uint64_t(n));
        } else if (k == isa::OperandKind::Unit || k == isa::OperandKind::MxuDtype || k == isa::OperandKind::Csr) {
          std::vector<uint32_t> vals;
          for (const auto& e : isa::enum_values())
            if (e.kind == k) vals.push_back(e.value);
          insn[i] = vals[rng() % vals.size()];
        } else if (k == isa::OperandKind::Uimm16) {
          insn[i] = int64_t(rng() & 0xffff);
        } else if (k == isa::OperandKind::Bits32) {
          insn[i] = int64_t(rng() & 0xffffffffu);
        } else if (k == isa::OperandKind::Pcrel32) {
          insn[i] = int64_t(rng() % 7) - 3;  // near this instruction
        } else {
          insn[i] = static_cast<int32_t>(static_cast<uint32_t>(rng()));
        }
      }
      const uint64_t word = isa::encode(insn);
      // Place the instruction at pc 3 so that `. - 3` stays a valid target.
      const std::string text = fmt::format(".target tiny\nnop\nnop\nnop\n{}\n", isa::disassemble(insn, 3));
      INFO(text);
      auto r = as::assemble(text, "roundtrip.s");
      INFO(render(r.errors));
      REQUIRE(r.program);
      REQUIRE(r.program->code.size() == 4);
      CHECK(r.program->code[3] == word);
    }
  }
}
