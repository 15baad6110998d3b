// The inter-chip interconnect (ICI): the chips of a system in an x by y by z
// grid (ring, 2-D or 3-D torus, or mesh; MachineConfig::ici_shape), a link
// each way between neighbours along every axis. docs/system.md describes it.
//
// Packets, per cycle:
// - A router per chip holds an input buffer per link and virtual channel,
//   and an injection queue per output link (and one for the chip itself)
//   its DMA engines fill, so packets for one link never wait behind those
//   for another.
// - Dimension-order routing: x first, then y, then z; on a wrapped axis the
//   shorter way round (ties go the positive way).
// - Two virtual channels break the cycles of a ring: a packet travels on
//   VC 0 along an axis until it crosses the axis's wrap-around link, then
//   on VC 1 (the dateline scheme).
// - Each output link sends one packet at a time at the link's bandwidth;
//   it may start only with a credit for the buffer it goes to. The credit
//   comes back a hop's latency after the packet leaves that buffer.
// - Arbitration: round-robin among the inputs whose head packet wants the
//   link.
// - A packet at its destination is delivered the cycle it reaches the head
//   of its buffer: its bytes are written to the destination core's VMEM,
//   or its count added to a semaphore there.
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <functional>
#include <string>
#include <vector>

#include "../core/semaphores.h"
#include "../mem/memory.h"
#include "tpu/sim/config.h"

namespace tpu::sim {

struct IciPacket {
  int src = 0, dst = 0;  // chips
  int core = 0;          // the TensorCore of dst it reaches
  uint32_t bytes = 0;    // on the wire
  // Data: written to dst's VMEM at addr, or with to_hbm handed to the
  // core's DMA engine, which writes it to HBM at addr. A read request
  // (read_bytes > 0, no data): handed to that DMA engine, which sends
  // read_bytes of its HBM from addr back to chip src's VMEM at reply_addr.
  // A signal (sem >= 0): count added to semaphore sem of dst's core.
  uint64_t addr = 0;
  bool to_hbm = false;
  uint64_t read_bytes = 0, reply_addr = 0;
  std::vector<uint8_t> data;
  int sem = -1;
  uint32_t count = 0;
  // The sending transfer's count of what is on its way: decremented once
  // delivered (written to HBM, for to_hbm; a read request's once all of
  // its replies are on their way, each counted).
  uint32_t* in_flight = nullptr;
  // Routing state: the axis it travels along and its virtual channel there.
  int dim = -1, vc = 0;
};

// Bytes a signal packet occupies on a link.
inline constexpr uint32_t kIciSignalBytes = 16;

class IciNetwork {
 public:
  explicit IciNetwork(const MachineConfig& cfg);

  // The VMEM and semaphores of core `core` of chip `chip`, for deliveries,
  // and its DMA engine, which takes packets for HBM and read requests
  // (false: not now; the packet waits at the head of its buffer, holding
  // its credit).
  void attach(int chip, int core, SparseMemory* vmem, SemaphoreFile* sems, std::function<bool(IciPacket&)> to_dma);
  SparseMemory& vmem(int chip, int core) { return *endpoint(chip, core).vmem; }
  SemaphoreFile& sems(int chip, int core) { return *endpoint(chip, core).sems; }
  int chips() const { return int(nodes_.size()); }

  // Room in chip's injection queue for the link towards dst.
  bool can_inject(int chip, int dst) const { return nodes_[size_t(chip)].inject[size_t(first_port(chip, dst))].size() < buffer_; }
  void inject(int chip, IciPacket p);
  // One cycle: packets land, credits return, packets are delivered and
  // sent. True if a packet was delivered (its semaphore count or bytes are
  // not visible until the cycle's update).
  bool tick(uint64_t now);
  bool idle() const { return packets_ == 0; }

  struct LinkStats {
    int from = 0, to = 0, dim = 0, dir = 0;  // dir +1 or -1
    uint64_t bytes = 0, packets = 0;
    double busy_cycles = 0;  // serialising packets
  };
  std::vector<LinkStats> link_stats() const;
  const std::array<uint32_t, 3>& shape() const { return shape_; }
  std::string topology() const;
  uint64_t bytes_delivered() const { return bytes_delivered_; }

 private:
  static constexpr int kPorts = 6;  // +x -x +y -y +z -z; input kPorts is the injection queues
  static constexpr int kVcs = 2;
  struct Endpoint {
    SparseMemory* vmem = nullptr;
    SemaphoreFile* sems = nullptr;
    std::function<bool(IciPacket&)> to_dma;
  };
  struct Link {
    int to = -1;  // neighbour chip; -1: no link
    bool wraps = false;
    uint64_t free_fp = 0;  // 1/1024 cycles: when it may start the next packet
    std::array<uint32_t, kVcs> credits{};
    std::deque<std::pair<uint64_t, IciPacket>> wire;        // arrival cycle, packet
    std::deque<std::pair<uint64_t, int>> credit_returns;  // cycle, vc
    uint64_t bytes = 0, packets = 0, busy_fp = 0;
  };
  struct Node {
    std::array<uint32_t, 3> at{};
    std::array<Link, kPorts> out;
    std::array<std::array<std::deque<IciPacket>, kVcs>, kPorts> in;  // from the neighbour on that port
    std::array<std::deque<IciPacket>, kPorts + 1> inject;  // by the first link taken; kPorts: to this chip
    std::array<int, kPorts> rr{};  // round-robin: the input to look at first
    uint32_t held = 0;             // packets in `in` and `inject` (a node holding none is skipped)
  };

  Endpoint& endpoint(int chip, int core) { return endpoints_[size_t(chip) * cores_ + size_t(core)]; }
  // The output port a packet at `node` takes next; -1 when it has arrived.
  int route(int node, int dst) const;
  int route(int node, const IciPacket& p) const { return route(node, p.dst); }
  int first_port(int chip, int dst) const { const int r = route(chip, dst); return r < 0 ? kPorts : r; }
  bool deliver(IciPacket& p);  // false: the HBM side cannot take it yet
  // Input `in` (kPorts: injection) as output `port` sees it.
  std::deque<IciPacket>& input(Node& n, int in, int vc, int port) { return in == kPorts ? n.inject[size_t(port)] : n.in[size_t(in)][size_t(vc)]; }

  std::array<uint32_t, 3> shape_;
  bool wrap_;
  uint64_t bw_fp_, hop_;
  uint32_t buffer_;
  size_t cores_;
  std::vector<Node> nodes_;
  std::vector<Endpoint> endpoints_;
  uint64_t packets_ = 0, credits_out_ = 0, bytes_delivered_ = 0;
  uint64_t next_land_ = ~uint64_t(0);  // no packet or credit lands on a link before this cycle
};

}  // namespace tpu::sim
