// What units report besides their architectural effects: per-cycle state
// for statistics and waveforms, and instruction intervals for the timeline.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "../core/issued.h"

namespace tpu::sim {

// A time series of the run: each row the growth of every column's counter
// over the cycles [start, end) (Chip::attach_series).
struct TimeSeries {
  std::vector<std::string> columns;  // "core0.vpu.busy_cycles", ..., "hbm.bytes_written"
  struct Row {
    uint64_t start, end;
    std::vector<uint64_t> values;  // one per column
  };
  std::vector<Row> rows;
  uint64_t every = 0;  // cycles a row (the last may be shorter)
};

// Per-unit counters, updated by the unit itself once per cycle.
struct UnitStats {
  uint64_t busy_cycles = 0;
  uint64_t stall_cycles = 0;
  std::map<std::string, uint64_t> stalls;  // by cause
  uint64_t instructions = 0;

  // `cycles` cycles in state `s`, stalled (or blocked) for `cause`.
  void account(UnitState s, const char* cause, uint64_t cycles = 1) {
    if (s == UnitState::Busy) busy_cycles += cycles;
    if (s == UnitState::Stalled || s == UnitState::Blocked) {
      stall_cycles += cycles;
      if (cause != last_cause_) {  // a unit stalls for one cause many cycles in a row
        last_cause_ = cause;
        last_count_ = &stalls[cause];
      }
      *last_count_ += cycles;
    }
  }

  UnitStats() = default;
  UnitStats(const UnitStats& o) : busy_cycles(o.busy_cycles), stall_cycles(o.stall_cycles), stalls(o.stalls), instructions(o.instructions) {}
  UnitStats& operator=(const UnitStats& o) {
    busy_cycles = o.busy_cycles, stall_cycles = o.stall_cycles, stalls = o.stalls, instructions = o.instructions;
    last_cause_ = nullptr, last_count_ = nullptr;
    return *this;
  }

 private:
  const char* last_cause_ = nullptr;  // the count of the last cause (map nodes stay put)
  uint64_t* last_count_ = nullptr;
};

// Receives one event per executed instruction (track = core * kUnitSlots + unit
// number as in the ISA's Unit operand) and counter samples. `work` is what
// the instruction moved or computed: MACs of an MXU stream, bytes of a DMA
// transfer, 0 otherwise.
class TraceSink {
 public:
  virtual ~TraceSink() = default;
  virtual void instruction(int track, uint32_t pc, uint64_t start_cycle, uint64_t end_cycle, uint64_t work) = 0;
  virtual void counter(int track, const char* name, uint64_t cycle, int64_t value) = 0;
  // Whether counter() does anything (else the chip samples nothing per cycle).
  virtual bool wants_counters() const { return true; }
};

// Hands every event to several sinks (the timeline, the profile, the event log).
class FanOut : public TraceSink {
 public:
  void add(TraceSink* s) {
    if (s) sinks_.push_back(s);
  }
  // The one sink there is, this when there are several, null for none.
  TraceSink* get() { return sinks_.empty() ? nullptr : sinks_.size() == 1 ? sinks_[0] : this; }
  void instruction(int track, uint32_t pc, uint64_t start, uint64_t end, uint64_t work) override {
    for (auto* s : sinks_) s->instruction(track, pc, start, end, work);
  }
  void counter(int track, const char* name, uint64_t cycle, int64_t value) override {
    for (auto* s : sinks_) s->counter(track, name, cycle, value);
  }
  bool wants_counters() const override {
    for (auto* s : sinks_)
      if (s->wants_counters()) return true;
    return false;
  }

 private:
  std::vector<TraceSink*> sinks_;
};

inline int track_id(int core, int unit) { return core * isa::kUnitSlots + unit; }

// Chip K of a system reports through this: its cores' tracks follow those of
// the chips before it (track_core gives the system-wide core, chip * cores +
// core), and its HBM counters (track -1 on one chip) are track -1 - K.
class ChipTracks : public TraceSink {
 public:
  ChipTracks(TraceSink* to, int chip, int cores) : to_(to), chip_(chip), offset_(chip * cores * isa::kUnitSlots) {}
  void instruction(int track, uint32_t pc, uint64_t start, uint64_t end, uint64_t work) override {
    to_->instruction(track + offset_, pc, start, end, work);
  }
  void counter(int track, const char* name, uint64_t cycle, int64_t value) override {
    to_->counter(track < 0 ? -1 - chip_ : track + offset_, name, cycle, value);
  }
  bool wants_counters() const override { return to_->wants_counters(); }

 private:
  TraceSink* to_;
  int chip_, offset_;
};
inline int track_core(int track) { return track / isa::kUnitSlots; }
inline int track_unit(int track) { return track % isa::kUnitSlots; }
// A unit's name from its number in a track: scalar, dma, vpu, mxu0, ...
inline std::string unit_name(int unit) {
  if (unit == isa::kUnitScalar) return "scalar";
  if (unit == isa::kUnitDma) return "dma";
  if (unit == isa::kUnitVpu) return "vpu";
  return "mxu" + std::to_string(unit - isa::kUnitMxu0);
}

}  // namespace tpu::sim
