#include "tpu/isa/machine.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <set>

namespace tpu::isa {
namespace {

using nlohmann::json;

// Reads one object of the config, checking every key it holds is known.
class Section {
 public:
  Section(const json& j, std::string path, const std::string& where) : path_(std::move(path)), where_(where) {
    if (!j.is_object()) fail(path_, "must be an object");
    j_ = &j;
  }
  ~Section() = default;

  template <typename T>
  void uint(const char* key, T& out, uint64_t lo, uint64_t hi, bool required = true) {
    seen_.insert(key);
    auto it = j_->find(key);
    if (it == j_->end()) {
      if (required) fail(name(key), "is missing");
      return;
    }
    // A float is taken when it is a whole number an uint64 holds (1e9 for a clock).
    const bool whole_float = it->is_number_float() && it->get<double>() >= 0 && it->get<double>() < 0x1p64 &&
                             it->get<double>() == std::floor(it->get<double>());
    if (!it->is_number_unsigned() && !whole_float) fail(name(key), "must be a non-negative integer");
    uint64_t v = it->is_number_unsigned() ? it->get<uint64_t>() : uint64_t(it->get<double>());
    if (v < lo || v > hi) fail(name(key), fmt::format("= {} is outside {}..{}", v, lo, hi));
    out = static_cast<T>(v);
  }
  void str(const char* key, std::string& out, const std::set<std::string>& allowed) {
    seen_.insert(key);
    auto it = j_->find(key);
    if (it == j_->end()) fail(name(key), "is missing");
    if (!it->is_string()) fail(name(key), "must be a string");
    out = it->get<std::string>();
    if (!allowed.count(out)) fail(name(key), fmt::format("= '{}' is not one of: {}", out, fmt::join(allowed, ", ")));
  }
  const json& child(const char* key) {
    seen_.insert(key);
    auto it = j_->find(key);
    if (it == j_->end()) fail(name(key), "is missing");
    return *it;
  }
  void skip(const char* key) { seen_.insert(key); }
  void finish() {
    for (const auto& [k, v] : j_->items())
      if (!seen_.count(k)) fail(name(k.c_str()), "is not a known parameter");
  }
  std::string name(const char* key) const { return path_.empty() ? key : path_ + "." + key; }
  [[noreturn]] void fail(const std::string& what, const std::string& msg) const {
    throw Error(fmt::format("{}: {} {}", where_, what, msg));
  }

