#include "memory.h"

#include <fmt/format.h>

namespace tpu::sim {

std::optional<std::string> SparseMemory::check_range(uint64_t addr, uint64_t n, uint64_t align, const char* name) const {
  if (align > 1 && addr % align != 0)
    return fmt::format("{} address {:#x} is not {}-byte aligned", name, addr, align);
  if (addr > size_ || n > size_ - addr)
    return fmt::format("{} access of {} bytes at {:#x} is outside {} ({} bytes)", name, n, addr, name, size_);
  return std::nullopt;
}

}  // namespace tpu::sim
