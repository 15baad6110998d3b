// The whole of tpuc as a library call: IR -> passes -> kernels -> assembly
// -> a .tpu program (through the assembler library).
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "tpu/compiler/codegen.h"
#include "tpu/ir/ir.h"
#include "tpu/isa/program.h"

namespace tpu::compiler {

struct CompileOptions {
  isa::MachineConfig machine;              // the target, and the timing the schedule is made for
  bool loops = true;                        // false: straight-line code (tpuc --no-loops)
  bool listing = true;                      // also write Compiled::assembly (the disassembly, commented)
  std::optional<ir::Precision> precision;  // overrides every dot's precision_config
  // Called after every IR pass with (pass name, printed IR), then with
  // ("kernel plan", the plan).
  std::function<void(const std::string&, const std::string&)> dump;
};

struct Compiled {
  ir::Function lowered;  // after the IR passes
  std::string plan;      // the kernel plan (Backend::describe)
  std::string assembly;  // with CompileOptions::listing
  isa::Program program;
};

// Throws Error for programs it cannot compile.
Compiled compile(const ir::Function& f, const CompileOptions& options);

// Reads MODULE.hlo (XLA HLO text), MODULE.mlir (StableHLO; also any file
// that starts like MLIR) or MODULE.ir (tpuc IR text) into the IR.
ir::Function load_module(const std::string& path);

}  // namespace tpu::compiler
