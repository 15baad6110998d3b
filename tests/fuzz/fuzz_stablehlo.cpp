// Fuzz target: any text given to the StableHLO reader yields a module or one
// tpu::Error, never a crash or a hang; a module that imports is compiled.
#include <cstdint>
#include <string_view>

#include "fuzz_compiler.h"
#include "tpu/hlo/stablehlo.h"
#include "tpu/ir/import.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const auto m = tpu::hlo::parse_stablehlo(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz.mlir");
    fuzz_compile(tpu::ir::import_hlo(m, "fuzz.mlir"));
  } catch (const tpu::Error&) {
  }
  return 0;
}
