#include <fmt/format.h>

#include <set>

#include "tpu/asm/assembler.h"
#include "tpu/isa/isa.h"

namespace tpu::as {

std::string check_directive(const isa::Check& c, std::string_view actual, std::string_view expected) {
  std::string s = fmt::format(".check {}, {}, {}", isa::check_kind_name(c.kind), actual, expected);
  if (c.kind == isa::CheckKind::expect_almost_eq) s += fmt::format(", tolerance=\"{}\"", c.tolerance);
  if (c.kind == isa::CheckKind::expect_close) s += fmt::format(", min_ulp={}, max_ulp={}", c.min_ulp, c.max_ulp);
  return s;
}

std::string disassemble(const isa::Program& p, const std::vector<Note>& notes) {
  std::string out;
  out += fmt::format("# {} instructions, {} data segments, {} tensor symbols\n", p.code.size(), p.data.size(),
                     p.symbols.size());
  out += fmt::format(".target \"{}\"", p.target.name);
  for (const auto& f : isa::target_fields()) out += fmt::format(", {}={}", f.key, p.target.*f.member);
  out += "\n";
  if (p.hbm_peak != 0) out += fmt::format(".hbm_peak {}  # bytes of HBM the program uses\n", p.hbm_peak);
  for (const auto& s : p.symbols) {
    out += fmt::format("{} {}, {}[{}], {:#x}", isa::symbol_kind_directive(s.kind), s.name, isa::dtype_name(s.dtype),
                       fmt::join(s.dims, ", "), s.hbm_addr);
    out += s.tiles.empty() ? "" : fmt::format(", tiles [{}]", fmt::join(s.tiles, ", "));
    out += s.tile_of.empty() ? "\n" : fmt::format(", tile_of [{}]\n", fmt::join(s.tile_of, ", "));
  }
  const auto outs = p.outputs();
  for (const auto& c : p.checks) out += check_directive(c, outs[c.actual]->name, outs[c.expected]->name) + "\n";
  for (size_t k = 0; k < p.kernels.size(); ++k) {
    out += fmt::format(".kernel {}, \"{}\"", k, p.kernels[k].name);
    for (const auto& o : p.kernels[k].ops) out += fmt::format(", \"{}\", {}", o.op, o.work);
    out += "\n";
  }

  // Name every branch target inside the program (or just past its end).
  std::vector<std::optional<isa::Instruction>> decoded;
  std::set<int64_t> targets;
  const auto n = static_cast<int64_t>(p.code.size());
  for (int64_t pc = 0; pc < n; ++pc) {
    decoded.push_back(isa::decode(p.code[static_cast<size_t>(pc)]));
    if (!decoded.back()) continue;
    const auto& ops = isa::format_spec(isa::spec(decoded.back()->op).format).operands;
    for (size_t i = 0; i < ops.size(); ++i)
      if (ops[i].kind == isa::OperandKind::Pcrel32) {
        int64_t t = pc + (*decoded.back())[i];
        if (t >= 0 && t <= n) targets.insert(t);
      }
  }
  auto label_for = [&](int64_t t) { return targets.count(t) ? fmt::format("L{}", t) : std::string(); };

  out += ".text\n";
  uint32_t kernel = isa::kNoKernel;
  auto note = notes.begin();
  for (int64_t pc = 0; pc <= n; ++pc) {
    for (; note != notes.end() && int64_t(note->pc) <= pc; ++note) out += note->text.empty() ? "\n" : "    # " + note->text + "\n";
    if (targets.count(pc)) out += fmt::format("L{}:\n", pc);
    if (pc == n) break;
    if (!p.kernel_of.empty() && p.kernel_of[size_t(pc)] != kernel) {
      kernel = p.kernel_of[size_t(pc)];
      out += fmt::format(".in_kernel {}\n", kernel == isa::kNoKernel ? -1 : int64_t(kernel));
    }
    const uint64_t word = p.code[static_cast<size_t>(pc)];
    std::string text = decoded[static_cast<size_t>(pc)] ? isa::disassemble(*decoded[static_cast<size_t>(pc)], pc, label_for)
                                                        : fmt::format(".inst {:#018x}", word);
    out += fmt::format("    {:<40} # {:5}: {:016x}\n", text, pc, word);
  }

  for (const auto& d : p.data) {
    out += fmt::format(".data {:#x}\n", d.hbm_addr);
    for (size_t i = 0; i < d.bytes.size(); i += 16) {
      // A run of whole zero lines is one .zero (the same bytes, a short listing).
      size_t zeros = i;
      while (zeros < d.bytes.size() && d.bytes[zeros] == 0) ++zeros;
      if ((zeros - i) / 16 >= 2) {
        const size_t run = (zeros - i) / 16 * 16;
        out += fmt::format("    .zero {:#x}\n", run);
        i += run - 16;
        continue;
      }
      out += "    .byte ";
      for (size_t j = i; j < std::min(i + 16, d.bytes.size()); ++j)
        out += fmt::format("{}{:#04x}", j == i ? "" : ", ", d.bytes[j]);
      out += "\n";
    }
  }
  return out;
}

}  // namespace tpu::as
