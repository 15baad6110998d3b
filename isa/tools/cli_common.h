// Shared command-line plumbing for the tools: --version, --log-level and -v
// on every tool; every diagnostic through spdlog as one line
// "TOOL: LEVEL: message" on stderr (LEVEL: error, warning, info, debug,
// trace, or "internal error"); CLI11 parse errors exit with status 2.
#pragma once

#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <filesystem>
#include <iostream>
#include <new>
#include <stdexcept>
#include <string>
#include <string_view>

#include "tpu/isa/error.h"
#include "tpu/isa/suggest.h"

namespace tpu::cli {

// The level as the tools print it (a custom spdlog flag: %*).
class LevelName : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& m, const std::tm&, spdlog::memory_buf_t& dest) override {
    static constexpr std::string_view names[] = {"trace", "debug", "info", "warning", "error", "internal error", "off"};
    const std::string_view n = names[size_t(m.level) < 7 ? size_t(m.level) : 6];
    dest.append(n.data(), n.data() + n.size());
  }
  std::unique_ptr<custom_flag_formatter> clone() const override { return std::make_unique<LevelName>(); }
};

// The tool's logger on stderr, made the default one (the libraries log through it).
inline void setup_logging(const std::string& tool, spdlog::level::level_enum level) {
  auto logger = std::make_shared<spdlog::logger>(tool, std::make_shared<spdlog::sinks::stderr_sink_st>());
  auto f = std::make_unique<spdlog::pattern_formatter>();
  f->add_flag<LevelName>('*').set_pattern("%n: %*: %v");
  logger->set_formatter(std::move(f));
  logger->set_level(level);
  logger->flush_on(spdlog::level::trace);
  spdlog::set_default_logger(std::move(logger));
}

// What CLI11 did not expect, in the order given: the first unknown option
// (a long one with the tool's closest), else the first argument too many.
inline std::string unexpected(const CLI::App& app, const std::vector<std::string>& extra, const std::string& fallback) {
  std::vector<std::string> names;
  for (const CLI::Option* o : app.get_options())
    for (const std::string& l : o->get_lnames()) names.push_back("--" + l);
  for (const std::string& a : extra)
    if (a.size() > 1 && a[0] == '-') {
      const std::string name = a.substr(0, a.find('='));
      return "unknown option '" + name + "'" + (name[1] == '-' ? did_you_mean(name, names) : "");
    }
  return extra.empty() ? fallback : "unexpected argument '" + extra.front() + "'";
}

// Adds --version, --log-level and -v; returns -1 to continue, or the exit
// status to return now.
inline int parse(CLI::App& app, int argc, char** argv) {
  setup_logging(app.get_name(), spdlog::level::warn);
  app.set_version_flag("--version", app.get_name() + " (tpusim " TPUSIM_VERSION ")", "print the version and exit");
  std::string level = "warning";
  int verbose = 0;
  app.add_option("--log-level", level, "what to print on stderr: off, error, warning (the default), info, debug or trace")
      ->check(CLI::IsMember({"off", "error", "warning", "info", "debug", "trace"}));
  app.add_flag("-v,--verbose", verbose, "print more: -v info, -vv debug, -vvv trace");
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {  // --help, --version
    return app.exit(e);
  } catch (const CLI::ExtrasError& e) {
    spdlog::error("{} (see --help)", unexpected(app, app.remaining(), e.what()));
    return 2;
  } catch (const CLI::ParseError& e) {
    spdlog::error("{} (see --help)", e.what());
    return 2;
  }
  auto lv = level == "warning" ? spdlog::level::warn : spdlog::level::from_str(level);
  if (verbose > 0) lv = std::min(lv, spdlog::level::level_enum(std::max(0, int(spdlog::level::warn) - verbose)));
  spdlog::set_level(lv);
  return -1;
}

// A bad combination or value of flags found after parsing: exit status 2.
class UsageError : public tpu::Error {
 public:
  using tpu::Error::Error;
};

// Runs a tool's work and turns what it throws into one line on stderr and
// the exit status of docs/robustness.md: `bad_input` (1, or tpu-compare's
// 2) for the user's mistake (Error, a file system error, a host out of
// memory), 4 for an internal error (a bug of ours), printed once.
template <typename Work>
int run(Work&& work, int bad_input = 1) {
  try {
    return work();
  } catch (const UsageError& e) {
    spdlog::error("{} (see --help)", e.what());
    return 2;
  } catch (const tpu::Error& e) {
    spdlog::error("{}", e.what());
  } catch (const std::filesystem::filesystem_error& e) {
    spdlog::error("{}", e.what());
  } catch (const std::bad_alloc&) {
    spdlog::error("out of host memory");
  } catch (const std::exception& e) {
    std::string_view what = e.what();
    while (what.rfind("internal error: ", 0) == 0) what.remove_prefix(16);
    spdlog::critical("{}", what);
    return 4;
  }
  return bad_input;
}

}  // namespace tpu::cli
