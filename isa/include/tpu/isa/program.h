// The .tpu program format (docs/program-format.md): the one writer and the
// one loader. The loader checks every field and accepts only the canonical
// layout the writer produces, so load(save(p)) == p and save(load(b)) == b.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tpu/isa/error.h"
#include "tpu/isa/target.h"

namespace tpu::isa {

inline constexpr char kProgramMagic[8] = {'T', 'P', 'U', 'P', 'R', 'O', 'G', '\0'};
inline constexpr uint16_t kProgramVersionMajor = 1;
inline constexpr uint16_t kProgramVersionMinor = 4;  // 1.1 adds the optional CHKS section, 1.2 TILE, 1.3 HEAP, 1.4 TMAP
inline constexpr size_t kMaxInstructions = 1u << 24;
inline constexpr size_t kMaxSymbols = 1u << 16;
inline constexpr size_t kMaxDataSegments = 1u << 16;
inline constexpr size_t kMaxRank = 8;
inline constexpr uint64_t kMaxDim = uint64_t(1) << 48;
inline constexpr size_t kMaxSymbolName = 255;

enum class Dtype : uint8_t { pred = 0, s8, s16, s32, s64, u8, u16, u32, u64, f16, bf16, f32, f64 };
inline constexpr int kNumDtypes = 13;

const char* dtype_name(Dtype d);
std::optional<Dtype> dtype_from_name(std::string_view name);
size_t dtype_size(Dtype d);
// The value of a float element stored as these bits (f16, bf16, f32, f64;
// the low dtype_size(d) bytes); NaN for any other dtype.
double float_bits_value(Dtype d, uint64_t bits);

enum class SymbolKind : uint8_t { Input = 0, Output = 1, Constant = 2 };
const char* symbol_kind_directive(SymbolKind k);  // ".input", ".output", ".const"

// A tensor in HBM: an ENTRY parameter (inputs, in parameter order), a result
// leaf (outputs, in order) or a named constant. On a system of several
// chips, `tiles` (when not empty) splits it: dims / tiles along each axis
// is one chip's tile, at hbm_addr in that chip's HBM; chip c holds the c-th
// tile in row-major order of the tiles, or tile tile_of[c] when tile_of is
// given (several chips may hold one tile: partly replicated; docs/system.md).
// Without tiles, every chip holds the whole tensor (an output is chip 0's).
struct TensorSymbol {
  SymbolKind kind = SymbolKind::Input;
  std::string name;
  Dtype dtype = Dtype::f32;
  std::vector<uint64_t> dims;
  uint64_t hbm_addr = 0;
  std::vector<uint64_t> tiles;
  std::vector<uint32_t> tile_of;  // by chip: the tile it holds (empty: chip c holds tile c)

