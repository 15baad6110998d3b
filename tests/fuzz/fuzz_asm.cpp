// Fuzz target: any text given to the assembler yields a program or
// diagnostics, never a crash; a program it accepts survives
// disassemble -> assemble unchanged.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "tpu/asm/assembler.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  tpu::as::AssembleOptions opts;
  opts.max_errors = 10;
  auto r = tpu::as::assemble(text, "fuzz.s", opts);
  if (!r.program) {
    if (r.errors.empty()) std::abort();  // a failure must say why
    for (const auto& d : r.errors) (void)d.render();
    return 0;
  }
  auto again = tpu::as::assemble(tpu::as::disassemble(*r.program), "fuzz-roundtrip.s");
  if (!again.program || !(*again.program == *r.program)) std::abort();
  return 0;
}
