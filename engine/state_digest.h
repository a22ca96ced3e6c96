#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "common/pubkey.h"
#include "engine/account_state.h"

namespace switchyard {

// An order-independent digest of the delegated set: the sum, modulo 2^128, of the 128-bit
// XXH3 hash of each delegated account's (account, validator, owner program, delegation
// slot, lamports, commit frequency). Tombstones and last-event slots do not count, so two
// states that delegate the same accounts the same way have the same digest whatever event
// order produced them. Updated incrementally: remove an account's old term, add its new one.
class StateDigest {
 public:
  StateDigest() = default;
  static StateDigest FromParts(uint64_t high, uint64_t low) {
    StateDigest d;
    d.value_ = (static_cast<unsigned __int128>(high) << 64) | low;
    return d;
  }

  // Adds or removes the term of `account` in `state`; no-op unless `state.delegated`.
  void Add(const Pubkey& account, const AccountState& state);
  void Remove(const Pubkey& account, const AccountState& state);

  uint64_t high() const { return static_cast<uint64_t>(value_ >> 64); }
  uint64_t low() const { return static_cast<uint64_t>(value_); }
  // 32 lowercase hex digits.
  std::string ToHex() const;
  static std::optional<StateDigest> FromHex(std::string_view hex);

  friend bool operator==(const StateDigest&, const StateDigest&) = default;

 private:
  unsigned __int128 value_ = 0;
};

}  // namespace switchyard
