// isa-gen: writes the files generated from isa.def.
//
//   isa-gen --write ROOT   regenerate them under the source tree ROOT
//   isa-gen --check ROOT   exit 1 naming each stale file
//
// docs/isa.md is isa/isa.md.in (the prose) with the tables filled in;
// hw/include/tpu_isa.vh gives the RTL the opcodes and field positions.
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <string>

#include "tpu/isa/isa.h"
#include "tpu/isa/target.h"

namespace {

using namespace tpu::isa;

constexpr const char* kBanner = "Generated from isa/include/tpu/isa/isa.def by isa-gen. Do not edit.";

std::string upper(std::string s) {
  for (char& c : s) c = c == '.' ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

std::string syntax(const InsnSpec& s) {
  std::string out = s.mnemonic;
  const auto& ops = format_spec(s.format).operands;
  for (size_t i = 0; i < ops.size(); ++i) out += (i == 0 ? " " : ", ") + std::string(ops[i].role);
  return out;
}

std::string layout(const FormatSpec& f) {
  std::string out = "op[63:56]";
  for (const auto& o : f.operands)
    out += o.hi == o.lo ? fmt::format(" {}[{}]", o.role, o.hi) : fmt::format(" {}[{}:{}]", o.role, o.hi, o.lo);
  return out;
}

std::string kind_syntax(OperandKind k) {
  if (const char* p = register_prefix(k)) return fmt::format("`{}0`..`{}{}`", p, p, register_count(k) - 1);
  std::string names;
  for (const auto& e : enum_values())
    if (e.kind == k) names += (names.empty() ? "`" : ", `") + std::string(e.name) + "`";
  if (!names.empty()) return names;
  switch (k) {
    case OperandKind::Simm32: return "expression, -2^31..2^31-1";
    case OperandKind::Uimm16: return "expression, 0..65535";
    case OperandKind::Bits32: return "expression, 0..0xffffffff (printed in hex)";
    case OperandKind::Pcrel32: return "label or expression (an instruction index); encoded as target - pc";
    default: return "";
  }
}

std::string markdown_tables() {
  std::ostringstream o;
  o << "<!-- " << kBanner << " -->\n\n";
  o << "## Operand kinds\n\n| kind | written as |\n|---|---|\n";
  for (OperandKind k : {OperandKind::Sreg, OperandKind::Vreg, OperandKind::Sem, OperandKind::Mxu, OperandKind::Unit,
                        OperandKind::MxuDtype, OperandKind::Csr, OperandKind::Simm32, OperandKind::Uimm16,
                        OperandKind::Bits32, OperandKind::Pcrel32})
    o << "| " << kind_name(k) << " | " << kind_syntax(k) << " |\n";
  o << "\n## Formats\n\nBits not listed are reserved and must be zero.\n\n| format | layout |\n|---|---|\n";
  for (const auto& f : formats()) o << "| " << f.name << " | `" << layout(f) << "` |\n";

  std::map<ExecUnit, std::vector<const InsnSpec*>> by_unit;
  for (const auto& s : instructions()) by_unit[s.unit].push_back(&s);
  o << "\n## Instructions (" << instructions().size() << ")\n";
  for (const auto& [unit, list] : by_unit) {
    o << "\n### " << unit_name(unit) << "\n\n| opcode | syntax | format | semantics |\n|---|---|---|---|\n";
    for (const InsnSpec* s : list)
      o << fmt::format("| 0x{:02X} | `{}` | {} | {} |\n", s->opcode, syntax(*s), format_spec(s->format).name, s->doc);
  }
  o << "\n## Enumerated operands\n\n| kind | name | value | meaning |\n|---|---|---|---|\n";
  for (const auto& e : enum_values())
    o << fmt::format("| {} | `{}` | {} | {} |\n", kind_name(e.kind), e.name, e.value, e.doc);
  return o.str();
}

std::string verilog_include() {
  std::ostringstream o;
  o << "// " << kBanner << "\n";
  o << "// Opcodes, operand field positions and enumerated values of the tpusim ISA.\n";
  o << "`ifndef TPU_ISA_VH\n`define TPU_ISA_VH\n\n";
  o << fmt::format("`define TPU_INSN_BITS {}\n`define TPU_OPCODE_HI {}\n`define TPU_OPCODE_LO {}\n\n", kInsnBits,
                   kOpcodeHi, kOpcodeLo);
  o << "// Opcodes\n";
  for (const auto& s : instructions()) o << fmt::format("`define TPU_OP_{} 8'h{:02X}\n", s.id, s.opcode);
  o << "\n// Operand fields: TPU_F_<format>_<role>_{HI,LO}\n";
  for (const auto& f : formats())
    for (const auto& op : f.operands) {
      std::string base = fmt::format("TPU_F_{}_{}", f.name, upper(op.role));
      o << fmt::format("`define {}_HI {}\n`define {}_LO {}\n", base, op.hi, base, op.lo);
    }
  o << "\n// Enumerated operand values\n";
  for (const auto& e : enum_values()) {
    std::string kind = e.kind == OperandKind::Unit ? "UNIT" : e.kind == OperandKind::MxuDtype ? "MXU_DTYPE" : "CSR";
    o << fmt::format("`define TPU_{}_{} {}\n", kind, upper(e.name), e.value);
  }
  o << "\n`endif  // TPU_ISA_VH\n";
  return o.str();
}

bool read_file(const std::string& path, std::string& out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::ostringstream ss;
  ss << in.rdbuf();
  out = ss.str();
  return true;
}

std::string isa_markdown(const std::string& root) {
  std::string tmpl;
  const std::string path = root + "/isa/isa.md.in";
  if (!read_file(path, tmpl)) throw tpu::Error(path + ": cannot open the template");
  const std::string marker = "@ISA_TABLES@";
  auto at = tmpl.find(marker);
  if (at == std::string::npos) throw tpu::Error(path + ": no " + marker + " marker");
  return tmpl.replace(at, marker.size(), markdown_tables());
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3 || (std::string(argv[1]) != "--write" && std::string(argv[1]) != "--check")) {
    std::cerr << "usage: isa-gen --write|--check SOURCE_ROOT\n";
    return 2;
  }
  const bool write = std::string(argv[1]) == "--write";
  const std::string root = argv[2];
  try {
    const std::pair<std::string, std::string> outputs[] = {
        {root + "/docs/isa.md", isa_markdown(root)},
        {root + "/hw/include/tpu_isa.vh", verilog_include()},
    };
    int stale = 0;
    for (const auto& [path, text] : outputs) {
      std::string current;
      bool same = read_file(path, current) && current == text;
      if (same) continue;
      if (write) {
        std::ofstream(path, std::ios::binary) << text;
        std::cout << "wrote " << path << "\n";
      } else {
        std::cerr << path << " is stale: run `cmake --build build --target regen-isa`\n";
        ++stale;
      }
    }
    return stale == 0 ? 0 : 1;
  } catch (const std::exception& e) {
    std::cerr << "isa-gen: " << e.what() << "\n";
    return 1;
  }
}
