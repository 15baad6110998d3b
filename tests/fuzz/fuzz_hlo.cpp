// Fuzz target: any text given to the HLO parser yields a module or one
// tpu::Error, never a crash or a hang.
#include <cstdint>
#include <string_view>

#include "tpu/hlo/hlo.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    tpu::hlo::parse(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz.hlo");
  } catch (const tpu::Error&) {
  }
  return 0;
}
