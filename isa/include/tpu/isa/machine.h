// The machine configuration: the target (what programs are compiled for)
// plus everything that only changes timing. Read from a preset or a JSON
// file whose shape mirrors the component tree; every parameter is checked.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "tpu/isa/isa.h"
#include "tpu/isa/target.h"

namespace tpu::isa {

// The machine's defaults are the default preset's (v5e, with the simple HBM
// model); config_fields() holds every numeric parameter below with its key,
// range, unit and meaning.
struct CoreParams {
  uint32_t queue_depth = 16;
  uint32_t branch_penalty = 2;
  uint32_t issue_width = 4;
};

// Per VpuClass (docs/isa.md gives each instruction's class).
struct VpuLatency {
  uint32_t alu = 2;
  uint32_t mul = 3;
  uint32_t div = 8;
  uint32_t transcendental = 8;
  uint32_t load = 3;
  uint32_t store = 1;
  uint32_t reduce = 7;
};

// Instructions the VPU may dispatch in one cycle, in queue order: at most
// `width` in all, `alu` of the arithmetic classes, `load` vld/vlda, `store`
// vst/vsta (docs/timing.md).
struct VpuIssue {
  uint32_t width = 4;
  uint32_t alu = 2;
  uint32_t load = 1;
  uint32_t store = 1;
};

// The issue slot an instruction of a class takes in a VPU cycle's group
// (vpu.issue.*): a transpose goes alone.
enum class VpuSlot : uint8_t { Alu, Load, Store, Whole };
VpuSlot vpu_slot(VpuClass c);

// One cycle's issue group of the VPU (docs/timing.md, "issue group"): the
// rule the simulator dispatches by and the compiler's scheduler estimates
// with. The first instruction always goes; another joins while the group
// has fewer than `width`, its slot is below its limit, the accumulator port
// (vlda, vsta) is free if it needs it, and no Whole-slot instruction (a
// transpose) is in it or wants in. wait and signal are the caller's: they
// go alone at the head of the queue.
class VpuIssueGroup {
 public:
  explicit VpuIssueGroup(const VpuIssue& issue) : limit_{issue.alu, issue.load, issue.store}, width_(issue.width) {}
  bool admits(Opcode op) const {
    if (n_ == 0) return true;
    const VpuSlot s = vpu_slot(spec(op).vpu_class);
    return !closed_ && s != VpuSlot::Whole && n_ < width_ && used_[int(s)] < limit_[int(s)] && !(acc_port_ && uses_acc_port(op));
  }
  void add(Opcode op) {
    const VpuSlot s = vpu_slot(spec(op).vpu_class);
    ++n_;
    if (s == VpuSlot::Whole) closed_ = true;
    else ++used_[int(s)];
    acc_port_ |= uses_acc_port(op);
  }
  uint32_t size() const { return n_; }
  static bool uses_acc_port(Opcode op) { return op == Opcode::VLDA || op == Opcode::VSTA; }

