#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <utility>

#include "absl/status/statusor.h"
#include "common/pubkey.h"

namespace switchyard {

// Solana's limits on program-derived-address seeds (the bump counts as one seed).
inline constexpr size_t kMaxPdaSeeds = 16;
inline constexpr size_t kMaxPdaSeedLength = 32;

// Whether `key` decompresses to a point of the ed25519 curve, with the semantics of the
// Solana runtime (curve25519-dalek's CompressedEdwardsY::decompress): only "is x recoverable
// from y" counts. Small-order points and points outside the prime-order subgroup are on the
// curve. libsodium's crypto_core_ed25519_is_valid_point is NOT this check (it also rejects
// those points, which are 7 in 8 of all curve points, and would derive wrong PDAs); this uses
// libsodium's crypto_core_ed25519_add, whose only input check is that same decompression.
// Thread-safe.
bool IsOnCurve(const Pubkey& key);

// SHA-256(seeds..., bump, program, "ProgramDerivedAddress"), which must be off the curve.
// Fails with InvalidArgument on more than kMaxPdaSeeds - 1 seeds or a seed longer than
// kMaxPdaSeedLength, and with NotFound when the hash lands on the curve.
absl::StatusOr<Pubkey> CreateProgramAddress(std::span<const std::string_view> seeds, uint8_t bump,
                                            const Pubkey& program);

// The first bump from 255 down to 1 (as Solana and web3.js search; never 0) for which
// CreateProgramAddress succeeds, and the address.
// Fails like CreateProgramAddress on bad seeds, and with NotFound if no bump works (which
// happens with probability 2^-256).
absl::StatusOr<std::pair<Pubkey, uint8_t>> FindProgramAddress(
    std::span<const std::string_view> seeds, const Pubkey& program);

}  // namespace switchyard
