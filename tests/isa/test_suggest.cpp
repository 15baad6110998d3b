// "Did you mean" suggestions (tpu/isa/suggest.h). Distances are the
// textbook ones: kitten -> sitting is 3 edits; a swap of neighbours is one;
// "ca" -> "abc" is 3 in the optimal string alignment distance (2 only if a
// substring may be edited twice, which this distance does not allow).
#include <catch2/catch.hpp>

#include "tpu/isa/suggest.h"

TEST_CASE("suggest: edit distance") {
  CHECK(tpu::edit_distance("kitten", "sitting") == 3);
  CHECK(tpu::edit_distance("", "abc") == 3);
  CHECK(tpu::edit_distance("abc", "") == 3);
  CHECK(tpu::edit_distance("inptus", "inputs") == 1);
  CHECK(tpu::edit_distance("ca", "abc") == 3);
  CHECK(tpu::edit_distance("same", "same") == 0);
}

TEST_CASE("suggest: the closest name, only when close") {
  const std::vector<std::string> flags = {"--inputs", "--outputs", "--stats", "--trace"};
  CHECK(tpu::closest("--inptus", flags) == "--inputs");
  CHECK(tpu::closest("--outptus", flags) == "--outputs");
  CHECK(tpu::closest("--frobnicate", flags).empty());
  CHECK(tpu::did_you_mean("v5ee", {"tiny", "v1", "v4", "v5e"}) == " (did you mean 'v5e'?)");
  CHECK(tpu::did_you_mean("nope", {"tiny", "v1", "v4", "v5e"}).empty());
  // Short names allow one edit: "v2" is one from "v1" and "v4" (the first wins).
  CHECK(tpu::closest("v2", {"tiny", "v1", "v4", "v5e"}) == "v1");
  CHECK(tpu::closest("exponentail", {"exp", "exponential", "expm1"}) == "exponential");
}
