#include "dram.h"

#include <algorithm>
#include <memory>

namespace tpu::sim::dram {

const char* cmd_name(Cmd c) {
  static const char* names[kNumCmds] = {"ACT", "PRE", "PREA", "RD", "WR", "RDA", "WRA", "REF", "REFb"};
  return names[int(c)];
}

namespace {

int log2u(uint64_t v) {
  int n = 0;
  while (v > 1) v >>= 1, ++n;
  return n;
}

constexpr uint64_t kNever = ~uint64_t(0);

// XOR of the consecutive `width`-bit pieces of x.
uint64_t fold(uint64_t x, int width) {
  if (width == 0) return 0;
  uint64_t h = 0;
  for (; x; x >>= width) h ^= x & ((uint64_t(1) << width) - 1);
  return h;
}

}  // namespace

AddressMap::AddressMap(const isa::DramParams& p) {
  shift_ = log2u(p.request_bytes());
  hash_ = p.address_hash == "xor";
  const std::vector<std::pair<std::string, int>> widths = {
      {"ch", log2u(p.channels)}, {"ra", log2u(p.ranks)},  {"bg", log2u(p.bankgroups)}, {"ba", log2u(p.banks_per_group)},
      {"ro", log2u(p.rows)},     {"co", log2u(p.row_bytes / p.request_bytes())}};
  int pos = 0;
  for (int i = int(p.address_mapping.size()) - 2; i >= 0; i -= 2) {  // least significant field last
    const std::string f = p.address_mapping.substr(size_t(i), 2);
    int w = 0;
    for (const auto& [name, width] : widths)
      if (name == f) w = width;
    Field fld{pos, (uint64_t(1) << w) - 1};
    if (f == "ch") ch_ = fld;
    else if (f == "ra") ra_ = fld;
    else if (f == "bg") bg_ = fld;
    else if (f == "ba") ba_ = fld;
    else if (f == "ro") ro_ = fld;
    else co_ = fld;
    pos += w;
  }
  chw_ = log2u(ch_.mask + 1), bgw_ = log2u(bg_.mask + 1), baw_ = log2u(ba_.mask + 1);
}

Location AddressMap::decode(uint64_t addr) const {
  const uint64_t a = addr >> shift_;
  Location l{ch_.get(a), ra_.get(a), bg_.get(a), ba_.get(a), ro_.get(a), co_.get(a)};
  if (hash_) {
    // Bits above the channel field, without the channel field itself.
    const uint64_t above = (a >> ch_.pos) >> chw_;
    l.channel ^= uint32_t(fold(above, chw_));
    const uint64_t bank = (uint64_t(l.bankgroup) << baw_ | l.bank) ^ fold(l.row, bgw_ + baw_);
    l.bankgroup = uint32_t(bank >> baw_);
    l.bank = uint32_t(bank & ba_.mask);
  }
  return l;
}

void Histogram::add(uint64_t v) {
  if (v >= counts_.size()) counts_.resize(std::max<size_t>(v + 1, counts_.size() * 2), 0);
  ++counts_[v];
  ++n_;
  sum_ += v;
}

uint64_t Histogram::percentile(double p) const {
  if (!n_) return 0;
  const uint64_t need = std::max<uint64_t>(1, uint64_t(p * double(n_) + 0.999999));
  uint64_t seen = 0;
  for (size_t v = 0; v < counts_.size(); ++v)
    if ((seen += counts_[v]) >= need) return v;
  return counts_.size() - 1;
}

void Histogram::merge(const Histogram& o) {
  if (o.counts_.size() > counts_.size()) counts_.resize(o.counts_.size(), 0);
  for (size_t v = 0; v < o.counts_.size(); ++v) counts_[v] += o.counts_[v];
  n_ += o.n_;
  sum_ += o.sum_;
}

Channel::Channel(uint32_t index, const isa::DramParams& p, const AddressMap& map)
    : index_(index),
      p_(p),
      map_(map),
      banks_per_rank_(p.bankgroups * p.banks_per_group),
      per_bank_queues_(p.queue_structure == "per_bank"),
      closed_page_(p.page_policy == "closed"),
      all_bank_refresh_(p.refresh == "all_bank") {
  banks_.resize(size_t(p.ranks) * banks_per_rank_);
  for (size_t b = 0; b < banks_.size(); ++b)
    banks_[b].rank = uint32_t(b / banks_per_rank_), banks_[b].bankgroup = uint32_t(b % banks_per_rank_ / p.banks_per_group);
  ranks_.resize(p.ranks);
  for (Rank& r : ranks_) r.rd_bg.assign(p.bankgroups, 0), r.wr_bg.assign(p.bankgroups, 0), r.rrd_bg.assign(p.bankgroups, 0);
  queues_.resize(per_bank_queues_ ? banks_.size() : p.ranks);
  queue_ready_.assign(queues_.size(), 0);
  read_q_.resize(queues_.size());
  write_buf_.resize(queues_.size());
  pending_reads_ = AddrMap<Waiting>(p.trans_queue_depth);
  pending_writes_ = AddrMap<uint32_t>(p.write_buffer);
  mix_.assign(queues_.size(), Mix{});
  refresh_every_ = all_bank_refresh_ ? std::max<uint64_t>(1, p.tREFI / p.ranks) : p.tREFIb;
  next_refresh_ = refresh_every_;
}

size_t Channel::bank_index(const Location& l) const {
  return size_t(l.rank) * banks_per_rank_ + l.bankgroup * p_.banks_per_group + l.bank;
}

int Channel::queue_index(const Location& l) const {
  return per_bank_queues_ ? int(bank_index(l)) : int(l.rank);
}

bool Channel::will_accept(bool write) const {
  return write ? write_buf_.size() < p_.write_buffer : read_q_.size() < p_.trans_queue_depth;
}

bool Channel::add(uint64_t id, uint64_t addr, const Location& at, bool write, uint64_t cycle) {
  const Trans t{id, addr, at, write, cycle};
  if (write) {
    ++stats_.writes;
    if ((*pending_writes_.insert(addr).first)++ == 0) {
      write_buf_.push(size_t(queue_index(t.at)), t);
    } else {
      complete(id, cycle + 1, false, cycle);  // merged into the buffered write of the same address
      return false;
    }
  } else {
    ++stats_.reads;
    if (pending_writes_.find(addr)) {  // served from the write buffer
      complete(id, cycle + 1, true, cycle);
      return false;
    }
    const auto [w, first] = pending_reads_.insert(addr);
    if (!first) {
      w->more.emplace_back(id, cycle);
      return false;
    }
    w->id = id, w->added = cycle;
    read_q_.push(size_t(queue_index(t.at)), t);
  }
  // A stuck channel stays asleep unless the newcomer changes that.
  sched_dirty_ = !stuck_ || may_move();
  return sched_dirty_;
}

Cmd Channel::required(const Entry& e) const {
  const Bank& b = banks_[bank_index(e.at)];
  if (!b.open) return Cmd::ACT;
  return b.row == e.at.row ? e.cmd : Cmd::PRE;
}

bool Channel::ready(Cmd c, const Location& at, uint64_t cycle) const { return ready_at(c, at) <= cycle; }

// The first cycle at which command c to `at` meets every timing constraint
// (state permitting).
uint64_t Channel::ready_at(Cmd c, const Location& at) const {
  const size_t first = size_t(at.rank) * banks_per_rank_;
  switch (c) {
    case Cmd::PREA: {
      uint64_t t = 0;
      for (size_t b = first; b < first + banks_per_rank_; ++b)
        if (banks_[b].open) t = std::max(t, banks_[b].earliest[int(Cmd::PRE)]);
      return t;
    }
    case Cmd::REF: {
      uint64_t t = 0;
      for (size_t b = first; b < first + banks_per_rank_; ++b) t = std::max(t, banks_[b].earliest[int(Cmd::REF)]);
      return t;
    }
    case Cmd::ACT: {
      uint64_t t = bank_ready(bank_index(at), Cmd::ACT);
      const auto& acts = ranks_[at.rank].acts;
      if (acts.size() >= 4) t = std::max(t, acts[acts.size() - 4] + p_.tFAW);
      return t;
    }
    default: return bank_ready(bank_index(at), c);
  }
}

uint64_t Channel::bank_ready(size_t bank, Cmd c) const {
  const uint64_t own = banks_[bank].earliest[int(c)];
  const Rank& r = ranks_[banks_[bank].rank];
  const size_t bg = banks_[bank].bankgroup;
  switch (c) {
    case Cmd::RD:
    case Cmd::RDA: return std::max(own, r.rd_bg[bg]);
    case Cmd::WR:
    case Cmd::WRA: return std::max(own, r.wr_bg[bg]);
    case Cmd::ACT:
    case Cmd::REFb: return std::max(own, r.rrd_bg[bg]);
    default: return own;
  }
}

// Issuing c at `cycle` delays later commands, by scope (docs/memory.md has
// the table; the checker restates it independently).
void Channel::update_timing(Cmd c, const Location& at, uint64_t cycle) {
  const uint32_t bc = p_.burst_cycles();
  const auto sub = [](int64_t v) { return uint64_t(std::max<int64_t>(v, 0)); };
  const uint64_t ccd_l = std::max(bc, p_.tCCD_L), ccd_s = std::max(bc, p_.tCCD_S);
  const uint64_t rd2wr = sub(int64_t(p_.CL) + bc - p_.CWL + p_.tRPRE + p_.tRTRS);
  const uint64_t rd2wr_o = sub(int64_t(p_.CL) + bc + p_.tRTRS - p_.CWL);
  const uint64_t wr2rd_l = p_.CWL + bc + p_.tWTR_L, wr2rd_s = p_.CWL + bc + p_.tWTR_S;
  const uint64_t wr2rd_o = sub(int64_t(p_.CWL) + bc + p_.tRTRS - p_.CL);
  const uint64_t rd2rd_o = bc + p_.tRTRS, wr2wr_o = bc + p_.tWPRE;
  const uint64_t wr2pre = p_.CWL + bc + p_.tWR;
  const size_t me = bank_index(at);
  auto later = [&](uint64_t& e, uint64_t delay) { e = std::max(e, cycle + delay); };
  auto bump = [&](size_t b, Cmd d, uint64_t delay) { later(banks_[b].earliest[int(d)], delay); };
  auto rank_banks = [&](auto fn) {
    for (size_t b = size_t(at.rank) * banks_per_rank_; b < size_t(at.rank + 1) * banks_per_rank_; ++b) fn(b);
  };
  switch (c) {
    case Cmd::RD:
    case Cmd::RDA:
    case Cmd::WR:
    case Cmd::WRA: {
      // Column to column, by bank group and rank.
      const bool read = is_read(c);
      for (uint32_t r = 0; r < ranks_.size(); ++r)
        for (uint32_t g = 0; g < p_.bankgroups; ++g) {
          const bool other = r != at.rank, same_bg = !other && g == at.bankgroup;
          if (read) {
            later(ranks_[r].rd_bg[g], other ? rd2rd_o : same_bg ? ccd_l : ccd_s);
            later(ranks_[r].wr_bg[g], other ? rd2wr_o : rd2wr);
          } else {
            later(ranks_[r].rd_bg[g], other ? wr2rd_o : same_bg ? wr2rd_l : wr2rd_s);
            later(ranks_[r].wr_bg[g], other ? wr2wr_o : same_bg ? ccd_l : ccd_s);
          }
        }
      if (c == Cmd::RD) bump(me, Cmd::PRE, p_.tRTP);
      if (c == Cmd::WR) bump(me, Cmd::PRE, wr2pre);
      if (c == Cmd::RDA || c == Cmd::WRA)
        for (Cmd d : {Cmd::ACT, Cmd::REF, Cmd::REFb}) bump(me, d, (c == Cmd::RDA ? p_.tRTP : wr2pre) + p_.tRP);
      break;
    }
    case Cmd::ACT:
      bump(me, Cmd::ACT, p_.tRAS + p_.tRP);
      for (Cmd d : {Cmd::RD, Cmd::RDA}) bump(me, d, p_.tRCDRD);
      for (Cmd d : {Cmd::WR, Cmd::WRA}) bump(me, d, p_.tRCDWR);
      bump(me, Cmd::PRE, p_.tRAS);
      bump(me, Cmd::REF, p_.tRAS + p_.tRP);
      for (uint32_t g = 0; g < p_.bankgroups; ++g) later(ranks_[at.rank].rrd_bg[g], g == at.bankgroup ? p_.tRRD_L : p_.tRRD_S);
      break;
    case Cmd::PRE:
      for (Cmd d : {Cmd::ACT, Cmd::REF, Cmd::REFb}) bump(me, d, p_.tRP);
      break;
    case Cmd::PREA:
      rank_banks([&](size_t b) {
        for (Cmd d : {Cmd::ACT, Cmd::REF, Cmd::REFb}) bump(b, d, p_.tRP);
      });
      break;
    case Cmd::REF:
      rank_banks([&](size_t b) {
        for (Cmd d : {Cmd::ACT, Cmd::REF, Cmd::REFb}) bump(b, d, p_.tRFC);
      });
      break;
    case Cmd::REFb:
      for (Cmd d : {Cmd::ACT, Cmd::REF, Cmd::REFb}) bump(me, d, p_.tRFCb);
      for (uint32_t g = 0; g < p_.bankgroups; ++g) later(ranks_[at.rank].rrd_bg[g], p_.tRRD_L);
      break;
  }
}

// A precharge for entry i closes a row others may still want: only when no
// earlier entry waits on the bank, and no later one hits the open row (or
// the row has served row_hit_cap hits already).
bool Channel::precharge_allowed(const std::vector<Entry>& q, size_t i) const {
  const Location& at = q[i].at;
  const size_t bank = bank_index(at);
  for (size_t k = 0; k < i; ++k)
    if (bank_index(q[k].at) == bank) return false;
  const Bank& b = banks_[bank];
  if (b.hits >= p_.row_hit_cap) return true;
  for (size_t k = i; k < q.size(); ++k)
    if (bank_index(q[k].at) == bank && q[k].at.row == b.row) return false;
  return true;
}

// The first ready command of the next queue that has one, round robin;
// within a queue the oldest ready command (FR-FCFS: a row hit is ready
// while a conflict waits behind its precharge).
Channel::Pick Channel::pick_from_queues(uint64_t cycle) {
  const int n = int(queues_.size());
  for (int k = 0; k < n; ++k) {
    if (++rr_ == n) rr_ = 0;
    const auto& q = queues_[size_t(rr_)];
    if (q.empty() || queue_ready_[size_t(rr_)] > cycle) continue;
    uint64_t earliest = kNever;
    if (per_bank_queues_) {
      const Pick p = pick_in_bank(size_t(rr_), cycle, earliest);
      if (p.valid) return p;
      queue_ready_[size_t(rr_)] = earliest;
      continue;
    }
    for (size_t i = 0; i < q.size(); ++i) {
      const Entry& e = q[i];
      if (refreshes_waiting_ && (ranks_[e.at.rank].refresh || banks_[bank_index(e.at)].refresh)) {
        earliest = 0;  // held by a refresh: look again every cycle
        continue;
      }
      const Cmd c = required(e);
      const uint64_t at = ready_at(c, e.at);
      if (at > cycle) {
        earliest = std::min(earliest, at);
        continue;
      }
      // Held back by an older or a hitting entry of this queue: only a
      // command from this queue (which resets the bound) can free it.
      if (c == Cmd::PRE && !precharge_allowed(q, i)) continue;
      if (is_write(c)) {  // a write waits for an older read of the same column
        bool older_read = false;
        for (size_t k = 0; k < i && !older_read; ++k)
          older_read = is_read(q[k].cmd) && q[k].addr == e.addr;
        if (older_read) continue;
      }
      return {true, c, rr_, i, e.at};
    }
    queue_ready_[size_t(rr_)] = earliest;
  }
  return {};
}

// pick_from_queues for a per-bank queue, whose entries share a bank: a
// closed bank's oldest entry activates; an open one's entries hit (their
// column command) or need it closed, which only the oldest may ask for and
// only when no entry hits (or the row has served row_hit_cap hits).
Channel::Pick Channel::pick_in_bank(size_t qi, uint64_t cycle, uint64_t& earliest) const {
  const auto& q = queues_[qi];
  const Bank& b = banks_[qi];
  if (refreshes_waiting_ && (b.refresh || ranks_[b.rank].refresh)) {
    earliest = 0;  // held by a refresh: look again every cycle
    return {};
  }
  if (!b.open) {
    const uint64_t at = ready_at(Cmd::ACT, q[0].at);
    if (at <= cycle) return {true, Cmd::ACT, int(qi), 0, q[0].at};
    earliest = at;
    return {};
  }
  // Each kind of command is ready for all its entries at once: the oldest
  // ready entry is the first read hit, the first write hit (not behind a
  // read of its column) or the first entry's precharge, whichever comes first.
  const Mix& m = mix_[qi];
  const Cmd rd = closed_page_ ? Cmd::RDA : Cmd::RD, wr = closed_page_ ? Cmd::WRA : Cmd::WR;
  bool want_rd = false, want_wr = false, want_pre = false;
  auto consider = [&](bool present, Cmd c, bool& want) {
    if (!present) return;
    const uint64_t at = bank_ready(qi, c);
    if (at > cycle) earliest = std::min(earliest, at);
    else want = true;
  };
  consider(m.reads > 0, rd, want_rd);
  consider(m.writes > 0, wr, want_wr);
  consider(m.others > 0, Cmd::PRE, want_pre);
  if (want_pre && q[0].at.row != b.row && (b.hits >= p_.row_hit_cap || m.reads + m.writes == 0))
    return {true, Cmd::PRE, int(qi), 0, q[0].at};
  for (size_t i = 0; i < q.size() && (want_rd || want_wr); ++i) {
    const Entry& e = q[i];
    if (e.at.row != b.row) continue;
    if (is_read(e.cmd)) {
      if (want_rd) return {true, e.cmd, int(qi), i, e.at};
      continue;
    }
    if (!want_wr) continue;
    bool older_read = false;  // a write waits for an older read of the same column
    for (size_t k = 0; k < i && !older_read; ++k) older_read = is_read(q[k].cmd) && q[k].addr == e.addr;
    if (!older_read) return {true, e.cmd, int(qi), i, e.at};
  }
  return {};
}

void Channel::forget_ready(const Location& at) {
  const size_t q = size_t(queue_index(at));
  queue_ready_[q] = 0;
  if (!per_bank_queues_) return;
  // A per-bank queue: what its entries need now (timing_bound).
  Mix& m = mix_[q];
  m = Mix{};
  const Bank& b = banks_[q];
  for (const Entry& e : queues_[q]) {
    if (!b.open || e.at.row != b.row) ++m.others;
    else if (is_read(e.cmd)) ++m.reads;
    else ++m.writes;
  }
}

// For a per-bank queue, the first cycle any of its entries' next commands
// meets the timing rules, exactly (0 for a per-rank queue: unknown).
uint64_t Channel::timing_bound(size_t q) const {
  if (!per_bank_queues_) return 0;
  const Bank& b = banks_[q];
  if (refreshes_waiting_ && (b.refresh || ranks_[b.rank].refresh)) return 0;
  const Mix& m = mix_[q];
  if (!b.open) {
    uint64_t t = bank_ready(q, Cmd::ACT);
    const auto& acts = ranks_[b.rank].acts;
    if (acts.size() >= 4) t = std::max(t, acts[acts.size() - 4] + p_.tFAW);
    return t;
  }
  uint64_t t = kNever;
  if (m.reads) t = std::min(t, bank_ready(q, closed_page_ ? Cmd::RDA : Cmd::RD));
  if (m.writes) t = std::min(t, bank_ready(q, closed_page_ ? Cmd::WRA : Cmd::WR));
  if (m.others) t = std::min(t, banks_[q].earliest[int(Cmd::PRE)]);
  return t;
}

// A waiting refresh: close the rank's (or bank's) rows, then refresh.
Channel::Pick Channel::pick_refresh(uint64_t cycle) const {
  for (uint32_t r = 0; r < ranks_.size(); ++r) {
    Location at;
    at.channel = index_;
    at.rank = r;
    if (ranks_[r].refresh) {
      bool open = false;
      for (size_t b = size_t(r) * banks_per_rank_; b < size_t(r + 1) * banks_per_rank_; ++b) open |= banks_[b].open;
      const Cmd c = open ? Cmd::PREA : Cmd::REF;
      if (ready(c, at, cycle)) return {true, c, -1, 0, at};
      continue;
    }
    for (uint32_t k = 0; k < banks_per_rank_; ++k) {
      const Bank& b = banks_[size_t(r) * banks_per_rank_ + k];
      if (!b.refresh) continue;
      at.bankgroup = k / p_.banks_per_group;
      at.bank = k % p_.banks_per_group;
      const Cmd c = b.open ? Cmd::PRE : Cmd::REFb;
      if (ready(c, at, cycle)) return {true, c, -1, 0, at};
    }
  }
  return {};
}

void Channel::issue(const Pick& p, uint64_t cycle) {
  if (listener_) listener_->command(cycle, p.cmd, p.at);
  Bank& b = banks_[bank_index(p.at)];
  const size_t rank_first = size_t(p.at.rank) * banks_per_rank_;
  switch (p.cmd) {
    case Cmd::ACT:
      b.open = true;
      b.row = p.at.row;
      b.hits = 0;
      ++stats_.activates;
      ranks_[p.at.rank].acts.push_back(cycle);
      if (ranks_[p.at.rank].acts.size() > 4) ranks_[p.at.rank].acts.pop_front();
      break;
    case Cmd::PRE:
      b.open = false;
      b.conflict = p.queue >= 0;
      ++stats_.precharges;
      break;
    case Cmd::PREA:
      for (size_t k = rank_first; k < rank_first + banks_per_rank_; ++k)
        if (banks_[k].open) banks_[k].open = false, banks_[k].conflict = false;
      ++stats_.precharges;
      break;
    case Cmd::REF:
      ranks_[p.at.rank].refresh = false;
      --refreshes_waiting_;
      ranks_[p.at.rank].refreshing_until = cycle + p_.tRFC;
      ++stats_.refreshes;
      stats_.refresh_bank_cycles += (cycle - ranks_[p.at.rank].refresh_since + p_.tRFC) * banks_per_rank_;
      break;
    case Cmd::REFb:
      b.refresh = false;
      --refreshes_waiting_;
      ++stats_.refreshes;
      stats_.refresh_bank_cycles += p_.tRFCb;
      break;
    default: {  // a column command
      auto& q = queues_[size_t(p.queue)];
      const Entry e = q[p.entry];
      q.erase(q.begin() + std::ptrdiff_t(p.entry));
      --queued_;
      sched_dirty_ = true;
      if (b.hits > 0) ++stats_.row_hits;
      else if (b.conflict) ++stats_.row_conflicts;
      else ++stats_.row_misses;
      b.conflict = false;
      ++b.hits;
      const bool write = is_write(p.cmd);
      if (any_column_ && write != last_column_write_) {
        ++stats_.turnarounds;
        stats_.turnaround_cycles += cycle > bus_free_ ? cycle - bus_free_ : 0;  // the bus idle before the switch
      }
      any_column_ = true;
      last_column_write_ = write;
      stats_.data_cycles += p_.burst_cycles();
      bus_free_ = std::max(bus_free_, cycle + p_.burst_cycles());
      if (write) {
        ++stats_.write_cmds;
        complete(e.id, cycle + p_.CWL + p_.burst_cycles(), false, 0);
        pending_writes_.erase(e.addr);  // writes merged into it were done when they arrived
      } else {
        ++stats_.read_cmds;
        const Waiting* w = pending_reads_.find(e.addr);
        const uint64_t at = cycle + p_.CL + p_.burst_cycles();
        complete(w->id, at, true, w->added);
        for (const auto& [id, added] : w->more) complete(id, at, true, added);
        pending_reads_.erase(e.addr);
      }
      if (p.cmd == Cmd::RDA || p.cmd == Cmd::WRA) b.open = false;
    }
  }
  update_timing(p.cmd, p.at, cycle);
  if (p.cmd == Cmd::PREA || p.cmd == Cmd::REF)
    for (size_t b = 0; b < banks_.size(); b += per_bank_queues_ ? 1 : banks_per_rank_)
      forget_ready(Location{index_, uint32_t(b / banks_per_rank_), uint32_t(b % banks_per_rank_ / p_.banks_per_group),
                            uint32_t(b % p_.banks_per_group), 0, 0});
  else
    forget_ready(p.at);  // the bank's state, its hits or its queue changed
}

// One transaction a cycle moves into its command queue: reads first; the
// write buffer drains when full, or when the command queues are empty and
// more than the threshold wait (DRAMsim3's rule) or no read does.
bool Channel::schedule_transaction() {
  if (!sched_dirty_) return false;  // nothing it looks at has changed since it last failed
  start_drain();
  auto& from = write_draining_ > 0 ? write_buf_ : read_q_;
  const int k = from.oldest([&](size_t q) { return queues_[q].size() < p_.cmd_queue_depth; });
  if (k >= 0) {
    const Trans t = from.front(k);
    if (t.write) {
      if (pending_reads_.find(t.addr)) {  // a read of this address goes first: reads move from the next cycle
        write_draining_ = 0;
        return false;
      }
      --write_draining_;
    }
    const Cmd c = t.write ? (closed_page_ ? Cmd::WRA : Cmd::WR) : (closed_page_ ? Cmd::RDA : Cmd::RD);
    queues_[size_t(k)].push_back({c, t.at, t.addr, t.id});
    forget_ready(t.at);
    ++queued_;
    from.pop(k);
    sched_dirty_ = may_move();  // if not, nothing will until a command issues or a request arrives
    return true;
  }
  sched_dirty_ = false;
  return false;
}

bool Channel::drain_due() const {
  return write_draining_ == 0 && !write_buf_.empty() &&
         (write_buf_.size() >= p_.write_buffer || (queued_ == 0 && (write_buf_.size() > p_.write_drain_threshold || read_q_.empty())));
}

void Channel::start_drain() {
  if (drain_due()) write_draining_ = uint32_t(write_buf_.size());
}

// Whether schedule_transaction, run now, might change anything (false only
// when it would surely neither start a drain nor move a transaction).
bool Channel::may_move() const {
  return drain_due() || (write_draining_ > 0 ? write_buf_ : read_q_).oldest([&](size_t q) { return queues_[q].size() < p_.cmd_queue_depth; }) >= 0;
}

void Channel::return_data(uint64_t cycle, std::vector<Completion>& done) {
  while (!returns_.empty() && returns_.top().cycle <= cycle) {
    const Return r = returns_.top();
    returns_.pop();
    if (r.read) stats_.read_latency.add(r.cycle - r.added);
    done.push_back({r.id, r.cycle});
  }
}

void Channel::tick(uint64_t cycle, std::vector<Completion>& done) {
  // Cycles skipped since the last tick had the same queues.
  const uint64_t gap = cycle > last_tick_ ? cycle - last_tick_ : 0;
  stats_.queue_occupancy += uint64_t(queued_) * gap;
  stats_.cycles += gap;
  // Cycles since the last tick with commands queued and the data bus idle.
  if (queued_ > 0 && cycle > bus_free_) stats_.act_wait_cycles += cycle - std::max(bus_free_, cycle - gap);
  last_tick_ = cycle;
  return_data(cycle, done);
  if (cycle >= next_refresh_) {  // next_event never lets a channel sleep past it
    if (all_bank_refresh_) {
      ranks_[next_refresh_rank_].refresh = true;
      ranks_[next_refresh_rank_].refresh_since = cycle;
      next_refresh_rank_ = (next_refresh_rank_ + 1) % uint32_t(ranks_.size());
    } else {
      banks_[next_refresh_bank_].refresh = true;
      next_refresh_bank_ = (next_refresh_bank_ + 1) % uint32_t(banks_.size());
    }
    ++refreshes_waiting_;
    next_refresh_ += refresh_every_;
  }
  Pick first = refreshes_waiting_ ? pick_refresh(cycle) : Pick{};
  if (!first.valid && (refreshes_waiting_ || cycle >= cmd_ready_)) first = pick_from_queues(cycle);
  if (first.valid) {
    issue(first, cycle);
    if (p_.dual_command) {  // HBM: a row and a column command in one cycle
      const Pick second = pick_from_queues(cycle);
      if (second.valid && is_column(second.cmd) != is_column(first.cmd)) issue(second, cycle);
    }
  }
  stuck_ = !schedule_transaction() || !sched_dirty_;
  // Each queue's bound, tightened by its exact timing (per-bank queues): it
  // holds for the next cycles, timing only moving later, until the queue or
  // its bank changes (forget_ready).
  cmd_ready_ = kNever;
  for (size_t k = 0; k < queues_.size(); ++k)
    if (!queues_[k].empty()) {
      if (queue_ready_[k] <= cycle + 1) queue_ready_[k] = std::max(queue_ready_[k], timing_bound(k));
      cmd_ready_ = std::min(cmd_ready_, queue_ready_[k]);
    }
  if (queued_ > 0 && cycle >= bus_free_) ++stats_.act_wait_cycles;
  stats_.queue_occupancy += queued_;
  ++stats_.cycles;
  last_tick_ = cycle + 1;
}

uint64_t Channel::next_event(uint64_t cycle) const {
  // Waiting transactions move every cycle, unless their command queues are
  // full: then only an issued command (below) makes room.
  if ((!read_q_.empty() || !write_buf_.empty()) && !stuck_) return cycle;
  uint64_t t = kNever;
  if (refreshes_waiting_) return cycle;
  return std::max(std::min(std::min(t, cmd_ready_), next_refresh_), cycle);
}

bool Channel::idle() const { return read_q_.empty() && write_buf_.empty() && queued_ == 0 && returns_.empty(); }

uint32_t Channel::state(uint64_t cycle) const {
  for (const Rank& r : ranks_)
    if (r.refresh || cycle < r.refreshing_until) return 2;
  for (const Bank& b : banks_)
    if (b.refresh) return 2;
  return idle() ? 0 : 1;
}

Dram::Dram(const isa::DramParams& p) : p_(p), map_(p_) {
  for (uint32_t c = 0; c < p_.channels; ++c) channels_.push_back(std::make_unique<Channel>(c, p_, map_));
  next_.assign(p_.channels, 0);
  next_tick_.assign(p_.channels, 0);
}

void Dram::add(uint64_t id, uint64_t addr, bool write, uint64_t cycle) {
  const Location at = map_.decode(addr);
  const uint32_t c = at.channel;
  if (channels_[c]->add(id, addr, at, write, cycle)) next_tick_[c] = std::min(next_tick_[c], cycle);
  next_[c] = std::min({next_[c], next_tick_[c], channels_[c]->next_return()});
  soonest_ = std::min(soonest_, next_[c]);
}

void Dram::tick(uint64_t cycle, std::vector<Completion>& done) {
  if (soonest_ > cycle) return;
  soonest_ = kNever;
  for (uint32_t c = 0; c < channels_.size(); ++c) {
    if (next_[c] > cycle) {
      soonest_ = std::min(soonest_, next_[c]);
      continue;
    }
    if (next_tick_[c] <= cycle) {
      channels_[c]->tick(cycle, done);
      next_tick_[c] = channels_[c]->next_event(cycle + 1);
    } else {
      channels_[c]->return_data(cycle, done);  // data returns without the controller doing anything
    }
    next_[c] = std::min(next_tick_[c], channels_[c]->next_return());
    soonest_ = std::min(soonest_, next_[c]);
  }
}

uint64_t Dram::next_event(uint64_t cycle) const { return std::max(soonest_, cycle); }

bool Dram::idle() const {
  for (const auto& c : channels_)
    if (!c->idle()) return false;
  return true;
}

void Dram::set_listener(CommandListener* l) {
  for (auto& c : channels_) c->set_listener(l);
}

ChannelStats Dram::total() const {
  ChannelStats t;
  for (const auto& c : channels_) {
    const ChannelStats& s = c->stats();
    t.reads += s.reads, t.writes += s.writes, t.read_cmds += s.read_cmds, t.write_cmds += s.write_cmds;
    t.row_hits += s.row_hits, t.row_misses += s.row_misses, t.row_conflicts += s.row_conflicts;
    t.activates += s.activates, t.precharges += s.precharges, t.refreshes += s.refreshes;
    t.data_cycles += s.data_cycles, t.refresh_bank_cycles += s.refresh_bank_cycles, t.turnarounds += s.turnarounds;
    t.turnaround_cycles += s.turnaround_cycles;
    t.act_wait_cycles += s.act_wait_cycles, t.queue_occupancy += s.queue_occupancy, t.cycles = std::max(t.cycles, s.cycles);
    t.read_latency.merge(s.read_latency);
  }
  return t;
}

}  // namespace tpu::sim::dram
