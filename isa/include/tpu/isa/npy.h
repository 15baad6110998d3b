// Reading and writing numpy .npy files (format 1.0/2.0/3.0, C order,
// little-endian) for the tensors a program takes and returns. bfloat16 is
// stored as uint16 bit patterns, pred as numpy bool.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tpu/isa/error.h"
#include "tpu/isa/program.h"

namespace tpu::isa {

struct NpyArray {
  std::string descr;  // numpy dtype string, e.g. "<f4", "|i1"
  std::vector<uint64_t> shape;
  std::vector<uint8_t> data;  // raw little-endian elements, C order
};

// Throws Error naming the file and the problem.
NpyArray read_npy(const std::string& path);
void write_npy(const std::string& path, const NpyArray& a);

// The numpy descr used for a tensor dtype ("<u2" for bf16).
std::string npy_descr(Dtype d);

// Checks that an array can feed a tensor symbol (same shape, and a descr
// that has the symbol's dtype: "<u2" or "<i2" for bf16) and returns its bytes.
std::vector<uint8_t> npy_to_tensor(const NpyArray& a, const TensorSymbol& sym, const std::string& where);

NpyArray tensor_to_npy(const TensorSymbol& sym, std::vector<uint8_t> bytes);

}  // namespace tpu::isa
