#include "system.h"

#include <fmt/format.h>

#include <iostream>

namespace tpu::sim {

System::System(sc_core::sc_module_name name, const MachineConfig& cfg, const DecodedProgram& program, const SimOptions& opts,
               RunControl& rc, TraceSink* trace, TraceSink* others)
    : sc_core::sc_module(name), clk("clk", rc.period()), ici(cfg), opts_(opts), rc_(rc) {
  const int n = int(cfg.target.chips);
  for (int c = 0; c < n; ++c) {
    chip_rc.push_back(std::make_unique<RunControl>(rc, n > 1 ? fmt::format("chip {}: ", c) : std::string()));
    TraceSink* sink = trace;
    if (c > 0) {
      sink = nullptr;
      if (others) sink = tracks_.emplace_back(std::make_unique<ChipTracks>(others, c, int(cfg.target.cores))).get();
    }
    chips.push_back(std::make_unique<Chip>(fmt::format("chip{}", c).c_str(), c, cfg, program, opts, *chip_rc.back(), sink, clk));
    for (auto& core : chips.back()->cores) {
      DmaEngine* dma = &core->dma;
      ici.attach(c, core->index, &core->vmem, &core->sems, [dma](IciPacket& p) { return dma->accept_remote(p); });
      core->dma.connect_ici(&ici, c);
    }
  }
  SC_HAS_PROCESS(System);
  SC_METHOD(monitor);
  sensitive << clk.negedge_event();
  dont_initialize();
}

void System::attach_vcd(VcdWriter* vcd) {
  vcd_ = vcd;
  vcd->add("clock", "cycle", 64, [this] { return rc_.cycle(); });
  for (auto& c : chips) c->attach_vcd(vcd, chips.size() > 1 ? fmt::format("chip{}.", c->index) : std::string());
}

std::string System::where(const Chip& c) const { return chips.size() > 1 ? fmt::format("chip {} ", c.index) : std::string(); }

bool System::quiet(uint64_t now, bool delivered) const {
  if (!ici.idle() || delivered) return false;
  const sc_core::sc_time this_edge = rc_.period() * double(now);
  for (const auto& c : chips)
    if (c->in_flight(now) || !c->sems_quiet(this_edge)) return false;
  return true;
}

void System::monitor() {
  if (rc_.faulted()) return;
  const uint64_t now = rc_.cycle();
  const bool delivered = ici.tick(now);
  for (auto& c : chips)
    if (!c->end_cycle(now)) return;
  if (vcd_) vcd_->sample(now);

  // Every chip's finished() each cycle (it records the chip's last cycle);
  // what only the deadlock test needs, only while no unit is busy.
  bool all_finished = ici.idle() && !delivered, busy = false;
  for (auto& c : chips) {
    all_finished &= c->finished(now);
    busy = busy || c->any_busy(now);
  }
  if (all_finished) {
    done_ = true;
    end_cycle_ = now + 1;
    sc_core::sc_stop();
    return;
  }
  if (!busy && quiet(now, delivered)) {
    std::vector<std::string> reports;
    for (const auto& c : chips)
      if (!c->finished(now)) reports.push_back(where(*c) + c->blocked_report());
    rc_.stop(RunStatus::deadlock, fmt::format("deadlock at cycle {}: no unit can make progress; {}", now, fmt::join(reports, " | ")));
    return;
  }
  const Chip& first = *chips[0];
  if (opts_.max_cycles && now + 1 >= opts_.max_cycles) {
    rc_.stop(RunStatus::cycle_limit,
             fmt::format("cycle limit of {} reached ({}core 0 scalar at pc {})", opts_.max_cycles, where(first), first.cores[0]->scalar.pc()));
    return;
  }
  if (rc_.budget().exceeded()) {
    rc_.fault(fmt::format("cycle {}: the program touched more simulated memory than the host memory budget of {} allows", now,
                          MemoryBudget::text(rc_.budget().limit())));
    return;
  }
  if (opts_.interrupt && (now & 0x3ff) == 0 && *opts_.interrupt) {
    rc_.stop(RunStatus::interrupted,
             fmt::format("interrupted at cycle {} ({}core 0 scalar at pc {})", now, where(first), first.cores[0]->scalar.pc()));
    return;
  }
  if (opts_.progress && (now & 0xffff) == 0 && now > 0) {
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start_).count();
    if (wall > 1.0) {
      std::cerr << fmt::format("\rtpusim: cycle {:>12}  {:>8.2f} Mcycles/s  pc {}", now, double(now) / wall / 1e6, first.cores[0]->scalar.pc())
                << std::flush;
      progress_shown_ = true;
    }
  }
}

}  // namespace tpu::sim
