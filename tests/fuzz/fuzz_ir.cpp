// Fuzz target: IR text parses or gives one tpu::Error; what parses prints
// and parses back to the same text, and compiles or gives one tpu::Error.
#include <cstdint>
#include <stdexcept>
#include <string_view>

#include "fuzz_compiler.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tpu::ir::Function f;
  try {
    f = tpu::ir::parse(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz.ir");
  } catch (const tpu::Error&) {
    return 0;
  }
  const std::string text = tpu::ir::print(f);
  if (tpu::ir::print(tpu::ir::parse(text, "printed.ir")) != text) throw std::logic_error("IR does not round-trip");
  fuzz_compile(f);
  return 0;
}
