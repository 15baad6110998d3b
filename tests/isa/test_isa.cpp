// The ISA table: encodings never overlap, fields are well formed, and every
// word that decodes re-encodes to itself.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <random>
#include <set>

#include "tpu/isa/isa.h"

using namespace tpu::isa;

namespace {

int expected_width(OperandKind k) {
  switch (k) {
    case OperandKind::Sreg:
    case OperandKind::Vreg: return 5;  // 32 registers
    case OperandKind::Sem: return 6;   // 64 semaphores
    case OperandKind::Mxu: return 3;
    case OperandKind::Simm32:
    case OperandKind::Bits32:
    case OperandKind::Pcrel32: return 32;
    case OperandKind::Uimm16: return 16;
    default: return 0;  // enums: checked against their values
  }
}

// A random valid value for an operand kind.
int64_t random_operand(OperandKind k, std::mt19937_64& rng) {
  if (int n = register_count(k)) return int64_t(rng() % uint64_t(n));
  switch (k) {
    case OperandKind::Unit:
    case OperandKind::MxuDtype:
    case OperandKind::Csr: {
      std::vector<uint32_t> vals;
      for (const auto& e : enum_values())
        if (e.kind == k) vals.push_back(e.value);
      return vals[rng() % vals.size()];
    }
    case OperandKind::Simm32:
    case OperandKind::Pcrel32: return static_cast<int32_t>(static_cast<uint32_t>(rng()));
    case OperandKind::Uimm16: return int64_t(rng() & 0xffff);
    case OperandKind::Bits32: return int64_t(rng() & 0xffffffffu);
    default: return 0;
  }
}

}  // namespace

TEST_CASE("no two instructions share an encoding", "[isa]") {
  const auto& insns = instructions();
  for (size_t i = 0; i < insns.size(); ++i)
    for (size_t j = i + 1; j < insns.size(); ++j) {
      const uint64_t common = defined_mask(insns[i]) & defined_mask(insns[j]) & (0xffull << kOpcodeLo);
      INFO(insns[i].mnemonic << " vs " << insns[j].mnemonic);
      // Some fixed bit that both instructions define must differ.
      CHECK((common & (match_bits(insns[i]) ^ match_bits(insns[j]))) != 0);
    }
}

TEST_CASE("mnemonics and ids are unique, opcode 0 is unassigned", "[isa]") {
  std::set<std::string> mnemonics, ids;
  for (const auto& s : instructions()) {
    CHECK(mnemonics.insert(s.mnemonic).second);
    CHECK(ids.insert(s.id).second);
    CHECK(s.opcode != 0);
    CHECK(find_mnemonic(s.mnemonic) == &s);
    CHECK(find_opcode(s.opcode) == &s);
  }
  CHECK(find_opcode(0) == nullptr);
}

TEST_CASE("format fields are disjoint, below the opcode and as wide as their kind", "[isa]") {
  for (const auto& f : formats()) {
    INFO("format " << f.name);
    uint64_t used = 0xffull << kOpcodeLo;
    CHECK(f.operands.size() <= size_t(kMaxOperands));
    for (const auto& o : f.operands) {
      INFO("operand " << o.role);
      REQUIRE(o.hi >= o.lo);
      REQUIRE(o.hi < kOpcodeLo);
      CHECK((used & o.mask()) == 0);
      used |= o.mask();
      if (int w = expected_width(o.kind)) CHECK(o.width() == w);
      for (const auto& e : enum_values())
        if (e.kind == o.kind) CHECK(e.value < (1u << o.width()));
    }
  }
}

TEST_CASE("every instruction encodes, decodes and disassembles with random operands", "[isa]") {
  const uint64_t seed = 0x15a5eed;
  std::mt19937_64 rng(seed);
  INFO("seed " << seed);
  for (const auto& s : instructions()) {
    const auto& ops = format_spec(s.format).operands;
    for (int trial = 0; trial < 200; ++trial) {
      Instruction insn;
      insn.op = s.op;
      for (size_t i = 0; i < ops.size(); ++i) insn[i] = random_operand(ops[i].kind, rng);
      const uint64_t word = encode(insn);
      CHECK((word >> kOpcodeLo) == s.opcode);
      auto back = decode(word);
      REQUIRE(back);
      CHECK(*back == insn);
      CHECK(disassemble(insn, 100).rfind(s.mnemonic, 0) == 0);
    }
  }
}

TEST_CASE("decode rejects reserved bits, unknown opcodes and undefined enum values", "[isa]") {
  for (const auto& s : instructions()) {
    const uint64_t reserved = ~defined_mask(s);
    for (int b = 0; b < 64; ++b)
      if (reserved >> b & 1) CHECK_FALSE(decode(match_bits(s) | (1ull << b)));
  }
  for (int op = 0; op < 256; ++op)
    if (!find_opcode(uint8_t(op))) CHECK_FALSE(decode(uint64_t(op) << kOpcodeLo));
  // Unit 3 is not defined: `wait` with it must not decode.
  const auto& sync = format_spec(spec(Opcode::WAIT).format).operands[0];
  CHECK_FALSE(decode(match_bits(spec(Opcode::WAIT)) | (3ull << sync.lo)));
}

