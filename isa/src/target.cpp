#include "tpu/isa/target.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <set>

#include "tpu/isa/isa.h"
#include "tpu/isa/machine.h"

namespace tpu::generated {
extern const std::vector<std::pair<std::string_view, std::string_view>> kPresetConfigs;
}

namespace tpu::isa {
namespace {

constexpr uint64_t KiB = 1024, MiB = KiB * KiB, GiB = KiB * MiB, TiB = KiB * GiB;

const std::vector<TargetField> kFields = {
    {"chips", &Target::chips, 1, 4096, "chips", "chips in the system, joined by ICI ([system.md](system.md))"},
    {"cores", &Target::cores, 1, 16, "cores", "TensorCores per chip"},
    {"mxus_per_core", &Target::mxus_per_core, 1, kMaxMxus, "MXUs", "MXUs per TensorCore"},
    {"mxu_dim", &Target::mxu_dim, 1, 1024, "PEs", "N of the N x N systolic array"},
    {"vpu_lanes", &Target::vpu_lanes, 1, 4096, "lanes", "L, the lanes of a vector register"},
    {"vmem_bytes", &Target::vmem_bytes, 1, 4 * GiB, "bytes", "vector memory per core"},
    {"acc_rows", &Target::acc_rows, 1, 1u << 24, "rows", "accumulator memory rows of mxu_dim 32-bit words, per core"},
    {"smem_bytes", &Target::smem_bytes, 8, 64 * MiB, "bytes", "scalar memory per core"},
    {"hbm_bytes", &Target::hbm_bytes, 1, 1 * TiB, "bytes", "HBM per chip"},
};

bool valid_name(std::string_view n) {
  if (n.empty() || n.size() > kMaxTargetName) return false;
  for (char c : n)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.')) return false;
  return true;
}

}  // namespace

bool Target::same_machine(const Target& o) const {
  for (const auto& f : kFields)
    if (this->*f.member != o.*f.member) return false;
  return true;
}

const std::vector<TargetField>& target_fields() { return kFields; }

void validate(const Target& t) {
  if (!valid_name(t.name))
    throw Error(fmt::format("target name '{}' must be 1..{} characters of [A-Za-z0-9_.-]", t.name, kMaxTargetName));
  for (const auto& f : kFields) {
    uint64_t v = t.*f.member;
    if (v < f.min || v > f.max)
      throw Error(fmt::format("target.{} = {} is outside {}..{} ({})", f.key, v, f.min, f.max, f.doc));
  }
  if (t.smem_bytes % 8 != 0) throw Error(fmt::format("target.smem_bytes = {} is not a multiple of 8", t.smem_bytes));
}

std::vector<std::string> preset_names() {
  std::vector<std::string> names;
  for (const auto& [name, text] : generated::kPresetConfigs) names.emplace_back(name);
  return names;
}

std::optional<std::string_view> preset_text(std::string_view name) {
  for (const auto& [n, t] : generated::kPresetConfigs)
    if (n == name) return t;
  return std::nullopt;
}

Target target_from_json(std::string_view json_text, std::string_view where) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(json_text);
  } catch (const nlohmann::json::exception& e) {  // syntax, or a number out of range (1e400)
    throw Error(fmt::format("{}: not valid JSON: {}", where, e.what()));
  }
  if (!j.is_object()) throw Error(fmt::format("{}: a config must be a JSON object", where));
  Target t;
  auto name = j.find("name");
  if (name == j.end() || !name->is_string()) throw Error(fmt::format("{}: missing string field 'name'", where));
  t.name = name->get<std::string>();
  auto tj = j.find("target");
  if (tj == j.end() || !tj->is_object()) throw Error(fmt::format("{}: missing object 'target'", where));
  std::set<std::string> known;
  for (const auto& f : kFields) {
    known.insert(f.key);
    auto v = tj->find(f.key);
    if (v == tj->end()) throw Error(fmt::format("{}: target.{} is missing ({})", where, f.key, f.doc));
    if (!v->is_number_unsigned())
      throw Error(fmt::format("{}: target.{} must be a non-negative integer", where, f.key));
    t.*f.member = v->get<uint64_t>();
  }
  for (const auto& [key, value] : tj->items())
    if (!known.count(key)) throw Error(fmt::format("{}: target.{} is not a known parameter", where, key));
  try {
    validate(t);
  } catch (const Error& e) {
    throw Error(fmt::format("{}: {}", where, e.what()));
  }
  return t;
}

std::string read_text_file(const std::string& path) { return read_file(path, kMaxTextFileBytes); }

Target load_target(std::string_view preset_or_path) { return load_config(std::string(preset_or_path)).target; }

}  // namespace tpu::isa
