// Shared command-line plumbing for the tools: CLI11 parse errors become one
// line on stderr and exit status 2.
#pragma once

#include <CLI/CLI.hpp>
#include <filesystem>
#include <iostream>
#include <new>
#include <stdexcept>
#include <string>
#include <string_view>

#include "tpu/isa/error.h"

namespace tpu::cli {

// Adds --version; returns -1 to continue, or the exit status to return now.
inline int parse(CLI::App& app, int argc, char** argv) {
  app.set_version_flag("--version", app.get_name() + " (tpusim " TPUSIM_VERSION ")", "print the version and exit");
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {  // --help, --version
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << app.get_name() << ": error: " << e.what() << " (see --help)\n";
    return 2;
  }
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
int run(std::string_view tool, Work&& work, int bad_input = 1) {
  try {
    return work();
  } catch (const UsageError& e) {
    std::cerr << tool << ": error: " << e.what() << " (see --help)\n";
    return 2;
  } catch (const tpu::Error& e) {
    std::cerr << tool << ": error: " << e.what() << "\n";
  } catch (const std::filesystem::filesystem_error& e) {
    std::cerr << tool << ": error: " << e.what() << "\n";
  } catch (const std::bad_alloc&) {
    std::cerr << tool << ": error: out of host memory\n";
  } catch (const std::exception& e) {
    std::string_view what = e.what();
    while (what.rfind("internal error: ", 0) == 0) what.remove_prefix(16);
    std::cerr << tool << ": internal error: " << what << "\n";
    return 4;
  }
  return bad_input;
}

}  // namespace tpu::cli
