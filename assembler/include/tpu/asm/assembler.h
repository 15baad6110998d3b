// The assembler (text -> Program) and its inverse, the disassembler
// (Program -> text that assembles back to the identical binary). The
// syntax is described in docs/isa.md; the instruction table comes from isa.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tpu/isa/program.h"

namespace tpu::as {

struct Diagnostic {
  std::string file;
  int line = 0;  // 1-based
  int col = 0;   // 1-based
  std::string message;
  std::string source_line;

  // "file:line:col: error: message", then the source line and a caret.
  std::string render() const;
};

struct AssembleOptions {
  // The target given on the command line (--config). A `.target` directive in
  // the file must agree with it; with neither, the default preset is used.
  std::optional<isa::Target> target;
  size_t max_errors = 50;
};

inline constexpr const char* kDefaultPreset = "v5e";

struct AssembleResult {
  std::optional<isa::Program> program;  // set when there were no errors
  std::vector<Diagnostic> errors;
};

AssembleResult assemble(std::string_view source, std::string_view filename, const AssembleOptions& options = {});

// A comment line of a listing, before the instruction at `pc` ("": a blank
// line). Notes come in pc order.
struct Note {
  size_t pc = 0;
  std::string text;
};

// Assembly text for a program; assemble(disassemble(p)) reproduces p exactly.
// `notes` are written as comments where they belong.
std::string disassemble(const isa::Program& p, const std::vector<Note>& notes = {});

// The `.check` directive for a check between two outputs of these names.
std::string check_directive(const isa::Check& c, std::string_view actual, std::string_view expected);

}  // namespace tpu::as
