// The detailed HBM model alone (no SystemC elaboration): address mapping,
// random traffic against the timing checker, and controllers broken on
// purpose (one constraint relaxed by a cycle) that the checker must catch.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <map>
#include <random>

#include "../../sim/mem/dram.h"
#include "../../sim/mem/dram_checker.h"
#include "tpu/isa/machine.h"

using namespace tpu::sim::dram;

namespace {

tpu::isa::DramParams device(const std::string& preset) { return tpu::isa::load_config(preset).hbm.detailed; }

// A one-channel device with tCCD longer than a burst, so every constraint
// can bind.
tpu::isa::DramParams small_device() {
  tpu::isa::DramParams p = device("hbm2");
  p.channels = 1;
  p.rows = 64;
  p.tCCD_S = 3;
  p.tCCD_L = 4;
  return p;
}

struct RunResult {
  uint64_t completed = 0, cycles = 0;
  std::optional<std::string> violation;
  ChannelStats stats;
};

// `n` requests to random addresses below `span`, a fraction `writes` of them
// writes, offered one a cycle; the controller runs on `ctrl`, the checker on
// `truth`. With `copy`, a copy's requests instead: reads of [0, span) in
// order, each followed by a write of the same place in [span, 2 span).
RunResult run_random(const tpu::isa::DramParams& ctrl, const tpu::isa::DramParams& truth, uint32_t seed, uint64_t n, uint64_t span,
                     double writes, bool copy = false) {
  INFO("seed " << seed);
  std::mt19937_64 rng(seed);
  Dram mem(ctrl);
  TimingChecker checker(truth);
  mem.set_listener(&checker);
  RunResult r;
  std::vector<Completion> done;
  uint64_t sent = 0, cycle = 0;
  const uint64_t req = ctrl.request_bytes();
  uint64_t addr = copy ? 0 : rng() % span / req * req;
  bool write = false;
  while ((sent < n || !mem.idle()) && cycle < 50'000'000) {
    mem.tick(cycle, done);
    r.completed += done.size();
    done.clear();
    if (checker.violation()) break;
    if (sent < n && mem.will_accept(addr, write)) {
      mem.add(sent++, addr, write, cycle + 1);
      if (copy) {
        write = sent % 2 == 1;
        addr = sent / 2 * req % span + (write ? span : 0);
      } else {
        addr = rng() % span / req * req;
        write = std::uniform_real_distribution<double>(0, 1)(rng) < writes;
      }
    }
    ++cycle;
  }
  r.cycles = cycle;
  r.violation = checker.violation();
  r.stats = mem.total();
  return r;
}

}  // namespace

TEST_CASE("dram: the address mapping takes its fields from the low bits up", "[dram]") {
  const tpu::isa::DramParams p = device("hbm2");  // rorabgbachco, 64 B requests, 32 of them a 2 KiB row
  AddressMap m(p);
  // From the least significant: 6 bits of byte, 5 of column, 3 of channel, 2 of bank, 2 of bank group, 15 of row.
  CHECK(m.decode(1u << 6).column == 1);
  CHECK(m.decode(1u << 11).channel == 1);
  CHECK(m.decode(1u << 14).bank == 1);
  CHECK(m.decode(1u << 16).bankgroup == 1);
  CHECK(m.decode(1u << 18).row == 1);
  const Location l = m.decode(0x1234567C0ull);
  CHECK(l.column == ((0x1234567C0ull >> 6) & 31));
  CHECK(l.channel == ((0x1234567C0ull >> 11) & 7));
  CHECK(l.row == ((0x1234567C0ull >> 18) & 32767));
}

