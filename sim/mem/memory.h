// Byte-addressed memories (HBM, VMEM, SMEM) stored sparsely in 64 KiB pages,
// so a 16 GiB HBM costs only what a program touches. Reads of untouched
// bytes return zero. Range checks are the caller's (see check_range).
#pragma once

#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>

#include "zeroed.h"

namespace tpu::sim {

// Host memory a run may use for the simulated memories' contents: shared by
// every SparseMemory (and the dense accumulators) of one run. A page that
// would pass the limit is not allocated; exceeded() tells the run to stop.
class MemoryBudget {
 public:
  explicit MemoryBudget(uint64_t limit_bytes) : limit_(limit_bytes) {}
  bool take(uint64_t bytes) {
    if (bytes > limit_ - used_) {
      exceeded_ = true;
      return false;
    }
    used_ += bytes;
    return true;
  }
  bool exceeded() const { return exceeded_; }
  uint64_t limit() const { return limit_; }
  // "8 GiB", "512 MiB", "1000 bytes": for messages.
  static std::string text(uint64_t bytes) {
    const char* units[] = {"bytes", "KiB", "MiB", "GiB"};
    int u = 0;
    while (u < 3 && bytes >= 1024 && bytes % 1024 == 0) bytes /= 1024, ++u;
    return std::to_string(bytes) + " " + units[u];
  }
  uint64_t used() const { return used_; }

 private:
  uint64_t limit_;
  uint64_t used_ = 0;
  bool exceeded_ = false;
};

class SparseMemory {
 public:
  explicit SparseMemory(uint64_t size, MemoryBudget* budget = nullptr) : size_(size), budget_(budget) {}
  uint64_t size() const { return size_; }

  void read(uint64_t addr, void* dst, uint64_t n) const {
    auto* out = static_cast<uint8_t*>(dst);
    while (n > 0) {
      const uint64_t off = addr & kPageMask;
      const uint64_t chunk = std::min(n, kPageBytes - off);
      const Page* p = find(addr >> kPageShift);
      if (p)
        std::memcpy(out, p->data() + off, chunk);
      else
        std::memset(out, 0, chunk);
      out += chunk, addr += chunk, n -= chunk;
    }
  }

  void write(uint64_t addr, const void* src, uint64_t n) {
    const auto* in = static_cast<const uint8_t*>(src);
    while (n > 0) {
      const uint64_t off = addr & kPageMask;
      const uint64_t chunk = std::min(n, kPageBytes - off);
      std::memcpy(page(addr >> kPageShift).data() + off, in, chunk);
      in += chunk, addr += chunk, n -= chunk;
    }
  }

  // An error message when [addr, addr + n) is outside the memory or addr is
  // not a multiple of align.
  std::optional<std::string> check_range(uint64_t addr, uint64_t n, uint64_t align, const char* name) const;

 private:
  static constexpr uint64_t kPageShift = 16;
  static constexpr uint64_t kPageBytes = uint64_t(1) << kPageShift;
  static constexpr uint64_t kPageMask = kPageBytes - 1;
  using Page = Zeroed<uint8_t>;  // kPageBytes

  const Page* find(uint64_t index) const {
    if (index == last_index_ && last_page_) return last_page_;
    auto it = pages_.find(index);
    if (it == pages_.end()) return nullptr;
    last_index_ = index;
    last_page_ = it->second.get();
    return last_page_;
  }
  Page& page(uint64_t index) {
    if (const Page* p = find(index)) return *const_cast<Page*>(p);
    if (budget_ && !budget_->take(kPageBytes)) {  // the run stops at the end of this cycle
      if (!overflow_) overflow_ = std::make_unique<Page>(kPageBytes);
      return *overflow_;
    }
    auto& slot = pages_[index];
    slot = std::make_unique<Page>(kPageBytes);
    last_index_ = index;
    last_page_ = slot.get();
    return *slot;
  }

  uint64_t size_;
  MemoryBudget* budget_;
  std::unique_ptr<Page> overflow_;  // takes writes past the budget
  std::unordered_map<uint64_t, std::unique_ptr<Page>> pages_;
  mutable uint64_t last_index_ = ~uint64_t(0);
  mutable Page* last_page_ = nullptr;
};

}  // namespace tpu::sim
