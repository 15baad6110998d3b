// The `detailed` HBM model (docs/memory.md): per channel a controller with a
// read queue, a write buffer, command queues per bank or per rank, FR-FCFS
// scheduling, open- or closed-page policy and all-bank or per-bank refresh,
// in front of banks whose timing follows the device's parameters. Plain C++,
// clocked in the device's own cycles: the chip (memory_system.h) and trace
// replay (tpusim --hbm-trace) both drive it.
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <memory>
#include <queue>
#include <string>
#include <utility>
#include <vector>

#include "tpu/isa/machine.h"

namespace tpu::sim::dram {

enum class Cmd : uint8_t { ACT, PRE, PREA, RD, WR, RDA, WRA, REF, REFb };
inline constexpr int kNumCmds = 9;
const char* cmd_name(Cmd c);
inline bool is_column(Cmd c) { return c == Cmd::RD || c == Cmd::WR || c == Cmd::RDA || c == Cmd::WRA; }
inline bool is_read(Cmd c) { return c == Cmd::RD || c == Cmd::RDA; }
inline bool is_write(Cmd c) { return c == Cmd::WR || c == Cmd::WRA; }

struct Location {
  uint32_t channel = 0, rank = 0, bankgroup = 0, bank = 0, row = 0, column = 0;
};

// address_mapping: six fields, most significant first; the low
// log2(request bytes) bits are the byte within a request. Bits above the
// fields are ignored (the address wraps around the device). address_hash
// xor: the channel is XORed with every bit above the channel field, folded
// to its width, and the bank group and bank with the row, folded likewise
// (a bijection: no two addresses meet).
class AddressMap {
 public:
  explicit AddressMap(const isa::DramParams& p);
  Location decode(uint64_t addr) const;

 private:
  struct Field {
    int pos = 0;
    uint64_t mask = 0;
    uint32_t get(uint64_t a) const { return uint32_t((a >> pos) & mask); }
  };
  int shift_ = 0;
  bool hash_ = false;
  int chw_ = 0, bgw_ = 0, baw_ = 0;  // field widths the hash folds to
  Field ch_, ra_, bg_, ba_, ro_, co_;
};

// A map from request addresses: open addressing with linear probing and
// backward-shift deletion, so the controller's lookups for every request
// allocate nothing. Its table is made at the first insert (a channel that
// sees no traffic allocates nothing).
template <typename V>
class AddrMap {
 public:
  explicit AddrMap(size_t expected = 64) : first_size_(std::max<size_t>(16, expected * 2)) {}
  V* find(uint64_t key) {
    if (slots_.empty()) return nullptr;
    for (size_t i = home(key);; i = (i + 1) & mask_) {
      if (!slots_[i].used) return nullptr;
      if (slots_[i].key == key) return &slots_[i].value;
    }
  }
  // The value of `key`, and whether it was just added (value-initialised).
  std::pair<V*, bool> insert(uint64_t key) {
    if (slots_.empty()) rehash(first_size_);
    if ((n_ + 1) * 2 > slots_.size()) rehash(slots_.size() * 2);
    size_t i = home(key);
    for (; slots_[i].used; i = (i + 1) & mask_)
      if (slots_[i].key == key) return {&slots_[i].value, false};
    slots_[i] = Slot{key, true, V{}};
    ++n_;
    return {&slots_[i].value, true};
  }
  void erase(uint64_t key) {
    if (slots_.empty()) return;
    size_t i = home(key);
    for (; slots_[i].key != key || !slots_[i].used; i = (i + 1) & mask_)
      if (!slots_[i].used) return;
    for (size_t j = (i + 1) & mask_; slots_[j].used; j = (j + 1) & mask_)
      if (((j - home(slots_[j].key)) & mask_) >= ((j - i) & mask_)) {  // j may move back to the hole
        slots_[i] = std::move(slots_[j]);
        i = j;
      }
    slots_[i].used = false;
    --n_;
  }