TEST_CASE("dram: random traffic completes with no timing violation", "[dram]") {
  struct Case {
    std::string preset;
    std::string page, refresh, queues;
  };
  for (const Case& c : {Case{"hbm2", "open", "all_bank", "per_bank"}, Case{"hbm2", "closed", "per_bank", "per_rank"},
                        Case{"hbm2e", "open", "per_bank", "per_bank"}, Case{"hbm3", "open", "all_bank", "per_rank"}}) {
    tpu::isa::DramParams p = device(c.preset);
    p.page_policy = c.page;
    p.refresh = c.refresh;
    p.queue_structure = c.queues;
    const uint32_t seed = 20261201;
    INFO(c.preset << " " << c.page << " " << c.refresh << " " << c.queues << " seed " << seed);
    const RunResult r = run_random(p, p, seed, 20000, 1u << 24, 0.3);
    CHECK_FALSE(r.violation);
    if (r.violation) FAIL_CHECK(*r.violation);
    CHECK(r.completed == 20000);
    CHECK(r.stats.reads + r.stats.writes == 20000);
    CHECK(r.stats.refreshes > 0);
  }
}

TEST_CASE("dram: a controller that relaxes a constraint by one cycle is caught", "[dram]") {
  const tpu::isa::DramParams truth = small_device();
  struct Relax {
    const char* name;
    uint32_t tpu::isa::DramParams::*member;
    const char* caught_as;  // what the checker reports
  };
  using D = tpu::isa::DramParams;
  for (const Relax& x : {Relax{"tRCDRD", &D::tRCDRD, "tRCDRD"}, Relax{"tRCDWR", &D::tRCDWR, "tRCDWR"}, Relax{"tRP", &D::tRP, "tRP"},
                         Relax{"tRAS", &D::tRAS, "tRAS"}, Relax{"tFAW", &D::tFAW, "tFAW"}, Relax{"tRRD_S", &D::tRRD_S, "tRRD_S"},
                         Relax{"tRRD_L", &D::tRRD_L, "tRRD_L"}, Relax{"tCCD_S", &D::tCCD_S, "tCCD_S"},
                         Relax{"tCCD_L", &D::tCCD_L, "tCCD_L"}, Relax{"tWTR_S", &D::tWTR_S, "tWTR_S"},
                         Relax{"tWTR_L", &D::tWTR_L, "tWTR_L"}, Relax{"tRFC", &D::tRFC, "tRFC"}, Relax{"tRTP", &D::tRTP, "tRTP"},
                         Relax{"tWR", &D::tWR, "tWR"}}) {
    tpu::isa::DramParams broken = truth;
    broken.*x.member -= 1;
    INFO("relaxed " << x.name);
    bool caught = false;
    std::string seen;
    for (uint32_t seed = 1; seed <= 4 && !caught; ++seed) {
      // Random traffic (row conflicts: the row constraints bind) and a copy
      // (row hits, the write buffer draining between reads: read-write
      // turnarounds bind).
      for (auto [writes, copy] : {std::pair{0.0, false}, {0.5, false}, {0.5, true}}) {
        if (copy && seed > 1) continue;  // the copy's requests do not depend on the seed
        const RunResult r = run_random(broken, truth, seed, 20000, 1u << 16, writes, copy);
        if (r.violation) {
          seen = *r.violation;
          caught = seen.find(std::string("breaks ") + x.caught_as + " ") != std::string::npos;
          if (caught) break;
        }
      }
    }
    INFO("the checker said: " << seen);
    CHECK(caught);
  }
}

// AddrMap (the controller's pending reads and writes) against std::map:
// random inserts, lookups and erases over few addresses, so probe chains
// form, wrap around the table and are cut by deletions.
TEST_CASE("dram: the address map keeps every key through inserts and erases", "[dram]") {
  const uint32_t seed = 20261202;
  INFO("seed " << seed);
  std::mt19937_64 rng(seed);
  AddrMap<uint32_t> m(4);
  std::map<uint64_t, uint32_t> ref;
  for (int step = 0; step < 200000; ++step) {
    const uint64_t key = (rng() % 300) * 64;
    switch (rng() % 3) {
      case 0: {
        const auto [v, fresh] = m.insert(key);
        REQUIRE(fresh == (ref.count(key) == 0));
        *v += 1;
        ref[key] += 1;
        break;
      }
      case 1: {
        const uint32_t* v = m.find(key);
        REQUIRE((v != nullptr) == (ref.count(key) != 0));
        if (v) REQUIRE(*v == ref[key]);
        break;
      }
      default:
        m.erase(key);
        ref.erase(key);
    }
  }
  for (const auto& [key, value] : ref) REQUIRE(*m.find(key) == value);
}
