#include "engine/state_digest.h"

#include <xxhash.h>

#include <cstring>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "common/endian.h"

namespace switchyard {
namespace {

unsigned __int128 Term(const Pubkey& account, const AccountState& s) {
  uint8_t buf[32 * 3 + 8 * 3];
  std::memcpy(buf, account.data(), 32);
  std::memcpy(buf + 32, s.validator.data(), 32);
  std::memcpy(buf + 64, s.owner_program.data(), 32);
  const uint64_t numbers[3] = {s.delegation_slot, s.lamports, s.commit_frequency_ms};
  for (int i = 0; i < 3; ++i) {
    for (int b = 0; b < 8; ++b) buf[96 + 8 * i + b] = static_cast<uint8_t>(numbers[i] >> (8 * b));
  }
  const XXH128_hash_t h = XXH3_128bits(buf, sizeof(buf));
  return (static_cast<unsigned __int128>(h.high64) << 64) | h.low64;
}

}  // namespace

void StateDigest::Add(const Pubkey& account, const AccountState& state) {
  if (state.delegated) value_ += Term(account, state);
}

void StateDigest::Remove(const Pubkey& account, const AccountState& state) {
  if (state.delegated) value_ -= Term(account, state);
}

std::string StateDigest::ToHex() const { return absl::StrFormat("%016x%016x", high(), low()); }

std::optional<StateDigest> StateDigest::FromHex(std::string_view hex) {
  if (hex.size() != 32) return std::nullopt;
  uint64_t parts[2];
  for (int i = 0; i < 2; ++i) {
    if (!absl::SimpleHexAtoi(absl::string_view(hex.data() + 16 * i, 16), &parts[i]))
      return std::nullopt;
  }
  return FromParts(parts[0], parts[1]);
}

}  // namespace switchyard