 private:
  struct Slot {
    uint64_t key = 0;
    bool used = false;
    V value{};
  };
  size_t home(uint64_t key) const { return size_t((key * 0x9E3779B97F4A7C15ull) >> shift_); }
  void rehash(size_t size) {  // size: a power of two
    size_t n = 16;
    while (n < size) n *= 2;
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(n, Slot{});
    mask_ = n - 1;
    shift_ = 64;
    while (n > 1) n >>= 1, --shift_;
    n_ = 0;
    for (Slot& s : old)
      if (s.used) *insert(s.key).first = std::move(s.value);
  }
  size_t first_size_;
  std::vector<Slot> slots_;
  size_t mask_ = 0, n_ = 0;
  int shift_ = 64;
};

// Sees every command a controller issues: the timing checker, the trace.
class CommandListener {
 public:
  virtual ~CommandListener() = default;
  virtual void command(uint64_t cycle, Cmd cmd, const Location& at) = 0;
};

// Exact percentiles over integer samples.
class Histogram {
 public:
  void add(uint64_t v);
  uint64_t count() const { return n_; }
  double mean() const { return n_ ? double(sum_) / double(n_) : 0.0; }
  uint64_t percentile(double p) const;  // the smallest v with at least p of the samples <= v
  void merge(const Histogram& o);

 private:
  std::vector<uint64_t> counts_;
  uint64_t n_ = 0;
  unsigned __int128 sum_ = 0;
};

struct ChannelStats {
  uint64_t reads = 0, writes = 0;  // requests accepted
  uint64_t read_cmds = 0, write_cmds = 0;
  uint64_t row_hits = 0;       // column commands to a row that an earlier one had already used
  uint64_t row_misses = 0;     // ... that needed an activate of a closed bank
  uint64_t row_conflicts = 0;  // ... that needed another row closed first
  uint64_t activates = 0, precharges = 0, refreshes = 0;
  uint64_t data_cycles = 0;        // cycles the data bus carried data
  uint64_t refresh_bank_cycles = 0;  // bank-cycles from a refresh's request until its tRFC (tRFCb) has passed
  uint64_t turnarounds = 0;        // column commands that switched between read and write
  uint64_t turnaround_cycles = 0;  // data bus idle cycles right before those
  uint64_t act_wait_cycles = 0;    // cycles with commands queued and the data bus idle (activates, precharges, timing)
  uint64_t queue_occupancy = 0;    // sum over cycles of the commands queued
  uint64_t cycles = 0;
  Histogram read_latency;          // accepted to data returned
};

struct Completion {
  uint64_t id = 0;
  uint64_t cycle = 0;  // the memory cycle its data returned (read) or was written (write)
  bool operator>(const Completion& o) const { return cycle != o.cycle ? cycle > o.cycle : id > o.id; }
};

class Channel {
 public:
  Channel(uint32_t index, const isa::DramParams& p, const AddressMap& map);

  bool will_accept(bool write) const;
  // A request accepted in `cycle` (it can be scheduled from that cycle on).
  // Whether the controller must tick in `cycle` (else it sleeps on).
  bool add(uint64_t id, uint64_t addr, const Location& at, bool write, uint64_t cycle);
  // One memory cycle: return data, refresh, issue up to two commands,
  // move one transaction into the command queues.
  void tick(uint64_t cycle, std::vector<Completion>& done);
  // The first cycle >= `cycle` at which tick() may do anything but return
  // data (return_data does that, and next_return says when).
  uint64_t next_event(uint64_t cycle) const;
  void return_data(uint64_t cycle, std::vector<Completion>& done);
  uint64_t next_return() const { return returns_.empty() ? ~uint64_t(0) : returns_.top().cycle; }
  bool idle() const;
  void set_listener(CommandListener* l) { listener_ = l; }
  const ChannelStats& stats() const { return stats_; }
  uint32_t queued() const { return queued_; }
  uint32_t waiting() const { return uint32_t(read_q_.size() + write_buf_.size()); }
  // 0 idle, 1 busy, 2 refreshing (waveforms).
  uint32_t state(uint64_t cycle) const;

