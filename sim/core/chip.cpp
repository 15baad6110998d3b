#include "chip.h"

#include "../mem/dram.h"

#include <fmt/format.h>

namespace tpu::sim {

namespace {

// One RTL waveform per MXU: FILE for a single MXU, else FILE with .coreC.mxuM
// before its extension.
std::string rtl_trace_path(const std::string& base, const MachineConfig& cfg, int core, uint64_t mxu) {
  if (base.empty() || (cfg.target.cores == 1 && cfg.target.mxus_per_core == 1)) return base;
  const auto dot = base.rfind('.');
  const std::string tag = fmt::format(".core{}.mxu{}", core, mxu);
  return dot == std::string::npos ? base + tag : base.substr(0, dot) + tag + base.substr(dot);
}

}  // namespace

TensorCore::TensorCore(sc_core::sc_module_name name, int chip, int idx, const MachineConfig& cfg, const DecodedProgram& program,
                       MxuModel model, RunControl& rc, MemorySystem& hbm, const std::string& rtl_trace)
    : sc_core::sc_module(name),
      index(idx),
      vmem(cfg.target.vmem_bytes, &rc.budget()),
      smem(cfg.target.smem_bytes, &rc.budget()),
      acc(cfg.target.acc_rows, uint32_t(cfg.target.mxu_dim)),
      sems("sems", rc.period()),
      dma("dma", idx, cfg, rc, sems, vmem, smem, hbm),
      vpu("vpu", idx, cfg, rc, sems, vmem, acc),
      scalar("scalar", ScalarParams{idx, chip, &cfg, &program}, rc, sems, smem) {
  std::vector<sc_core::sc_fifo<Issued>*> mxu_queues;
  for (uint64_t m = 0; m < cfg.target.mxus_per_core; ++m) {
    const std::string mname = fmt::format("mxu{}", m);
    if (model == MxuModel::Rtl)
      mxus.push_back(make_rtl_mxu(mname.c_str(), idx, int(m), cfg, rc, sems, vmem, acc, rtl_trace_path(rtl_trace, cfg, idx, m)));
    else
      mxus.push_back(std::make_unique<Mxu>(mname.c_str(), idx, int(m), cfg, model == MxuModel::Pe ? MxuPath::Pe : MxuPath::Fast,
                                           rc, sems, vmem, acc));
    mxu_queues.push_back(&mxus.back()->instruction_queue());
  }
  scalar.bind_queues(&dma.queue(), &vpu.queue(), mxu_queues);
}

void TensorCore::bind_clock(sc_core::sc_clock& clk) {
  scalar.clk(clk);
  dma.clk(clk);
  vpu.clk(clk);
  for (auto& m : mxus) m->bind_clock(clk);
}

void TensorCore::set_trace(TraceSink* t) {
  scalar.set_trace(t);
  dma.set_trace(t);
  vpu.set_trace(t);
  for (auto& m : mxus) m->attach_trace(t);
}

void TensorCore::settle(uint64_t last) {
  scalar.settle(last);
  dma.settle(last);
  vpu.settle(last);
  for (auto& m : mxus) m->settle(last);
}

bool TensorCore::finished(uint64_t now) const {
  if (!scalar.halted() || !dma.idle() || !vpu.idle(now)) return false;
  for (const auto& m : mxus)
    if (!m->idle(now)) return false;
  return true;
}

bool TensorCore::in_flight(uint64_t now) const {
  if (dma.outstanding() > 0 || dma.receiving() || vpu.in_flight(now)) return true;
  for (const auto& m : mxus)
    if (m->in_flight(now)) return true;
  return false;
}

// Whether some unit can move on by itself: issuing, working, or stalled on
// its own resources (a queued unit's Stalled causes all resolve with time;
// Blocked means waiting on a semaphore, i.e. on another unit).
bool TensorCore::any_busy(uint64_t now) const {
  auto moving = [](UnitState s) { return s == UnitState::Busy || s == UnitState::Stalled; };
  if (scalar.progressing(now) || moving(dma.state()) || moving(vpu.state())) return true;
  for (const auto& m : mxus)
    if (moving(m->unit_state())) return true;
  return false;
}

std::string TensorCore::blocked_report() const {
  std::vector<std::string> parts;
  if (!scalar.halted()) parts.push_back(fmt::format("scalar at pc {}", scalar.pc()));
  if (auto b = dma.blocked_on(); !b.empty()) parts.push_back("dma " + b);
  if (auto b = vpu.blocked_on(); !b.empty()) parts.push_back("vpu " + b);
  for (size_t m = 0; m < mxus.size(); ++m)
    if (auto b = mxus[m]->blocked_report(); !b.empty()) parts.push_back(fmt::format("mxu{} {}", m, b));
  return fmt::format("core {}: {}", index, fmt::join(parts, "; "));
}

Chip::Chip(sc_core::sc_module_name name, int idx, const MachineConfig& cfg, const DecodedProgram& program, const SimOptions& opts,
           RunControl& rc, TraceSink* trace, sc_core::sc_clock& clk)
    : sc_core::sc_module(name),
      index(idx),
      hbm("hbm", cfg, rc.budget(), opts.dram_check),
      opts_(opts),
      rc_(rc),
      trace_(trace),
      counters_(trace && trace->wants_counters()) {
  for (uint64_t c = 0; c < cfg.target.cores; ++c) {
    const MxuModel model = opts.rtl_mxu ? MxuModel::Rtl : opts.pe_level_mxu ? MxuModel::Pe : MxuModel::Fast;
    cores.push_back(std::make_unique<TensorCore>(fmt::format("core{}", c).c_str(), idx, int(c), cfg, program, model, rc, hbm,
                                                 opts.rtl_trace_path));
    cores.back()->bind_clock(clk);
    if (trace) cores.back()->set_trace(trace);
  }
  std::vector<SemaphoreFile*> sems;
  for (auto& c : cores) sems.push_back(&c->sems);
  for (auto& c : cores) c->dma.connect_cores(sems);
}

void Chip::attach_vcd(VcdWriter* vcd, const std::string& prefix) {
  for (auto& c : cores) {
    const std::string p = fmt::format("{}core{}", prefix, c->index);
    TensorCore* core = c.get();
    vcd->add(p + ".scalar", "pc", 32, [core] { return core->scalar.pc(); });
    vcd->add(p + ".scalar", "state", 2, [core] { return uint64_t(core->scalar.state()); });
    vcd->add(p + ".scalar", "halted", 1, [core] { return core->scalar.halted(); });
    vcd->add(p + ".dma", "state", 2, [core] { return uint64_t(core->dma.state()); });
    vcd->add(p + ".dma", "pc", 32, [core] { return core->dma.current_pc(); });
    vcd->add(p + ".dma", "queue", 16, [core] { return uint64_t(core->dma.queue_depth()); });
    vcd->add(p + ".dma", "outstanding", 16, [core] { return uint64_t(core->dma.outstanding()); });
    vcd->add(p + ".dma", "bytes_moved", 64, [core] { return core->dma.bytes_moved(); });
    vcd->add(p + ".vpu", "state", 2, [core] { return uint64_t(core->vpu.state()); });
    vcd->add(p + ".vpu", "pc", 32, [core] { return core->vpu.current_pc(); });
    vcd->add(p + ".vpu", "queue", 16, [core] { return uint64_t(core->vpu.queue_depth()); });
    for (size_t m = 0; m < core->mxus.size(); ++m) {
      MxuUnit* mx = core->mxus[m].get();
      const std::string s = fmt::format("{}.mxu{}", p, m);
      vcd->add(s, "state", 2, [mx] { return uint64_t(mx->unit_state()); });
      vcd->add(s, "pc", 32, [mx] { return mx->current_pc(); });
      vcd->add(s, "queue", 16, [mx] { return uint64_t(mx->pending_instructions()); });
      vcd->add(s, "streaming", 1, [mx] { return mx->streaming(); });
      vcd->add(s, "loading_weights", 1, [mx] { return mx->loading(); });
      vcd->add(s, "rows_in_flight", 16, [mx] { return mx->rows_in_flight(); });
    }
    for (int s = 0; s < isa::kNumSems; ++s)
      vcd->add(p + ".sems", fmt::format("sem{}", s), 32, [core, s] { return core->sems.value(s); });
  }
  vcd->add(prefix + "hbm", "bytes_read", 64, [this] { return hbm.bytes_read(); });
  vcd->add(prefix + "hbm", "bytes_written", 64, [this] { return hbm.bytes_written(); });
  if (const dram::Dram* d = hbm.timing().dram()) {
    // Per channel: 0 idle, 1 busy, 2 refreshing; commands queued; transactions waiting.
    const HbmTiming* t = &hbm.timing();
    for (uint32_t c = 0; c < d->channels(); ++c) {
      const dram::Channel* ch = &d->channel(c);
      const std::string s = fmt::format("{}hbm.ch{}", prefix, c);
      vcd->add(s, "dram_state", 2, [ch, t] { return uint64_t(ch->state(t->memory_cycle())); });
      vcd->add(s, "commands_queued", 16, [ch] { return uint64_t(ch->queued()); });
      vcd->add(s, "transactions_waiting", 16, [ch] { return uint64_t(ch->waiting()); });
      vcd->add(s, "activates", 64, [ch] { return ch->stats().activates; });
    }
  }
}

void Chip::sample_counters(uint64_t now) {
  size_t i = 0;
  const auto sample = [&](int core, int unit, int64_t d) {
    if (last_depth_.size() <= i) last_depth_.resize(i + 1, -1);
    if (last_depth_[i] != d) trace_->counter(track_id(core, unit), "queue depth", now, d);
    last_depth_[i++] = d;
  };
  for (auto& c : cores) {
    sample(c->index, 1, c->dma.queue_depth());
    sample(c->index, 2, c->vpu.queue_depth());
    for (size_t m = 0; m < c->mxus.size(); ++m) sample(c->index, 8 + int(m), c->mxus[m]->pending_instructions());
  }
}

void Chip::attach_series(uint64_t every, bool fixed) {
  series_.every = every;
  fixed_ = fixed;
  auto column = [&](int track, std::string name) {
    column_track_.push_back(track);
    series_.columns.push_back(std::move(name));
  };
  for (const auto& c : cores) {
    const std::string p = fmt::format("core{}.", c->index);
    column(track_id(c->index, 0), p + "scalar.busy_cycles");
    column(track_id(c->index, 1), p + "dma.busy_cycles");
    column(track_id(c->index, 2), p + "vpu.busy_cycles");
    for (size_t m = 0; m < c->mxus.size(); ++m) column(track_id(c->index, 8 + int(m)), fmt::format("{}mxu{}.busy_cycles", p, m));
    for (size_t m = 0; m < c->mxus.size(); ++m) column(-2, fmt::format("{}mxu{}.macs", p, m));
  }
  column(-1, "hbm.bytes_read");
  column(-1, "hbm.bytes_written");
  if (const dram::Dram* d = hbm.timing().dram())
    for (uint32_t c = 0; c < d->channels(); ++c) {
      column(kChannelColumn - int(c), fmt::format("hbm.channel{}.device_bytes", c));
      channel_counter_names_.push_back(fmt::format("HBM channel {} bytes per cycle", c));
    }
  row_base_.assign(series_.columns.size(), 0);
}

std::vector<uint64_t> Chip::series_counters() const {
  std::vector<uint64_t> v;
  for (const auto& c : cores) {
    v.push_back(c->scalar.stats().busy_cycles);
    v.push_back(c->dma.stats().busy_cycles);
    v.push_back(c->vpu.stats().busy_cycles);
    for (const auto& m : c->mxus) v.push_back(m->unit_stats().busy_cycles);
    for (const auto& m : c->mxus) v.push_back(m->macs());
  }
  v.push_back(hbm.bytes_read());
  v.push_back(hbm.bytes_written());
  if (const dram::Dram* d = hbm.timing().dram())
    for (uint32_t c = 0; c < d->channels(); ++c) {
      const dram::ChannelStats& s = d->channel(c).stats();
      v.push_back((s.reads + s.writes) * d->params().request_bytes());
    }
  return v;
}

// One row [row_start_, end), also as counter tracks (busy %, HBM bytes per
// cycle) on the trace.
void Chip::series_row(uint64_t end) {
  if (end <= row_start_) return;
  constexpr size_t kMaxRows = 4096;
  const std::vector<uint64_t> now = series_counters();
  TimeSeries::Row row{row_start_, end, {}};
  const double span = double(end - row_start_);
  uint64_t hbm_bytes = 0;
  for (size_t i = 0; i < now.size(); ++i) {
    row.values.push_back(now[i] - row_base_[i]);
    if (trace_ && column_track_[i] >= 0)
      trace_->counter(column_track_[i], "busy %", row_start_, int64_t(100.0 * double(row.values[i]) / span + 0.5));
    if (column_track_[i] == -1) hbm_bytes += row.values[i];
    if (trace_ && column_track_[i] <= kChannelColumn)
      trace_->counter(-1, channel_counter_names_[size_t(kChannelColumn - column_track_[i])].c_str(), row_start_,
                      int64_t(double(row.values[i]) / span + 0.5));
  }
  if (trace_) trace_->counter(-1, "HBM bytes per cycle", row_start_, int64_t(double(hbm_bytes) / span + 0.5));
  series_.rows.push_back(std::move(row));
  row_base_ = now;
  row_start_ = end;
  if (!fixed_ && series_.rows.size() == kMaxRows) {  // merge pairs: half the rows, twice the interval
    std::vector<TimeSeries::Row> merged;
    for (size_t i = 0; i < series_.rows.size(); i += 2) {
      TimeSeries::Row m = series_.rows[i];
      m.end = series_.rows[i + 1].end;
      for (size_t c = 0; c < m.values.size(); ++c) m.values[c] += series_.rows[i + 1].values[c];
      merged.push_back(std::move(m));
    }
    series_.rows = std::move(merged);
    series_.every *= 2;
  }
}

void Chip::finish_series(uint64_t end_cycle) {
  if (series_.every) series_row(end_cycle);
}

bool Chip::end_cycle(uint64_t now) {
  hbm.end_cycle(now);
  if (auto v = hbm.timing().violation()) {
    rc_.fault(fmt::format("cycle {}: internal error: {}", now, *v));
    return false;
  }
  if (counters_) sample_counters(now);
  if (series_.every && now + 1 - row_start_ >= series_.every) series_row(now + 1);
  return true;
}

bool Chip::finished(uint64_t now) {
  if (finish_cycle_) return true;
  for (const auto& c : cores)
    if (!c->finished(now)) return false;
  finish_cycle_ = now + 1;
  return true;
}

bool Chip::in_flight(uint64_t now) const {
  for (const auto& c : cores)
    if (c->in_flight(now)) return true;
  return false;
}

bool Chip::any_busy(uint64_t now) const {
  for (const auto& c : cores)
    if (c->any_busy(now)) return true;
  return false;
}

bool Chip::sems_quiet(sc_core::sc_time edge) const {
  for (const auto& c : cores)
    if (c->sems.last_change() >= edge) return false;
  return true;
}

std::string Chip::blocked_report() const {
  std::vector<std::string> reports;
  for (const auto& c : cores) reports.push_back(c->blocked_report());
  return fmt::format("{}", fmt::join(reports, " | "));
}

}  // namespace tpu::sim
