// Runs simulations for tests. SystemC elaborates once per process, so each
// simulation runs in a forked child that sends its result back through a
// pipe; one test case may then run as many simulations as it likes.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "tpu/asm/assembler.h"
#include "tpu/sim/simulator.h"

namespace tpu::test {

struct SimRun {
  std::optional<std::string> fault;
  uint64_t cycles = 0;
  std::vector<std::vector<uint8_t>> outputs;
  nlohmann::json stats;
};

// Assembles `source` for `preset` or `target` (the test fails on assembly errors).
isa::Program assemble_for(const std::string& source, const std::string& preset);
isa::Program assemble_for(const std::string& source, const isa::Target& target);

// A preset with the simple HBM model: docs/timing.md's formulas, and the
// cycle counts tests pin, are written for it (the detailed model has its own
// tests: test_dram.cpp, tests/hbm).
sim::MachineConfig formula_config(const std::string& preset);

SimRun simulate(const isa::Program& program, const sim::MachineConfig& config,
                const std::vector<std::vector<uint8_t>>& inputs, const sim::SimOptions& options = {});
SimRun simulate(const std::string& source, const std::string& preset, const std::vector<std::vector<uint8_t>>& inputs = {},
                const sim::SimOptions& options = {});

std::string read_source(const std::string& relative_path);  // from the source tree

// Byte helpers for building inputs and reading outputs.
template <typename T>
std::vector<uint8_t> to_bytes(const std::vector<T>& v) {
  std::vector<uint8_t> b(v.size() * sizeof(T));
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}
template <typename T>
std::vector<T> from_bytes(const std::vector<uint8_t>& b) {
  std::vector<T> v(b.size() / sizeof(T));
  std::memcpy(v.data(), b.data(), v.size() * sizeof(T));
  return v;
}

// docs/timing.md's DMA formula: a transfer of `bytes` from an idle HBM
// (aligned to a burst), whose burst i is requested in cycle first_burst + i,
// lands in the returned cycle.
uint64_t dma_landing_cycle(const sim::MachineConfig& cfg, uint64_t first_burst, uint64_t bytes);

uint16_t bf16_round(float x);  // round to nearest even
float bf16_value(uint16_t b);

// The seed for a random test: TPU_TEST_SEED if set, else `fallback`; printed.
uint64_t test_seed(uint64_t fallback);

}  // namespace tpu::test
