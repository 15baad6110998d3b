// StableHLO (MLIR text, what `jax.jit(f).lower(x).as_text()` prints) read
// into the same hlo::Module as HLO text, so both share the importer and every
// decomposition after it. Pretty and generic op forms, func.func/call/return,
// regions with implicit captures, dense literals (list, splat, hex), the
// #stablehlo attributes, chlo.erf, sdy annotations, and loc(...) locations
// (with #loc aliases): each instruction keeps its .mlir line and column and
// the user's Python "file:line". StableHLO's check.expect_* calls become
// Module::checks over extra results of @main.
#pragma once

#include <string_view>

#include "tpu/hlo/hlo.h"

namespace tpu::hlo {

// Throws Error "file:line:col: message" for malformed text and
// "file:line:col: unsupported ..." for ops and attributes tpuc does not know.
Module parse_stablehlo(std::string_view text, std::string_view filename);

// True when the text is MLIR (a module, a func.func or a #loc alias first),
// not HLO text.
bool looks_like_stablehlo(std::string_view text);

}  // namespace tpu::hlo