 private:
  uint32_t limit_[3], width_, used_[3] = {0, 0, 0}, n_ = 0;
  bool acc_port_ = false, closed_ = false;
};

struct VpuParams {
  VpuLatency latency;
  VpuIssue issue;
};

struct DmaParams {
  uint32_t max_outstanding = 16;
  uint32_t burst_bytes = 512;
  uint32_t bursts_per_cycle = 2;
};

// The `detailed` HBM model's device and controller (docs/memory.md): every
// field is in dram_fields(), which drives parsing, to_json and the docs.
struct DramParams {
  std::string preset;  // the device preset (configs/dram/NAME.json) the values start from
  std::string description;
  // organisation
  uint32_t channels = 0;         // independent channels (pseudo-channels count as channels), all stacks
  uint32_t ranks = 0;            // per channel
  uint32_t bankgroups = 0;       // per rank
  uint32_t banks_per_group = 0;
  uint32_t rows = 0;             // per bank
  uint32_t row_bytes = 0;        // the page: bytes one activate opens in a channel
  uint32_t bus_bits = 0;         // data bus width of a channel
  uint32_t burst_length = 0;     // BL: beats a column command moves
  uint32_t beats_per_clock = 0;  // 2 (double data rate), 4 for HBM3's data clock
  // timing, in cycles of tck_ps
  uint32_t tck_ps = 0;
  uint32_t CL = 0, CWL = 0, tRCDRD = 0, tRCDWR = 0, tRP = 0, tRAS = 0, tRFC = 0, tRFCb = 0, tREFI = 0, tREFIb = 0;
  uint32_t tRRD_S = 0, tRRD_L = 0, tWTR_S = 0, tWTR_L = 0, tFAW = 0, tWR = 0, tCCD_S = 0, tCCD_L = 0, tRTP = 0;
  uint32_t tRTRS = 0, tRPRE = 0, tWPRE = 0;
  // controller
  std::string address_mapping;   // six 2-letter fields, most significant first: ro ra bg ba ch co
  std::string address_hash;      // none | xor: higher bits folded into the channel and bank bits
  std::string page_policy;       // open | closed
  std::string queue_structure;   // per_bank | per_rank command queues
  std::string refresh;           // all_bank (REF every tREFI) | per_bank (REFb every tREFIb)
  uint32_t cmd_queue_depth = 0;  // entries per command queue
  uint32_t trans_queue_depth = 0;  // read transactions waiting per channel
  uint32_t write_buffer = 0;     // writes buffered per channel; drained when full
  uint32_t write_drain_threshold = 0;  // ... or when more wait and the command queues are empty
  uint32_t row_hit_cap = 0;      // row hits served before a waiting conflict may close the row
  uint32_t dual_command = 0;     // 1: a row and a column command may issue in the same cycle (HBM)

  uint64_t request_bytes() const { return uint64_t(bus_bits) / 8 * burst_length; }
  uint32_t burst_cycles() const { return burst_length / beats_per_clock; }
  uint64_t capacity_bytes() const { return uint64_t(channels) * ranks * bankgroups * banks_per_group * rows * row_bytes; }
  double peak_bytes_per_s() const { return double(channels) * bus_bits / 8 * beats_per_clock * 1e12 / tck_ps; }
};

struct DramField {
  const char* section;  // organisation | timing | controller
  const char* key;
  uint32_t DramParams::*member;
  uint32_t min, max;
  const char* doc;
};
struct DramTextField {
  const char* key;  // in controller
  std::string DramParams::*member;
  std::vector<std::string> allowed;  // empty: checked by validate_dram
  const char* doc;
};
const std::vector<DramField>& dram_fields();
const std::vector<DramTextField>& dram_text_fields();

struct HbmParams {
  // ideal: every request returns `ideal.latency_ns` after it is sent, no
  // bandwidth limit; simple: one FIFO server, bandwidth + latency;
  // detailed: channels, banks, rows, refresh and a scheduling controller.
  std::string model = "simple";
  struct {
    uint32_t latency_ns = 100;
  } ideal;
  struct {
    uint64_t bandwidth_bytes_per_s = 819000000000;
    uint32_t latency_ns = 100;
  } simple;
  bool has_ideal = false, has_simple = false, has_detailed = false;  // the subtrees the config holds
  DramParams detailed;
};

// The on-chip interconnect between the cores' DMA ports and the HBM
// channels (used by the detailed HBM model): a crossbar whose port per core
// carries link_bytes_per_cycle each way, hop_latency cycles each way, and
// credits for the requests a channel's input buffer holds.
struct NocParams {
  uint32_t link_bytes_per_cycle = 1024;
  uint32_t hop_latency = 4;
  uint32_t credits = 8;
};

// The links between chips (ICI, docs/system.md): the chips of
// target.chips sit in an x by y by z grid, each joined to its neighbours
// along every axis longer than one chip (and, with `wrap`, the last to the
// first: a ring or torus). A link carries `link_bandwidth_bytes_per_s` in
// each direction, in packets of at most `packet_bytes`; a packet takes
// `hop_latency_ns` to cross; a link's receiver buffers `buffer_packets`
// packets per virtual channel (credit-based flow control).
struct IciParams {
  // 0: the preset's shape for target.chips (ici_shape()): `dims` axes,
  // as square as the count allows.
  uint32_t x = 0, y = 0, z = 0;
  uint32_t dims = 2;
  uint32_t wrap = 1;
  uint64_t link_bandwidth_bytes_per_s = 50000000000;
  uint32_t hop_latency_ns = 1000;
  uint32_t packet_bytes = 512;
  uint32_t buffer_packets = 256;
};

// The timing of an N x N MXU (docs/timing.md, "MXU"), for the simulator
// and the compiler's cost model alike.
struct MxuTiming {
  uint64_t n = 0;
  // A weight load dispatched at t reads weight row i in cycle t + i and
  // commits the shadow buffer at the end of cycle t + N - 1, the cycle by
  // which every row that used that buffer must have reached the
  // accumulators. A swap may follow from t + N.
  uint64_t load_cycles() const { return n; }
  uint64_t load_commit(uint64_t t) const { return t + n - 1; }
  // A stream dispatched at t feeds input row i in cycle t + i (the next
  // stream may start at t + rows); its result reaches the accumulators in
  // cycle t + i + 2N - 1.
  uint64_t result_latency() const { return 2 * n - 1; }
  uint64_t last_result(uint64_t t, uint64_t rows) const { return t + rows - 1 + result_latency(); }
};

struct MachineConfig {
  Target target;
  std::string description;
  uint64_t clock_hz = 1500000000;
  CoreParams core;
  VpuParams vpu;
  DmaParams dma;
  HbmParams hbm;
  NocParams noc;
  IciParams ici;