TEST_CASE("random words: whatever decodes re-encodes to itself", "[isa]") {
  const uint64_t seed = 20261129;
  std::mt19937_64 rng(seed);
  INFO("seed " << seed);
  int decoded = 0;
  for (int i = 0; i < 200000; ++i) {
    // Random opcode from the table half the time so that decoding succeeds often.
    uint64_t w = rng();
    if (i % 2) {
      const auto& s = instructions()[rng() % instructions().size()];
      w = match_bits(s) | (w & defined_mask(s) & ~(0xffull << kOpcodeLo));
    }
    if (auto insn = decode(w)) {
      ++decoded;
      REQUIRE(encode(*insn) == w);
    }
  }
  CHECK(decoded > 50000);
}

TEST_CASE("check_operand rejects out-of-range values", "[isa]") {
  CHECK(check_operand(OperandKind::Sreg, 32));
  CHECK(check_operand(OperandKind::Sreg, -1));
  CHECK_FALSE(check_operand(OperandKind::Sreg, 31));
  CHECK(check_operand(OperandKind::Simm32, int64_t(INT32_MAX) + 1));
  CHECK_FALSE(check_operand(OperandKind::Simm32, INT32_MIN));
  CHECK(check_operand(OperandKind::Uimm16, 65536));
  CHECK(check_operand(OperandKind::Bits32, -1));
  CHECK(check_operand(OperandKind::Unit, 3));
  CHECK_FALSE(check_operand(OperandKind::Unit, 8));
  Instruction bad;
  bad.op = Opcode::ADD;
  bad[0] = 40;
  CHECK_THROWS_AS(encode(bad), std::invalid_argument);
}

// The builders place operands by the format's order (docs/isa.md gives the
// assembly syntax the expected text is written in) and check each.
TEST_CASE("builders place and check operands", "[isa]") {
  const Instruction add = build::VADD_F32(1, 2, 3);
  CHECK(add.op == Opcode::VADD_F32);
  CHECK(add[operand::V3::vd] == 1);
  CHECK(add[operand::V3::vb] == 3);
  CHECK(disassemble(add, 0) == "vadd.f32 v1, v2, v3");
  CHECK(disassemble(build::DMA_LD2D(1, 2, 3, 4, 5, 6, 7), 0) == "dma.ld2d s1, s2, s3, s4, s5, s6, sem7");
  CHECK(disassemble(build::WAIT(values::Unit_mxu0 + 2, 9, 4), 0) == "wait mxu2, sem9, 4");
  CHECK(disassemble(build::LOOP(5, -3), 10) == "loop s5, . - 3");
  const Instruction li = build::LI(7, -1);
  CHECK(decode(encode(li)) == li);
  CHECK_THROWS_AS(build::VADD_F32(32, 0, 0), std::logic_error);
  CHECK_THROWS_AS(build::LI(1, int64_t(1) << 31), std::logic_error);
  CHECK_THROWS_AS(build::SIGNAL(values::Unit_vpu, kNumSems, 1), std::logic_error);
  CHECK_THROWS_AS(make(Opcode::VADD_F32, {1, 2}), std::logic_error);
  static_assert(operand_count::DMA2 == 7 && operand_count::N == 0);
}

// Register effects, as each instruction's description in docs/isa.md reads.
TEST_CASE("register effects: what each instruction reads and writes", "[isa]") {
  const RegisterUse add = register_use(build::ADD(3, 1, 2));
  CHECK(add.swrite == 1u << 3);
  CHECK(add.sread == ((1u << 1) | (1u << 2)));
  CHECK(register_use(build::LIH(4, 1)).sread == 1u << 4);  // keeps the low half
  CHECK(register_use(build::LI(4, 1)).sread == 0);
  CHECK(register_use(build::LOOP(5, -2)).sread == 1u << 5);
  CHECK(register_use(build::LOOP(5, -2)).swrite == 1u << 5);
  const RegisterUse ld = register_use(build::VLD_F32(7, 2, 64));
  CHECK(ld.vwrite == 1u << 7);
  CHECK(ld.sread == 1u << 2);
  CHECK(ld.vread == 0);
  CHECK(register_use(build::VST_F32(7, 2, 64)).vread == 1u << 7);
  CHECK(register_use(build::VST_F32(7, 2, 64)).vwrite == 0);
  CHECK(register_use(build::DMA_LD(1, 2, 3, 0)).sread == 0b1110u);  // addresses are read
  CHECK(register_use(build::DMA_LD(1, 2, 3, 0)).swrite == 0);
  CHECK(independent(register_use(build::VLD_F32(1, 0, 0)), register_use(build::VADD_F32(2, 3, 4))));
  CHECK_FALSE(independent(register_use(build::VLD_F32(1, 0, 0)), register_use(build::VADD_F32(2, 1, 4))));  // read after write
  CHECK_FALSE(independent(register_use(build::VLD_F32(1, 0, 0)), register_use(build::VADD_F32(1, 3, 4))));  // write after write
  CHECK_FALSE(independent(register_use(build::VLD_F32(2, 0, 0)), register_use(build::VADD_F32(1, 2, 4))));  // write after read
}

TEST_CASE("disassembly of branch targets", "[isa]") {
  Instruction j;
  j.op = Opcode::JMP;
  j[0] = -3;
  CHECK(disassemble(j, 10) == "jmp . - 3");
  j[0] = 0;
  CHECK(disassemble(j, 10) == "jmp .");
  CHECK(disassemble(j, 10, [](int64_t t) { return fmt::format("L{}", t); }) == "jmp L10");
}
