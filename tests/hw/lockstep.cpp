// Lockstep cross-check of the MXU: one command stream drives the SystemC MXU
// model (sim/mxu) and the Verilated RTL (hw/rtl/mxu_top.v) side by side,
// cycle by cycle. Every accumulator write must happen in the same cycle, to
// the same row, with the same bits; the first divergence is reported with
// its cycle, column and both values.
//
//   mxu_lockstep_N [--seed S] [--commands K] [--pe]
//   mxu_lockstep_N --stream FILE [--pe]
//
// Built once per array size N (the RTL's parameter). Streams are seeded
// random: loads (plain and transposed), swaps, streams that overwrite or
// accumulate, both dtypes, back-to-back weight loads, idle gaps, and
// operands full of NaN, infinities, subnormals and extreme exponents. Or a
// stream recorded by `tpusim --record-mxu`: its commands in order, each
// command's rows placed in a fresh VMEM region.
#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <deque>
#include <fstream>
#include <sstream>
#include <random>
#include <string>
#include <systemc>

#include "../../sim/core/semaphores.h"
#include "../../sim/mem/accumulators.h"
#include "../../sim/mem/memory.h"
#include "../../sim/mxu/mxu.h"
// Verilator's headers call sc_time_stamp() unqualified when SystemC is present.
using sc_core::sc_time_stamp;
#include VMXU_HEADER
#include "../../sim/mxu/rtl_driver.h"
#include "tpu/sim/config.h"

namespace {

using namespace tpu;
using namespace tpu::sim;

constexpr uint64_t kVmem = 1 << 16;        // random streams
constexpr uint64_t kStreamVmem = 1ull << 32;  // replayed streams (addresses are 32-bit in the RTL)
constexpr uint64_t kAccRows = 64;

struct Cmd {
  isa::Opcode op;
  uint64_t src = 0, stride = 0, acc = 0, rows = 0;
  bool int8 = false;
  uint64_t gap = 0;  // idle cycles before it is offered
};

// A valid random command stream: swaps only after a load, streams only after
// the first swap and in the active weights' dtype.
std::vector<Cmd> random_stream(uint32_t n, uint64_t count, std::mt19937_64& rng) {
  std::vector<Cmd> out;
  bool shadow_loaded = false, have_active = false, active_int8 = false, shadow_int8 = false;
  while (out.size() < count) {
    Cmd c;
    c.gap = rng() % 4 == 0 ? rng() % (3 * n) : 0;
    const uint64_t r = rng() % 10;
    if ((r < 3 || !have_active) && !shadow_loaded) {
      c.op = rng() % 4 == 0 ? isa::Opcode::MXU_LWT : isa::Opcode::MXU_LW;
      c.int8 = rng() % 3 == 0;
      const uint64_t eb = c.int8 ? 1 : 2;
      c.stride = n * eb * (1 + rng() % 3);
      c.src = (rng() % ((kVmem - (n - 1) * c.stride - n * eb) / eb)) * eb;
      shadow_loaded = true;
      shadow_int8 = c.int8;
    } else if ((r < 5 || !have_active) && shadow_loaded) {
      c.op = isa::Opcode::MXU_SWAP;
      shadow_loaded = false;
      have_active = true;
      active_int8 = shadow_int8;
    } else if (have_active) {
      c.op = rng() % 2 ? isa::Opcode::MXU_MMA : isa::Opcode::MXU_MM;
      c.int8 = active_int8;
      const uint64_t eb = c.int8 ? 1 : 2;
      c.rows = rng() % 8 == 0 ? 0 : 1 + rng() % (3 * n);
      c.stride = n * eb * (1 + rng() % 2);
      c.src = c.rows == 0 ? 0 : (rng() % ((kVmem - (c.rows - 1) * c.stride - n * eb) / eb)) * eb;
      c.acc = rng() % (kAccRows - c.rows + 1);
    } else {
      continue;
    }
    out.push_back(c);
  }
  return out;
}

Issued to_issued(const Cmd& c) {
  Issued is;
  is.insn.op = c.op;
  const bool lw = c.op == isa::Opcode::MXU_LW || c.op == isa::Opcode::MXU_LWT;
  const bool mm = c.op == isa::Opcode::MXU_MM || c.op == isa::Opcode::MXU_MMA;
  // Register operands carry their values in v[]; the register numbers are irrelevant here.
  if (lw) is.v = {0, c.src, c.stride, c.int8 ? 1u : 0u}, is.insn.operands = {0, 1, 2, c.int8 ? 1 : 0};
  if (mm) is.v = {0, c.acc, c.src, c.stride, c.rows, c.int8 ? 1u : 0u}, is.insn.operands = {0, 1, 2, 3, 4, c.int8 ? 1 : 0};
  return is;
}

struct Bench : sc_core::sc_module {
  sc_core::sc_clock clk{"clk", sc_core::sc_time(1, sc_core::SC_NS)};
  MachineConfig cfg;
  RunControl rc{sc_core::sc_time(1, sc_core::SC_NS), kDefaultMemoryBudget};
  SemaphoreFile sems{"sems", sc_core::sc_time(1, sc_core::SC_NS)};
  SparseMemory vmem;
  Accumulators acc_model, acc_rtl;
  Mxu mxu;
  VMXU_CLASS rtl;
  std::vector<Cmd> stream;
  size_t next = 0;
  uint64_t ready_at = 0;  // cycle from which the next command may be offered
  std::deque<std::pair<Cmd, uint64_t>> rtl_queue;  // command, first cycle the RTL may take it
  std::vector<Mxu::AccWrite> model_log, rtl_log;
  std::vector<uint8_t> row_bytes;  // scratch for the RTL's VMEM reads
  uint64_t quiet = 0;
  bool rtl_error = false;