  uint64_t elements() const;
  uint64_t tile_index(uint64_t chip) const { return tile_of.empty() ? chip : tile_of.at(chip); }
  uint64_t bytes() const;  // saturates at UINT64_MAX
  uint64_t tile_count() const;  // the product of tiles (1 without)
  std::vector<uint64_t> local_dims() const;
  uint64_t local_bytes() const;  // what one chip holds
  bool operator==(const TensorSymbol& o) const {
    return kind == o.kind && name == o.name && dtype == o.dtype && dims == o.dims && hbm_addr == o.hbm_addr && tiles == o.tiles &&
           tile_of == o.tile_of;
  }
};

// Copies chip `chip`'s tile of a tiled tensor out of `global` (to_local) or
// into it (the reverse).
void copy_tile(const TensorSymbol& s, uint64_t chip, const uint8_t* from, uint8_t* to, bool to_local);

// Bytes placed in HBM before the program starts (weights, tables, ...).
struct DataSegment {
  uint64_t hbm_addr = 0;
  std::vector<uint8_t> bytes;
  bool operator==(const DataSegment& o) const { return hbm_addr == o.hbm_addr && bytes == o.bytes; }
};

// A check the program asks the simulator to make on two of its outputs after
// the run (StableHLO's check.expect_* custom calls), with the StableHLO
// interpreter's semantics: exact equality; |a - b| <= tolerance; or a distance
// in units in the last place between min_ulp and max_ulp.
enum class CheckKind : uint8_t { expect_eq = 0, expect_almost_eq = 1, expect_close = 2 };
inline constexpr int kNumCheckKinds = 3;
inline constexpr size_t kMaxChecks = 1u << 16;
const char* check_kind_name(CheckKind k);  // "expect_eq", ...
std::optional<CheckKind> check_kind_from_name(std::string_view name);

struct Check {
  CheckKind kind = CheckKind::expect_eq;
  uint32_t actual = 0, expected = 0;  // output numbers (outputs in file order)
  double tolerance = 0;               // expect_almost_eq only
  uint64_t min_ulp = 0, max_ulp = 0;  // expect_close only
  bool operator==(const Check& o) const {
    return kind == o.kind && actual == o.actual && expected == o.expected && tolerance == o.tolerance && min_ulp == o.min_ulp &&
           max_ulp == o.max_ulp;
  }
};

// What tpuc knows of each instruction, for profiles: the kernel it belongs
// to and the HLO ops that kernel computes (tpusim's stats.json `kernels` and
// `ops`). A hand-written program has none.
struct KernelOp {
  std::string op;     // "m.mlir:6 %0 (model.py:21)"
  uint64_t work = 0;  // its share of the kernel's arithmetic (MACs, elements), to split the kernel's cycles
  bool operator==(const KernelOp& o) const { return op == o.op && work == o.work; }
};
struct KernelInfo {
  std::string name;  // "matmul -> %7 f32[8,16]"
  std::vector<KernelOp> ops;
  bool operator==(const KernelInfo& o) const { return name == o.name && ops == o.ops; }
};
inline constexpr uint32_t kNoKernel = 0xFFFFFFFF;
inline constexpr size_t kMaxKernels = 1u << 16;
inline constexpr size_t kMaxKernelOps = 1u << 16;  // per kernel
inline constexpr size_t kMaxDebugText = 1024;      // characters of a kernel name or an op

// Evaluates a check on the two outputs' bytes (dense, row-major, of type t):
// pass or fail, and a line saying why (the first mismatch and its index).
struct CheckOutcome {
  bool pass = false;
  std::string detail;
};
CheckOutcome evaluate_check(const Check& c, const TensorSymbol& t, const std::vector<uint8_t>& actual,
                            const std::vector<uint8_t>& expected);

struct Program {
  Target target;
  std::vector<uint64_t> code;
  std::vector<DataSegment> data;
  std::vector<TensorSymbol> symbols;
  std::vector<Check> checks;  // saved in a CHKS section (version 1.1) when not empty
  // Saved in a KERN section (version 1.1) when not empty; kernel_of then has
  // one entry per instruction: its kernel, or kNoKernel.
  std::vector<KernelInfo> kernels;
  std::vector<uint32_t> kernel_of;
  // The HBM the program uses, [0, hbm_peak): the end of its highest buffer
  // as the compiler assigned them (a HEAP section, version 1.3); 0: not
  // given (a hand-written program).
  uint64_t hbm_peak = 0;

  std::vector<const TensorSymbol*> inputs() const;
  std::vector<const TensorSymbol*> outputs() const;
  bool operator==(const Program& o) const {
    return target == o.target && code == o.code && data == o.data && symbols == o.symbols && checks == o.checks &&
           kernels == o.kernels && kernel_of == o.kernel_of && hbm_peak == o.hbm_peak;
  }
};

// Throws Error if a program breaks a rule the loader enforces (so the writer
// never produces a file the loader rejects).
void validate(const Program& p);

std::vector<uint8_t> save(const Program& p);
void save_file(const Program& p, const std::string& path);

// Throws Error with one line saying what is wrong and at which byte offset.
Program load(const uint8_t* bytes, size_t size);
Program load_file(const std::string& path);

}  // namespace tpu::isa
