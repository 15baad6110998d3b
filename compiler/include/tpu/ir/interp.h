// The IR's reference interpreter: the oracle the compiler's tests compare
// against. Values are held as doubles, which represent every pred, s8, s32,
// bf16 and f32 value exactly; each op computes in its dtype's arithmetic (f32
// ops in float, integer ops wrapping in 32 bits) and rounds its result to its
// dtype. Contractions (dot, convolution) and reductions add in double and
// round once: a more accurate answer than any hardware order.
#pragma once

#include <map>
#include <optional>
#include <vector>

#include "tpu/ir/ir.h"
#include "tpu/isa/npy.h"

namespace tpu::ir {

struct Tensor {
  Type type;
  std::vector<double> v;  // row-major
};

// inputs in parameter order; returns the results in order. Throws Error on a
// type mismatch of an input. An SPMD function (devices > 1) takes and
// returns global values: each device runs on its tile (or the whole of an
// untiled input), all-reduce combines within its groups in group order, and
// an untiled result is device 0's.
std::vector<Tensor> interpret(const Function& f, const std::vector<Tensor>& inputs);

// Evaluates one op given its operand values (constant folding uses this).
Tensor evaluate(const Op& op, const std::vector<const Tensor*>& operands);

// The values of a function's ops that are known at compile time: computed
// from constants alone (no parameter on the way), each at most `limit`
// elements, memoised. The function may grow while it is in use (an importer
// or a pass adds ops); ops already added must not change.
class ConstantFolder {
 public:
  static constexpr int64_t kDefaultLimit = 4096;
  explicit ConstantFolder(const Function& f, int64_t limit = kDefaultLimit) : f_(f), limit_(limit) {}
  const Tensor* value(int v);  // nullptr when not known
  std::optional<double> scalar(int v);  // the value of a one-element op

 private:
  const Function& f_;
  int64_t limit_;
  std::map<int, std::optional<Tensor>> known_;
};

// How far `got` is from `ref` (same shape): the normwise relative error
// ||got - ref|| / ||ref|| over the finite pairs (infinite when a NaN or an
// infinity is not matched), the largest absolute difference and the number
// of elements that differ.
struct Difference {
  double relative = 0, max_abs = 0;
  int64_t differing = 0;
};
Difference compare(const Tensor& got, const Tensor& ref);

Tensor from_npy(const isa::NpyArray& a, const Type& expected, const std::string& where);
isa::NpyArray to_npy(const Tensor& t);
// Raw little-endian storage bytes (pred and s8 one byte, bf16 two, f32/s32 four).
std::vector<uint8_t> to_bytes(const Tensor& t);
Tensor from_bytes(const Type& type, const std::vector<uint8_t>& bytes);

}  // namespace tpu::ir
