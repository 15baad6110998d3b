// Reading and writing whole files with the checks every tool needs: a
// directory, a device or an oversized file is refused with one line before
// anything is allocated, and a write that did not reach the disk (full disk,
// unwritable path) is an error, not a silent success.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace tpu::isa {

// Largest input each kind of file may be (docs/robustness.md).
inline constexpr uint64_t kMaxTextFileBytes = uint64_t(1) << 30;     // HLO, IR, assembly, configs
inline constexpr uint64_t kMaxBinaryFileBytes = uint64_t(16) << 30;  // .tpu programs and .npy arrays

// The contents of a regular file or a pipe of at most max_bytes. Throws Error
// naming the path otherwise.
std::string read_file(const std::string& path, uint64_t max_bytes);

// Writes data to path (created or truncated) and checks it reached the file.
void write_file(const std::string& path, std::string_view data);

}  // namespace tpu::isa
