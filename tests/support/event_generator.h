#pragma once

#include <cstdint>
#include <map>
#include <random>
#include <vector>

#include "engine/account_state.h"
#include "engine/event.h"
#include "engine/state_digest.h"

namespace switchyard::testing {

struct GeneratorOptions {
  uint64_t seed = 1;
  // Picks the account set; 0 means `seed`. Streams with different seeds and the same
  // account seed continue one another (give them consecutive slot ranges).
  uint64_t account_seed = 0;
  size_t accounts = 100;
  size_t validators = 4;
  Slot first_slot = 1;
  size_t slots = 50;
  size_t events_per_slot = 10;
  // Fraction of account events whose slot is a few slots in the past (late or stale).
  double late_fraction = 0.05;
  // Probability per slot of a StreamGap ... Resynced pair.
  double gap_probability = 0.0;
};

// A key whose 32 bytes are all `fill`.
Pubkey TestKey(uint8_t fill);
// A delegation of TestKey(account) at `slot` to TestKey(validator), owner TestKey(0xAA).
DelegatedEvent TestDelegation(uint8_t account, Slot slot, uint8_t validator = 0xEE);

// A deterministic stream of delegation events for tests and benchmarks: per slot a number
// of Delegated/Undelegated events over a fixed account set, then SlotSealed(slot).
std::vector<Event> GenerateEvents(const GeneratorOptions& options);

// The account set of the generator, for lookups.
std::vector<Pubkey> GeneratedAccounts(const GeneratorOptions& options);

// A straightforward in-memory fold of a single-partition event stream, independent of
// engine/Fold: applies every account event in order with ApplyAccountEvent and records the
// digest at each SlotSealed. The reference the engine is compared with.
struct ReferenceFold {
  std::map<Pubkey, AccountState> accounts;
  StateDigest digest;
  std::map<Slot, StateDigest> sealed_digests;
  uint64_t account_events = 0;
  uint64_t ignored_stale = 0;

  void Apply(const Event& event);
  // The delegated subset.
  std::map<Pubkey, AccountState> Delegated() const;
};

}  // namespace switchyard::testing
