// The MXU's arithmetic array, behind one interface with two implementations
// that must agree bit for bit and cycle for cycle:
//  - PeArray advances every PE register every cycle (a skewed wavefront);
//  - FastArray computes a row's whole result when the row is fed.
// Either way, the result of a row fed in cycle c is complete at the end of
// cycle c + 2N - 2, and the MXU writes it to the accumulators in c + 2N - 1.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

namespace tpu::sim {

// One input row in flight and, once complete, its result.
struct MxuRow {
  uint64_t fed_cycle = ~uint64_t(0);
  bool int8 = false;
  int buf = 0;
  bool accumulate = false;
  uint64_t acc_row = 0;
  uint32_t* x = nullptr;       // N operands: f32 bits (bf16 widened) or s32
  uint32_t* result = nullptr;  // N words: f32 bits or s32 (both in the MXU's row store)
  bool pending = false;          // fed, its result not yet computed (complete())
};

class MxuArray {
 public:
  explicit MxuArray(uint32_t n) : n_(n) {}
  virtual ~MxuArray() = default;
  uint32_t n() const { return n_; }

  // Weight buffer b: w[k * N + j] is the weight of PE(k, j) (k: input index,
  // j: output column) as f32 bits or s32.
  virtual void set_weights(int b, const std::vector<uint32_t>& w) = 0;
  // Feeds a row in cycle `now` (at most one per cycle).
  virtual void feed(uint64_t now, MxuRow& row) = 0;
  // Before the row's result is read (in its drain cycle): an array may
  // compute the results of fed rows late, several at once.
  virtual void complete(MxuRow& /*row*/) {}
  // Advances one cycle; called every cycle in which a row is in flight,
  // after any feed of that cycle.
  virtual void step(uint64_t now) = 0;

 protected:
  uint32_t n_;
};

std::unique_ptr<MxuArray> make_pe_array(uint32_t n);
std::unique_ptr<MxuArray> make_fast_array(uint32_t n);

}  // namespace tpu::sim
