#include "solana/pda.h"

#include <sodium.h>

#include <memory>

#include "absl/status/status.h"
#include "common/sha256.h"
#include "fmt/format.h"

namespace switchyard {
namespace {

constexpr std::string_view kPdaMarker = "ProgramDerivedAddress";

// The compressed identity point (y = 1, x = 0): adding it changes nothing, so
// crypto_core_ed25519_add(r, key, identity) succeeds exactly when `key` decompresses.
constexpr unsigned char kIdentity[crypto_core_ed25519_BYTES] = {1};

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

// Hashes the seeds once; each bump then finishes a clone.
Sha256 HashSeeds(std::span<const std::string_view> seeds) {
  Sha256 hash;
  for (std::string_view seed : seeds) hash.Update(seed);
  return hash;
}

absl::StatusOr<Pubkey> FinishAddress(const Sha256& seeded, uint8_t bump, const Pubkey& program) {
  Sha256 hash = seeded.Clone();
  hash.Update(std::string_view(reinterpret_cast<const char*>(&bump), 1));
  hash.Update(std::span<const uint8_t>(program.data(), Pubkey::kSize));
  hash.Update(kPdaMarker);
  absl::StatusOr<Sha256::Digest> digest = hash.Finish();
  if (!digest.ok()) return digest.status();
  const Pubkey address = Pubkey::FromBytes(digest->data());
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
  return FinishAddress(HashSeeds(seeds), bump, program);
}

absl::StatusOr<std::pair<Pubkey, uint8_t>> FindProgramAddress(
    std::span<const std::string_view> seeds, const Pubkey& program) {
  if (absl::Status status = CheckSeeds(seeds); !status.ok()) return status;
  const Sha256 seeded = HashSeeds(seeds);
  for (int bump = 255; bump >= 1; --bump) {  // Solana never tries bump 0.
    absl::StatusOr<Pubkey> address = FinishAddress(seeded, static_cast<uint8_t>(bump), program);
    if (address.ok()) return std::make_pair(*address, static_cast<uint8_t>(bump));
    if (!absl::IsNotFound(address.status())) return address.status();
  }
  return absl::NotFoundError("no bump seed gives an address off the ed25519 curve");
}

}  // namespace switchyard
