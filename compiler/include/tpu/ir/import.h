// XLA HLO (parsed by tpu/hlo/hlo.h) -> the IR. Throws Error
// "file:line: unsupported <what>" for anything the IR cannot express.
#pragma once

#include <string_view>

#include "tpu/hlo/hlo.h"
#include "tpu/ir/ir.h"

namespace tpu::ir {

Function import_hlo(const hlo::Module& m, std::string_view filename);

}  // namespace tpu::ir
