// The assembler's language: expressions, labels, directives, and the
// errors a user sees.
#include <catch2/catch.hpp>

#include "tpu/asm/assembler.h"
#include "tpu/isa/isa.h"

using namespace tpu;

namespace {

isa::Program ok(const std::string& src) {
  auto r = as::assemble(src, "t.s");
  std::string errs;
  for (const auto& d : r.errors) errs += d.render();
  INFO(errs);
  REQUIRE(r.program);
  return *r.program;
}

std::vector<as::Diagnostic> errors(const std::string& src, const as::AssembleOptions& o = {}) {
  auto r = as::assemble(src, "t.s", o);
  CHECK_FALSE(r.program);
  return r.errors;
}

isa::Instruction insn(const isa::Program& p, size_t i) {
  auto d = isa::decode(p.code.at(i));
  REQUIRE(d);
  return *d;
}

}  // namespace

TEST_CASE("expressions follow C precedence in 64-bit arithmetic", "[asm]") {
  auto p = ok(".target tiny\n.equ A, 1 + 2 * 3\n.equ B, (1 << 4) | 3 & 1\n"
              "li s1, A\nli s2, B\nli s3, -A\nli s4, ~0\nli s5, 17 % 5 - 10 / 3\nli s6, 0x10 + 0b101 + 0o7\n");
  CHECK(insn(p, 0)[1] == 7);
  CHECK(insn(p, 1)[1] == 17);
  CHECK(insn(p, 2)[1] == -7);
  CHECK(insn(p, 3)[1] == -1);
  CHECK(insn(p, 4)[1] == -1);
  CHECK(insn(p, 5)[1] == 16 + 5 + 7);
}

TEST_CASE("labels, forward references and the location counter", "[asm]") {
  auto p = ok(".target tiny\nstart: nop\n  beq s1, s2, end\n  jmp start\n  jmp . + 1\nend: halt\n");
  CHECK(insn(p, 1)[2] == 3);   // end (4) - pc (1)
  CHECK(insn(p, 2)[0] == -2);  // start (0) - pc (2)
  CHECK(insn(p, 3)[0] == 1);
}

TEST_CASE("data segments, data labels and tensor symbols", "[asm]") {
  auto p = ok(".target tiny\n.input x, f32[2, 3], 0x40\n.const w, s8[4], wdata\n.output y, pred[], 0x80\n"
              "halt\n.data 0x100\nwdata: .byte 1, -1, 0x7f, 255\n.half 0x1234\n.zero 2\n.word -2\n.dword 1 << 40\n");
  REQUIRE(p.data.size() == 1);
  CHECK(p.data[0].hbm_addr == 0x100);
  CHECK(p.data[0].bytes == std::vector<uint8_t>{1, 0xff, 0x7f, 0xff, 0x34, 0x12, 0, 0, 0xfe, 0xff, 0xff, 0xff,
                                                0, 0, 0, 0, 0, 1, 0, 0});
  REQUIRE(p.symbols.size() == 3);
  CHECK(p.symbols[0].name == "x");
  CHECK(p.symbols[0].dims == std::vector<uint64_t>{2, 3});
  CHECK(p.symbols[1].hbm_addr == 0x100);
  CHECK(p.symbols[2].dims.empty());
  CHECK(p.inputs().size() == 1);
}

TEST_CASE("the target comes from .target, --config or the default preset", "[asm]") {
  CHECK(ok("nop\n").target.name == as::kDefaultPreset);
  CHECK(ok(".target v1\n").target.mxu_dim == 256);
  as::AssembleOptions o;
  o.target = isa::load_target("tiny");
  CHECK(as::assemble("nop\n", "t.s", o).program->target.name == "tiny");
  auto e = errors(".target v5e\nnop\n", o);
  REQUIRE(e.size() == 1);
  CHECK(e[0].message == "the file's .target 'v5e' differs from --config 'tiny'");
  auto custom = ok(".target \"mine\", chips=1, cores=1, mxus_per_core=2, mxu_dim=16, vpu_lanes=16, "
                   "vmem_bytes=65536, acc_rows=64, smem_bytes=64, hbm_bytes=1048576\n");
  CHECK(custom.target.mxu_dim == 16);
  CHECK(ok(".target tiny, mxu_dim=4\n").target.mxu_dim == 4);
  CHECK(errors(".target \"mine\", chips=1\n")[0].message.find("'cores' is missing") != std::string::npos);
}

TEST_CASE("errors carry file, line, column, the source line and a caret", "[asm]") {
  auto e = errors("nop\n  ad s1, s2, s3\n");
  REQUIRE(e.size() == 1);
  CHECK(e[0].line == 2);
  CHECK(e[0].col == 3);
  CHECK(e[0].message == "unknown instruction 'ad'; did you mean 'add'?");
  CHECK(e[0].render() == "t.s:2:3: error: unknown instruction 'ad'; did you mean 'add'?\n  ad s1, s2, s3\n  ^\n");
}

