#include "trace_writer.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>

#include "tpu/isa/isa.h"

namespace tpu::sim {

TraceWriter::TraceWriter(const std::string& path, const isa::Program& program, uint64_t clock_hz, int chips, int cores, int mxus,
                         uint64_t window_start, uint64_t window_end)
    : path_(path), program_(program), cores_(cores), us_per_cycle_(1e6 / double(clock_hz)), text_(program.code.size()),
      window_start_(window_start), window_end_(window_end) {
  out_ = std::fopen(path.c_str(), "w");
  if (!out_) throw Error(fmt::format("{}: cannot open for writing ({})", path, std::strerror(errno)));
  std::fprintf(out_, "{\"displayTimeUnit\":\"ns\",\"otherData\":{\"clock_hz\":%llu},\"traceEvents\":[\n",
               static_cast<unsigned long long>(clock_hz));
  std::vector<int> units = {isa::kUnitScalar, isa::kUnitDma, isa::kUnitVpu};
  for (int m = 0; m < mxus; ++m) units.push_back(isa::kUnitMxu0 + m);
  using nlohmann::json;
  for (int c = 0; c < chips * cores; ++c) {
    const std::string name = chips > 1 ? fmt::format("chip{} core{}", c / cores, c % cores) : fmt::format("core{}", c);
    put(json{{"ph", "M"}, {"name", "process_name"}, {"pid", c}, {"args", {{"name", name}}}}.dump());
    put(json{{"ph", "M"}, {"name", "process_sort_index"}, {"pid", c}, {"args", {{"sort_index", c}}}}.dump());
    for (size_t i = 0; i < units.size(); ++i) {
      put(json{{"ph", "M"}, {"name", "thread_name"}, {"pid", c}, {"tid", units[i]}, {"args", {{"name", unit_name(units[i])}}}}
              .dump());
      put(json{{"ph", "M"}, {"name", "thread_sort_index"}, {"pid", c}, {"tid", units[i]}, {"args", {{"sort_index", units[i] * 100}}}}.dump());
      lanes_[{c, units[i]}].push_back(0);  // lane 0 exists from the start
    }
  }
  put(json{{"ph", "M"}, {"name", "thread_name"}, {"pid", 0}, {"tid", kKernelTrack}, {"args", {{"name", "kernels"}}}}.dump());
  put(json{{"ph", "M"}, {"name", "thread_sort_index"}, {"pid", 0}, {"tid", kKernelTrack}, {"args", {{"sort_index", -1}}}}.dump());
  lanes_[{0, kKernelTrack}].push_back(0);
}

int TraceWriter::lane(int pid, int unit, uint64_t start, uint64_t end) {
  auto& ends = lanes_[{pid, unit}];
  size_t l = 0;
  while (l < ends.size() && ends[l] > start) ++l;
  if (l == ends.size()) {
    if (ends.size() == kMaxLanes) {  // all busy: the one free soonest
      l = size_t(std::min_element(ends.begin(), ends.end()) - ends.begin());
    } else {
      ends.push_back(0);
      const int tid = unit + 100 * int(l);
      const std::string name = unit == kKernelTrack ? "kernels" : unit_name(unit);
      put(nlohmann::json{{"ph", "M"}, {"name", "thread_name"}, {"pid", pid}, {"tid", tid}, {"args", {{"name", fmt::format("{} (lane {})", name, l + 1)}}}}
              .dump());
      put(nlohmann::json{{"ph", "M"}, {"name", "thread_sort_index"}, {"pid", pid}, {"tid", tid},
                         {"args", {{"sort_index", unit == kKernelTrack ? -1 : unit * 100 + int(l)}}}}
              .dump());
    }
  }
  ends[l] = std::max(ends[l], end);
  return unit + 100 * int(l);
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
  if (end <= window_start_ || start >= window_end_ || full(start)) return;
  const std::string& t = text_of(pc);
  put(nlohmann::json{{"ph", "X"},
                     {"name", t.substr(0, t.find(' '))},
                     {"cat", unit_name(track_unit(track))},
                     {"pid", track_core(track)},
                     {"tid", lane(track_core(track), track_unit(track), start, end)},
                     {"ts", double(start) * us_per_cycle_},
                     {"dur", double(end - start) * us_per_cycle_},
                     {"args", {{"pc", pc}, {"text", t}, {"start_cycle", start}, {"cycles", end - start}, {"work", work}}}}
          .dump());
}

void TraceWriter::counter(int track, const char* name, uint64_t cycle, int64_t value) {
  if (cycle < window_start_ || cycle >= window_end_ || full(cycle)) return;
  put(nlohmann::json{{"ph", "C"},
                     {"name", name},
                     {"pid", track < 0 ? (-1 - track) * cores_ : track_core(track)},  // HBM: the chip's first core
                     {"ts", double(cycle) * us_per_cycle_},
                     {"args", {{track < 0 ? std::string("hbm") : unit_name(track_unit(track)), value}}}}
          .dump());
}

void TraceWriter::kernels(const nlohmann::json& kernels) {
  std::vector<const nlohmann::json*> order;  // by first cycle, so lanes fill in time order
  for (const auto& k : kernels)
    if (k["instructions"].get<uint64_t>() > 0) order.push_back(&k);
  std::stable_sort(order.begin(), order.end(),
                   [](const nlohmann::json* a, const nlohmann::json* b) { return (*a)["first_cycle"].get<uint64_t>() < (*b)["first_cycle"].get<uint64_t>(); });
  for (const auto* k : order) {
    const uint64_t start = (*k)["first_cycle"], end = (*k)["last_cycle"];
    if (end <= window_start_ || start >= window_end_ || full(start)) continue;
    put(nlohmann::json{{"ph", "X"},
                       {"name", (*k)["name"]},
                       {"cat", "kernel"},
                       {"pid", 0},
                       {"tid", lane(0, kKernelTrack, start, end)},
                       {"ts", double(start) * us_per_cycle_},
                       {"dur", double(end - start) * us_per_cycle_},
                       {"args", {{"ops", (*k)["ops"]}, {"cycles", end - start}, {"bound", (*k)["bound"]}}}}
            .dump());
  }
}

void TraceWriter::finish() {
  std::FILE* f = out_;
  out_ = nullptr;
  std::fputs("\n]}\n", f);
  const bool failed = std::ferror(f) != 0;
  if (std::fclose(f) != 0 || failed) throw Error(fmt::format("{}: write error ({})", path_, std::strerror(errno)));
}

}  // namespace tpu::sim
