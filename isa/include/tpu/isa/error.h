// Errors. `Error` is the user's mistake (bad file, bad config, bad flag): its
// message is one line meant for them. Broken internal invariants are
// std::logic_error and say "internal error".
#pragma once

#include <stdexcept>
#include <string>

namespace tpu {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

}  // namespace tpu
