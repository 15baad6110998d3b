// An array of zeros that costs nothing until it is touched: a large one is
// a private anonymous mapping, pages the OS zeroes on first touch, so a
// simulated memory (accumulators, weight buffers) of a chip that never uses
// it costs no host time or memory; a small one comes from calloc. T must be
// trivially copyable (all-zero bytes is its zero).
#pragma once

#include <sys/mman.h>

#include <cstdlib>
#include <memory>
#include <new>
#include <type_traits>

namespace tpu::sim {

template <typename T>
class Zeroed {
  static_assert(std::is_trivially_copyable_v<T>);

 public:
  explicit Zeroed(size_t n) : p_(allocate(n), Free{n * sizeof(T)}) {}
  T* data() { return p_.get(); }
  const T* data() const { return p_.get(); }

 private:
  static constexpr size_t kMapped = size_t(128) << 10;  // bytes from which an array is mapped
  static T* allocate(size_t n) {
    void* p = nullptr;
    if (n * sizeof(T) >= kMapped) {
      p = mmap(nullptr, n * sizeof(T), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (p == MAP_FAILED) p = nullptr;
    } else {
      p = std::calloc(n ? n : 1, sizeof(T));
    }
    if (!p) throw std::bad_alloc();
    return static_cast<T*>(p);
  }
  struct Free {
    size_t bytes = 0;
    void operator()(T* p) const {
      if (bytes >= kMapped) munmap(p, bytes);
      else std::free(p);
    }
  };
  std::unique_ptr<T, Free> p_;
};

}  // namespace tpu::sim
