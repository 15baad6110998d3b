#include "trace_writer.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>

#include "tpu/isa/isa.h"

namespace tpu::sim {

TraceWriter::TraceWriter(const std::string& path, const isa::Program& program, uint64_t clock_hz, int cores, int mxus)
    : path_(path), program_(program), us_per_cycle_(1e6 / double(clock_hz)), text_(program.code.size()) {
  out_ = std::fopen(path.c_str(), "w");
  if (!out_) throw Error(fmt::format("{}: cannot open for writing ({})", path, std::strerror(errno)));
  std::fprintf(out_, "{\"displayTimeUnit\":\"ns\",\"otherData\":{\"clock_hz\":%llu},\"traceEvents\":[\n",
               static_cast<unsigned long long>(clock_hz));
  std::vector<int> units = {0, 1, 2};
  for (int m = 0; m < mxus; ++m) units.push_back(8 + m);
  using nlohmann::json;
  for (int c = 0; c < cores; ++c) {
    put(json{{"ph", "M"}, {"name", "process_name"}, {"pid", c}, {"args", {{"name", fmt::format("core{}", c)}}}}.dump());
    for (size_t i = 0; i < units.size(); ++i) {
      put(json{{"ph", "M"}, {"name", "thread_name"}, {"pid", c}, {"tid", units[i]}, {"args", {{"name", unit_name(units[i])}}}}
              .dump());
      put(json{{"ph", "M"}, {"name", "thread_sort_index"}, {"pid", c}, {"tid", units[i]}, {"args", {{"sort_index", i}}}}.dump());
    }
  }
}

TraceWriter::~TraceWriter() {
  if (!out_) return;
  std::fputs("\n]}\n", out_);
  std::fclose(out_);
}

void TraceWriter::put(const std::string& json_object) {
  std::fputs(first_ ? "" : ",\n", out_);
  std::fputs(json_object.c_str(), out_);
  first_ = false;
}

const std::string& TraceWriter::text_of(uint32_t pc) {
  if (text_[pc].empty()) {
    auto d = isa::decode(program_.code[pc]);
    text_[pc] = d ? isa::disassemble(*d, pc) : fmt::format(".inst {:#018x}", program_.code[pc]);
  }
  return text_[pc];
}

bool TraceWriter::full(uint64_t cycle) {
  if (events_ > kMaxEvents) return true;
  if (++events_ <= kMaxEvents) return false;
  put(nlohmann::json{{"ph", "i"},
                     {"s", "g"},
                     {"name", fmt::format("trace full: events after the first {} are not recorded", kMaxEvents)},
                     {"pid", 0},
                     {"ts", double(cycle) * us_per_cycle_}}
          .dump());
  return true;
}

void TraceWriter::instruction(int track, uint32_t pc, uint64_t start, uint64_t end, uint64_t work) {
  if (full(start)) return;
  const std::string& t = text_of(pc);
  put(nlohmann::json{{"ph", "X"},
                     {"name", t.substr(0, t.find(' '))},
                     {"cat", unit_name(track % 16)},
                     {"pid", track / 16},
                     {"tid", track % 16},
                     {"ts", double(start) * us_per_cycle_},
                     {"dur", double(end - start) * us_per_cycle_},
                     {"args", {{"pc", pc}, {"text", t}, {"start_cycle", start}, {"cycles", end - start}, {"work", work}}}}
          .dump());
}

void TraceWriter::counter(int track, const char* name, uint64_t cycle, int64_t value) {
  if (full(cycle)) return;
  put(nlohmann::json{{"ph", "C"},
                     {"name", name},
                     {"pid", track / 16},
                     {"ts", double(cycle) * us_per_cycle_},
                     {"args", {{unit_name(track % 16), value}}}}
          .dump());
}

void TraceWriter::finish() {
  std::FILE* f = out_;
  out_ = nullptr;
  std::fputs("\n]}\n", f);
  const bool failed = std::ferror(f) != 0;
  if (std::fclose(f) != 0 || failed) throw Error(fmt::format("{}: write error ({})", path_, std::strerror(errno)));
}

}  // namespace tpu::sim
