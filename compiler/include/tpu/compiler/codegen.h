// The back end: kernel planning (fusion, tiling, buffer assignment) and code
// generation to assembly for one TensorCore. Input: a function after the IR
// pipeline (passes.h). docs/compiler.md describes the kernels and the schedule.
#pragma once

#include <string>

#include "tpu/ir/ir.h"
#include "tpu/isa/target.h"

namespace tpu::compiler {

struct Plan;  // opaque: kernels, buffers, fused expressions

struct Backend {
  explicit Backend(const ir::Function& f, const isa::Target& t);
  ~Backend();
  Backend(const Backend&) = delete;
  Backend& operator=(const Backend&) = delete;

  // The kernel plan in text (for --dump-after-each-pass and tests).
  std::string describe() const;
  // Assembly text, each kernel commented with the HLO ops it came from.
  std::string assembly() const;

 private:
  Plan* plan_;
};

}  // namespace tpu::compiler
