// Accumulator memory of one TensorCore: rows of mxu_dim 32-bit words (f32
// or s32 by use), written by the MXUs as results drain and read by the VPU.
#pragma once

#include <cstdint>

#include "zeroed.h"

namespace tpu::sim {

class Accumulators {
 public:
  Accumulators(uint64_t rows, uint32_t width) : rows_(rows), width_(width), data_(rows * width) {}
  uint64_t rows() const { return rows_; }
  uint32_t width() const { return width_; }
  uint32_t* row(uint64_t r) { return data_.data() + r * width_; }
  const uint32_t* row(uint64_t r) const { return data_.data() + r * width_; }

 private:
  uint64_t rows_;
  uint32_t width_;
  Zeroed<uint32_t> data_;
};

}  // namespace tpu::sim
