#include "tpu/isa/isa.h"

#include <fmt/format.h>

#include <array>
#include <set>
#include <stdexcept>
#include <unordered_map>

namespace tpu::isa {
namespace {

#define OPND(kind, role, hi, lo) OperandSpec{OperandKind::kind, #role, hi, lo}

const std::vector<FormatSpec> kFormats = {
#define ISA_FORMAT(name, ...) FormatSpec{Format::name, #name, {__VA_ARGS__}},
#include "tpu/isa/isa.def"
};

const std::vector<InsnSpec> kInsns = {
#define ISA_INSN(id, mnemonic, opcode, format, unit, cls, doc) \
  InsnSpec{Opcode::id, #id, mnemonic, opcode, Format::format, ExecUnit::unit, VpuClass::cls, doc},
#include "tpu/isa/isa.def"
};

const std::vector<EnumValue> kEnums = {
#define ISA_ENUM(kind, name, value, doc) EnumValue{OperandKind::kind, #name, value, doc},
#include "tpu/isa/isa.def"
};

#undef OPND

struct Tables {
  std::array<const InsnSpec*, 256> by_opcode{};
  std::unordered_map<std::string_view, const InsnSpec*> by_mnemonic;
  Tables() {
    for (const auto& s : kInsns) {
      by_opcode[s.opcode] = &s;
      by_mnemonic.emplace(s.mnemonic, &s);
    }
  }
};

const Tables& tables() {
  static const Tables t;
  return t;
}

uint64_t field(uint64_t word, const OperandSpec& o) { return (word & o.mask()) >> o.lo; }

}  // namespace

const std::vector<InsnSpec>& instructions() { return kInsns; }
const std::vector<FormatSpec>& formats() { return kFormats; }
const std::vector<EnumValue>& enum_values() { return kEnums; }

const FormatSpec& format_spec(Format f) { return kFormats.at(static_cast<size_t>(f)); }

const InsnSpec& spec(Opcode op) {
  const InsnSpec* s = tables().by_opcode[static_cast<uint8_t>(op)];
  if (s == nullptr) throw std::logic_error("internal error: opcode without a table entry");
  return *s;
}

const InsnSpec* find_opcode(uint8_t opcode) { return tables().by_opcode[opcode]; }

const InsnSpec* find_mnemonic(std::string_view mnemonic) {
  auto it = tables().by_mnemonic.find(mnemonic);
  return it == tables().by_mnemonic.end() ? nullptr : it->second;
}

const char* kind_name(OperandKind k) {
  switch (k) {
    case OperandKind::Sreg: return "scalar register";
    case OperandKind::Vreg: return "vector register";
    case OperandKind::Sem: return "semaphore";
    case OperandKind::Mxu: return "MXU";
    case OperandKind::Unit: return "unit";
    case OperandKind::MxuDtype: return "MXU dtype";
    case OperandKind::Csr: return "CSR";
    case OperandKind::Simm32: return "signed 32-bit immediate";
    case OperandKind::Uimm16: return "unsigned 16-bit immediate";
    case OperandKind::Bits32: return "32-bit pattern";
    case OperandKind::Pcrel32: return "branch target";
  }
  return "?";
}

const char* unit_name(ExecUnit u) {
  switch (u) {
    case ExecUnit::Scalar: return "scalar";
    case ExecUnit::Sync: return "sync";
    case ExecUnit::Dma: return "dma";
    case ExecUnit::Mxu: return "mxu";
    case ExecUnit::Vpu: return "vpu";
  }
  return "?";
}

uint64_t match_bits(const InsnSpec& s) { return static_cast<uint64_t>(s.opcode) << kOpcodeLo; }

uint64_t defined_mask(const InsnSpec& s) {
  uint64_t m = 0xffull << kOpcodeLo;
  for (const auto& o : format_spec(s.format).operands) m |= o.mask();
  return m;
}

std::optional<uint32_t> enum_lookup(OperandKind kind, std::string_view name) {
  for (const auto& e : kEnums)
    if (e.kind == kind && name == e.name) return e.value;
  return std::nullopt;
}

const char* enum_name(OperandKind kind, uint32_t value) {
  for (const auto& e : kEnums)
    if (e.kind == kind && e.value == value) return e.name;
  return nullptr;
}

const char* register_prefix(OperandKind kind) {
  switch (kind) {
    case OperandKind::Sreg: return "s";
    case OperandKind::Vreg: return "v";
    case OperandKind::Sem: return "sem";
    case OperandKind::Mxu: return "m";
    default: return nullptr;
  }
}

int register_count(OperandKind kind) {
  switch (kind) {
    case OperandKind::Sreg: return kNumSregs;
    case OperandKind::Vreg: return kNumVregs;
    case OperandKind::Sem: return kNumSems;
    case OperandKind::Mxu: return kMaxMxus;
    default: return 0;
  }
}

std::optional<std::string> check_operand(OperandKind kind, int64_t v) {
  if (int n = register_count(kind); n > 0) {
    if (v < 0 || v >= n) return fmt::format("{} {}{} does not exist (0..{})", kind_name(kind), register_prefix(kind), v, n - 1);
    return std::nullopt;
  }
  switch (kind) {
    case OperandKind::Unit:
    case OperandKind::MxuDtype:
    case OperandKind::Csr:
      if (v < 0 || v > 0xffff || enum_name(kind, static_cast<uint32_t>(v)) == nullptr)
        return fmt::format("{} value {} is not defined", kind_name(kind), v);
      return std::nullopt;
    case OperandKind::Simm32:
    case OperandKind::Pcrel32:
      if (v < INT32_MIN || v > INT32_MAX) return fmt::format("{} {} does not fit in 32 signed bits", kind_name(kind), v);
      return std::nullopt;
    case OperandKind::Uimm16:
      if (v < 0 || v > 0xffff) return fmt::format("{} {} is outside 0..65535", kind_name(kind), v);
      return std::nullopt;
    case OperandKind::Bits32:
      if (v < 0 || v > 0xffffffffll) return fmt::format("{} {} is outside 0..0xffffffff", kind_name(kind), v);
      return std::nullopt;
    default:
      return std::nullopt;
  }
}

RegisterUse register_use(const Instruction& insn) {
  // Per opcode and operand: 1 read, 2 written, 3 both (from isa.def's
  // register effects), 0 not a register.
  static const auto table = [] {
    const std::set<std::string_view> dest_roles = {
#define ISA_DEST_ROLE(role) #role,
#include "tpu/isa/isa.def"
    };
    const std::set<Opcode> reads_dest = {
#define ISA_READS_DEST(id) Opcode::id,
#include "tpu/isa/isa.def"
    };
    std::array<std::array<uint8_t, kMaxOperands>, 256> t{};
    for (const InsnSpec& s : instructions()) {
      const auto& ops = format_spec(s.format).operands;
      for (size_t i = 0; i < ops.size(); ++i) {
        if (ops[i].kind != OperandKind::Sreg && ops[i].kind != OperandKind::Vreg) continue;
        const bool dest = dest_roles.count(ops[i].role) > 0;
        t[s.opcode][i] = uint8_t(dest ? (reads_dest.count(s.op) ? 3 : 2) : 1);
      }
    }
    return t;
  }();
  RegisterUse u;
  const auto& ops = format_spec(spec(insn.op).format).operands;
  const auto& eff = table[uint8_t(insn.op)];
  for (size_t i = 0; i < ops.size(); ++i) {
    if (eff[i] == 0) continue;
    const uint32_t bit = uint32_t(1) << insn[i];
    const bool s = ops[i].kind == OperandKind::Sreg;
    if (eff[i] & 1) (s ? u.sread : u.vread) |= bit;
    if (eff[i] & 2) (s ? u.swrite : u.vwrite) |= bit;
  }
  return u;
}

Instruction make(Opcode op, const int64_t* operands, size_t count) {
  const InsnSpec& s = spec(op);
  const auto& ops = format_spec(s.format).operands;
  if (count != ops.size()) throw std::logic_error(fmt::format("{} takes {} operands, not {}", s.mnemonic, ops.size(), count));
  Instruction insn;
  insn.op = op;
  for (size_t i = 0; i < count; ++i) {
    if (auto err = check_operand(ops[i].kind, operands[i]))
      throw std::logic_error(fmt::format("{}, operand {}: {}", s.mnemonic, ops[i].role, *err));
    insn[i] = operands[i];
  }
  return insn;
}

uint64_t encode(const Instruction& insn) {
  const InsnSpec& s = spec(insn.op);
  const auto& ops = format_spec(s.format).operands;
  uint64_t word = match_bits(s);
  for (size_t i = 0; i < ops.size(); ++i) {
    if (auto err = check_operand(ops[i].kind, insn[i])) throw std::invalid_argument(*err);
    word |= (static_cast<uint64_t>(insn[i]) << ops[i].lo) & ops[i].mask();
  }
  return word;
}

std::optional<Instruction> decode(uint64_t word) {
  const InsnSpec* s = find_opcode(static_cast<uint8_t>(word >> kOpcodeLo));
  if (s == nullptr || (word & ~defined_mask(*s)) != 0) return std::nullopt;
  Instruction insn;
  insn.op = s->op;
  const auto& ops = format_spec(s->format).operands;
  for (size_t i = 0; i < ops.size(); ++i) {
    uint64_t raw = field(word, ops[i]);
    int64_t v = static_cast<int64_t>(raw);
    if (ops[i].kind == OperandKind::Simm32 || ops[i].kind == OperandKind::Pcrel32)
      v = static_cast<int32_t>(static_cast<uint32_t>(raw));
    if (check_operand(ops[i].kind, v)) return std::nullopt;
    insn[i] = v;
  }
  return insn;
}

std::string disassemble(const Instruction& insn, int64_t pc, const LabelFn& label_for) {
  const InsnSpec& s = spec(insn.op);
  std::string out = s.mnemonic;
  const auto& ops = format_spec(s.format).operands;
  for (size_t i = 0; i < ops.size(); ++i) {
    out += i == 0 ? " " : ", ";
    const int64_t v = insn[i];
    if (const char* prefix = register_prefix(ops[i].kind)) {
      out += fmt::format("{}{}", prefix, v);
      continue;
    }
    switch (ops[i].kind) {
      case OperandKind::Unit:
      case OperandKind::MxuDtype:
      case OperandKind::Csr:
        out += enum_name(ops[i].kind, static_cast<uint32_t>(v));
        break;
      case OperandKind::Bits32:
        out += fmt::format("{:#010x}", v);
        break;
      case OperandKind::Pcrel32: {
        std::string label = label_for ? label_for(pc + v) : std::string();
        if (!label.empty())
          out += label;
        else if (v == 0)
          out += ".";
        else
          out += fmt::format(". {} {}", v < 0 ? '-' : '+', v < 0 ? -v : v);
        break;
      }
      default:
        out += std::to_string(v);
    }
  }
  return out;
}

}  // namespace tpu::isa
