#include "tpu/isa/suggest.h"

#include <algorithm>

namespace tpu {

// Optimal string alignment distance (Damerau-Levenshtein without edits of
// a substring twice): three rows of the dynamic program.
size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> before(b.size() + 1), prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) cur[j] = std::min(cur[j], before[j - 2] + 1);
    }
    std::swap(before, prev);
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::string closest(std::string_view name, const std::vector<std::string>& candidates) {
  const size_t limit = std::max<size_t>(1, name.size() / 4);
  size_t best = limit + 1;
  const std::string* pick = nullptr;
  for (const std::string& c : candidates) {
    if (c == name) continue;
    const size_t d = edit_distance(name, c);
    if (d < best) best = d, pick = &c;
  }
  return pick ? *pick : std::string();
}

std::string did_you_mean(std::string_view name, const std::vector<std::string>& candidates) {
  const std::string c = closest(name, candidates);
  return c.empty() ? std::string() : " (did you mean '" + c + "'?)";
}

}  // namespace tpu
