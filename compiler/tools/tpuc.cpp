// tpuc: XLA HLO text (or tpuc IR text, *.ir) -> a .tpu program, or the IR
// or assembly on the way; `--interpret` runs the IR reference interpreter.
#include <fmt/format.h>

#include <filesystem>
#include <iostream>

#include "cli_common.h"
#include "tpu/compiler/compile.h"
#include "tpu/compiler/passes.h"
#include "tpu/ir/interp.h"
#include "tpu/isa/npy.h"

namespace {

void write_text(const std::string& path, const std::string& text) {
  if (path.empty() || path == "-") {
    std::cout << text << std::flush;
    if (!std::cout) throw tpu::Error("cannot write to standard output");
    return;
  }
  tpu::isa::write_file(path, text);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"tpuc: compile a JAX program as StableHLO (*.mlir, as_text()) or XLA HLO text (*.hlo), or tpuc IR (*.ir), for the tpusim TPU", "tpuc"};
  std::string input, output, config = "v5e", precision, emit = "bin", outputs_dir;
  std::vector<std::string> inputs, settings;
  bool dump = false, interpret = false, no_loops = false;
  app.add_option("module", input, "MODULE.mlir (StableHLO), MODULE.hlo (XLA HLO text) or MODULE.ir (tpuc IR text)")->required();
  app.add_option("-o,--output", output, "output file (.tpu for --emit bin; '-' or none prints ir/asm)");
  app.add_option("--config", config, "target machine: a preset (tiny, v1, v4, v5e) or a config file; default v5e");
  app.add_option("--set", settings, "KEY=VALUE: change one parameter of --config (hbm.simple.latency_ns=200, target.mxu_dim=16); repeatable")
      ->allow_extra_args(false);
  app.add_option("--precision", precision, "f32 dot passes: default (1), high (3), highest (6); default: each dot's precision_config")
      ->check(CLI::IsMember({"default", "high", "highest"}));
  app.add_option("--emit", emit, "what to write: ir (after the IR passes), asm, or bin (a .tpu program; the default)")
      ->check(CLI::IsMember({"ir", "asm", "bin"}));
  app.add_flag("--no-loops", no_loops, "write every tile's instructions out (no loops): the same schedule, straight-line");
  app.add_flag("--dump-after-each-pass", dump, "print the IR after every pass, then the kernel plan, to stderr");
  app.add_flag("--interpret", interpret, "run the IR reference interpreter instead of compiling (needs --inputs, --outputs)");
  app.add_option("--inputs", inputs, "with --interpret: one .npy per ENTRY parameter, in order");
  app.add_option("--outputs", outputs_dir, "with --interpret: directory for out0.npy, out1.npy, ...");
  if (int rc = tpu::cli::parse(app, argc, argv); rc >= 0) return rc;

  using namespace tpu;
  return cli::run([&] {
    ir::Function f = compiler::load_module(input);
    if (dump) std::cerr << "// ----- after import\n" << ir::print(f);
    if (interpret) {
      if (outputs_dir.empty()) throw cli::UsageError("--interpret needs --outputs DIR");
      const auto params = f.params();
      if (inputs.size() != params.size())
        throw cli::UsageError(fmt::format("{} takes {} inputs, {} given with --inputs", input, params.size(), inputs.size()));
      std::vector<ir::Tensor> in;
      for (size_t i = 0; i < params.size(); ++i) in.push_back(ir::from_npy(isa::read_npy(inputs[i]), f.param_global_type(i), inputs[i]));
      const auto out = ir::interpret(f, in);
      std::filesystem::create_directories(outputs_dir);
      for (size_t i = 0; i < out.size(); ++i) isa::write_npy(fmt::format("{}/out{}.npy", outputs_dir, i), ir::to_npy(out[i]));
      return 0;
    }
    std::optional<ir::Precision> prec;
    if (precision == "default") prec = ir::Precision::default_;
    if (precision == "high") prec = ir::Precision::high;
    if (precision == "highest") prec = ir::Precision::highest;
    if (emit == "ir") {
      compiler::PassObserver after;
      if (dump) after = [](const std::string& pass, const ir::Function& g) { std::cerr << "// ----- after " << pass << "\n" << ir::print(g); };
      write_text(output, ir::print(compiler::run_pipeline(f, compiler::ir_pipeline(prec), after)));
      return 0;
    }
    compiler::CompileOptions opts;
    opts.machine = isa::load_config(config, settings);
    opts.loops = !no_loops;
    opts.listing = emit == "asm";
    opts.precision = prec;
    if (dump) opts.dump = [](const std::string& pass, const std::string& text) { std::cerr << "// ----- after " << pass << "\n" << text; };
    const compiler::Compiled c = compiler::compile(f, opts);
    spdlog::info("{}: {} ops after the passes, {} kernels, {} instructions, {} checks for target {}", input, c.lowered.ops.size(),
                 c.program.kernels.size(), c.program.code.size(), c.program.checks.size(), c.program.target.name);
    if (emit == "asm") {
      write_text(output, c.assembly);
      return 0;
    }
    if (output.empty()) throw cli::UsageError("--emit bin needs -o PROG.tpu");
    isa::save_file(c.program, output);
    return 0;
  });
}