// A diagnostic on a very long line quotes 120 characters around the
// column, with "..." where the line is cut, the caret still under it.
TEST_CASE("a long line is quoted around the error", "[asm]") {
  const std::string line = "li s1, " + std::string(60000, '(') + "1" + std::string(59999, ')');
  auto e = errors(line + "\n");
  REQUIRE(!e.empty());
  const std::string r = e[0].render();
  INFO(r.substr(0, 400));
  CHECK(r.size() < 400);
  const size_t l2 = r.find('\n') + 1, l3 = r.find('\n', l2) + 1;
  const std::string quoted = r.substr(l2, l3 - l2 - 1), caret = r.substr(l3, r.size() - l3 - 1);
  REQUIRE(caret.back() == '^');
  REQUIRE(caret.size() <= quoted.size());
  CHECK(quoted[caret.size() - 1] == line[size_t(e[0].col - 1)]);
  // A short line is quoted whole.
  CHECK(errors("frob\n")[0].render() == "t.s:1:1: error: unknown instruction 'frob'\nfrob\n^\n");
}

TEST_CASE("several errors are reported in one run", "[asm]") {
  auto e = errors("add s1, s2\nli s40, 1\nli s1, undefined_thing\nx: nop\nx: nop\nvadd.f32 v1, v2, s3\n"
                  "li s1, 1 2\naddi s1, s2, 1 << 40\nwait gpu, sem1, 1\n.byte 1\n.bogus\nli s1, 1 / 0\n");
  REQUIRE(e.size() == 11);
  CHECK(e[0].message == "expected ',' before operand 3 (rs2), found end of line");
  CHECK(e[1].message == "expected a scalar register (s0..s31) for rd, found 's40'");
  CHECK(e[2].message == "undefined symbol 'undefined_thing'");
  CHECK(e[3].message == "symbol 'x' is already defined on line 4");
  CHECK(e[4].message == "expected a vector register (v0..v31) for vb, found 's3'");
  CHECK(e[5].message == "unexpected '2' after the operands");
  CHECK(e[6].message.find("does not fit in 32 signed bits") != std::string::npos);
  CHECK(e[7].message.find("expected a unit (sc, dma, vpu, mxu0") == 0);
  CHECK(e[8].message == ".byte outside a .data section");
  CHECK(e[9].message == "unknown directive '.bogus'");
  CHECK(e[10].message == "division by zero");
  for (size_t i = 0; i < e.size(); ++i) CHECK(e[i].line == int(i < 3 ? i + 1 : i + 2));
}

TEST_CASE("lexical errors", "[asm]") {
  CHECK(errors("li s1, 0x\n")[0].message == "number has no digits");
  CHECK(errors("li s1, 99999999999999999999\n")[0].message == "number does not fit in 64 bits");
  CHECK(errors("li s1, 12z\n")[0].message == "invalid digit 'z' in a base-10 number");
  CHECK(errors(".target \"abc\n")[0].message == "unterminated string");
  CHECK(errors("li s1, $\n")[0].message == "unexpected character '$'");
  CHECK(errors(std::string("li s1, \x01\n"))[0].message == "unexpected byte 0x01");
}

TEST_CASE("program-level checks point at the input", "[asm]") {
  auto e = errors(".target tiny\n.input x, f32[1 << 30], 0\n");
  REQUIRE(e.size() == 1);
  CHECK(e[0].message.find("does not fit in HBM") != std::string::npos);
  CHECK(errors(".target tiny\n.data 0\n.byte 1\n.data 0\n.byte 2\n")[0].message.find("overlap") != std::string::npos);
}

TEST_CASE("the .check directive names two outputs and tpu-objdump writes it back", "[asm]") {
  const std::string head = ".output y, f32[4], 0x0\n.output r, f32[4], 0x100\n.input x, f32[4], 0x200\n";
  const isa::Program p = ok(head + ".check expect_close, y, r, max_ulp=5\n.check expect_almost_eq, r, y, tolerance=\"2.5e-4\"\n"
                                   ".check expect_eq, y, y\nhalt\n");
  REQUIRE(p.checks.size() == 3);
  CHECK((p.checks[0].kind == isa::CheckKind::expect_close && p.checks[0].max_ulp == 5 && p.checks[0].min_ulp == 0));
  CHECK((p.checks[1].actual == 1 && p.checks[1].expected == 0 && p.checks[1].tolerance == 2.5e-4));
  CHECK(ok(as::disassemble(p)) == p);
  CHECK(ok(head + ".check expect_close, y, r\nhalt\n").checks[0].max_ulp == 3);  // StableHLO's custom-call default
  const std::pair<const char*, const char*> bad[] = {
      {".check expect_near, y, r", "unknown check kind 'expect_near'"},
      {".check expect_eq, y, x", "'x' is not an output declared before this .check"},
      {".check expect_eq, y, r, max_ulp=2", "expect_eq takes no parameter 'max_ulp'"},
      {".check expect_close, y, r, min_ulp=4, max_ulp=3", "min_ulp 4 is above max_ulp 3"},
      {".check expect_almost_eq, y, r, tolerance=\"-1\"", "is not a finite number >= 0"},
  };
  for (const auto& [line, why] : bad) {
    INFO(line);
    const auto e = errors(head + line + "\nhalt\n");
    REQUIRE(e.size() == 1);
    CHECK_THAT(e[0].render(), Catch::Contains(why));
  }
}