 private:
  const json* j_ = nullptr;
  std::string path_;
  std::string where_;
  std::set<std::string> seen_;
};

}  // namespace

uint64_t MachineConfig::hbm_latency_cycles() const {
  return (uint64_t(hbm.latency_ns) * clock_hz + 999999999) / 1000000000;
}

uint64_t MachineConfig::hbm_bytes_per_cycle_fp() const {
  unsigned __int128 fp = (unsigned __int128)hbm.bandwidth_bytes_per_s * 1024 / clock_hz;
  return fp < 1 ? 1 : uint64_t(fp);
}

MachineConfig config_from_json(const std::string& text, const std::string& where) {
  MachineConfig c;
  c.target = target_from_json(text, where);
  json j = json::parse(text);  // already validated as JSON above
  Section top(j, "", where);
  top.skip("name");
  top.skip("target");
  if (j.contains("description")) {
    top.skip("description");
    if (!j["description"].is_string()) top.fail("description", "must be a string");
    c.description = j["description"].get<std::string>();
  }
  top.uint("clock_hz", c.clock_hz, 1000000, 100000000000ull);
  {
    Section s(top.child("core"), "core", where);
    s.uint("queue_depth", c.core.queue_depth, 1, 1024);
    s.uint("branch_penalty", c.core.branch_penalty, 0, 64);
    s.uint("issue_width", c.core.issue_width, 1, 16);
    s.finish();
  }
  {
    Section v(top.child("vpu"), "vpu", where);
    Section l(v.child("latency"), "vpu.latency", where);
    l.uint("alu", c.vpu.latency.alu, 1, 256);
    l.uint("mul", c.vpu.latency.mul, 1, 256);
    l.uint("div", c.vpu.latency.div, 1, 256);
    l.uint("transcendental", c.vpu.latency.transcendental, 1, 256);
    l.uint("load", c.vpu.latency.load, 1, 256);
    l.uint("store", c.vpu.latency.store, 1, 256);
    l.uint("reduce", c.vpu.latency.reduce, 1, 256);
    l.finish();
    Section is(v.child("issue"), "vpu.issue", where);
    is.uint("width", c.vpu.issue.width, 1, 16);
    is.uint("alu", c.vpu.issue.alu, 1, 16);
    is.uint("load", c.vpu.issue.load, 1, 16);
    is.uint("store", c.vpu.issue.store, 1, 16);
    is.finish();
    v.finish();
  }
  {
    Section d(top.child("dma"), "dma", where);
    d.uint("max_outstanding", c.dma.max_outstanding, 1, 1024);
    d.uint("burst_bytes", c.dma.burst_bytes, 1, 1u << 20);
    d.uint("bursts_per_cycle", c.dma.bursts_per_cycle, 1, 64);
    d.finish();
  }
  {
    Section h(top.child("hbm"), "hbm", where);
    h.str("model", c.hbm.model, {"simple"});
    h.uint("bandwidth_bytes_per_s", c.hbm.bandwidth_bytes_per_s, 1000000, 1000000000000000ull);
    h.uint("latency_ns", c.hbm.latency_ns, 0, 100000);
    h.finish();
  }
  top.finish();
  if (c.target.chips != 1) throw Error(fmt::format("{}: target.chips = {}: multi-chip systems are not modelled yet", where, c.target.chips));
  return c;
}

namespace {

// Replaces the value at a dotted path that the config already has.
void apply_setting(json& j, const std::string& setting) {
  const size_t eq = setting.find('=');
  if (eq == std::string::npos || eq == 0) throw Error(fmt::format("--set '{}' is not KEY=VALUE", setting));
  const std::string key = setting.substr(0, eq), text = setting.substr(eq + 1);
  json* at = &j;
  for (size_t start = 0; start <= key.size();) {
    const size_t dot = std::min(key.find('.', start), key.size());
    const std::string part = key.substr(start, dot - start);
    if (!at->is_object() || !at->contains(part)) throw Error(fmt::format("--set {}: the config has no parameter '{}'", setting, key));
    at = &(*at)[part];
    start = dot + 1;
  }
  if (at->is_object()) throw Error(fmt::format("--set {}: '{}' is a section, not a parameter", setting, key));
  // A number or a JSON literal as written; anything else is a string (hbm.model=simple).
  json value = json::parse(text, nullptr, false);
  *at = value.is_discarded() ? json(text) : value;
}

}  // namespace

MachineConfig load_config(const std::string& preset_or_path, const std::vector<std::string>& settings) {
  std::string text, where;
  if (auto preset = preset_text(preset_or_path)) {
    text = std::string(*preset);
    where = fmt::format("preset '{}'", preset_or_path);
  } else if (preset_or_path.find('/') == std::string::npos && preset_or_path.find(".json") == std::string::npos) {
    throw Error(fmt::format("unknown preset '{}' (presets: {})", preset_or_path, fmt::join(preset_names(), ", ")));
  } else {
    text = read_text_file(preset_or_path);
    where = preset_or_path;
  }
  if (settings.empty()) return config_from_json(text, where);
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    throw Error(fmt::format("{}: not valid JSON: {}", where, e.what()));
  }
  for (const std::string& s : settings) apply_setting(j, s);
  return config_from_json(j.dump(), fmt::format("{} with --set {}", where, fmt::join(settings, " --set ")));
}

std::string MachineConfig::to_json() const {
  json t;
  for (const auto& f : target_fields()) t[f.key] = target.*f.member;
  json j = {{"name", target.name},
            {"description", description},
            {"target", t},
            {"clock_hz", clock_hz},
            {"core", {{"queue_depth", core.queue_depth}, {"branch_penalty", core.branch_penalty}, {"issue_width", core.issue_width}}},
            {"vpu",
             {{"latency",
               {{"alu", vpu.latency.alu},
                {"mul", vpu.latency.mul},
                {"div", vpu.latency.div},
                {"transcendental", vpu.latency.transcendental},
                {"load", vpu.latency.load},
                {"store", vpu.latency.store},
                {"reduce", vpu.latency.reduce}}},
              {"issue", {{"width", vpu.issue.width}, {"alu", vpu.issue.alu}, {"load", vpu.issue.load}, {"store", vpu.issue.store}}}}},
            {"dma", {{"max_outstanding", dma.max_outstanding}, {"burst_bytes", dma.burst_bytes}, {"bursts_per_cycle", dma.bursts_per_cycle}}},
            {"hbm", {{"model", hbm.model}, {"bandwidth_bytes_per_s", hbm.bandwidth_bytes_per_s}, {"latency_ns", hbm.latency_ns}}}};
  return j.dump(2) + "\n";
}

}  // namespace tpu::isa
