// "Did you mean": the known name closest to a misspelt one, for messages
// about unknown flags, presets, config keys and operations.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace tpu {

// Edits (insert, delete, substitute, swap two neighbours) from a to b.
size_t edit_distance(std::string_view a, std::string_view b);

// The candidate closest to `name` if it is close enough to be what was
// meant (at most one edit in four characters, and at least one), else "".
// Ties go to the first candidate.
std::string closest(std::string_view name, const std::vector<std::string>& candidates);

// " (did you mean 'X'?)" for the closest candidate, or "".
std::string did_you_mean(std::string_view name, const std::vector<std::string>& candidates);

}  // namespace tpu
