// Fuzz target: any bytes given to the loader are rejected with tpu::Error or
// load; a program that loads is canonical (saves to the same bytes) and its
// disassembly reassembles to the same program.
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "tpu/asm/assembler.h"
#include "tpu/isa/program.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tpu::isa::Program p;
  try {
    p = tpu::isa::load(data, size);
  } catch (const tpu::Error&) {
    return 0;
  }
  if (tpu::isa::save(p) != std::vector<uint8_t>(data, data + size)) std::abort();
  auto again = tpu::as::assemble(tpu::as::disassemble(p), "fuzz-roundtrip.s");
  if (!again.program || !(*again.program == p)) std::abort();
  return 0;
}
