#include "trace_writer.h"

#include <fmt/format.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "tpu/isa/isa.h"

namespace tpu::sim {
namespace {

std::string unit_track_name(int unit) {
  if (unit == 0) return "scalar";
  if (unit == 1) return "dma";
  if (unit == 2) return "vpu";
  return fmt::format("mxu{}", unit - 8);
}

}  // namespace

TraceWriter::TraceWriter(const isa::Program& program, uint64_t clock_hz, int cores, int mxus)
    : program_(program), clock_hz_(clock_hz), cores_(cores), mxus_(mxus) {}

void TraceWriter::instruction(int track, uint32_t pc, uint64_t start, uint64_t end) {
  events_.push_back({track, pc, start, end});
}

void TraceWriter::counter(int track, const char* name, uint64_t cycle, int64_t value) {
  counters_.push_back({track, name, cycle, value});
}

void TraceWriter::write(const std::string& path) const {
  std::ofstream out(path, std::ios::trunc);
  if (!out) throw Error(fmt::format("{}: cannot open for writing", path));
  const double us_per_cycle = 1e6 / double(clock_hz_);
  std::vector<std::string> text(program_.code.size());
  auto text_of = [&](uint32_t pc) -> const std::string& {
    if (text[pc].empty()) {
      auto d = isa::decode(program_.code[pc]);
      text[pc] = d ? isa::disassemble(*d, pc) : fmt::format(".inst {:#018x}", program_.code[pc]);
    }
    return text[pc];
  };
  out << "{\"displayTimeUnit\":\"ns\",\"otherData\":{\"clock_hz\":" << clock_hz_ << "},\"traceEvents\":[\n";
  bool first = true;
  auto put = [&](const nlohmann::json& j) {
    out << (first ? "" : ",\n") << j.dump();
    first = false;
  };
  std::vector<int> units = {0, 1, 2};
  for (int m = 0; m < mxus_; ++m) units.push_back(8 + m);
  for (int c = 0; c < cores_; ++c) {
    put({{"ph", "M"}, {"name", "process_name"}, {"pid", c}, {"args", {{"name", fmt::format("core{}", c)}}}});
    for (size_t i = 0; i < units.size(); ++i) {
      put({{"ph", "M"}, {"name", "thread_name"}, {"pid", c}, {"tid", units[i]}, {"args", {{"name", unit_track_name(units[i])}}}});
      put({{"ph", "M"}, {"name", "thread_sort_index"}, {"pid", c}, {"tid", units[i]}, {"args", {{"sort_index", i}}}});
    }
  }
  for (const Event& e : events_) {
    const std::string& t = text_of(e.pc);
    put({{"ph", "X"},
         {"name", t.substr(0, t.find(' '))},
         {"cat", unit_track_name(e.track % 16)},
         {"pid", e.track / 16},
         {"tid", e.track % 16},
         {"ts", double(e.start) * us_per_cycle},
         {"dur", double(e.end - e.start) * us_per_cycle},
         {"args", {{"pc", e.pc}, {"text", t}, {"start_cycle", e.start}, {"cycles", e.end - e.start}}}});
  }
  for (const Counter& c : counters_)
    put({{"ph", "C"},
         {"name", c.name},
         {"pid", c.track / 16},
         {"ts", double(c.cycle) * us_per_cycle},
         {"args", {{unit_track_name(c.track % 16), c.value}}}});
  out << "\n]}\n";
  if (!out) throw Error(fmt::format("{}: write error", path));
}

}  // namespace tpu::sim
