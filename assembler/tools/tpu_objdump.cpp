// tpu-objdump PROG.tpu [-o FILE]: prints assembly that tpu-as turns back into
// the identical binary.
#include <iostream>

#include "cli_common.h"
#include "tpu/asm/assembler.h"

int main(int argc, char** argv) {
  CLI::App app{"tpu-objdump: disassemble a .tpu program (the output reassembles to the identical binary)"};
  app.name("tpu-objdump");
  std::string input, output;
  app.add_option("program", input, "program (.tpu)")->required();
  app.add_option("-o,--output", output, "write the assembly here instead of stdout");
  if (int rc = tpu::cli::parse(app, argc, argv); rc >= 0) return rc;
  return tpu::cli::run([&] {
    const std::string text = tpu::as::disassemble(tpu::isa::load_file(input));
    if (output.empty()) {
      std::cout << text << std::flush;
      if (!std::cout) throw tpu::Error("cannot write to standard output");
      return 0;
    }
    tpu::isa::write_file(output, text);
    return 0;
  });
}