  Bench(sc_core::sc_module_name name, const MachineConfig& c, bool pe, std::vector<Cmd> s, uint64_t vmem_bytes,
        uint64_t acc_rows)
      : sc_core::sc_module(name),
        cfg(c),
        vmem(vmem_bytes),
        acc_model(acc_rows, uint32_t(c.target.mxu_dim)),
        acc_rtl(acc_rows, uint32_t(c.target.mxu_dim)),
        mxu("mxu", 0, 0, cfg, pe ? MxuPath::Pe : MxuPath::Fast, rc, sems, vmem, acc_model),
        stream(std::move(s)),
        row_bytes(2 * size_t(c.target.mxu_dim)) {
    mxu.clk(clk);
    mxu.log_acc_writes(&model_log);
    rtl::reset(rtl);
    SC_HAS_PROCESS(Bench);
    SC_METHOD(tick);
    sensitive << clk.posedge_event();
    dont_initialize();
  }

  void tick() {
    const uint64_t now = rc.cycle();
    // Offer the next command to both, through the model's queue and an equal one for the RTL.
    if (next < stream.size() && now >= ready_at) {
      if (mxu.queue().nb_write(to_issued(stream[next]))) {
        rtl_queue.emplace_back(stream[next], now + 1);
        ++next;
        ready_at = now + 1 + (next < stream.size() ? stream[next].gap : 0);
      }
    }
    step_rtl(now);
    const bool done = next == stream.size() && rtl_queue.empty() && rtl.idle_o && mxu.idle(now);
    quiet = done ? quiet + 1 : 0;
    if (quiet > 2 || now > 10000000) sc_core::sc_stop();
  }