 private:
  struct Trans {
    uint64_t id, addr;
    Location at;
    bool write;
    uint64_t added;
    uint64_t seq = 0;  // arrival order
  };
  // Transactions waiting for their command queue, kept per command queue so
  // that the oldest one whose queue has room is found without scanning
  // the others.
  class TransQueue {
   public:
    void resize(size_t queues) { q_.resize(queues); }
    void push(size_t queue, Trans t) {
      t.seq = seq_++;
      q_[queue].push_back(t);
      ++n_;
    }
    size_t size() const { return n_; }
    bool empty() const { return n_ == 0; }
    // The command queue whose oldest transaction is the oldest of those
    // whose queue has room (room(queue)), or -1.
    template <typename Room>
    int oldest(Room room) const {
      int best = -1;
      for (size_t k = 0; k < q_.size(); ++k)
        if (!q_[k].empty() && (best < 0 || q_[k].front().seq < q_[size_t(best)].front().seq) && room(k)) best = int(k);
      return best;
    }
    Trans& front(int queue) { return q_[size_t(queue)].front(); }
    void pop(int queue) {
      q_[size_t(queue)].pop_front();
      --n_;
    }

   private:
    // A FIFO that allocates nothing before its first push (a channel keeps
    // one per bank and most stay empty; a std::deque allocates at once).
    class Fifo {
     public:
      bool empty() const { return head_ == tail_; }
      Trans& front() { return buf_[head_ & (buf_.size() - 1)]; }
      const Trans& front() const { return buf_[head_ & (buf_.size() - 1)]; }
      void push_back(const Trans& t) {
        if (tail_ - head_ == buf_.size()) grow();
        buf_[tail_++ & (buf_.size() - 1)] = t;
      }
      void pop_front() { ++head_; }

     private:
      void grow() {
        std::vector<Trans> b(std::max<size_t>(8, 2 * buf_.size()));
        for (size_t i = head_; i != tail_; ++i) b[i - head_] = buf_[i & (buf_.size() - 1)];
        tail_ -= head_, head_ = 0;
        buf_.swap(b);
      }
      std::vector<Trans> buf_;  // a power of two long
      size_t head_ = 0, tail_ = 0;
    };
    std::vector<Fifo> q_;
    uint64_t seq_ = 0;
    size_t n_ = 0;
  };
  struct Entry {
    Cmd cmd;  // RD, WR, RDA or WRA
    Location at;
    uint64_t addr;
    uint64_t id;
  };
  struct Bank {
    bool open = false;
    bool conflict = false;  // closed for another row: the next activate serves a conflict
    bool refresh = false;   // a per-bank refresh waits for it
    uint32_t row = 0;
    uint32_t hits = 0;  // column commands since the activate
    uint32_t rank = 0, bankgroup = 0;  // where it is (no division on the hot path)
    std::array<uint64_t, kNumCmds> earliest{};
  };
  struct Rank {
    bool refresh = false;  // an all-bank refresh waits
    uint64_t refresh_since = 0;
    uint64_t refreshing_until = 0;  // tRFC after the last REF
    std::deque<uint64_t> acts;  // the last four activates (tFAW)
    // Per bank group: the earliest read, write and activate (or per-bank
    // refresh) of its banks, as the column and activate commands of the
    // whole channel constrain them (the bank's own rules are in Bank).
    std::vector<uint64_t> rd_bg, wr_bg, rrd_bg;
  };
  struct Pick {
    bool valid = false;
    Cmd cmd = Cmd::ACT;
    int queue = -1;
    size_t entry = 0;
    Location at;
  };

  size_t bank_index(const Location& l) const;
  int queue_index(const Location& l) const;
  Cmd required(const Entry& e) const;
  bool ready(Cmd c, const Location& at, uint64_t cycle) const;
  uint64_t ready_at(Cmd c, const Location& at) const;
  uint64_t bank_ready(size_t bank, Cmd c) const;  // c to that bank: its rules and its bank group's
  Pick pick_from_queues(uint64_t cycle);
  Pick pick_in_bank(size_t queue, uint64_t cycle, uint64_t& earliest) const;
  void forget_ready(const Location& at);  // a bank or its queue changed: its queue's bounds are stale
  Pick pick_refresh(uint64_t cycle) const;
  bool precharge_allowed(const std::vector<Entry>& q, size_t i) const;
  void issue(const Pick& p, uint64_t cycle);
  void update_timing(Cmd c, const Location& at, uint64_t cycle);
  // Whether a transaction moved; if not, none will until a command issues
  // or a request arrives.
  bool schedule_transaction();
  bool may_move() const;
  bool drain_due() const;  // the write buffer should start draining
  void start_drain();
  // A request done at `at`; a read's latency counts from `added`.
  void complete(uint64_t id, uint64_t at, bool read, uint64_t added) { returns_.push({at, id, added, read}); }

