#include "harness.h"

#include <fmt/format.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <algorithm>
#include <cstring>

#include "tpu/isa/target.h"

namespace tpu::test {
namespace {

void put_u64(std::string& s, uint64_t v) { s.append(reinterpret_cast<const char*>(&v), 8); }
void put_str(std::string& s, const std::string& x) {
  put_u64(s, x.size());
  s += x;
}

struct Cursor {
  const std::string& s;
  size_t at = 0;
  uint64_t u64() {
    uint64_t v;
    std::memcpy(&v, s.data() + at, 8);
    at += 8;
    return v;
  }
  std::string str() {
    uint64_t n = u64();
    std::string x = s.substr(at, n);
    at += n;
    return x;
  }
};

}  // namespace

isa::Program assemble_for(const std::string& source, const std::string& preset) { return assemble_for(source, isa::load_target(preset)); }

isa::Program assemble_for(const std::string& source, const isa::Target& target) {
  as::AssembleOptions o;
  o.target = target;
  auto r = as::assemble(source, "test.s", o);
  std::string errs;
  for (const auto& d : r.errors) errs += d.render();
  INFO(errs);
  REQUIRE(r.program);
  return *r.program;
}

sim::MachineConfig formula_config(const std::string& preset) { return sim::load_config(preset, {"hbm.model=simple"}); }

SimRun simulate(const isa::Program& program, const sim::MachineConfig& config,
                const std::vector<std::vector<uint8_t>>& inputs, const sim::SimOptions& options) {
  int fds[2];
  REQUIRE(pipe(fds) == 0);
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    close(fds[0]);
    setenv("SYSTEMC_DISABLE_COPYRIGHT_MESSAGE", "1", 1);
    std::string out;
    try {
      sim::Simulator s(config, program, options);
      sim::RunResult r = s.run(inputs);
      put_u64(out, r.fault ? 1 : 0);
      put_str(out, r.fault.value_or(""));
      put_u64(out, r.cycles);
      put_u64(out, r.outputs.size());
      for (const auto& o : r.outputs) put_str(out, std::string(o.begin(), o.end()));
      put_str(out, r.stats_json);
    } catch (const std::exception& e) {
      out.clear();
      put_u64(out, 1);
      put_str(out, std::string("error: ") + e.what());
      put_u64(out, 0);
      put_u64(out, 0);
      put_str(out, "{}");
    }
    for (size_t done = 0; done < out.size();) {
      ssize_t n = write(fds[1], out.data() + done, out.size() - done);
      if (n <= 0) _exit(2);
      done += size_t(n);
    }
    _exit(0);
  }
  close(fds[1]);
  std::string buf;
  char chunk[65536];
  for (ssize_t n; (n = read(fds[0], chunk, sizeof chunk)) > 0;) buf.append(chunk, size_t(n));
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  INFO("simulation child status " << status);
  REQUIRE((WIFEXITED(status) && WEXITSTATUS(status) == 0));
  Cursor c{buf};
  SimRun run;
  if (c.u64()) run.fault = c.str();
  else c.str();
  run.cycles = c.u64();
  const uint64_t n = c.u64();
  for (uint64_t i = 0; i < n; ++i) {
    std::string o = c.str();
    run.outputs.emplace_back(o.begin(), o.end());
  }
  run.stats = nlohmann::json::parse(c.str());
  return run;
}

SimRun simulate(const std::string& source, const std::string& preset, const std::vector<std::vector<uint8_t>>& inputs,
                const sim::SimOptions& options) {
  return simulate(assemble_for(source, preset), sim::load_config(preset), inputs, options);
}

std::string read_source(const std::string& relative_path) {
  return isa::read_text_file(std::string(TPU_SOURCE_DIR) + "/" + relative_path);
}

uint64_t dma_landing_cycle(const sim::MachineConfig& cfg, uint64_t first_burst, uint64_t bytes) {
  // Burst i is sent in cycle first_burst + i / P (P = dma.bursts_per_cycle).
  // The server: start = max(e * bw, free); free = start + bytes * 1024;
  // done = ceil(free / bw) + H; the transfer lands with its last burst.
  const uint64_t bw = cfg.hbm_bytes_per_cycle_fp(), burst = cfg.dma.burst_bytes, P = cfg.dma.bursts_per_cycle;
  unsigned __int128 free = 0;
  uint64_t done = 0, i = 0;
  for (uint64_t off = 0; off < bytes; off += burst, ++i) {
    const uint64_t e = first_burst + i / P;
    const unsigned __int128 start = std::max<unsigned __int128>((unsigned __int128)e * bw, free);
    free = start + (unsigned __int128)std::min(burst, bytes - off) * 1024;
    done = uint64_t((free + bw - 1) / bw) + cfg.hbm_latency_cycles();
  }
  return done;
}

uint16_t bf16_round(float x) {
  uint32_t b;
  std::memcpy(&b, &x, 4);
  if ((b & 0x7fffffffu) > 0x7f800000u) return uint16_t((b >> 16) | 0x40);
  return uint16_t((b + 0x7fffu + ((b >> 16) & 1)) >> 16);
}

float bf16_value(uint16_t b) {
  uint32_t bits = uint32_t(b) << 16;
  float x;
  std::memcpy(&x, &bits, 4);
  return x;
}

uint64_t test_seed(uint64_t fallback) {
  const char* env = std::getenv("TPU_TEST_SEED");
  const uint64_t seed = env ? std::strtoull(env, nullptr, 0) : fallback;
  std::printf("seed %llu (set TPU_TEST_SEED to change)\n", static_cast<unsigned long long>(seed));
  return seed;
}

}  // namespace tpu::test
