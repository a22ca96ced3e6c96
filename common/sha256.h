#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace switchyard {

// SHA-256 over bytes fed in pieces (OpenSSL): the project's one SHA-256, for program-derived
// addresses, the audit digest, and a snapshot's files as the admin listener exports them and a
// new replica downloads them. A value that one thread uses at a time.
class Sha256 {
 public:
  using Digest = std::array<uint8_t, 32>;

  Sha256();
  ~Sha256();
  Sha256(Sha256&&) noexcept;
  Sha256& operator=(Sha256&&) noexcept;

  // A hash with the same bytes fed so far, to be fed on separately (a common prefix hashed
  // once).
  Sha256 Clone() const;
  void Update(std::string_view bytes);
  void Update(std::span<const uint8_t> bytes) {
    Update(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
  }
  // The digest of every byte fed so far. Once only.
  absl::StatusOr<Digest> Finish();
  // The same as 64 lowercase hex digits. Once only.
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
