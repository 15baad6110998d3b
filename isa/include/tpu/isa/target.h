// The target: the machine parameters a program is compiled for and that
// its code depends on (array size, lanes, memory sizes, chip count). A .tpu
// records them; the simulator refuses to run a program on a machine whose
// target differs. Timing parameters (clock, HBM timings, ...) are not part
// of the target: they can change without recompiling.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tpu/isa/error.h"
#include "tpu/isa/file.h"

namespace tpu::isa {

struct Target {
  std::string name;
  uint64_t chips = 0;
  uint64_t cores = 0;
  uint64_t mxus_per_core = 0;
  uint64_t mxu_dim = 0;
  uint64_t vpu_lanes = 0;
  uint64_t vmem_bytes = 0;
  uint64_t acc_rows = 0;
  uint64_t smem_bytes = 0;
  uint64_t hbm_bytes = 0;

  bool same_machine(const Target& o) const;  // every parameter but the name
  bool operator==(const Target& o) const { return name == o.name && same_machine(o); }
};

struct TargetField {
  const char* key;
  uint64_t Target::*member;
  uint64_t min;
  uint64_t max;
  const char* unit;
  const char* doc;
};

// Every numeric parameter, in file order, with its valid range.
const std::vector<TargetField>& target_fields();

inline constexpr size_t kMaxTargetName = 64;

// Throws Error naming the first bad parameter.
void validate(const Target& t);

// Preset names (configs/*.json, built into the binary) and their text.
std::vector<std::string> preset_names();
std::optional<std::string_view> preset_text(std::string_view name);

// Reads the "target" object of a config in JSON text; `where` names it in errors.
Target target_from_json(std::string_view json_text, std::string_view where);

// The target of a preset or config file, after the whole config is validated
// (load_config in machine.h): tpuc, tpu-as and tpusim accept the same files.
Target load_target(std::string_view preset_or_path);

// read_file with the limit for text files; throws Error with the path on failure.
std::string read_text_file(const std::string& path);

}  // namespace tpu::isa
