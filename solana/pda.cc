#include "solana/pda.h"

#include <openssl/evp.h>
#include <sodium.h>

#include <memory>

#include "absl/status/status.h"
#include "fmt/format.h"

namespace switchyard {
namespace {

constexpr std::string_view kPdaMarker = "ProgramDerivedAddress";

// The compressed identity point (y = 1, x = 0): adding it changes nothing, so
// crypto_core_ed25519_add(r, key, identity) succeeds exactly when `key` decompresses.
constexpr unsigned char kIdentity[crypto_core_ed25519_BYTES] = {1};

struct DigestContextDeleter {
  void operator()(EVP_MD_CTX* ctx) const { EVP_MD_CTX_free(ctx); }
};
using DigestContext = std::unique_ptr<EVP_MD_CTX, DigestContextDeleter>;

absl::Status CheckSeeds(std::span<const std::string_view> seeds) {
  if (seeds.size() + 1 > kMaxPdaSeeds) {
    return absl::InvalidArgumentError(
        fmt::format("{} seeds plus the bump is more than {} seeds", seeds.size(), kMaxPdaSeeds));
  }
  for (size_t i = 0; i < seeds.size(); ++i) {
    if (seeds[i].size() > kMaxPdaSeedLength) {
      return absl::InvalidArgumentError(
          fmt::format("seed {} is {} bytes, more than {}", i, seeds[i].size(), kMaxPdaSeedLength));
    }
  }
  return absl::OkStatus();
}

// Hashes the seeds into a context that each bump then copies and finishes.
absl::StatusOr<DigestContext> HashSeeds(std::span<const std::string_view> seeds) {
  DigestContext ctx(EVP_MD_CTX_new());
  if (ctx == nullptr || EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) != 1) {
    return absl::InternalError("OpenSSL: cannot initialise SHA-256");
  }
  for (std::string_view seed : seeds) {
    if (EVP_DigestUpdate(ctx.get(), seed.data(), seed.size()) != 1) {
      return absl::InternalError("OpenSSL: SHA-256 update failed");
    }
  }
  return ctx;
}

absl::StatusOr<Pubkey> FinishAddress(const EVP_MD_CTX* seeded, uint8_t bump,
                                     const Pubkey& program) {
  DigestContext ctx(EVP_MD_CTX_new());
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  if (ctx == nullptr || EVP_MD_CTX_copy_ex(ctx.get(), seeded) != 1 ||
      EVP_DigestUpdate(ctx.get(), &bump, 1) != 1 ||
      EVP_DigestUpdate(ctx.get(), program.data(), Pubkey::kSize) != 1 ||
      EVP_DigestUpdate(ctx.get(), kPdaMarker.data(), kPdaMarker.size()) != 1 ||
      EVP_DigestFinal_ex(ctx.get(), digest, &size) != 1 || size != Pubkey::kSize) {
    return absl::InternalError("OpenSSL: SHA-256 failed");
  }
  const Pubkey address = Pubkey::FromBytes(digest);
  if (IsOnCurve(address)) {
    return absl::NotFoundError(
        fmt::format("bump {} gives a point on the ed25519 curve, not a program address", bump));
  }
  return address;
}

}  // namespace

bool IsOnCurve(const Pubkey& key) {
  unsigned char sum[crypto_core_ed25519_BYTES];
  return crypto_core_ed25519_add(sum, key.data(), kIdentity) == 0;
}

absl::StatusOr<Pubkey> CreateProgramAddress(std::span<const std::string_view> seeds, uint8_t bump,
                                            const Pubkey& program) {
  if (absl::Status status = CheckSeeds(seeds); !status.ok()) return status;
  absl::StatusOr<DigestContext> seeded = HashSeeds(seeds);
  if (!seeded.ok()) return seeded.status();
  return FinishAddress(seeded->get(), bump, program);
}

absl::StatusOr<std::pair<Pubkey, uint8_t>> FindProgramAddress(
    std::span<const std::string_view> seeds, const Pubkey& program) {
  if (absl::Status status = CheckSeeds(seeds); !status.ok()) return status;
  absl::StatusOr<DigestContext> seeded = HashSeeds(seeds);
  if (!seeded.ok()) return seeded.status();
  for (int bump = 255; bump >= 1; --bump) {  // Solana never tries bump 0.
    absl::StatusOr<Pubkey> address =
        FinishAddress(seeded->get(), static_cast<uint8_t>(bump), program);
    if (address.ok()) return std::make_pair(*address, static_cast<uint8_t>(bump));
    if (!absl::IsNotFound(address.status())) return address.status();
  }
  return absl::NotFoundError("no bump seed gives an address off the ed25519 curve");
}

}  // namespace switchyard
