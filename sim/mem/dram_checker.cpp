#include "dram_checker.h"

#include <fmt/format.h>

#include <algorithm>

namespace tpu::sim::dram {

TimingChecker::TimingChecker(const isa::DramParams& p) : p_(p) {
  const size_t banks = size_t(p.bankgroups) * p.banks_per_group;
  banks_.resize(size_t(p.channels) * p.ranks * banks);
  ranks_.resize(size_t(p.channels) * p.ranks);
  bus_.resize(p.channels);
  for (Bus& b : bus_) b.rd_bg.assign(size_t(p.ranks) * p.bankgroups, kLongAgo), b.wr_bg = b.rd_bg;
}

TimingChecker::Bank& TimingChecker::bank(const Location& at) {
  return banks_[((size_t(at.channel) * p_.ranks + at.rank) * p_.bankgroups + at.bankgroup) * p_.banks_per_group + at.bank];
}

void TimingChecker::fail(const char* constraint, const Location& at, int64_t earlier, int64_t now, Cmd cmd) {
  if (violation_) return;
  violation_ = fmt::format("DRAM timing violation: {} at cycle {} breaks {} (channel {} rank {} bank group {} bank {}; the command it "
                           "follows was at cycle {})",
                           cmd_name(cmd), now, constraint, at.channel, at.rank, at.bankgroup, at.bank, earlier);
}

void TimingChecker::command(uint64_t cycle, Cmd cmd, const Location& at) {
  ++commands_;
  const int64_t t = int64_t(cycle);
  const int64_t bl = p_.burst_cycles();
  Rank& rank = ranks_[size_t(at.channel) * p_.ranks + at.rank];
  Bus& bus = bus_[at.channel];
  const size_t bg = size_t(at.rank) * p_.bankgroups + at.bankgroup;
  auto rank_banks = [&](auto fn) {
    Location l = at;
    for (l.bankgroup = 0; l.bankgroup < p_.bankgroups; ++l.bankgroup)
      for (l.bank = 0; l.bank < p_.banks_per_group; ++l.bank) fn(l, bank(l));
  };
  Bank& b = bank(at);
  // A refresh holds the whole rank.
  if (cmd != Cmd::REF) need(t - rank.ref >= p_.tRFC, "tRFC", at, rank.ref, t, cmd);
  switch (cmd) {
    case Cmd::ACT: {
      need(!b.open, "activate of an open bank", at, b.act, t, cmd);
      need(t - b.pre >= p_.tRP, "tRP", at, b.pre, t, cmd);
      need(t - b.act >= int64_t(p_.tRAS) + p_.tRP, "tRC", at, b.act, t, cmd);
      need(t >= b.auto_pre, "tRP after auto-precharge", at, b.auto_pre - p_.tRP, t, cmd);
      need(t - b.refb >= p_.tRFCb, "tRFCb", at, b.refb, t, cmd);
      rank_banks([&](const Location& l, Bank& o) {
        if (&o == &b) return;
        const bool same_bg = l.bankgroup == at.bankgroup;
        need(t - o.act >= (same_bg ? p_.tRRD_L : p_.tRRD_S), same_bg ? "tRRD_L" : "tRRD_S", at, o.act, t, cmd);
      });
      rank.acts.erase(std::remove_if(rank.acts.begin(), rank.acts.end(), [&](int64_t a) { return t - a >= p_.tFAW; }),
                      rank.acts.end());
      need(rank.acts.size() < 4, "tFAW", at, rank.acts.empty() ? t : rank.acts.front(), t, cmd);
      rank.acts.push_back(t);
      b.open = true;
      b.act = t;
      break;
    }
    case Cmd::RD:
    case Cmd::RDA:
    case Cmd::WR:
    case Cmd::WRA: {
      const bool read = is_read(cmd);
      need(b.open, "a column command to a closed bank", at, b.act, t, cmd);
      need(t - b.act >= (read ? p_.tRCDRD : p_.tRCDWR), read ? "tRCDRD" : "tRCDWR", at, b.act, t, cmd);
      // Column to column: tCCD_L in the bank group, tCCD_S across, and never
      // closer than a burst on the shared data bus.
      for (uint32_t g = 0; g < p_.bankgroups; ++g) {
        const size_t k = size_t(at.rank) * p_.bankgroups + g;
        const int64_t last = std::max(bus.rd_bg[k], bus.wr_bg[k]);
        const bool same = k == bg;
        need(t - last >= (same ? p_.tCCD_L : p_.tCCD_S), same ? "tCCD_L" : "tCCD_S", at, last, t, cmd);
        need(t - last >= bl, "the data bus (a burst)", at, last, t, cmd);
        if (read) {
          const int64_t w = bus.wr_bg[k];
          need(t - w >= int64_t(p_.CWL) + bl + (same ? p_.tWTR_L : p_.tWTR_S), same ? "tWTR_L" : "tWTR_S", at, w, t, cmd);
        }
      }
      if (!read) need(t - bus.rd >= int64_t(p_.CL) + bl - p_.CWL + p_.tRPRE, "read to write turnaround", at, bus.rd, t, cmd);
      (read ? bus.rd : bus.wr) = t;
      (read ? bus.rd_bg[bg] : bus.wr_bg[bg]) = t;
      (read ? b.rd : b.wr) = t;
      if (cmd == Cmd::RDA || cmd == Cmd::WRA) {
        b.open = false;
        b.auto_pre = (read ? t + p_.tRTP : t + p_.CWL + bl + p_.tWR) + p_.tRP;
        b.pre = b.auto_pre - p_.tRP;
      }
      break;
    }
    case Cmd::PRE:
    case Cmd::PREA: {
      auto check = [&](const Location& l, Bank& o) {
        if (!o.open) return;
        need(t - o.act >= p_.tRAS, "tRAS", l, o.act, t, cmd);
        need(t - o.rd >= p_.tRTP, "tRTP", l, o.rd, t, cmd);
        need(t - o.wr >= int64_t(p_.CWL) + bl + p_.tWR, "tWR", l, o.wr, t, cmd);
        o.open = false;
        o.pre = t;
      };
      if (cmd == Cmd::PRE) {
        need(b.open, "precharge of a closed bank", at, b.pre, t, cmd);
        check(at, b);
      } else {
        rank_banks(check);
      }
      break;
    }
    case Cmd::REF:
      need(t - rank.ref >= p_.tRFC, "tRFC", at, rank.ref, t, cmd);
      rank_banks([&](const Location& l, Bank& o) {
        need(!o.open, "refresh with a row open", l, o.act, t, cmd);
        need(t - o.pre >= p_.tRP, "tRP", l, o.pre, t, cmd);
        need(t >= o.auto_pre, "tRP after auto-precharge", l, o.auto_pre - p_.tRP, t, cmd);
      });
      rank.ref = t;
      break;
    case Cmd::REFb:
      need(!b.open, "refresh of an open bank", at, b.act, t, cmd);
      need(t - b.pre >= p_.tRP, "tRP", at, b.pre, t, cmd);
      need(t - b.refb >= p_.tRFCb, "tRFCb", at, b.refb, t, cmd);
      b.refb = t;
      break;
  }
}

}  // namespace tpu::sim::dram