  void step_rtl(uint64_t now) {
    const bool offer = !rtl_queue.empty() && rtl_queue.front().second <= now;
    rtl::Command cmd;
    if (offer) {
      const Cmd& c = rtl_queue.front().first;
      cmd = rtl::Command{uint8_t(c.op), uint32_t(c.src), uint32_t(c.stride), uint32_t(c.acc), uint32_t(c.rows), c.int8};
    }
    const rtl::CycleResult r = rtl::step(rtl, offer ? &cmd : nullptr, vmem, acc_rtl, row_bytes);
    if (r.acc_write) {
      const uint32_t* row = acc_rtl.row(r.acc_row);
      rtl_log.push_back({now, r.acc_row, std::vector<uint32_t>(row, row + acc_rtl.width())});
    }
    if (r.taken) rtl_queue.pop_front();
    rtl_error |= rtl.error_o;
  }
};

uint16_t operand_bits(std::mt19937_64& rng) {
  static const uint16_t kSpecial[] = {0x0000, 0x8000, 0x7f80, 0xff80, 0x7fc0, 0x0001, 0x807f, 0x7f7f,
                                      0xff7f, 0x0080, 0x8080, 0x1f80, 0x2000, 0x6000, 0x5f80, 0x3f80};
  const uint64_t r = rng();
  if (r % 5 == 0) return kSpecial[(r >> 8) % 16];
  if (r % 5 == 1) return uint16_t((r >> 16) & 0x80ff) | uint16_t((0x3c + (r >> 40) % 8) << 7);  // products near 2^-126
  if (r % 5 == 2) return uint16_t(r >> 16);                                                     // any pattern
  std::normal_distribution<float> d(0.0f, 4.0f);
  float x = d(rng);
  uint32_t b;
  std::memcpy(&b, &x, 4);
  return uint16_t((b + 0x7fff + ((b >> 16) & 1)) >> 16);
}

// A stream recorded by tpusim --record-mxu, relocated: every command's rows
// go to a fresh, packed VMEM region.
std::vector<Cmd> read_stream(const std::string& path, uint32_t n, std::vector<std::pair<uint64_t, std::vector<uint8_t>>>& rows) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error(path + ": cannot open");
  std::string line;
  std::getline(in, line);
  if (line != fmt::format("tpusim-mxu-stream 1 n={}", n)) throw std::runtime_error(path + ": not a stream for N = " + std::to_string(n));
  std::vector<Cmd> out;
  uint64_t next_addr = 0;
  // The latest load and the latest stream, and how many of their rows have arrived.
  struct Open {
    size_t cmd = SIZE_MAX;
    uint64_t total = 0, seen = 0;
  } load, feed;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    std::string kind;
    ls >> kind;
    if (kind == "cmd") {
      uint64_t cycle, acc, count;
      std::string op, dtype;
      ls >> cycle >> op >> dtype >> acc >> count;
      const isa::InsnSpec* spec = isa::find_mnemonic(op);
      if (!ls || !spec || spec->unit != isa::ExecUnit::Mxu) throw std::runtime_error(path + ": bad line: " + line);
      Cmd c;
      c.op = spec->op;
      c.int8 = dtype == "s8";
      c.acc = acc;
      c.stride = uint64_t(n) * (c.int8 ? 1 : 2);
      c.src = next_addr;
      const bool lw = c.op == isa::Opcode::MXU_LW || c.op == isa::Opcode::MXU_LWT;
      const uint64_t rows_read = c.op == isa::Opcode::MXU_SWAP ? 0 : count;
      c.rows = lw || c.op == isa::Opcode::MXU_SWAP ? 0 : count;
      next_addr += rows_read * c.stride;
      if (lw) {
        if (load.seen != load.total) throw std::runtime_error(path + ": a load is missing rows");
        load = Open{out.size(), rows_read, 0};
      } else if (c.op != isa::Opcode::MXU_SWAP) {
        if (feed.seen != feed.total) throw std::runtime_error(path + ": a stream is missing rows");
        feed = Open{out.size(), rows_read, 0};
      }
      out.push_back(c);
    } else if (kind == "wrow" || kind == "xrow") {
      Open& o = kind == "wrow" ? load : feed;
      std::string hex;
      ls >> hex;
      if (o.cmd == SIZE_MAX || o.seen == o.total || hex.size() != 2 * out[o.cmd].stride)
        throw std::runtime_error(path + ": unexpected row: " + line.substr(0, 40));
      std::vector<uint8_t> bytes(hex.size() / 2);
      for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = uint8_t(std::stoul(hex.substr(2 * i, 2), nullptr, 16));
      rows.emplace_back(out[o.cmd].src + o.seen * out[o.cmd].stride, std::move(bytes));
      ++o.seen;
    }
  }
  if (load.seen != load.total || feed.seen != feed.total) throw std::runtime_error(path + ": the last command is missing rows");
  return out;
}

}  // namespace