  const uint32_t index_;
  const isa::DramParams p_;
  const AddressMap& map_;
  const uint32_t banks_per_rank_;
  const bool per_bank_queues_, closed_page_, all_bank_refresh_;
  CommandListener* listener_ = nullptr;

  std::vector<Bank> banks_;
  std::vector<Rank> ranks_;
  std::vector<std::vector<Entry>> queues_;
  // Per queue: no entry's next command is legal before this cycle. Timing
  // only ever moves later, so it stays a lower bound until a bank of the
  // queue changes state (recomputed then) or an entry joins (lowered).
  std::vector<uint64_t> queue_ready_;
  // Per per-bank queue: its entries that hit the open row, by kind, and the
  // others (they need an activate or a precharge first).
  struct Mix {
    uint32_t reads = 0, writes = 0, others = 0;
  };
  std::vector<Mix> mix_;
  uint64_t timing_bound(size_t q) const;
  uint32_t queued_ = 0;
  int rr_ = 0;  // round robin over command queues
  TransQueue read_q_, write_buf_;
  struct Waiting {  // the reads of one address (a second one rides on the first)
    uint64_t id, added;
    std::vector<std::pair<uint64_t, uint64_t>> more;  // (id, added)
  };
  AddrMap<Waiting> pending_reads_;
  AddrMap<uint32_t> pending_writes_;
  uint32_t write_draining_ = 0;
  struct Return {
    uint64_t cycle, id, added;
    bool read;
    bool operator>(const Return& o) const { return cycle != o.cycle ? cycle > o.cycle : id > o.id; }
  };
  std::priority_queue<Return, std::vector<Return>, std::greater<Return>> returns_;
  uint32_t next_refresh_rank_ = 0, next_refresh_bank_ = 0;
  uint64_t refresh_every_ = 0, next_refresh_ = 0;  // a refresh is due every refresh_every_ cycles, next at next_refresh_
  uint32_t refreshes_waiting_ = 0;                 // ranks and banks whose refresh waits
  uint64_t last_tick_ = 0;
  bool last_column_write_ = false, any_column_ = false;
  uint64_t bus_free_ = 0;  // the data bus is idle from this cycle
  bool stuck_ = false;     // no transaction moves until a command issues or a request arrives
  bool sched_dirty_ = true;  // a transaction arrived or a command left its queue since schedule_transaction failed
  uint64_t cmd_ready_ = 0;   // no queued command is legal before this cycle (as of the end of the last tick)
  ChannelStats stats_;
};

// All channels of a device behind one address map.
class Dram {
 public:
  explicit Dram(const isa::DramParams& p);
  const isa::DramParams& params() const { return p_; }
  const AddressMap& map() const { return map_; }
  uint32_t channel_of(uint64_t addr) const { return map_.decode(addr).channel; }
  bool will_accept(uint64_t addr, bool write) const { return channels_[channel_of(addr)]->will_accept(write); }
  // A request for `addr` (its channel decides), accepted in `cycle`.
  void add(uint64_t id, uint64_t addr, bool write, uint64_t cycle);
  const Channel& channel(uint32_t c) const { return *channels_[c]; }
  uint32_t channels() const { return uint32_t(channels_.size()); }
  // Every channel's tick for `cycle`, skipping channels with nothing to do.
  void tick(uint64_t cycle, std::vector<Completion>& done);
  uint64_t next_event(uint64_t cycle) const;
  bool idle() const;
  void set_listener(CommandListener* l);
  ChannelStats total() const;

 private:
  isa::DramParams p_;
  AddressMap map_;
  std::vector<std::unique_ptr<Channel>> channels_;
  std::vector<uint64_t> next_tick_;  // per channel: the next cycle its controller has anything to do
  std::vector<uint64_t> next_;       // per channel: that, or its next data return if sooner
  uint64_t soonest_ = 0;             // the least of next_
};

}  // namespace tpu::sim::dram
