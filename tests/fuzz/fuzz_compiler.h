// Shared by the compiler fuzz targets: runs the IR pipeline and plans and
// emits code for tiny when the function is small (a fuzzed shape of 10^12
// elements would only measure the code generator's patience). A tpu::Error
// is a fine answer; anything else (std::logic_error is "internal error")
// escapes and is a finding.
#pragma once

#include "tpu/compiler/compile.h"
#include "tpu/ir/ir.h"
#include "tpu/isa/error.h"

inline void fuzz_compile(const tpu::ir::Function& f) {
  int64_t total = 0;
  for (const auto& op : f.ops) {
    total += op.type.elements();
    for (int64_t d : op.window) total += d * 1000;
  }
  if (total > 100000 || f.ops.size() > 200) return;
  tpu::compiler::CompileOptions o;
  o.machine = tpu::isa::load_config("tiny");
  try {
    tpu::compiler::compile(f, o);
  } catch (const tpu::Error&) {
  }
}
