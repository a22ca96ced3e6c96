#include "tests/support/tmpfs.h"

#include <fcntl.h>
#include <sys/mount.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <vector>

namespace switchyard::testing {

TmpfsMount::TmpfsMount(std::string dir, int megabytes)
    : dir_(std::move(dir)), filler_(dir_ + "/filler") {
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  const std::string data = "size=" + std::to_string(megabytes) + "m";
  if (mount("tmpfs", dir_.c_str(), "tmpfs", 0, data.c_str()) != 0) {
    error_ = "mount -t tmpfs -o " + data + " tmpfs " + dir_ + ": " + std::strerror(errno);
    return;
  }
  mounted_ = true;
}

TmpfsMount::~TmpfsMount() {
  if (mounted_) umount2(dir_.c_str(), MNT_DETACH);
}

uint64_t TmpfsMount::Fill() {
  const int fd = open(filler_.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  if (fd < 0) return 0;
  uint64_t written = 0;
  // Large writes first, then a page at a time, so that no page stays free.
  for (size_t chunk : {size_t{1} << 20, size_t{4096}, size_t{512}}) {
    const std::vector<char> bytes(chunk, 'f');
    for (;;) {
      const ssize_t n = write(fd, bytes.data(), bytes.size());
      if (n <= 0) break;
      written += static_cast<uint64_t>(n);
    }
  }
  fsync(fd);
  close(fd);
  return written;
}

void TmpfsMount::Free() { unlink(filler_.c_str()); }

uint64_t TmpfsMount::FreeBytes() const {
  struct statvfs s {};
  if (statvfs(dir_.c_str(), &s) != 0) return 0;
  return static_cast<uint64_t>(s.f_bavail) * s.f_frsize;
}

}  // namespace switchyard::testing
