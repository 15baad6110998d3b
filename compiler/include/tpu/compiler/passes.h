// IR -> IR passes. Each keeps the function's meaning (the interpreter gives
// the same results before and after, up to float rounding where a pass
// reorders or splits arithmetic, and the approximations of legalize-math);
// run_pipeline verifies what each leaves.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "tpu/ir/ir.h"

namespace tpu::compiler {

// Short counted while loops -> their trips, inlined: a loop whose condition
// is known at compile time once the state before it is, with at most 8
// trips, or with a dynamic-slice or dynamic-update-slice (at most 4,096
// trips; its starts are then known: a slice, or pads and a select; the back
// end has no slice at a runtime offset yet, so those loops are refused
// otherwise). Other loops stay loops.
ir::Function unroll_loops(const ir::Function& f);

// A constant of several values inside a while loop's condition or body ->
// a state element the loop passes through, the constant outside (its
// bytes sit in HBM for the whole run).
ir::Function hoist_loop_constants(const ir::Function& f);

// Work in a while loop's body that does not depend on the trip (XLA's
// while-loop invariant code motion): an op whose operands are state elements
// the body passes through unchanged, constants or such ops is computed once
// before the loop, and the body reads its value as a state element of its
// own. Ops that cost nothing here (constants, iota, broadcasts, reshapes)
// are not hoisted for their own sake, nor is a value the body would read
// that is larger than its operands (it would sit in HBM while the loop
// runs: it is computed in the body, from them), nor anything with a region
// or across devices.
ir::Function hoist_loop_invariants(const ir::Function& f);

// gather and scatter -> one-hot dots: each index becomes a one-hot row
// over the positions of the one dimension it indexes (gather clamps it into
// range, scatter drops it when out of range), and the gather or scatter a
// dot with the operand or updates, f32 values as three exact bf16 parts.
// Index components that count along a batch dimension (x[arange(n), i])
// become batching dimensions; several data-dependent ones (x[i, j]) one
// index over the product of their dimensions. Scatter adds or replaces (the
// last update in index order wins). Other forms are refused.
ir::Function lower_gather_scatter(const ir::Function& f);

// Tensors without elements: an op producing none becomes a broadcast of a
// constant; dots and convolutions of an empty operand become zeros, reduce,
// reduce-window and pad of one the init or pad value; empty concatenate
// operands are dropped. The back end then meets no empty work.
ir::Function fold_empty(const ir::Function& f);

// erf, sine, cosine, exponential-minus-one, log-plus-one, is-finite,
// atan2, remainder and round-nearest-afz -> the ops the VPU has (polynomials, exp
// and log, compares, floor and selects).
ir::Function legalize_math(const ir::Function& f);

// arg-reduce (argmax / argmin) -> a reduce for the extreme, compares and
// selects, and a minimum reduce of the indices that reach it.
ir::Function lower_arg_reduce(const ir::Function& f);

// Inline-free cleanups: constant folding (small results), identity
// reshape/transpose/convert/broadcast removal, reshape and broadcast chains
// folded, common subexpressions merged, dead code removed.
ir::Function canonicalize(const ir::Function& f);

// u32 ops whose result depends on more than the bits -> signed ones: order
// comparisons on x ^ 2^31, maximum/minimum/clamp by select, conversions to
// and from float in exact steps, to and from signed types as bitcasts;
// division, power and maximum/minimum reductions of u32 are refused.
ir::Function lower_unsigned(const ir::Function& f);

// convolution -> pad + strided slices (im2col) + concatenate + reshape + dot;
// feature groups become one convolution per group.
ir::Function lower_convolution(const ir::Function& f);

// reduce-window -> pad + one strided slice per window offset + combiner ops.
ir::Function lower_reduce_window(const ir::Function& f);

// select-and-scatter -> pad + one strided slice per window offset, a running
// selection (compare/select, padding masked out), and per offset the
// selected source values scattered back by an interior-padded pad.
ir::Function lower_select_and_scatter(const ir::Function& f);

// reduce -> transposes and reshapes around a 2-D reduce of dimension 1
// ([rows, R], across lanes) or 0 ([R, columns], down columns), with a
// constant init; a non-constant init is combined afterwards.
ir::Function canonicalize_reduce(const ir::Function& f);

// dot -> [B, M, K] x [B, K, N] -> [B, M, N] (or rank 2 without batch) with
// transposes and reshapes; operand dtypes made MXU-ready (s8 x s8 -> s32,
// bf16 x bf16 -> f32, f32 x f32 -> f32).
ir::Function canonicalize_dot(const ir::Function& f);

// f32 dots -> sums of bf16 x bf16 dots over the operands' bf16 parts
// (SPEC 5): default 1 pass, high 3, highest 6. `override` replaces every
// dot's own precision.
ir::Function split_f32_dots(const ir::Function& f, std::optional<ir::Precision> override);

// A global program with shardings (Function::partitions) -> every device's
// program on local shapes, with the collectives that keep its values
// (docs/compiler.md, "Automatic SPMD partitioning"). Others pass unchanged.
ir::Function spmd_partition(const ir::Function& f);

struct Pass {
  std::string name;
  std::function<ir::Function(const ir::Function&)> run;
  bool regions = true;  // run_pipeline runs it over loops' conditions and bodies too (false: it does so itself)
};

// The IR pipeline tpuc runs, in order.
std::vector<Pass> ir_pipeline(std::optional<ir::Precision> precision);

// Runs the passes in order, each over the while loops' conditions and
// bodies first (Pass::regions) and then over the function, and verifies the function after each (a pass that
// leaves an invalid function is an internal error that names the pass);
// `after`, if set, sees each pass's result.
using PassObserver = std::function<void(const std::string& pass, const ir::Function& f)>;
ir::Function run_pipeline(const ir::Function& f, const std::vector<Pass>& passes, const PassObserver& after = {});

// The form the back end takes, which the pipeline establishes: no op a pass
// lowers (convolution, reduce-window, select-and-scatter, the math functions
// of legalize-math), dots as [B,M,K] x [B,K,N] or [M,K] x [K,N] of bf16 -> f32
// or s8 -> s32, reduces of one dimension of a 2-D value with a constant
// init, no u32 ordering, maximum, minimum, clamp, divide or power. Anything
// else is an internal error naming the op.
void check_backend_form(const ir::Function& f);

}  // namespace tpu::compiler