TEST_CASE("tiles split a tensor over the chips, and tpu-objdump writes them back", "[asm]") {
  const std::string t = ".target \"t\", chips=4, cores=1, mxus_per_core=1, mxu_dim=8, vpu_lanes=8, vmem_bytes=65536, acc_rows=64, "
                        "smem_bytes=1024, hbm_bytes=4096\n";
  const auto p = ok(t + ".input x, f32[8, 8], 0, tiles [2, 2]\n.output y, f32[8], 256, tiles [4]\nhalt\n");
  CHECK(p.symbols[0].tiles == std::vector<uint64_t>{2, 2});
  CHECK(ok(as::disassemble(p)) == p);
  // A tile of 1 KiB fits a 4 KiB HBM where the whole 16 KiB would not.
  CHECK(ok(t + ".input x, f32[64, 64], 0, tiles [4, 1]\nhalt\n").symbols[0].local_bytes() == 4096);
  CHECK(errors(t + ".input x, f32[8, 8], 0, tiles [3, 1]\nhalt\n")[0].message == "3 tiles do not divide dimension 0 of 8");
  CHECK(errors(t + ".input x, f32[8, 8], 0, tiles [2, 1]\nhalt\n")[0].message == "2 tiles, but the target has 4 chip(s) (target.chips)");
  CHECK(errors(t + ".input x, f32[8, 8], 0, tiles [4]\nhalt\n")[0].message == "1 tiles for 2 dimensions");
  CHECK(errors(t + ".input x, f32[8, 8], 0, tile [4, 1]\nhalt\n")[0].message == "expected 'tiles [...]' after the address, not 'tile'");
  CHECK(errors(t + ".input x, f32[8], 0, tiles [4, 1]\nhalt\n")[0].message == "more tiles than the 1 dimensions");
}

TEST_CASE(".kernel and .in_kernel give each instruction its kernel", "[asm]") {
  const isa::Program p = ok(".kernel 0, \"copy\", \"m.hlo:3 x (a.py:1)\", 16\n.kernel 1, \"matmul\"\n.text\n"
                            "  nop\n.in_kernel 1\n  nop\n  nop\n.in_kernel 0\n  nop\n.in_kernel -1\n  halt\n");
  REQUIRE(p.kernels.size() == 2);
  CHECK(p.kernels[0].ops == std::vector<isa::KernelOp>{{"m.hlo:3 x (a.py:1)", 16}});
  CHECK(p.kernel_of == std::vector<uint32_t>{isa::kNoKernel, 1, 1, 0, isa::kNoKernel});
  CHECK(ok(as::disassemble(p)) == p);
  const std::pair<const char*, const char*> bad[] = {
      {".kernel 1, \"x\"\nhalt\n", "kernel 1 is defined where kernel 0 comes next"},
      {".in_kernel 0\nhalt\n", ".in_kernel without any .kernel"},
      {".kernel 0, \"x\"\n.in_kernel 3\nhalt\n", ".in_kernel 3: there are 1 kernels"},
      {".kernel 0, \"x\", \"op\"\nhalt\n", "',' and the op's work"},
  };
  for (const auto& [src, why] : bad) {
    INFO(src);
    const auto e = errors(src);
    REQUIRE(e.size() >= 1);
    CHECK_THAT(e[0].render(), Catch::Contains(why));
  }
}

TEST_CASE(".inst carries words that are not instructions", "[asm]") {
  auto p = ok(".inst 0xff00000000000000\n");
  CHECK(p.code[0] == 0xff00000000000000ull);
  CHECK(errors(".inst 0x0200000000000000\n")[0].message.find("decodes as an instruction") != std::string::npos);
}

TEST_CASE("disassembly reassembles to the identical program", "[asm]") {
  auto p = ok(".target tiny\n.input x, f32[8], 0\n.output y, s32[2, 2], 64\n"
              "top: li s1, 5\nloop s1, top\nbne s1, s0, . + 100\nvli v1, 0x3f800000\n.inst 0xff00000000000001\nhalt\n"
              ".data 0x200\n.byte 1, 2, 3\n.data 0x300\n.zero 40\n");
  const std::string text = as::disassemble(p);
  auto q = ok(text);
  CHECK(q == p);
  CHECK(isa::save(q) == isa::save(p));
}
