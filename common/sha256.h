#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace switchyard {

// SHA-256 over bytes fed in pieces (OpenSSL), for checking files that are too large to hold
// in memory: a snapshot's files as the admin listener exports them and as a new replica
// downloads them. A value that one thread uses at a time.
class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(Sha256&&) noexcept;
  Sha256& operator=(Sha256&&) noexcept;

  void Update(std::string_view bytes);
  // The digest of every byte fed so far, as 64 lowercase hex digits. Once only.
  absl::StatusOr<std::string> FinishHex();

 private:
  struct Context;
  std::unique_ptr<Context> context_;
  bool ok_ = true;
};

// A file's size and SHA-256 (64 hex digits), read in pieces.
struct FileSha256 {
  uint64_t size = 0;
  std::string sha256;
};
absl::StatusOr<FileSha256> Sha256OfFile(const std::string& path);

}  // namespace switchyard
