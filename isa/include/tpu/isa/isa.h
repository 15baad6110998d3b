// The instruction set: tables, encoder, decoder and disassembler, all
// generated from isa.def. This library knows nothing of the assembler, the
// compiler or the simulator.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tpu::isa {

inline constexpr int kInsnBits = 64;
inline constexpr int kInsnBytes = 8;
inline constexpr int kOpcodeHi = 63;
inline constexpr int kOpcodeLo = 56;
inline constexpr int kMaxOperands = 7;
inline constexpr int kNumSregs = 32;
inline constexpr int kNumVregs = 32;
inline constexpr int kNumSems = 64;
inline constexpr int kMaxMxus = 8;

enum class OperandKind : uint8_t { Sreg, Vreg, Sem, Mxu, Unit, MxuDtype, Csr, Simm32, Uimm16, Bits32, Pcrel32 };

// The unit that executes an instruction once the scalar unit has issued it.
enum class ExecUnit : uint8_t { Scalar, Sync, Dma, Mxu, Vpu };

// A VPU instruction's class: its result latency (`vpu.latency.*` of the
// machine config) and its issue slot (docs/timing.md). `None` for the other
// units' instructions.
enum class VpuClass : uint8_t { None, Alu, Mul, Div, Transcendental, Load, Store, Reduce, Transpose };

enum class Format : uint8_t {
#define ISA_FORMAT(name, ...) name,
#include "tpu/isa/isa.def"
};

// The enumerated operand values of isa.def by name: values::Unit_mxu0,
// values::MxuDtype_s8, values::Csr_core.
namespace values {
#define ISA_ENUM(kind, name, value, doc) inline constexpr int kind##_##name = value;
#include "tpu/isa/isa.def"
}  // namespace values

// The units a `wait` or `signal` names: MXU m is kUnitMxu0 + m. The
// simulator numbers its units' tracks the same way, kUnitSlots per core.
inline constexpr int kUnitScalar = values::Unit_sc, kUnitDma = values::Unit_dma, kUnitVpu = values::Unit_vpu,
                     kUnitMxu0 = values::Unit_mxu0, kUnitSlots = kUnitMxu0 + kMaxMxus;

// Each format's operands by role: operand::DMA2::rrows is the position of
// DMA2's `rrows` in Instruction::operands (and in the simulator's issued
// values). Code reads operands by these names, never by position.
namespace operand {
#define OPND(kind, role, hi, lo) role
#define ISA_FORMAT(name, ...) \
  struct name {               \
    enum Role : int { __VA_ARGS__ }; \
  };
#include "tpu/isa/isa.def"
#undef OPND
}  // namespace operand

// Each format's operand count: operand_count::DMA2.
namespace operand_count {
#define OPND(kind, role, hi, lo) 0
#define ISA_FORMAT(name, ...) inline constexpr int name = int(std::initializer_list<int>{__VA_ARGS__}.size());
#include "tpu/isa/isa.def"
#undef OPND
}  // namespace operand_count

// Opcode values are the encodings themselves.
enum class Opcode : uint8_t {
#define ISA_INSN(id, mnemonic, opcode, format, unit, cls, doc) id = opcode,
#include "tpu/isa/isa.def"
};

struct OperandSpec {
  OperandKind kind;
  const char* role;  // name used in docs: rd, rs1, vd, target, ...
  uint8_t hi;
  uint8_t lo;
  int width() const { return hi - lo + 1; }
  uint64_t mask() const { return (width() == 64 ? ~0ull : ((1ull << width()) - 1)) << lo; }
};

struct FormatSpec {
  Format format;
  const char* name;
  std::vector<OperandSpec> operands;
};

struct InsnSpec {
  Opcode op;
  const char* id;        // enumerator name, e.g. VADD_F32
  const char* mnemonic;  // assembly name, e.g. vadd.f32
  uint8_t opcode;
  Format format;
  ExecUnit unit;
  VpuClass vpu_class;
  const char* doc;
};

