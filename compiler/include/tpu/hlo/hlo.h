// XLA HLO text, as JAX emits it (`lowered.as_text(dialect="hlo")`), parsed
// into modules, computations and instructions. Attribute values are kept as
// their text; typed readers turn the common ones into numbers. This is the
// front of tpuc; the IR, passes and code generation build on it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tpu/isa/error.h"
#include "tpu/isa/program.h"

namespace tpu::hlo {

struct Shape {
  bool tuple = false;
  std::vector<Shape> elements;  // tuple elements
  std::string dtype;            // pred, s8, s32, bf16, f32, ...; "token" for tokens
  std::vector<int64_t> dims;
  std::vector<int64_t> layout;  // minor-to-major, empty when not printed
  std::string to_string() const;
};

struct Instruction {
  std::string name;
  Shape shape;
  std::string opcode;
  std::vector<std::string> operands;  // operand instruction names
  std::string literal;                // constant(...) and parameter(...): the text in the parentheses
  std::vector<std::pair<std::string, std::string>> attributes;  // in order, values as written
  bool root = false;
  int line = 0;
  int col = 0;         // StableHLO: the op's column (0: not known)
  std::string source;  // the user's "file.py:line" (HLO metadata or StableHLO loc), if known

  const std::string* attribute(std::string_view key) const;
};

struct Computation {
  std::string name;
  bool entry = false;
  std::vector<Instruction> instructions;
  int line = 0;
  const Instruction* root() const;
  const Instruction* find(std::string_view name) const;
};

struct Module {
  std::string name;
  std::vector<std::pair<std::string, std::string>> attributes;  // e.g. entry_computation_layout
  std::vector<Computation> computations;
  // StableHLO check.expect_* calls: the ENTRY results they compare (after
  // the program's own results).
  std::vector<isa::Check> checks;
  const Computation* entry() const;
  const Computation* find(std::string_view name) const;
};

// Throws Error "file:line: message" for malformed text.
Module parse(std::string_view text, std::string_view filename);

// XLA's HLO opcodes (xla/hlo/ir/hlo_opcode.h), those tpuc imports and the
// rest: an opcode outside this list is a misspelling, not a missing feature.
const std::vector<std::string>& xla_opcodes();

// `{1,0}` or `{}` -> integers; throws Error naming the instruction otherwise.
std::vector<int64_t> parse_int_list(const std::string& value, const Instruction& where);

}  // namespace tpu::hlo
