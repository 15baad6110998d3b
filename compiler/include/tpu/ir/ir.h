// tpuc's linear-algebra IR: one function of static-shape tensor operations in
// SSA form. Value %i is the result of op i; operands refer to earlier ops, so
// the op list is always in a valid execution order. The operations are XLA's
// (same names, same semantics) minus the ones the importer removes (tuples,
// calls, a reduction's region: it names its combiner instead). A while loop
// keeps its condition and body as functions of its own. docs/ir.md
// describes the text format; print() and parse() are exact inverses.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tpu/isa/error.h"
#include "tpu/isa/program.h"

namespace tpu::ir {

enum class DType : uint8_t { pred, s8, s32, bf16, f32, u32, f16 };
const char* dtype_name(DType d);
bool is_float(DType d);
int dtype_bytes(DType d);  // storage size in HBM and VMEM: pred and s8 take 1, bf16 and f16 2
isa::Dtype isa_dtype(DType d);  // its type in a .tpu program
bool is_32bit(DType d);   // s32, u32, f32: what bitcast-convert reinterprets

struct Type {
  DType dtype = DType::f32;
  std::vector<int64_t> dims;
  int64_t elements() const;
  int64_t bytes() const { return elements() * dtype_bytes(dtype); }
  std::string str() const;  // f32[2,3]
  bool operator==(const Type& o) const { return dtype == o.dtype && dims == o.dims; }
  bool operator!=(const Type& o) const { return !(*this == o); }
};

#define TPU_IR_OPS(X)                                                                              \
  /* sources */ X(parameter) X(constant) X(iota)                                                   \
  /* layout */ X(broadcast) X(reshape) X(transpose) X(slice) X(pad) X(concatenate) X(reverse)        \
  /* unary */ X(convert) X(bitcast_convert) X(negate) X(abs) X(exponential) X(log) X(tanh) X(logistic) X(rsqrt) X(sqrt) \
      X(floor) X(ceil) X(round_nearest_even) X(round_nearest_afz) X(sign) X(erf) X(sine) X(cosine) X(exponential_minus_one) \
      X(log_plus_one) X(is_finite) X(not_)                                          \
  /* binary */ X(add) X(subtract) X(multiply) X(divide) X(remainder) X(atan2) X(maximum) X(minimum) X(power) X(and_)     \
      X(or_) X(xor_) X(shift_left) X(shift_right_arithmetic) X(shift_right_logical) X(compare)       \
  /* ternary */ X(select) X(clamp)                                                                  \
  /* contractions and reductions */ X(dot) X(convolution) X(reduce) X(arg_reduce) X(reduce_window) \
      X(select_and_scatter)                                                                         \
  /* indexed */ X(gather) X(scatter) X(dynamic_slice) X(dynamic_update_slice)                        \
  /* across devices */ X(all_reduce) X(all_gather) X(reduce_scatter) X(all_to_all) X(collective_permute)        \
  /* loops */ X(while_) X(get_tuple_element)

enum class OpKind : uint8_t {
#define X(n) n,
  TPU_IR_OPS(X)
#undef X
};
const char* op_name(OpKind k);  // "round-nearest-even", "and", ...
bool is_elementwise(OpKind k);
bool is_unary(OpKind k);
bool is_binary(OpKind k);
bool is_collective(OpKind k);  // all-reduce, all-gather, reduce-scatter, all-to-all, collective-permute: across devices
constexpr OpKind kLastOp = OpKind::get_tuple_element;

// replace (a scatter's update takes the element's place) is scatter's alone.
enum class Combiner : uint8_t { add, multiply, maximum, minimum, and_, or_, replace };
const char* combiner_name(Combiner c);
double combiner_identity(Combiner c, DType d);  // x combined with it is x
enum class Direction : uint8_t { EQ, NE, LT, LE, GT, GE };
const char* direction_name(Direction d);
enum class Precision : uint8_t { default_, high, highest };
const char* precision_name(Precision p);

struct ConvDims {  // XLA's ConvolutionDimensionNumbers
  int64_t in_batch = 0, in_feature = 0, k_in = 0, k_out = 0, out_batch = 0, out_feature = 0;
  std::vector<int64_t> in_spatial, k_spatial, out_spatial;
  bool operator==(const ConvDims& o) const;
};

// XLA's GatherDimensionNumbers (with slice_sizes), under gather's names;
// a scatter's ScatterDimensionNumbers map onto them: update_window_dims ->
// offset, inserted_window_dims -> collapsed, scatter_dims_to_operand_dims ->
// start_index_map, input_batching_dims -> operand_batching,
// scatter_indices_batching_dims -> index_batching.
struct GatherDims {
  std::vector<int64_t> offset, collapsed, start_index_map, operand_batching, index_batching;
  std::vector<int64_t> slice_sizes;  // gather only
  int64_t index_vector_dim = 0;
  bool operator==(const GatherDims& o) const;
};

struct Function;

struct Op {
  OpKind kind = OpKind::parameter;
  Type type;
  std::vector<int> operands;
  // Attributes; which are meaningful depends on kind (see docs/ir.md).
  int64_t index = 0;              // parameter number, iota dimension, concatenate dimension
  std::vector<int64_t> dims;      // broadcast, transpose, reduce, reverse dimensions
  std::vector<int64_t> lo, hi, interior;  // slice start/limit/-, pad low/high/interior, window padding
  std::vector<int64_t> strides;   // slice and window strides
  std::vector<int64_t> window, lhs_dilation, rhs_dilation;  // reduce-window and convolution
  std::vector<int64_t> lhs_batch, rhs_batch, lhs_contract, rhs_contract;  // dot
  ConvDims conv;
  GatherDims gather;              // gather, scatter
  int64_t feature_groups = 1, batch_groups = 1;
  Precision precision = Precision::default_;
  Direction direction = Direction::EQ;
  Combiner combiner = Combiner::add;
  std::vector<double> literal;    // constant values, row-major (one value: a splat)
  bool opaque = false;            // a constant whose value is runtime data: never folded into others
  // In a global program over a mesh (Function::mesh): for each dimension of
  // the value, the mesh axes it is split over (a mask: bit a for axis a);
  // a parameter's in_sharding, a with_sharding_constraint elsewhere. None:
  // the partitioner chooses.
  std::vector<int64_t> sharding;
  std::string loc;                // where it came from: "file:line name"
  // all-reduce, all-gather: the devices that combine their values, in
  // groups (each in ring order); every device of the function is in one.
  // collective-permute: [source, target] pairs.
  std::vector<std::vector<int64_t>> groups;
  // while: its condition (state -> pred[]) and body (state -> next state).
  // Its operands are the initial state; the loop's values are its
  // get-tuple-elements (index: the state element), typed as the state. The
  // while op's own type is pred[] (a placeholder: nothing else reads it).
  std::vector<Function> regions;
};

struct Function {
  std::string name = "main";
  std::vector<Op> ops;
  std::vector<int> results;
  std::vector<std::string> param_names;  // parameter i's name, for .input symbols
  // SPMD: the function is every device's program, and its parameters and
  // results are each device's share. Tiles (none: the whole value on every
  // device) split a global value along each axis over the devices,
  // row-major (docs/ir.md).
  int64_t devices = 1;  // a loop's regions have their loop's devices
  std::vector<std::vector<int64_t>> param_tiles, result_tiles;  // by parameter and result number
  // By device, the tile it holds when several devices hold one (a value
  // split over some axes of the mesh, whole along the others); none: device
  // d holds tile d.
  std::vector<std::vector<int64_t>> param_tile_of, result_tile_of;  // by parameter and result number
  // Automatic SPMD (jax.jit with shardings): the global program, to run on
  // the devices of `mesh` (its axes' sizes, the first the most significant
  // in a device's number) once the spmd-partition pass has made it every
  // device's program. Until then it is one device's program on global
  // shapes (what the interpreter runs); its parameters' shardings and the
  // constraints on other values are their ops' `sharding`.
  std::vector<int64_t> mesh;
  int64_t partitions() const {  // the mesh's devices (saturating at 2^40)
    int64_t n = 1;
    for (int64_t a : mesh) n = a < 1 ? 0 : n > (int64_t(1) << 40) / a ? int64_t(1) << 40 : n * a;
    return n;
  }
  // Checks between two results (StableHLO check.expect_*), written to the
  // .tpu; not printed in IR text, and kept across passes by compile().
  std::vector<isa::Check> checks;

