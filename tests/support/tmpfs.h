#pragma once

#include <cstdint>
#include <string>

namespace switchyard::testing {

// A tmpfs of a fixed size mounted on a directory for one test, to make a disk fill up: Fill()
// writes a filler file until the filesystem has no space left, Free() deletes it. Mounting
// needs root (CAP_SYS_ADMIN); error() says why it failed, so a test can skip. Unmounted (lazily,
// so files still open do not keep it) on destruction.
class TmpfsMount {
 public:
  TmpfsMount(std::string dir, int megabytes);
  ~TmpfsMount();
  TmpfsMount(const TmpfsMount&) = delete;
  TmpfsMount& operator=(const TmpfsMount&) = delete;

  // Empty when mounted, else why not.
  const std::string& error() const { return error_; }
  const std::string& dir() const { return dir_; }
  // Writes the filler until a write fails with ENOSPC; returns the bytes it holds.
  uint64_t Fill();
  void Free();
  // Bytes free for an unprivileged writer, from statvfs.
  uint64_t FreeBytes() const;

 private:
  std::string dir_;
  std::string filler_;
  bool mounted_ = false;
  std::string error_;
};

}  // namespace switchyard::testing
