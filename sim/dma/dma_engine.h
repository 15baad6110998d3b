// The DMA engine of one TensorCore: takes transfers from its queue, cuts
// them into bursts (at most burst_bytes, not crossing a burst_bytes boundary
// of the HBM address), sends up to dma.bursts_per_cycle bursts per cycle to
// HBM's port (oldest transfer first), and signals a transfer's semaphore when
// its last burst has landed (bursts may land in any order). Transfers
// complete in order; a `signal` joins them as a marker that moves no data,
// takes no outstanding slot and adds its count when every transfer before it
// has completed, while later transfers go on. `dma.lds` is a load whose
// bytes land in the core's SMEM instead of VMEM.
//
// Across chips (ICI): `dma.rcp` cuts its bytes into packets of at most
// ici.packet_bytes, sent to the system's network as the queue of this
// chip's router takes them; it completes when every packet has been
// delivered, and its semaphore is the destination core's. `dma.rsig` is a
// marker that, once every earlier transfer has completed, sends a signal
// packet to the other chip.
#pragma once

#include <systemc>

#include <deque>

#include "../core/queued_unit.h"
#include "../ici/ici_network.h"
#include "../mem/memory_system.h"
#include "../mem/memory.h"
#include "tpu/sim/config.h"

namespace tpu::sim {

class DmaEngine : public sc_core::sc_module, public QueuedUnit {
 public:
  sc_core::sc_in<bool> clk{"clk"};

  DmaEngine(sc_core::sc_module_name name, int core, const MachineConfig& cfg, RunControl& rc, SemaphoreFile& sems,
            SparseMemory& vmem, SparseMemory& smem, MemorySystem& hbm);

  // The semaphore files of the chip's cores, by index (dma.csig).
  void connect_cores(std::vector<SemaphoreFile*> sems) { core_sems_ = std::move(sems); }
  // The system's network and this chip's index in it (dma.rcp, dma.rsig).
  void connect_ici(IciNetwork* ici, int chip) { ici_ = ici, chip_ = chip; }
  bool idle() const { return !head_ && queue_.num_available() == 0 && transfers_.empty(); }
  uint32_t outstanding() const { return uint32_t(transfers_.size() - markers_); }
  // A packet another chip's dma.rst sent to this chip's HBM (written in
  // bursts like a store), or a read request of its dma.rld (read in bursts
  // like a load, each sent back in packets as it lands); both ahead of this
  // core's own transfers, at most ici.buffer_packets of each at a time
  // (false: full; the packet waits in the router).
  bool accept_remote(IciPacket& p);
  bool receiving() const { return !incoming_.empty() || !reads_.empty(); }
  uint64_t bytes_moved() const { return bytes_moved_; }

 private:
  struct Transfer {
    bool store = false;
    uint32_t pc = 0;
    int sem = 0;
    uint64_t start = 0;
    uint64_t hbm = 0, vmem = 0, rows = 1, row_bytes = 0, hbm_stride = 0, vmem_stride = 0;
    uint64_t row = 0, offset = 0;  // next byte to emit
    uint32_t in_flight = 0;
    uint32_t count = 1;               // added to sem on completion
    SemaphoreFile* target = nullptr;  // whose sem (another core's for dma.csig); null: this core's
    bool marker = false;              // a signal: no data
    int chip = -1;                    // dma.rcp, dma.rst, dma.rsig: the destination chip
    bool to_hbm = false;              // dma.rst
    bool from_hbm = false;            // dma.rld: hbm is the other chip's
    bool to_smem = false;             // dma.lds: `vmem` is an SMEM address
    bool emitted_all() const { return row >= rows; }
  };

  void tick();
  void step(uint64_t now);
  void complete(uint64_t now);
  void emit(uint64_t now);
  bool dispatch(const Issued& is, uint64_t now);
  bool signal(const Issued& is, uint64_t now, SemaphoreFile* target, int chip = -1);
  bool remote(const Issued& is, Transfer& t);
  bool send_packet(Transfer& t);

  const MachineConfig& cfg_;
  SparseMemory& vmem_;
  SparseMemory& smem_;
  MemorySystem& hbm_;
  std::vector<SemaphoreFile*> core_sems_;
  IciNetwork* ici_ = nullptr;
  int chip_ = 0;
  std::deque<Transfer> transfers_;  // in flight and markers, oldest first
  struct Incoming {
    Transfer t;                  // a store of the packet's bytes to HBM
    std::vector<uint8_t> data;   // (not in VMEM: they came over ICI)
    uint32_t* sender = nullptr;  // the sending transfer's count, decremented once written
  };
  std::deque<Incoming> incoming_;
  sc_core::sc_event remote_;  // wakes the engine (sleep.h) when the ICI hands it work
  struct Read {
    Transfer t;                  // a load of the requested bytes from HBM
    IciPacket reply;             // what every reply packet shares: its destination, counter
    std::deque<IciPacket> out;   // landed, waiting for the router
  };
  std::deque<Read> reads_;
  void reply(Read& r, const HbmBurst& b);
  uint32_t markers_ = 0;
  struct Burst {
    Transfer* transfer;
    HbmBurst hbm;
    Read* read = nullptr;  // a burst read for another chip
  };
  void emit_bursts(Transfer& t, const std::vector<uint8_t>* data, uint64_t now, uint32_t& sent, Read* read = nullptr);
  // In flight, by slot (HbmBurst::tag; a deque keeps them in place); they
  // may land in any order.
  std::deque<Burst> bursts_;
  std::vector<size_t> free_slots_;
  uint64_t bytes_moved_ = 0;
  std::vector<uint8_t> landing_;  // a load burst on its way from HBM to VMEM
};

}  // namespace tpu::sim