  int add(Op op) {
    ops.push_back(std::move(op));
    return int(ops.size()) - 1;
  }
  std::vector<int> params() const;  // op index of parameter i, in parameter order
  // The global type of parameter or result i: its type times its tiles.
  Type param_global_type(size_t i) const;
  Type result_global_type(size_t i) const;
};

// The tile device d holds: tile_of[d], or d without tile_of.
inline int64_t tile_index(const std::vector<std::vector<int64_t>>& tile_of, size_t value, int64_t d) {
  return value < tile_of.size() && !tile_of[value].empty() ? tile_of[value][size_t(d)] : d;
}

// A mesh of devices: its axes' sizes, the first the most significant in a
// device's number (row-major). A mask names some of its axes (bit a for
// axis a). The one place the partitioner, the importer and the IR number
// devices along axes.
struct Mesh {
  std::vector<int64_t> sizes;

  // The devices along the axes of `mask`.
  int64_t count(int64_t mask) const;
  // Device d's coordinate along axis a, and its place along the axes of
  // `mask` (row-major over them).
  int64_t coord(int64_t d, size_t a) const;
  int64_t index(int64_t d, int64_t mask) const;
  // The devices that differ only along the axes of `mask`: a group per
  // place along the other axes (in that order), each in index(d, mask) order.
  std::vector<std::vector<int64_t>> groups(int64_t mask) const;
  // A value split over the mesh, per dimension the mask of the axes it is
  // split over (dimension order major first): the tiles along each
  // dimension, and the tile each device holds (row-major over the tiles),
  // empty where device d holds tile d.
  std::vector<int64_t> tiles(const std::vector<int64_t>& masks) const;
  std::vector<int64_t> tile_of(const std::vector<int64_t>& masks) const;

 private:
  int64_t all() const { return (int64_t(1) << sizes.size()) - 1; }
};

// `tiles` (empty: none) of a local type: the global type.
Type tiled_type(const Type& local, const std::vector<int64_t>& tiles);

std::string print(const Function& f);
Function parse(std::string_view text, std::string_view filename);

// Checks operand order, operand types and every attribute against the result
// type; throws Error("loc: op %i: what is wrong").
void verify(const Function& f);

// The result type an op must have given its operands (used by the verifier
// and by passes that build ops). Throws Error when the op is malformed.
Type infer_type(const Function& f, const Op& op);
// Windows along one dimension of `in` elements: padded by lo/hi, dilated by
// base_dil, a window of `size` dilated by win_dil, moved by `stride`.
int64_t window_out(int64_t in, int64_t lo, int64_t hi, int64_t base_dil, int64_t size, int64_t stride, int64_t win_dil);

// Rounds a value to what dtype can hold (bf16 nearest-even, s8/s32 wrapping).
double canonicalize_value(DType d, double v);

}  // namespace tpu::ir