struct EnumValue {
  OperandKind kind;
  const char* name;
  uint32_t value;
  const char* doc;
};

const std::vector<InsnSpec>& instructions();
const std::vector<FormatSpec>& formats();
const std::vector<EnumValue>& enum_values();
const FormatSpec& format_spec(Format f);
const InsnSpec& spec(Opcode op);
const InsnSpec* find_opcode(uint8_t opcode);
const InsnSpec* find_mnemonic(std::string_view mnemonic);
const char* kind_name(OperandKind k);
const char* unit_name(ExecUnit u);

// Bits that are defined (opcode plus operand fields) for an instruction.
uint64_t defined_mask(const InsnSpec& s);
// The fixed bits: the opcode placed in its field.
uint64_t match_bits(const InsnSpec& s);

std::optional<uint32_t> enum_lookup(OperandKind kind, std::string_view name);
const char* enum_name(OperandKind kind, uint32_t value);  // nullptr when not a valid value

// Register-like operands: the assembly prefix and number of registers.
const char* register_prefix(OperandKind kind);  // "s", "v", "sem", "m"; nullptr for others
int register_count(OperandKind kind);

// One decoded instruction. Operand values are in format order; Pcrel32 holds
// the offset (target - pc); Simm32 is sign-extended; Bits32 is 0..2^32-1.
struct Instruction {
  Opcode op = Opcode::NOP;
  std::array<int64_t, kMaxOperands> operands{};
  int64_t& operator[](size_t i) { return operands[i]; }
  int64_t operator[](size_t i) const { return operands[i]; }
  bool operator==(const Instruction& o) const { return op == o.op && operands == o.operands; }
};

// The registers an instruction reads and writes (isa.def's register
// effects), as masks: bit r is s<r> or v<r>.
struct RegisterUse {
  uint32_t sread = 0, swrite = 0, vread = 0, vwrite = 0;
};
RegisterUse register_use(const Instruction& insn);
// Whether two instructions may swap places: neither writes a register the
// other reads or writes.
inline bool independent(const RegisterUse& a, const RegisterUse& b) {
  return !(a.swrite & (b.sread | b.swrite)) && !(b.swrite & a.sread) && !(a.vwrite & (b.vread | b.vwrite)) && !(b.vwrite & a.vread);
}

// Checks that value fits the operand kind; returns an error message if not.
std::optional<std::string> check_operand(OperandKind kind, int64_t value);

// An instruction from its operands in format order, each checked against
// its kind: a wrong count or a value out of range is a bug in the caller
// (std::logic_error naming the instruction and the operand).
Instruction make(Opcode op, const int64_t* operands, size_t count);
inline Instruction make(Opcode op, std::initializer_list<int64_t> operands) { return make(op, operands.begin(), operands.size()); }

// One builder per instruction of isa.def, its operand count checked at
// compile time: build::VADD_F32(vd, va, vb), build::LOOP(rc, target).
namespace build {
#define ISA_INSN(id, mnemonic, opcode, format, unit, cls, doc)                                              \
  template <typename... A>                                                                                  \
  Instruction id(A... a) {                                                                                  \
    static_assert(sizeof...(A) == operand_count::format, mnemonic " takes a different number of operands"); \
    return make(Opcode::id, {int64_t(a)...});                                                               \
  }
#include "tpu/isa/isa.def"
}  // namespace build

// Encodes an instruction whose operands pass check_operand (throws
// std::invalid_argument otherwise: that is a bug in the caller).
uint64_t encode(const Instruction& insn);

// Decodes a word; nullopt for an unknown opcode, a set reserved bit, or an
// invalid enumerated value. A decoded word always re-encodes to itself.
std::optional<Instruction> decode(uint64_t word);

// Assembly text for an instruction at index pc. label_for(target) may name a
// branch target; when it returns an empty string the target prints as `. + N`.
using LabelFn = std::function<std::string(int64_t target)>;
std::string disassemble(const Instruction& insn, int64_t pc, const LabelFn& label_for = {});

}  // namespace tpu::isa
