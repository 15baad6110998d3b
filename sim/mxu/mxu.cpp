#include "mxu.h"

#include <fmt/format.h>

#include "numerics.h"

namespace tpu::sim {

using isa::Opcode;
using namespace isa::operand;

namespace {

// The accumulator's read-modify-write of one row (numerics.h: a stored
// subnormal counts as zero; the sum is flushed and NaN canonical).
__attribute__((target_clones("avx2", "default"))) void accumulate_f32(uint32_t* acc, const uint32_t* add, uint32_t n) {
  for (uint32_t j = 0; j < n; ++j)
    acc[j] = mxu::as_bits(mxu::add(mxu::daz(mxu::as_float(acc[j])), mxu::as_float(add[j])));
}

// bf16 operands (little-endian bytes) as the array sees them (numerics.h).
__attribute__((target_clones("avx2", "default"))) void widen_bf16(const uint8_t* bytes, uint32_t* out, uint32_t n) {
  for (size_t i = 0; i < n; ++i) {  // a size_t index: the loop vectorises
    uint16_t b;
    std::memcpy(&b, bytes + 2 * i, 2);
    out[i] = mxu::as_bits(mxu::bf16_operand(b));
  }
}

__attribute__((target_clones("avx2", "default"))) void accumulate_s32(uint32_t* acc, const uint32_t* add, uint32_t n) {
  for (uint32_t j = 0; j < n; ++j) acc[j] += add[j];
}

}  // namespace

Mxu::Mxu(sc_core::sc_module_name name, int core, int index, const MachineConfig& cfg, MxuPath path, RunControl& rc,
         SemaphoreFile& sems, SparseMemory& vmem, Accumulators& acc)
    : sc_core::sc_module(name),
      QueuedUnit(core, isa::kUnitMxu0 + index, cfg.core.queue_depth, rc, sems),
      n_(uint32_t(cfg.target.mxu_dim)),
      timing_(cfg.mxu_timing()),
      index_(index),
      vmem_(vmem),
      acc_(acc),
      array_(path == MxuPath::Pe ? make_pe_array(n_) : make_fast_array(n_)),
      load_row_(n_),
      slots_(2 * size_t(n_)),
      row_store_(slots_.size() * 2 * n_),
      row_bytes_(size_t(n_) * 2) {
  for (size_t i = 0; i < slots_.size(); ++i) slots_[i].x = row_store_.data() + 2 * i * n_, slots_[i].result = slots_[i].x + n_;
  SC_HAS_PROCESS(Mxu);
  SC_METHOD(tick);
  sensitive << clk.pos();
  dont_initialize();
}

void Mxu::read_operands(uint64_t addr, bool int8, uint32_t* out) {
  vmem_.read(addr, row_bytes_.data(), uint64_t(n_) * elem_bytes(int8));
  if (int8) {
    for (uint32_t i = 0; i < n_; ++i) out[i] = uint32_t(int32_t(int8_t(row_bytes_[i])));
    return;
  }
  widen_bf16(row_bytes_.data(), out, n_);
}

bool Mxu::check_vmem_rows(const Issued& is, uint64_t base, uint64_t stride, uint64_t rows, bool int8) {
  if (rows == 0) return true;
  const uint64_t bytes = uint64_t(n_) * elem_bytes(int8);
  // Rows are checked at the first and last address; strides may be negative.
  for (uint64_t r : {uint64_t(0), rows - 1}) {
    const uint64_t addr = base + r * stride;
    if (auto err = vmem_.check_range(addr, bytes, elem_bytes(int8), "VMEM")) {
      rc_.fault(fmt::format("core {} mxu{}: pc {}: {} row {}: {}", core_, index_, is.pc, isa::spec(is.insn.op).mnemonic, r, *err));
      return false;
    }
  }
  return true;
}

// Result rows fed 2N - 1 cycles ago enter the accumulators.
void Mxu::drain(uint64_t now) {
  const uint64_t lat = timing_.result_latency();
  if (in_flight_ == 0 || now < lat) return;
  MxuRow& r = slots_[(now - lat) % slots_.size()];
  if (r.fed_cycle != now - lat) return;
  array_->complete(r);
  uint32_t* acc = acc_.row(r.acc_row);
  if (!r.accumulate)
    std::copy(r.result, r.result + n_, acc);
  else if (r.int8)
    accumulate_s32(acc, r.result, n_);
  else
    accumulate_f32(acc, r.result, n_);
  if (acc_log_) acc_log_->push_back({now, r.acc_row, std::vector<uint32_t>(acc, acc + n_)});
  r.fed_cycle = ~uint64_t(0);
  --in_flight_;
}

void Mxu::record_row(const char* kind, uint64_t addr, bool int8) {
  const uint64_t n = uint64_t(n_) * elem_bytes(int8);
  vmem_.read(addr, row_bytes_.data(), n);
  *record_ << kind << ' ';
  for (uint64_t b = 0; b < n; ++b) *record_ << fmt::format("{:02x}", row_bytes_[b]);
  *record_ << '\n';
}

void Mxu::advance_load(uint64_t now) {
  if (!loading_) return;
  const uint64_t i = now - load_.start;
  if (record_) record_row("wrow", load_.src + i * load_.stride, load_.int8);
  if (!load_.transpose) {
    read_operands(load_.src + i * load_.stride, load_.int8, staging_.data() + i * n_);
  } else {
    read_operands(load_.src + i * load_.stride, load_.int8, load_row_.data());
    for (uint32_t j = 0; j < n_; ++j) staging_[size_t(j) * n_ + i] = load_row_[j];
  }
  if (i + 1 < timing_.load_cycles()) return;
  loading_ = false;
  shadow_ = Shadow::Loaded;
  const int b = active_ < 0 ? 0 : 1 - active_;
  array_->set_weights(b, staging_);
  int8_[b] = load_.int8;
}

void Mxu::advance_stream(uint64_t now) {
  if (!streaming_) return;
  const uint64_t i = now - stream_.start;
  MxuRow& r = slots_[now % slots_.size()];
  r.fed_cycle = now;
  r.int8 = stream_.int8;
  r.buf = stream_.buf;
  r.accumulate = stream_.accumulate;
  r.acc_row = stream_.acc_row + i;
  if (record_) record_row("xrow", stream_.src + i * stream_.stride, stream_.int8);
  read_operands(stream_.src + i * stream_.stride, stream_.int8, r.x);
  array_->feed(now, r);
  ++in_flight_;
  macs_ += uint64_t(n_) * n_;
  if (i + 1 == stream_.rows) streaming_ = false;
}

bool Mxu::dispatch(const Issued& is, uint64_t now) {
  const uint64_t n = n_;
  switch (is.insn.op) {
    case Opcode::MXU_LW:
    case Opcode::MXU_LWT: {
      const int shadow = active_ < 0 ? 0 : 1 - active_;
      // The tile commits at the end of t + N - 1: by then every row that used
      // the shadow buffer must have reached the accumulators.
      if (loading_ || shadow_ == Shadow::Loaded || timing_.load_commit(now) < buf_drained_[shadow]) return false;
      const bool int8 = is.insn[MLW::dtype] == isa::values::MxuDtype_s8;
      if (!check_vmem_rows(is, is[MLW::rsrc], is[MLW::rstride], n, int8)) return false;
      load_ = WeightLoad{now, is[MLW::rsrc], is[MLW::rstride], is.insn.op == Opcode::MXU_LWT, int8};
      staging_.resize(n * n);  // at the first load
      if (record_) *record_ << fmt::format("cmd {} {} {} 0 {}\n", now, isa::spec(is.insn.op).mnemonic, int8 ? "s8" : "bf16", n);
      loading_ = true;
      load_done_ = now + timing_.load_cycles();
      shadow_ = Shadow::Loading;
      last_complete_ = std::max(last_complete_, timing_.load_commit(now));
      trace_event(is.pc, now, load_done_);
      return true;
    }
    case Opcode::MXU_SWAP: {
      if (shadow_ != Shadow::Loaded) return false;
      active_ = active_ < 0 ? 0 : 1 - active_;
      shadow_ = Shadow::Free;
      if (record_) *record_ << fmt::format("cmd {} mxu.swap - 0 0\n", now);
      trace_event(is.pc, now, now + 1);
      return true;
    }
    case Opcode::MXU_MM:
    case Opcode::MXU_MMA: {
      if (streaming_) return false;
      const bool int8 = is.insn[MMM::dtype] == isa::values::MxuDtype_s8;
      const char* mnem = isa::spec(is.insn.op).mnemonic;
      if (active_ < 0) {
        rc_.fault(fmt::format("core {} mxu{}: pc {}: {} before any weights were loaded and swapped in", core_, index_, is.pc, mnem));
        return false;
      }
      if (int8_[active_] != int8) {
        rc_.fault(fmt::format("core {} mxu{}: pc {}: {} streams {} inputs through {} weights", core_, index_, is.pc, mnem,
                              int8 ? "s8" : "bf16", int8_[active_] ? "s8" : "bf16"));
        return false;
      }
      const uint64_t rows = is[MMM::rrows], racc = is[MMM::racc];
      if (racc > acc_.rows() || rows > acc_.rows() - racc) {
        rc_.fault(fmt::format("core {} mxu{}: pc {}: {} writes accumulator rows {}..{}, outside 0..{}", core_, index_, is.pc,
                              mnem, int64_t(racc), int64_t(racc + rows) - 1, acc_.rows() - 1));
        return false;
      }
      if (!check_vmem_rows(is, is[MMM::rsrc], is[MMM::rstride], rows, int8)) return false;
      if (record_) *record_ << fmt::format("cmd {} {} {} {} {}\n", now, mnem, int8 ? "s8" : "bf16", racc, rows);
      if (rows == 0) {
        trace_event(is.pc, now, now + 1);
        return true;
      }
      stream_ = Stream{now, is[MMM::rsrc], is[MMM::rstride], rows, racc, is.insn.op == Opcode::MXU_MMA, int8, active_};
      streaming_ = true;
      const uint64_t done = timing_.last_result(now, rows);
      buf_drained_[active_] = done;
      last_complete_ = std::max(last_complete_, done);
      trace_event(is.pc, now, done + 1, rows * n * n);
      return true;
    }
    default:
      throw std::logic_error(fmt::format("internal error: {} is not an MXU instruction", isa::spec(is.insn.op).mnemonic));
  }
}

void Mxu::tick() {
  const uint64_t now = rc_.cycle();
  if (woke(now)) return;
  drain(now);
  fire_due(now);
  UnitState state = (streaming_ || loading_ || in_flight_ > 0) ? UnitState::Busy : UnitState::Idle;
  const char* cause = "";
  if (const Issued* h = current(now)) {
    switch (sync_deferred(*h, now, std::max(last_complete_, load_done_))) {
      case SyncResult::Done: state = UnitState::Busy; break;
      case SyncResult::Blocked:
        if (state != UnitState::Busy) state = UnitState::Blocked, cause = blocked_cause(*h);
        break;
      case SyncResult::NotSync: {
        const Issued is = *h;
        if (dispatch(is, now)) {
          retire();
          state = UnitState::Busy;
        } else if (state != UnitState::Busy) {
          state = UnitState::Stalled;
          cause = is.insn.op == Opcode::MXU_SWAP ? "weight_load" : "weights_in_use";
        }
        break;
      }
    }
  }
  if (rc_.faulted()) return;
  loaded_now_ = loading_, streamed_now_ = streaming_;
  advance_load(now);
  advance_stream(now);
  if (in_flight_ > 0) array_->step(now);
  finish(state, cause);
  rest(now, !streaming_ && !loading_ && in_flight_ == 0);
}

}  // namespace tpu::sim