  // Derived. The simple model's latency and bandwidth (in 1/1024 bytes per
  // cycle, fixed point, at least 1).
  uint64_t hbm_latency_cycles() const;
  uint64_t hbm_bytes_per_cycle_fp() const;
  // The selected model's peak bandwidth (0 for `ideal`: no limit) and the
  // latency of an unloaded read (for `detailed`: a row conflict, tRP + tRCD
  // + CL + burst), for rooflines and the compiler's cost model.
  double hbm_peak_bytes_per_s() const;
  double hbm_unloaded_latency_ns() const;
  // The cycles a lone DMA transfer takes besides moving its bytes, for cost
  // models: the memory's unloaded latency plus kDmaEngineCycles.
  double dma_latency_cycles() const;
  // The DMA engine's own part of that: the bursts leave the cycle after
  // dispatch, and the instruction waiting for the count dispatches the cycle
  // after the last lands (docs/timing.md). A test checks the estimate against
  // a lone transfer in the simulator on every preset (within 1.5 cycles).
  static constexpr double kDmaEngineCycles = 2;
  // Cycles from a VPU instruction's dispatch to its result (vpu.latency.*;
  // a transpose takes one cycle a lane).
  uint32_t vpu_latency(VpuClass c) const;
  MxuTiming mxu_timing() const { return MxuTiming{target.mxu_dim}; }

  std::string to_json() const;  // the resolved config, every parameter
  // The system's grid of chips: ici.x, y, z as set, else the preset's
  // shape for target.chips (ici.dims axes, each a power of two as equal as
  // the count allows, the first the longest). Their product is target.chips.
  std::array<uint32_t, 3> ici_shape() const;
  // The ICI's bytes per cycle per link and direction, 1/1024 fixed point.
  uint64_t ici_bytes_per_cycle_fp() const;
  uint64_t ici_hop_cycles() const;
};

// "4", "2x4", "4x4x4" -> {x, y, z}; throws Error unless each is 1..4096.
std::array<uint32_t, 3> parse_topology(const std::string& text);
std::string topology_text(const std::array<uint32_t, 3>& shape);

// One numeric parameter of the config outside `target` and
// `hbm.detailed` (those have their own tables): its dotted key, which is
// also the member's path in MachineConfig. The table drives parsing,
// validation, to_json and docs/configs.md; the default is MachineConfig{}'s.
struct ConfigField {
  const char* key;
  uint64_t (*get)(const MachineConfig&);
  void (*set)(MachineConfig&, uint64_t);
  uint64_t min, max;
  const char* unit;
  const char* doc;
};
const std::vector<ConfigField>& config_fields();

// A preset name or a path to a JSON config, with `settings` ("KEY=VALUE",
// KEY a dotted path the config has: hbm.simple.bandwidth_bytes_per_s=1.6e12)
// applied before validation. Throws Error naming the parameter and the file.
MachineConfig load_config(const std::string& preset_or_path, const std::vector<std::string>& settings = {});
MachineConfig config_from_json(const std::string& text, const std::string& where);

}  // namespace tpu::isa
