// Catch2's main for simulator tests, plus the sc_main that Debian's SystemC
// library expects to exist (simulations run in forked children; see harness.h).
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>
#include <cstdlib>

extern "C" int sc_main(int, char**) { return 0; }

int main(int argc, char* argv[]) {
  setenv("SYSTEMC_DISABLE_COPYRIGHT_MESSAGE", "1", 1);
  return Catch::Session().run(argc, argv);
}
