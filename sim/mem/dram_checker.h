// The DRAM timing checker: sees every command a controller issues and checks
// it against the device's JEDEC constraints, written here from the
// parameters directly (not from the controller's timing table), so a
// controller that gets a constraint wrong is caught. The first violation is
// kept as one line naming the constraint, the bank and both cycles.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "dram.h"

namespace tpu::sim::dram {

class TimingChecker : public CommandListener {
 public:
  explicit TimingChecker(const isa::DramParams& p);
  void command(uint64_t cycle, Cmd cmd, const Location& at) override;
  const std::optional<std::string>& violation() const { return violation_; }
  uint64_t commands() const { return commands_; }

 private:
  static constexpr int64_t kLongAgo = INT64_MIN / 4;
  struct Bank {
    bool open = false;
    int64_t act = kLongAgo, pre = kLongAgo, rd = kLongAgo, wr = kLongAgo, refb = kLongAgo;
    int64_t auto_pre = kLongAgo;  // the cycle an RDA/WRA's precharge completes (tRP included)
  };
  struct Rank {
    int64_t ref = kLongAgo;
    std::vector<int64_t> acts;  // activates within the last tFAW
  };
  void need(bool ok, const char* constraint, const Location& at, int64_t earlier, int64_t now, Cmd cmd) {
    if (!ok) fail(constraint, at, earlier, now, cmd);
  }
  void fail(const char* constraint, const Location& at, int64_t earlier, int64_t now, Cmd cmd);
  Bank& bank(const Location& at);

  isa::DramParams p_;
  std::vector<Bank> banks_;  // per channel, rank, bank
  std::vector<Rank> ranks_;  // per channel, rank
  // per channel: the last column command of each kind, overall and per bank group
  struct Bus {
    int64_t rd = kLongAgo, wr = kLongAgo;
    std::vector<int64_t> rd_bg, wr_bg;
  };
  std::vector<Bus> bus_;
  std::optional<std::string> violation_;
  uint64_t commands_ = 0;
};

}  // namespace tpu::sim::dram
