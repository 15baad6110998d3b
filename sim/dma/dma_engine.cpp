#include "dma_engine.h"

#include <fmt/format.h>

namespace tpu::sim {

using isa::Opcode;
using namespace isa::operand;

DmaEngine::DmaEngine(sc_core::sc_module_name name, int core, const MachineConfig& cfg, RunControl& rc,
                     SemaphoreFile& sems, SparseMemory& vmem, SparseMemory& smem, MemorySystem& hbm)
    : sc_core::sc_module(name),
      QueuedUnit(core, isa::kUnitDma, cfg.core.queue_depth, rc, sems),
      cfg_(cfg),
      vmem_(vmem),
      smem_(smem),
      hbm_(hbm) {
  SC_HAS_PROCESS(DmaEngine);
  SC_METHOD(tick);
  sensitive << clk.pos();
  dont_initialize();
}

void DmaEngine::complete(uint64_t now) {
  while (HbmBurst* landed = hbm_.next_landed(core_, now)) {
    Burst& burst = bursts_[landed->tag];
    HbmBurst& b = burst.hbm;
    if (burst.read) {
      reply(*burst.read, b);
    } else if (b.write) {
      hbm_.memory().write(b.hbm_addr, b.data.data(), b.bytes);
    } else {
      landing_.resize(b.bytes);
      hbm_.memory().read(b.hbm_addr, landing_.data(), b.bytes);
      (burst.transfer->to_smem ? smem_ : vmem_).write(b.vmem_addr, landing_.data(), b.bytes);
    }
    bytes_moved_ += b.bytes;
    --burst.transfer->in_flight;
    b.data.clear();
    free_slots_.push_back(landed->tag);
  }
  // Writes from other chips are done once their bursts have landed.
  while (!incoming_.empty() && incoming_.front().t.emitted_all() && incoming_.front().t.in_flight == 0) {
    if (incoming_.front().sender) --*incoming_.front().sender;
    incoming_.pop_front();
  }
  // Reads for other chips: replies go to the router as it has room; a read
  // is done when every reply is on its way.
  for (Read& r : reads_)
    for (; !r.out.empty() && ici_->can_inject(chip_, r.reply.dst); r.out.pop_front()) ici_->inject(chip_, std::move(r.out.front()));
  while (!reads_.empty() && reads_.front().t.emitted_all() && reads_.front().t.in_flight == 0 && reads_.front().out.empty()) {
    if (reads_.front().reply.in_flight) --*reads_.front().reply.in_flight;
    reads_.pop_front();
  }
  // Transfers finish in order of their last burst; the oldest finished ones retire.
  while (!transfers_.empty() && transfers_.front().emitted_all() && transfers_.front().in_flight == 0) {
    const Transfer& t = transfers_.front();
    if (t.marker && t.chip >= 0) {  // dma.rsig: its count travels to the other chip
      if (!ici_->can_inject(chip_, t.chip)) break;
      IciPacket p;
      p.src = chip_, p.dst = t.chip, p.core = core_, p.bytes = kIciSignalBytes, p.sem = t.sem, p.count = t.count;
      ici_->inject(chip_, std::move(p));
    } else {
      (t.target ? *t.target : sems_).signal(t.sem, t.count);
    }
    if (t.marker) --markers_;
    trace_event(t.pc, t.start, now + 1, t.rows * t.row_bytes);
    transfers_.pop_front();
  }
}

// Each cycle the engine sends up to dma.bursts_per_cycle bursts to HBM and,
// on its own port, up to as many packets to the ICI router, oldest transfer
// first on each; a transfer that cannot go on holds up only those behind it
// on the same path (HBM, or the router's queue for its link).
void DmaEngine::emit(uint64_t now) {
  const uint32_t most = cfg_.dma.bursts_per_cycle;
  uint32_t sent = 0, packets = 0;  // HBM bursts, ICI packets this cycle
  for (Incoming& in : incoming_) {  // other chips' writes to this chip's HBM first
    if (sent == most) break;
    emit_bursts(in.t, &in.data, now, sent);
  }
  for (Read& r : reads_) {  // and their reads of it
    if (sent == most) break;
    emit_bursts(r.t, nullptr, now, sent, &r);
  }
  for (Transfer& t : transfers_) {
    if (t.emitted_all()) continue;
    if (t.from_hbm) {  // dma.rld: one request packet to the other chip
      if (packets == most || !ici_->can_inject(chip_, t.chip)) continue;
      IciPacket p;
      p.src = chip_, p.dst = t.chip, p.core = core_, p.bytes = kIciSignalBytes;
      p.addr = t.hbm, p.read_bytes = t.row_bytes, p.reply_addr = t.vmem;
      p.in_flight = &t.in_flight;
      ++t.in_flight;
      t.row = t.rows;
      ici_->inject(chip_, std::move(p));
      ++packets;
    } else if (t.chip >= 0) {  // dma.rcp, dma.rst: packets to the router, as many as it takes
      for (; !t.emitted_all() && packets < most && send_packet(t); ++packets) {
      }
    } else if (sent < most) {
      emit_bursts(t, nullptr, now, sent);
      if (!t.emitted_all()) sent = most;  // in order: later HBM transfers wait
    }
    if (sent == most && packets == most) return;
  }
}

// HBM bursts of t while the cycle's budget lasts; a store's bytes come from
// VMEM, or from `data` (one row) for a write that came over ICI.
void DmaEngine::emit_bursts(Transfer& t, const std::vector<uint8_t>* data, uint64_t now, uint32_t& sent, Read* read) {
  const uint64_t burst = cfg_.dma.burst_bytes;
  for (; !t.emitted_all() && sent < cfg_.dma.bursts_per_cycle; ++sent) {
    const uint64_t hbm = t.hbm + t.row * t.hbm_stride + t.offset;
    const uint64_t vmem = t.vmem + t.row * t.vmem_stride + t.offset;
    const uint64_t n = std::min(t.row_bytes - t.offset, burst - hbm % burst);
    HbmBurst b;
    b.write = t.store;
    b.hbm_addr = hbm;
    b.vmem_addr = vmem;
    b.bytes = uint32_t(n);
    if (t.store) {
      b.data.resize(n);
      if (data) std::copy_n(data->begin() + long(t.offset), n, b.data.begin());
      else vmem_.read(vmem, b.data.data(), n);
    }
    t.offset += n;
    if (t.offset == t.row_bytes) t.offset = 0, ++t.row;
    ++t.in_flight;
    size_t slot = bursts_.size();
    if (!free_slots_.empty()) {
      slot = free_slots_.back();
      free_slots_.pop_back();
      bursts_[slot] = {&t, std::move(b), read};
    } else {
      bursts_.push_back({&t, std::move(b), read});
    }
    bursts_[slot].hbm.tag = slot;
    hbm_.request(core_, now, &bursts_[slot].hbm);
  }
}

bool DmaEngine::accept_remote(IciPacket& p) {
  if (p.read_bytes > 0) {
    if (reads_.size() >= cfg_.ici.buffer_packets) return false;
    Read r;
    r.t.hbm = p.addr;
    r.t.row_bytes = p.read_bytes;
    r.reply.src = chip_, r.reply.dst = p.src, r.reply.core = core_;
    r.reply.addr = p.reply_addr;
    r.reply.in_flight = p.in_flight;
    reads_.push_back(std::move(r));
    if (asleep()) remote_.notify(sc_core::SC_ZERO_TIME);
    return true;
  }
  if (incoming_.size() >= cfg_.ici.buffer_packets) return false;
  Incoming in;
  in.t.store = true;
  in.t.hbm = p.addr;
  in.t.row_bytes = p.data.size();
  in.data = std::move(p.data);
  in.sender = p.in_flight;
  incoming_.push_back(std::move(in));
  if (asleep()) remote_.notify(sc_core::SC_ZERO_TIME);
  return true;
}

bool DmaEngine::send_packet(Transfer& t) {
  if (!ici_->can_inject(chip_, t.chip)) return false;
  IciPacket p;
  p.src = chip_, p.dst = t.chip, p.core = core_;
  const uint64_t n = std::min<uint64_t>(t.row_bytes - t.offset, cfg_.ici.packet_bytes);
  p.bytes = uint32_t(n);
  p.addr = t.hbm + t.offset;  // the destination's VMEM or HBM address
  p.to_hbm = t.to_hbm;
  p.data.resize(n);
  vmem_.read(t.vmem + t.offset, p.data.data(), n);
  p.in_flight = &t.in_flight;
  t.offset += n;
  if (t.offset == t.row_bytes) t.offset = 0, ++t.row;
  ++t.in_flight;
  bytes_moved_ += n;
  ici_->inject(chip_, std::move(p));
  return true;
}

// A burst read for another chip has landed: its bytes go back in packets.
void DmaEngine::reply(Read& r, const HbmBurst& b) {
  const uint64_t offset = b.hbm_addr - r.t.hbm;
  for (uint64_t k = 0; k < b.bytes; k += cfg_.ici.packet_bytes) {
    IciPacket p = r.reply;
    const uint64_t n = std::min<uint64_t>(b.bytes - k, cfg_.ici.packet_bytes);
    p.addr = r.reply.addr + offset + k;
    p.bytes = uint32_t(n);
    p.data.resize(n);
    hbm_.memory().read(b.hbm_addr + k, p.data.data(), n);
    if (p.in_flight) ++*p.in_flight;
    r.out.push_back(std::move(p));
  }
}

// dma.rcp, dma.rst: local VMEM to another chip's VMEM or HBM; dma.rld:
// another chip's HBM to local VMEM.
bool DmaEngine::remote(const Issued& is, Transfer& t) {
  auto fail = [&](const std::string& msg) {
    rc_.fault(fmt::format("core {} dma: pc {}: {}: {}", core_, is.pc, isa::spec(is.insn.op).mnemonic, msg));
    return false;
  };
  const uint64_t chip = is[DMAR::rchip];
  if (!ici_ || chip >= uint64_t(ici_->chips()))
    return fail(fmt::format("chip {} does not exist (the system has {})", chip, ici_ ? ici_->chips() : 1));
  t.chip = int(chip);
  t.row_bytes = is[DMAR::rbytes];
  t.from_hbm = is.insn.op == Opcode::DMA_RLD;
  t.to_hbm = is.insn.op == Opcode::DMA_RST;
  // hbm: the other chip's address (VMEM for dma.rcp), vmem: this chip's.
  t.vmem = t.from_hbm ? is[DMAR::rdst] : is[DMAR::rsrc];
  t.hbm = t.from_hbm ? is[DMAR::rsrc] : is[DMAR::rdst];
  t.sem = int(is.insn[DMAR::sem]);
  t.target = t.from_hbm ? nullptr : &ici_->sems(t.chip, core_);  // dma.rld signals here
  if (t.row_bytes > 0) {
    if (auto err = vmem_.check_range(t.vmem, t.row_bytes, 1, "VMEM")) return fail(*err);
    // Every chip's HBM is as large as this one's.
    const bool hbm = t.to_hbm || t.from_hbm;
    const SparseMemory& there = hbm ? hbm_.memory() : ici_->vmem(t.chip, core_);
    if (auto err = there.check_range(t.hbm, t.row_bytes, 1, fmt::format("chip {}'s {}", t.chip, hbm ? "HBM" : "VMEM").c_str()))
      return fail(*err);
  }
  return true;
}

bool DmaEngine::dispatch(const Issued& is, uint64_t now) {
  const char* mnem = isa::spec(is.insn.op).mnemonic;
  auto fail = [&](const std::string& msg) {
    rc_.fault(fmt::format("core {} dma: pc {}: {}: {}", core_, is.pc, mnem, msg));
    return false;
  };
  Transfer t;
  t.pc = is.pc;
  t.start = now;
  switch (is.insn.op) {
    case Opcode::DMA_LD:
    case Opcode::DMA_LDS:
    case Opcode::DMA_ST:
      t.store = is.insn.op == Opcode::DMA_ST;
      t.to_smem = is.insn.op == Opcode::DMA_LDS;
      t.row_bytes = is[DMA1::rbytes];
      t.sem = int(is.insn[DMA1::sem]);
      t.hbm = t.store ? is[DMA1::rdst] : is[DMA1::rsrc];
      t.vmem = t.store ? is[DMA1::rsrc] : is[DMA1::rdst];
      break;
    case Opcode::DMA_LD2D:
    case Opcode::DMA_ST2D:
      t.store = is.insn.op == Opcode::DMA_ST2D;
      t.rows = is[DMA2::rrows];
      t.row_bytes = is[DMA2::rrowbytes];
      t.sem = int(is.insn[DMA2::sem]);
      t.hbm = t.store ? is[DMA2::rdst] : is[DMA2::rsrc];
      t.vmem = t.store ? is[DMA2::rsrc] : is[DMA2::rdst];
      t.hbm_stride = t.store ? is[DMA2::rdstride] : is[DMA2::rsstride];
      t.vmem_stride = t.store ? is[DMA2::rsstride] : is[DMA2::rdstride];
      break;
    case Opcode::DMA_RCP:
    case Opcode::DMA_RLD:
    case Opcode::DMA_RST:
      if (!remote(is, t)) return false;
      break;
    default:
      throw std::logic_error(fmt::format("internal error: {} is not a DMA instruction", mnem));
  }
  if (outstanding() >= cfg_.dma.max_outstanding) return false;
  if (t.rows > (uint64_t(1) << 32)) return fail(fmt::format("{} rows is more than 2^32", t.rows));
  if (t.row_bytes > 0 && t.chip < 0)
    for (uint64_t r = 0; r < t.rows; ++r) {
      if (auto err = hbm_.memory().check_range(t.hbm + r * t.hbm_stride, t.row_bytes, 1, "HBM"))
        return fail(fmt::format("row {}: {}", r, *err));
      if (auto err = (t.to_smem ? smem_ : vmem_).check_range(t.vmem + r * t.vmem_stride, t.row_bytes, 1, t.to_smem ? "SMEM" : "VMEM"))
        return fail(fmt::format("row {}: {}", r, *err));
    }
  if (t.row_bytes == 0 || t.rows == 0) t.row = t.rows = 0;  // nothing to move: completes at once
  transfers_.push_back(t);
  return true;
}

bool DmaEngine::signal(const Issued& is, uint64_t now, SemaphoreFile* target, int chip) {
  if (markers_ >= depth_) return false;  // as many pending as the queue holds, like the other units' signals
  Transfer t;
  t.pc = is.pc;
  t.start = now;
  // `signal dma` (SYNC) and `dma.csig` (CSIG) hold sem and count alike.
  static_assert(+SYNC::sem == +CSIG::sem && +SYNC::count == +CSIG::count && +SYNC::sem == +RSIG::sem && +SYNC::count == +RSIG::count);
  t.sem = int(is.insn[SYNC::sem]);
  t.count = uint32_t(is.insn[SYNC::count]);
  t.target = target;
  t.chip = chip;
  t.marker = true;
  t.rows = 0;
  transfers_.push_back(t);
  ++markers_;
  return true;
}

void DmaEngine::tick() {
  const uint64_t now = rc_.cycle();
  if (woke(now)) return;
  step(now);
  rest(now, transfers_.empty() && !receiving(), &remote_);
}

void DmaEngine::step(uint64_t now) {
  complete(now);
  emit(now);
  UnitState state = transfers_.empty() ? UnitState::Idle : UnitState::Busy;
  const char* cause = "";
  const Issued* h = current(now);
  SemaphoreFile* target = nullptr;
  if (h && h->insn.op == Opcode::DMA_CSIG) {
    const uint64_t c = (*h)[0];
    if (c >= core_sems_.size()) {
      rc_.fault(fmt::format("core {} dma: pc {}: dma.csig: core {} does not exist (this chip has {})", core_, h->pc, c, core_sems_.size()));
      h = nullptr;
    } else {
      target = core_sems_[size_t(c)];
    }
  }
  int chip = -1;
  if (h && h->insn.op == Opcode::DMA_RSIG) {
    const uint64_t c = (*h)[RSIG::rchip];
    if (!ici_ || c >= uint64_t(ici_->chips())) {
      rc_.fault(fmt::format("core {} dma: pc {}: dma.rsig: chip {} does not exist (the system has {})", core_, h->pc, c,
                            ici_ ? ici_->chips() : 1));
      h = nullptr;
    } else {
      chip = int(c);
    }
  }
  if (h && (h->insn.op == Opcode::SIGNAL || h->insn.op == Opcode::DMA_CSIG || h->insn.op == Opcode::DMA_RSIG)) {
    if (signal(*h, now, target, chip)) {
      retire();
      state = UnitState::Busy;
    } else {
      state = UnitState::Stalled, cause = "outstanding";
    }
  } else if (h) {
    switch (sync(*h, now, true)) {
      case SyncResult::Done: state = UnitState::Busy; break;
      case SyncResult::Blocked:
        if (state != UnitState::Busy) state = UnitState::Blocked, cause = blocked_cause(*h);
        break;
      case SyncResult::NotSync: {
        const Issued is = *h;
        if (dispatch(is, now)) {
          retire();
          state = UnitState::Busy;
        } else if (!rc_.faulted()) {
          state = UnitState::Stalled, cause = "outstanding";
        }
        break;
      }
    }
  }
  // A transfer with nothing to move finishes in the cycle it is dispatched.
  if (!transfers_.empty() && transfers_.back().rows == 0 && transfers_.back().in_flight == 0) complete(now);
  finish(state, cause);
}

}  // namespace tpu::sim
