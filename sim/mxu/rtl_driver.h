// One clock cycle of the Verilated MXU (hw/rtl/mxu_top.v): the command port,
// the combinational VMEM and accumulator reads the RTL asks for, the
// accumulator write it makes, and the rising edge. Shared by --mxu=rtl
// (rtl_mxu.cpp) and the lockstep harness (tests/hw/lockstep.cpp), so both
// drive the RTL the same way. Include after the Verilated model's header.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "../mem/accumulators.h"
#include "../mem/memory.h"
#include "verilated_vcd_c.h"

namespace tpu::sim::rtl {

// Little-endian bytes into and out of Verilator's port types.
inline void put(QData& port, const uint8_t* b, size_t n) {
  port = 0;
  for (size_t i = 0; i < n && i < 8; ++i) port |= QData(b[i]) << (8 * i);
}
template <std::size_t W>
void put(VlWide<W>& port, const uint8_t* b, size_t n) {
  for (size_t w = 0; w < W; ++w) {
    uint32_t v = 0;
    for (size_t i = 0; i < 4 && 4 * w + i < n; ++i) v |= uint32_t(b[4 * w + i]) << (8 * i);
    port[w] = v;
  }
}
inline uint32_t word(const QData& port, size_t j) { return uint32_t(port >> (32 * j)); }
template <std::size_t W>
uint32_t word(const VlWide<W>& port, size_t j) {
  return port[j];
}

// Reset: one clock edge with rst_ni low, then released.
template <typename Rtl>
void reset(Rtl& rtl) {
  rtl.rst_ni = 0;
  rtl.clk_i = 0;
  rtl.eval();
  rtl.clk_i = 1;
  rtl.eval();
  rtl.clk_i = 0;
  rtl.rst_ni = 1;
  rtl.eval();
}

// An MXU instruction as the command port takes it.
struct Command {
  uint8_t op = 0;
  uint32_t src = 0, stride = 0, acc = 0, rows = 0;
  bool int8 = false;
};

struct CycleResult {
  bool taken = false;      // the RTL accepted the command
  bool fed = false;        // an input row entered the array
  bool loading = false;    // a weight row was read
  bool acc_write = false;  // acc_row got a new value
  uint64_t acc_row = 0;
};

// Drives cycle `cycle`. The VCD, if any, gets the settled cycle at
// cycle * period_ps (the model VCD's time) and the rising edge half a period
// later. `row_bytes` is scratch of 2N bytes.
template <typename Rtl>
CycleResult step(Rtl& rtl, const Command* cmd, const SparseMemory& vmem, Accumulators& acc, std::vector<uint8_t>& row_bytes,
                 VerilatedVcdC* vcd = nullptr, uint64_t cycle = 0, uint64_t period_ps = 0) {
  const Command c = cmd ? *cmd : Command{};
  rtl.cmd_valid_i = cmd != nullptr;
  rtl.cmd_op_i = c.op;
  rtl.cmd_src_i = c.src;
  rtl.cmd_stride_i = c.stride;
  rtl.cmd_acc_i = c.acc;
  rtl.cmd_rows_i = c.rows;
  rtl.cmd_int8_i = c.int8;
  rtl.clk_i = 0;
  rtl.eval();  // the falling edge and the command settle: read addresses are out
  // Rows past the end of VMEM read as zeros (the RTL drives addresses even
  // when not reading); the accumulator row comes from registered state, so
  // all three reads are served before one more evaluation.
  auto row_at = [&](uint64_t addr) {
    std::fill(row_bytes.begin(), row_bytes.end(), 0);
    if (addr < vmem.size()) vmem.read(addr, row_bytes.data(), std::min<uint64_t>(row_bytes.size(), vmem.size() - addr));
    return row_bytes.data();
  };
  put(rtl.w_rd_data_i, row_at(rtl.w_rd_addr_o), row_bytes.size());
  put(rtl.in_rd_data_i, row_at(rtl.in_rd_addr_o), row_bytes.size());
  CycleResult r;
  r.acc_row = rtl.acc_row_o < acc.rows() ? rtl.acc_row_o : 0;
  put(rtl.acc_rdata_i, reinterpret_cast<const uint8_t*>(acc.row(r.acc_row)), 4 * size_t(acc.width()));
  rtl.eval();
  r.acc_write = rtl.acc_we_o;
  if (r.acc_write)
    for (uint32_t j = 0; j < acc.width(); ++j) acc.row(r.acc_row)[j] = word(rtl.acc_wdata_o, j);
  r.fed = rtl.in_rd_en_o;
  r.loading = rtl.w_rd_en_o;
  r.taken = cmd && rtl.cmd_ready_o;
  if (vcd) vcd->dump(cycle * period_ps);
  rtl.clk_i = 1;
  rtl.eval();
  if (vcd) vcd->dump(cycle * period_ps + period_ps / 2);
  return r;
}

}  // namespace tpu::sim::rtl
