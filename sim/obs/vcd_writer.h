// A small waveform writer for the model's own signals: values are sampled
// once per cycle (after every unit has evaluated it) and only changes are
// written, inside an optional window of cycles. Scopes follow the hardware
// (core0.scalar, core0.mxu1, ...), and a GTKWave save file groups them and
// names the unit states. VCD, or FST (GTKWave's own compressed format) when
// the build has Verilator's copy of GTKWave's fstapi.
//
// Time stamps are in picoseconds, each computed from its cycle (cycle x
// 10^12 / clock_hz, rounded), so they never drift from the cycle count; the
// `clock.cycle` signal carries the cycle number itself.
#pragma once

#include <cstdint>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

namespace tpu::sim {

class VcdWriter {
 public:
  enum class Format { vcd, fst };
  // Throws Error when the file cannot be written or FST is not built in.
  VcdWriter(const std::string& path, uint64_t clock_hz, uint64_t start_cycle, uint64_t end_cycle, Format format = Format::vcd);
  ~VcdWriter();
  VcdWriter(const VcdWriter&) = delete;
  VcdWriter& operator=(const VcdWriter&) = delete;

  // Registers a signal before the first sample; scope uses '.' separators.
  // A unit's `state` signal is shown with its state names in GTKWave.
  void add(const std::string& scope, const std::string& name, int width, std::function<uint64_t()> get);
  void sample(uint64_t cycle);
  // Writes the final time stamp, the GTKWave save file (path.gtkw) and the
  // state names (path.states, a GTKWave translate filter).
  void close(uint64_t end_cycle);

  static bool fst_available();

 private:
  struct Signal {
    std::string scope, name, id;
    int width;
    std::function<uint64_t()> get;
    uint64_t last;
    bool written;
    uint32_t fst_handle;
  };
  void header();
  void walk_scopes(const std::function<void(const std::string&)>& open, const std::function<void()>& close,
                   const std::function<void(Signal&)>& var);
  void emit(Signal& s, uint64_t v);
  void stamp(uint64_t cycle);
  uint64_t time_ps(uint64_t cycle) const;

  std::string path_;
  Format format_;
  std::ofstream out_;
  void* fst_ = nullptr;
  uint64_t clock_hz_;
  uint64_t start_, end_;
  std::vector<Signal> signals_;
  bool header_done_ = false;
  uint64_t last_time_written_ = ~uint64_t(0);
};

}  // namespace tpu::sim
