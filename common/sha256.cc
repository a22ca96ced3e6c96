#include "common/sha256.h"

#include <openssl/evp.h>

#include <fstream>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace switchyard {

struct Sha256::Context {
  struct Free {
    void operator()(EVP_MD_CTX* ctx) const { EVP_MD_CTX_free(ctx); }
  };
  std::unique_ptr<EVP_MD_CTX, Free> ctx{EVP_MD_CTX_new()};
};

Sha256::Sha256() : context_(std::make_unique<Context>()) {
  ok_ = context_->ctx != nullptr &&
        EVP_DigestInit_ex(context_->ctx.get(), EVP_sha256(), nullptr) == 1;
}
Sha256::~Sha256() = default;
Sha256::Sha256(Sha256&&) noexcept = default;
Sha256& Sha256::operator=(Sha256&&) noexcept = default;

Sha256 Sha256::Clone() const {
  Sha256 copy;
  copy.ok_ =
      ok_ && copy.ok_ && EVP_MD_CTX_copy_ex(copy.context_->ctx.get(), context_->ctx.get()) == 1;
  return copy;
}

void Sha256::Update(std::string_view bytes) {
  ok_ = ok_ && EVP_DigestUpdate(context_->ctx.get(), bytes.data(), bytes.size()) == 1;
}

absl::StatusOr<Sha256::Digest> Sha256::Finish() {
  Digest digest;
  unsigned int size = 0;
  const bool ok =
      ok_ && EVP_DigestFinal_ex(context_->ctx.get(), digest.data(), &size) == 1 && size == 32;
  ok_ = false;
  if (!ok) return absl::InternalError("SHA-256 failed in OpenSSL");
  return digest;
}

absl::StatusOr<std::string> Sha256::FinishHex() {
  absl::StatusOr<Digest> digest = Finish();
  if (!digest.ok()) return digest.status();
  return absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(digest->data()), digest->size()));
}

absl::StatusOr<FileSha256> Sha256OfFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open ", path));
  Sha256 hash;
  FileSha256 out;
  std::vector<char> buffer(1 << 20);
  while (in) {
    in.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
    const std::streamsize n = in.gcount();
    if (n <= 0) break;
    hash.Update(std::string_view(buffer.data(), static_cast<size_t>(n)));
    out.size += static_cast<uint64_t>(n);
  }
  if (in.bad()) return absl::UnavailableError(absl::StrCat("cannot read ", path));
  absl::StatusOr<std::string> hex = hash.FinishHex();
  if (!hex.ok()) return hex.status();
  out.sha256 = *std::move(hex);
  return out;
}

}  // namespace switchyard
