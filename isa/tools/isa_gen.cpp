// isa-gen: writes the files generated from isa.def.
//
//   isa-gen --write ROOT   regenerate them under the source tree ROOT
//   isa-gen --check ROOT   exit 1 naming each stale file
//
// docs/isa.md is isa/isa.md.in (the prose) with the tables filled in;
// hw/include/tpu_isa.vh gives the RTL the opcodes and field positions;
// docs/configs.md's parameter table is written from the config's tables
// (target_fields, config_fields) between its two markers.
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <string>

#include "tpu/isa/isa.h"
#include "tpu/isa/machine.h"
#include "tpu/isa/target.h"

namespace {

using namespace tpu::isa;

constexpr const char* kBanner = "Generated from isa/include/tpu/isa/isa.def by isa-gen. Do not edit.";

// Text for a Markdown table cell: a '|' of the text (rs1 | rs2) escaped.
std::string cell(const std::string& s) {
  std::string o;
  for (char c : s) o += c == '|' ? std::string("\\|") : std::string(1, c);
  return o;
}

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
  static const char* classes[] = {"", "alu", "mul", "div", "transcendental", "load", "store", "reduce", "transpose"};
  for (const auto& [unit, list] : by_unit) {
    const bool vpu = unit == ExecUnit::Vpu;  // the class: vpu.latency.CLASS, and the issue slot (docs/timing.md)
    o << "\n### " << unit_name(unit) << "\n\n| opcode | syntax | format | " << (vpu ? "class | " : "") << "semantics |\n|---|---|---|"
      << (vpu ? "---|" : "") << "---|\n";
    for (const InsnSpec* s : list)
      o << fmt::format("| 0x{:02X} | `{}` | {} | {}{} |\n", s->opcode, syntax(*s), format_spec(s->format).name,
                       vpu ? fmt::format("{} | ", classes[int(s->vpu_class)]) : "", cell(s->doc));
  }
  o << "\n## Enumerated operands\n\n| kind | name | value | meaning |\n|---|---|---|---|\n";
  for (const auto& e : enum_values())
    o << fmt::format("| {} | `{}` | {} | {} |\n", kind_name(e.kind), e.name, e.value, cell(e.doc));
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

// A bound as people write it: 64 KiB, 2^24, 1e15, 1.5 GHz.
std::string bound(uint64_t v, const std::string& unit) {
  if (unit == "Hz" && v >= 1000000000 && v % 100000000 == 0) return fmt::format("{:g} GHz", double(v) / 1e9);
  if (unit == "Hz" && v >= 1000000 && v % 1000000 == 0) return fmt::format("{} MHz", v / 1000000);
  if (unit == "bytes" && v >= 1024 && (v & (v - 1)) == 0) {
    const char* names[] = {"KiB", "MiB", "GiB", "TiB"};
    int k = 0;
    for (v /= 1024; v >= 1024 && k < 3; v /= 1024) ++k;
    return fmt::format("{} {}", v, names[k]);
  }
  if (v >= 65536 && (v & (v - 1)) == 0) {
    int k = 0;
    while ((uint64_t(1) << k) != v) ++k;
    return fmt::format("2^{}", k);
  }
  if (v >= 1000000) {
    int k = 0;
    uint64_t x = v;
    while (x % 10 == 0) x /= 10, ++k;
    if (k >= 6) return fmt::format("{}e{}", x, k);
  }
  return std::to_string(v);
}

std::string config_table() {
  const MachineConfig v5e = load_config("v5e");  // also MachineConfig{}'s values (a test checks)
  std::string o = "| parameter | meaning | unit | range | v5e |\n|---|---|---|---|---|\n";
  for (const auto& f : target_fields())
    o += fmt::format("| `target.{}` | {} | {} | {}..{} | {} |\n", f.key, f.doc, f.unit, bound(f.min, f.unit), bound(f.max, f.unit),
                     bound(v5e.target.*f.member, f.unit));
  for (const auto& f : config_fields())
    o += fmt::format("| `{}` | {} | {} | {}..{} | {} |\n", f.key, f.doc, f.unit, bound(f.min, f.unit), bound(f.max, f.unit),
                     bound(f.get(v5e), f.unit));
  return o;
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

// docs/configs.md with the text between the markers replaced by the table.
std::string configs_markdown(const std::string& root) {
  std::string doc;
  const std::string path = root + "/docs/configs.md";
  if (!read_file(path, doc)) throw tpu::Error(path + ": cannot open it");
  const std::string begin = "<!-- parameters: generated by isa-gen from the config's tables -->\n", end = "<!-- end of parameters -->";
  const size_t b = doc.find(begin), e = doc.find(end);
  if (b == std::string::npos || e == std::string::npos || e < b) throw tpu::Error(path + ": no parameter-table markers");
  return doc.replace(b + begin.size(), e - b - begin.size(), config_table());
}

}  // namespace

int main(int argc, char** argv) {
  const std::string flag = argc == 2 ? argv[1] : "";
  if (flag == "--version" || flag == "--help" || flag == "-h") {
    if (flag == "--version") std::cout << "isa-gen (tpusim " TPUSIM_VERSION ")\n";
    else std::cout << "isa-gen: write (--write) or check (--check) the files generated from isa.def under SOURCE_ROOT\nusage: isa-gen --write|--check SOURCE_ROOT\n";
    return 0;
  }
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
        {root + "/docs/configs.md", configs_markdown(root)},
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