int sc_main(int argc, char* argv[]) {
  uint64_t seed = 1, commands = 300;
  bool pe = false;
  std::string stream_path;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--seed" && i + 1 < argc) seed = std::strtoull(argv[++i], nullptr, 0);
    else if (a == "--commands" && i + 1 < argc) commands = std::strtoull(argv[++i], nullptr, 0);
    else if (a == "--pe") pe = true;
    else if (a == "--stream" && i + 1 < argc) stream_path = argv[++i];
    else {
      std::fprintf(stderr, "usage: %s [--seed S] [--commands K | --stream FILE] [--pe]\n", argv[0]);
      return 2;
    }
  }
  sc_core::sc_report_handler::set_actions(sc_core::SC_INFO, sc_core::SC_DO_NOTHING);
  MachineConfig cfg = load_config("tiny");
  cfg.target.mxu_dim = MXU_N;
  cfg.target.vpu_lanes = MXU_N;
  cfg.core.queue_depth = 4;
  std::mt19937_64 rng(seed);
  std::vector<Cmd> stream;
  std::vector<std::pair<uint64_t, std::vector<uint8_t>>> rows;
  if (!stream_path.empty()) {
    try {
      stream = read_stream(stream_path, MXU_N, rows);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "mxu_lockstep: %s\n", e.what());
      return 2;
    }
    std::printf("N %d, stream %s: %zu commands, model path %s\n", MXU_N, stream_path.c_str(), stream.size(), pe ? "pe" : "fast");
  } else {
    std::printf("N %d, seed %llu, %llu commands, model path %s\n", MXU_N, (unsigned long long)seed,
                (unsigned long long)commands, pe ? "pe" : "fast");
    stream = random_stream(MXU_N, commands, rng);
  }
  uint64_t acc_rows = kAccRows;
  for (const Cmd& c : stream) acc_rows = std::max(acc_rows, c.acc + c.rows);
  Bench bench("bench", cfg, pe, stream, stream_path.empty() ? kVmem : kStreamVmem, acc_rows);
  if (stream_path.empty()) {
    for (uint64_t a = 0; a + 1 < kVmem; a += 2) {
      const uint16_t v = operand_bits(rng);
      bench.vmem.write(a, &v, 2);
    }
  }
  for (const auto& [addr, bytes] : rows) bench.vmem.write(addr, bytes.data(), bytes.size());
  sc_core::sc_start();

  if (bench.rc.faulted()) {
    std::printf("FAIL: the model faulted: %s\n", bench.rc.fault_message()->c_str());
    return 1;
  }
  if (bench.rtl_error) {
    std::printf("FAIL: the RTL flagged a dtype mismatch the model did not\n");
    return 1;
  }
  const auto& m = bench.model_log;
  const auto& r = bench.rtl_log;
  for (size_t i = 0; i < std::max(m.size(), r.size()); ++i) {
    if (i >= m.size() || i >= r.size()) {
      std::printf("FAIL: accumulator write %zu: %s has none (model %zu writes, rtl %zu)\n", i, i >= m.size() ? "the model" : "the RTL",
                  m.size(), r.size());
      return 1;
    }
    if (m[i].cycle != r[i].cycle || m[i].row != r[i].row) {
      std::printf("FAIL: accumulator write %zu: model writes row %llu in cycle %llu, rtl row %llu in cycle %llu\n", i,
                  (unsigned long long)m[i].row, (unsigned long long)m[i].cycle, (unsigned long long)r[i].row,
                  (unsigned long long)r[i].cycle);
      return 1;
    }
    for (size_t j = 0; j < m[i].data.size(); ++j)
      if (m[i].data[j] != r[i].data[j]) {
        std::printf("FAIL: first divergence in cycle %llu, accumulator row %llu, column %zu: model %08x, rtl %08x\n",
                    (unsigned long long)m[i].cycle, (unsigned long long)m[i].row, j, m[i].data[j], r[i].data[j]);
        return 1;
      }
  }
  std::printf("PASS: %zu accumulator writes identical in cycle, row and bits over %llu cycles\n", m.size(),
              (unsigned long long)bench.rc.cycle());
  return m.empty() ? 1 : 0;
}
