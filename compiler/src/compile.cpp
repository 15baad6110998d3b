#include "tpu/compiler/compile.h"

#include <fmt/format.h>

#include <filesystem>

#include "tpu/asm/assembler.h"
#include "tpu/compiler/codegen.h"
#include "tpu/compiler/passes.h"
#include "tpu/hlo/stablehlo.h"
#include "tpu/ir/import.h"

namespace tpu::compiler {

namespace {

// What a .tpu program can carry: inputs and outputs of at most isa::kMaxRank
// dimensions.
void check_interface(const ir::Function& f) {
  auto check = [&](int v, const char* what) {
    const ir::Op& op = f.ops[v];
    if (op.type.dims.size() > isa::kMaxRank)
      throw Error(fmt::format("{}: unsupported {} of rank {} ({}): a .tpu program's inputs and outputs have at most rank {}",
                              op.loc.empty() ? "<ir>" : op.loc, what, op.type.dims.size(), op.type.str(), isa::kMaxRank));
  };
  for (int p : f.params()) check(p, "input");
  for (int r : f.results) check(r, "output");
}

}  // namespace

Compiled compile(const ir::Function& f, const CompileOptions& options) {
  check_interface(f);
  Compiled c;
  PassObserver dump;
  if (options.dump) dump = [&](const std::string& pass, const ir::Function& g) { options.dump(pass, ir::print(g)); };
  c.lowered = run_pipeline(f, ir_pipeline(options.precision), dump);
  check_backend_form(c.lowered);
  c.lowered.checks = f.checks;  // passes keep the results' order
  // An SPMD program runs on a system of its devices' count (docs/system.md).
  isa::MachineConfig machine = options.machine;
  const int64_t devices = c.lowered.devices;  // spmd-partition sets it for a sharded program
  if (devices > 1 && uint64_t(devices) != machine.target.chips) {
    machine.target.chips = uint64_t(devices);
    const auto s = machine.ici_shape();
    if (uint64_t(s[0]) * s[1] * s[2] != machine.target.chips)
      throw Error(fmt::format("the program runs on {} devices; the config's ICI topology {} has {} chips", devices,
                              isa::topology_text(s), uint64_t(s[0]) * s[1] * s[2]));
  }
  Backend backend(c.lowered, machine, options.loops);
  c.plan = backend.describe();
  if (options.dump) options.dump("kernel plan", c.plan);
  Generated g = backend.generate();
  c.program = std::move(g.program);
  if (options.listing) c.assembly = as::disassemble(c.program, g.notes);
  return c;
}

ir::Function load_module(const std::string& path) {
  const std::string text = isa::read_text_file(path);
  if (std::string_view(text).substr(0, sizeof isa::kProgramMagic) == std::string_view(isa::kProgramMagic, sizeof isa::kProgramMagic))
    throw Error(fmt::format("{}: a compiled .tpu program, not a module to compile; run it with tpusim (tpusim {})", path, path));
  const std::string ext = std::filesystem::path(path).extension().string();
  if (ext == ".ir") return ir::parse(text, path);
  if (ext == ".mlir" || (ext != ".hlo" && hlo::looks_like_stablehlo(text))) return ir::import_hlo(hlo::parse_stablehlo(text, path), path);
  return ir::import_hlo(hlo::parse(text, path), path);
}

}  // namespace tpu::compiler
