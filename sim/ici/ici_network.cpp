#include "ici_network.h"

#include <fmt/format.h>

#include <stdexcept>

namespace tpu::sim {

IciNetwork::IciNetwork(const MachineConfig& cfg)
    : shape_(cfg.ici_shape()),
      wrap_(cfg.ici.wrap != 0),
      bw_fp_(cfg.ici_bytes_per_cycle_fp()),
      hop_(cfg.ici_hop_cycles()),
      buffer_(cfg.ici.buffer_packets),
      cores_(size_t(cfg.target.cores)) {
  const size_t n = size_t(shape_[0]) * shape_[1] * shape_[2];
  nodes_.resize(n);
  endpoints_.resize(n * cores_);
  for (size_t i = 0; i < n; ++i) {
    Node& node = nodes_[i];
    node.at = {uint32_t(i % shape_[0]), uint32_t(i / shape_[0] % shape_[1]), uint32_t(i / (size_t(shape_[0]) * shape_[1]))};
    for (int d = 0; d < 3; ++d) {
      const uint32_t len = shape_[size_t(d)];
      for (int neg = 0; neg < 2; ++neg) {
        Link& l = node.out[size_t(2 * d + neg)];
        const uint32_t c = node.at[size_t(d)];
        const bool edge = neg ? c == 0 : c + 1 == len;
        // An axis of two chips has one link each way, never a second that wraps.
        if (len < 2 || (edge && (!wrap_ || len == 2))) continue;
        auto at = node.at;
        at[size_t(d)] = neg ? (c + len - 1) % len : (c + 1) % len;
        l.to = int(at[0] + shape_[0] * (at[1] + shape_[1] * at[2]));
        l.wraps = edge;
        l.credits.fill(buffer_);
      }
    }
  }
}

void IciNetwork::attach(int chip, int core, SparseMemory* vmem, SemaphoreFile* sems, std::function<bool(IciPacket&)> to_dma) {
  endpoint(chip, core) = {vmem, sems, std::move(to_dma)};
}

void IciNetwork::inject(int chip, IciPacket p) {
  auto& q = nodes_[size_t(chip)].inject[size_t(first_port(chip, p.dst))];
  if (q.size() >= buffer_) throw std::logic_error("internal error: ICI injection queue full");
  p.dim = -1, p.vc = 0;
  q.push_back(std::move(p));
  ++nodes_[size_t(chip)].held;
  ++packets_;
}

int IciNetwork::route(int node, int dst) const {
  const auto& here = nodes_[size_t(node)].at;
  const auto& there = nodes_[size_t(dst)].at;
  for (int d = 0; d < 3; ++d) {
    const uint32_t a = here[size_t(d)], b = there[size_t(d)], len = shape_[size_t(d)];
    if (a == b) continue;
    if (wrap_ && len > 2) return 2 * d + ((b + len - a) % len <= len / 2 ? 0 : 1);
    return 2 * d + (b > a ? 0 : 1);
  }
  return -1;
}

bool IciNetwork::deliver(IciPacket& p) {
  Endpoint& e = endpoint(p.dst, p.core);
  if (p.sem >= 0) {
    e.sems->signal(p.sem, p.count);
  } else if (p.to_hbm || p.read_bytes > 0) {
    const size_t bytes = p.data.size();
    if (!e.to_dma(p)) return false;  // it decrements the sender's count once done
    bytes_delivered_ += bytes;
    --packets_;
    return true;
  } else {
    e.vmem->write(p.addr, p.data.data(), p.data.size());
    bytes_delivered_ += p.data.size();
  }
  if (p.in_flight) --*p.in_flight;
  --packets_;
  return true;
}

bool IciNetwork::tick(uint64_t now) {
  if (packets_ == 0 && credits_out_ == 0) return false;
  const uint64_t before = packets_;
  // Packets land in their buffers; credits come back (each link's in the
  // order sent, so the earliest is at a front).
  if (now >= next_land_) {
    next_land_ = ~uint64_t(0);
    for (Node& n : nodes_)
      for (int port = 0; port < kPorts; ++port) {
        Link& l = n.out[size_t(port)];
        for (; !l.wire.empty() && l.wire.front().first <= now; l.wire.pop_front()) {
          IciPacket& p = l.wire.front().second;
          Node& to = nodes_[size_t(l.to)];
          to.in[size_t(port ^ 1)][size_t(p.vc)].push_back(std::move(p));
          ++to.held;
        }
        for (; !l.credit_returns.empty() && l.credit_returns.front().first <= now; l.credit_returns.pop_front(), --credits_out_)
          ++l.credits[size_t(l.credit_returns.front().second)];
        if (!l.wire.empty()) next_land_ = std::min(next_land_, l.wire.front().first);
        if (!l.credit_returns.empty()) next_land_ = std::min(next_land_, l.credit_returns.front().first);
      }
  }
  // A packet leaving the buffer of input `in` gives its credit back to the
  // neighbour that sent it.
  auto free_slot = [&](Node& n, int in, int vc) {
    if (in == kPorts) return;
    nodes_[size_t(n.out[size_t(in)].to)].out[size_t(in ^ 1)].credit_returns.push_back({now + hop_, vc});
    next_land_ = std::min(next_land_, now + hop_);
    ++credits_out_;
  };
  for (size_t i = 0; i < nodes_.size(); ++i) {
    Node& n = nodes_[i];
    if (n.held == 0) continue;
    // Deliveries: the head of every buffer that has arrived.
    for (int in = 0; in <= kPorts; ++in)
      for (int vc = 0; vc < (in == kPorts ? 1 : kVcs); ++vc) {
        auto& q = input(n, in, vc, kPorts);
        while (!q.empty() && q.front().dst == int(i)) {
          if (!deliver(q.front())) break;
          q.pop_front();
          --n.held;
          free_slot(n, in, vc);
        }
      }
    // Each output link takes one packet, round-robin over the inputs.
    constexpr int kInputs = (kPorts + 1) * kVcs;
    for (int port = 0; port < kPorts; ++port) {
      Link& l = n.out[size_t(port)];
      if (l.to < 0 || l.free_fp >= (now + 1) * 1024) continue;  // busy all this cycle
      for (int k = 0; k < kInputs; ++k) {
        const int slot = (n.rr[size_t(port)] + k) % kInputs, in = slot / kVcs, vc = slot % kVcs;
        if (in == kPorts && vc > 0) continue;
        auto& q = input(n, in, vc, port);
        if (q.empty() || route(int(i), q.front()) != port) continue;
        IciPacket& p = q.front();
        const int dim = port / 2;
        const int next_vc = l.wraps ? 1 : p.dim == dim ? p.vc : 0;
        if (l.credits[size_t(next_vc)] == 0) continue;
        --l.credits[size_t(next_vc)];
        const uint64_t ser = (uint64_t(p.bytes) * 1024 * 1024 + bw_fp_ - 1) / bw_fp_;  // 1/1024 cycles
        const uint64_t start = std::max(l.free_fp, now * 1024);
        l.free_fp = start + ser;
        l.busy_fp += ser;
        l.bytes += p.bytes;
        ++l.packets;
        p.dim = dim, p.vc = next_vc;
        l.wire.push_back({(l.free_fp + 1023) / 1024 + hop_, std::move(p)});
        next_land_ = std::min(next_land_, l.wire.back().first);
        q.pop_front();
        --n.held;
        free_slot(n, in, vc);
        n.rr[size_t(port)] = (slot + 1) % kInputs;
        break;
      }
    }
  }
  return packets_ < before;
}

std::vector<IciNetwork::LinkStats> IciNetwork::link_stats() const {
  std::vector<LinkStats> v;
  for (size_t i = 0; i < nodes_.size(); ++i)
    for (int port = 0; port < kPorts; ++port) {
      const Link& l = nodes_[i].out[size_t(port)];
      if (l.to < 0) continue;
      v.push_back({int(i), l.to, port / 2, port % 2 ? -1 : 1, l.bytes, l.packets, double(l.busy_fp) / 1024.0});
    }
  return v;
}

std::string IciNetwork::topology() const {
  std::string s = isa::topology_text(shape_);
  const bool wraps = wrap_ && (shape_[0] > 2 || shape_[1] > 2 || shape_[2] > 2);
  return s + (wraps ? " torus" : " mesh");
}

}  // namespace tpu::sim
