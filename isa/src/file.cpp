#include "tpu/isa/file.h"

#include <fmt/format.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include "tpu/isa/error.h"

namespace tpu::isa {

std::string read_file(const std::string& path, uint64_t max_bytes) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) throw Error(fmt::format("{}: cannot open file ({})", path, std::strerror(errno)));
  if (S_ISDIR(st.st_mode)) throw Error(fmt::format("{}: is a directory, not a file", path));
  if (!S_ISREG(st.st_mode) && !S_ISFIFO(st.st_mode))
    throw Error(fmt::format("{}: is not a regular file (a device or socket)", path));
  if (S_ISREG(st.st_mode) && uint64_t(st.st_size) > max_bytes)
    throw Error(fmt::format("{}: {} bytes is larger than the {} bytes allowed for this kind of file", path,
                            uint64_t(st.st_size), max_bytes));
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!f) throw Error(fmt::format("{}: cannot open file ({})", path, std::strerror(errno)));
  std::string data;
  if (S_ISREG(st.st_mode)) data.reserve(size_t(st.st_size));
  char buf[1 << 16];
  while (size_t n = std::fread(buf, 1, sizeof buf, f.get())) {
    if (data.size() + n > max_bytes)
      throw Error(fmt::format("{}: larger than the {} bytes allowed for this kind of file", path, max_bytes));
    data.append(buf, n);
  }
  if (std::ferror(f.get())) throw Error(fmt::format("{}: read error", path));
  return data;
}

void write_file(const std::string& path, std::string_view data) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) throw Error(fmt::format("{}: cannot open for writing ({})", path, std::strerror(errno)));
  const bool wrote = std::fwrite(data.data(), 1, data.size(), f) == data.size();
  const int err = errno;
  const bool closed = std::fclose(f) == 0;
  if (!wrote || !closed) throw Error(fmt::format("{}: write error ({})", path, std::strerror(wrote ? errno : err)));
}

}  // namespace tpu::isa
