// Shared command-line plumbing for the tools: CLI11 parse errors become one
// line on stderr and exit status 2.
#pragma once

#include <CLI/CLI.hpp>
#include <iostream>
#include <string>

namespace tpu::cli {

// Returns -1 to continue, or the exit status to return now.
inline int parse(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << app.get_name() << ": error: " << e.what() << " (see --help)\n";
    return 2;
  }
  return -1;
}

}  // namespace tpu::cli
