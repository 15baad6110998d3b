// A small VCD writer for the model's own signals: values are sampled once
// per cycle (after every unit has evaluated it) and only changes are
// written, inside an optional window of cycles. Scopes follow the hardware
// (core0.scalar, core0.mxu1, ...), and a GTKWave save file groups them.
#pragma once

#include <cstdint>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

namespace tpu::sim {

class VcdWriter {
 public:
  VcdWriter(const std::string& path, uint64_t period_ps, uint64_t start_cycle, uint64_t end_cycle);

  // Registers a signal before the first sample; scope uses '.' separators.
  void add(const std::string& scope, const std::string& name, int width, std::function<uint64_t()> get);
  void sample(uint64_t cycle);
  // Writes the final time stamp and the GTKWave save file (path.gtkw).
  void close(uint64_t end_cycle);

 private:
  struct Signal {
    std::string scope, name, id;
    int width;
    std::function<uint64_t()> get;
    uint64_t last;
    bool written;
  };
  void header();
  void emit(Signal& s, uint64_t v);

  std::string path_;
  std::ofstream out_;
  uint64_t period_ps_;
  uint64_t start_, end_;
  std::vector<Signal> signals_;
  bool header_done_ = false;
  uint64_t last_time_written_ = ~uint64_t(0);
};

}  // namespace tpu::sim
