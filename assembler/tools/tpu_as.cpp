// tpu-as FILE.s -o PROG.tpu [--config CFG]
#include <fmt/format.h>

#include <iostream>

#include "cli_common.h"
#include "tpu/asm/assembler.h"
#include "tpu/isa/machine.h"

int main(int argc, char** argv) {
  CLI::App app{"tpu-as: assemble tpu assembly into a .tpu program"};
  app.name("tpu-as");
  std::string input, output, config;
  std::vector<std::string> settings;
  app.add_option("input", input, "assembly source (.s)")->required();
  app.add_option("-o,--output", output, "program to write (.tpu)")->required();
  app.add_option("--config", config,
                 "target preset (tiny, v1, v4, v5e) or config file; a .target directive in the file must agree "
                 "(default: the file's .target, else v5e)");
  app.add_option("--set", settings, "KEY=VALUE: change one parameter of --config (target.mxu_dim=16); repeatable")
      ->allow_extra_args(false);
  if (int rc = tpu::cli::parse(app, argc, argv); rc >= 0) return rc;
  return tpu::cli::run([&] {
    tpu::as::AssembleOptions opts;
    if (!settings.empty() && config.empty()) throw tpu::cli::UsageError("--set needs --config");
    if (!config.empty()) opts.target = tpu::isa::load_config(config, settings).target;
    const std::string source = tpu::isa::read_text_file(input);
    auto result = tpu::as::assemble(source, input, opts);
    for (const auto& d : result.errors) std::cerr << d.render();
    if (!result.program) {
      spdlog::error("{} error{}", result.errors.size(), result.errors.size() == 1 ? "" : "s");
      return 1;
    }
    tpu::isa::save_file(*result.program, output);
    return 0;
  });
}
