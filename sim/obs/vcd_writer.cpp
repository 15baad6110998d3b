#include "vcd_writer.h"

#include <fmt/format.h>

#include <map>
#include <sstream>

#include "tpu/isa/error.h"
#include "tpu/isa/file.h"

#ifdef TPU_HAVE_FST
extern "C" {
#include "fstapi.h"
}
#endif

namespace tpu::sim {
namespace {

// VCD identifiers: printable ASCII 33..126, shortest first.
std::string vcd_id(size_t i) {
  std::string s;
  do {
    s += char(33 + i % 94);
    i /= 94;
  } while (i > 0);
  return s;
}

}  // namespace

// The names of UnitState's values (0 idle, 1 busy, 2 stalled, 3 blocked).
constexpr const char* kStateNames[] = {"idle", "busy", "stalled", "blocked"};

bool VcdWriter::fst_available() {
#ifdef TPU_HAVE_FST
  return true;
#else
  return false;
#endif
}

VcdWriter::VcdWriter(const std::string& path, uint64_t clock_hz, uint64_t start_cycle, uint64_t end_cycle, Format format)
    : path_(path), format_(format), clock_hz_(clock_hz), start_(start_cycle), end_(end_cycle) {
  if (format == Format::fst) {
#ifdef TPU_HAVE_FST
    fst_ = fstWriterCreate(path.c_str(), 1);
    if (!fst_) throw Error(fmt::format("{}: cannot open for writing", path));
    fstWriterSetTimescale(fst_, -12);
    fstWriterSetPackType(fst_, FST_WR_PT_LZ4);
#else
    throw Error("--fst: this build has no FST writer (it needs Verilator's copy of GTKWave's fstapi and zlib)");
#endif
  } else {
    out_.open(path, std::ios::trunc);
    if (!out_) throw Error(fmt::format("{}: cannot open for writing", path));
  }
}

VcdWriter::~VcdWriter() {
#ifdef TPU_HAVE_FST
  if (fst_) fstWriterClose(fst_);
#endif
}

uint64_t VcdWriter::time_ps(uint64_t cycle) const {
  return uint64_t((unsigned __int128)cycle * 1000000000000u / clock_hz_ +
                  ((unsigned __int128)cycle * 1000000000000u % clock_hz_ * 2 >= clock_hz_ ? 1 : 0));
}

void VcdWriter::stamp(uint64_t cycle) {
#ifdef TPU_HAVE_FST
  if (fst_) return fstWriterEmitTimeChange(fst_, time_ps(cycle));
#endif
  out_ << '#' << time_ps(cycle) << '\n';
}

void VcdWriter::add(const std::string& scope, const std::string& name, int width, std::function<uint64_t()> get) {
  signals_.push_back({scope, name, vcd_id(signals_.size()), width, std::move(get), 0, false, 0});
}

// Calls open/close around the nested scopes of the signals, in registration
// order ("core0.mxu1": core0, then mxu1), and var for each signal.
void VcdWriter::walk_scopes(const std::function<void(const std::string&)>& open, const std::function<void()>& close,
                            const std::function<void(Signal&)>& var) {
  std::vector<std::string> opened;
  for (Signal& s : signals_) {
    std::vector<std::string> parts;
    size_t at = 0;
    for (size_t dot; (dot = s.scope.find('.', at)) != std::string::npos; at = dot + 1) parts.push_back(s.scope.substr(at, dot - at));
    parts.push_back(s.scope.substr(at));
    size_t common = 0;
    while (common < opened.size() && common < parts.size() && opened[common] == parts[common]) ++common;
    for (; opened.size() > common; opened.pop_back()) close();
    for (size_t i = common; i < parts.size(); ++i) open(parts[i]), opened.push_back(parts[i]);
    var(s);
  }
  for (; !opened.empty(); opened.pop_back()) close();
}

void VcdWriter::header() {
  header_done_ = true;
#ifdef TPU_HAVE_FST
  if (fst_) {
    fstWriterSetScope(fst_, FST_ST_VCD_MODULE, "tpu", nullptr);
    walk_scopes([&](const std::string& name) { fstWriterSetScope(fst_, FST_ST_VCD_MODULE, name.c_str(), nullptr); },
                [&] { fstWriterSetUpscope(fst_); },
                [&](Signal& s) { s.fst_handle = fstWriterCreateVar(fst_, FST_VT_VCD_WIRE, FST_VD_IMPLICIT, uint32_t(s.width), s.name.c_str(), 0); });
    fstWriterSetUpscope(fst_);
    return;
  }
#endif
  out_ << "$date tpusim $end\n$version tpusim VCD writer $end\n$timescale 1 ps $end\n$scope module tpu $end\n";
  walk_scopes([&](const std::string& name) { out_ << "$scope module " << name << " $end\n"; }, [&] { out_ << "$upscope $end\n"; },
              [&](Signal& s) {
                out_ << "$var wire " << s.width << " " << s.id << " " << s.name;
                if (s.width > 1) out_ << " [" << s.width - 1 << ":0]";
                out_ << " $end\n";
              });
  out_ << "$upscope $end\n$enddefinitions $end\n";
}

void VcdWriter::emit(Signal& s, uint64_t v) {
#ifdef TPU_HAVE_FST
  if (fst_) {
    char bits[65];
    for (int b = 0; b < s.width; ++b) bits[b] = ((v >> (s.width - 1 - b)) & 1) ? '1' : '0';
    bits[s.width] = 0;
    fstWriterEmitValueChange(fst_, s.fst_handle, bits);
    s.last = v;
    s.written = true;
    return;
  }
#endif
  if (s.width == 1) {
    out_ << (v & 1) << s.id << '\n';
  } else {
    out_ << 'b';
    bool started = false;
    for (int b = s.width - 1; b >= 0; --b) {
      const bool bit = (v >> b) & 1;
      if (bit) started = true;
      if (started || b == 0) out_ << (bit ? '1' : '0');
    }
    out_ << ' ' << s.id << '\n';
  }
  s.last = v;
  s.written = true;
}

void VcdWriter::sample(uint64_t cycle) {
  if (cycle < start_ || cycle >= end_) return;
  if (!header_done_) header();
  bool stamped = false;
  for (Signal& s : signals_) {
    uint64_t v = s.get();
    if (s.width < 64) v &= (uint64_t(1) << s.width) - 1;
    if (s.written && v == s.last) continue;
    if (!stamped) {
      stamp(cycle);
      last_time_written_ = cycle;
      stamped = true;
    }
    emit(s, v);
  }
}

void VcdWriter::close(uint64_t end_cycle) {
  if (!header_done_) header();
  const uint64_t last = std::min(end_cycle, end_);
  if (last_time_written_ == ~uint64_t(0) || last > last_time_written_) stamp(last);
#ifdef TPU_HAVE_FST
  if (fst_) {
    fstWriterClose(fst_);
    fst_ = nullptr;
  }
#endif
  if (format_ == Format::vcd) {
    out_.close();
    if (!out_) throw Error(fmt::format("{}: write error", path_));
  }
  std::string states;
  for (size_t v = 0; v < 4; ++v) states += fmt::format("{} {}\n", v, kStateNames[v]);
  isa::write_file(path_ + ".states", states);
  std::ostringstream g;
  g << "[*] GTKWave save file written by tpusim: one group per unit\n";
  g << "[dumpfile] \"" << path_ << "\"\n";
  std::string group;
  for (const Signal& s : signals_) {
    if (s.scope != group) {
      if (!group.empty()) g << "@1000200\n-" << group << "\n";
      group = s.scope;
      g << "@800200\n-" << group << "\n";
    }
    if (s.name == "state") g << "@2022\n^1 " << path_ << ".states\n";  // hex, translated by the filter: idle, busy, ...
    else g << (s.width == 1 ? "@28\n" : "@22\n");
    g << "tpu." << s.scope << "." << s.name;
    if (s.width > 1) g << "[" << s.width - 1 << ":0]";
    g << "\n";
  }
  if (!group.empty()) g << "@1000200\n-" << group << "\n";
  isa::write_file(path_ + ".gtkw", g.str());
}

}  // namespace tpu::sim
