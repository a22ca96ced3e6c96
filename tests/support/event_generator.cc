#include "tests/support/event_generator.h"

namespace switchyard::testing {
namespace {

Pubkey KeyFrom(std::mt19937_64& rng) {
  std::array<uint8_t, 32> bytes;
  for (size_t i = 0; i < bytes.size(); i += 8) {
    const uint64_t v = rng();
    for (size_t b = 0; b < 8; ++b) bytes[i + b] = static_cast<uint8_t>(v >> (8 * b));
  }
  return Pubkey(bytes);
}

Signature SignatureFrom(std::mt19937_64& rng) {
  std::array<uint8_t, 64> bytes;
  for (size_t i = 0; i < bytes.size(); i += 8) {
    const uint64_t v = rng();
    for (size_t b = 0; b < 8; ++b) bytes[i + b] = static_cast<uint8_t>(v >> (8 * b));
  }
  return Signature(bytes);
}

}  // namespace

Pubkey TestKey(uint8_t fill) {
  std::array<uint8_t, 32> bytes;
  bytes.fill(fill);
  return Pubkey(bytes);
}

DelegatedEvent TestDelegation(uint8_t account, Slot slot, uint8_t validator) {
  DelegatedEvent d;
  d.account = TestKey(account);
  d.validator = TestKey(validator);
  d.owner_program = TestKey(0xAA);
  d.slot = slot;
  d.lamports = 1000 + account;
  d.commit_frequency_ms = 30000;
  return d;
}

std::vector<Pubkey> GeneratedAccounts(const GeneratorOptions& options) {
  const uint64_t seed = options.account_seed != 0 ? options.account_seed : options.seed;
  std::mt19937_64 rng(seed * 7919 + 1);
  std::vector<Pubkey> accounts;
  accounts.reserve(options.accounts);
  for (size_t i = 0; i < options.accounts; ++i) accounts.push_back(KeyFrom(rng));
  return accounts;
}

std::vector<Event> GenerateEvents(const GeneratorOptions& options) {
  const std::vector<Pubkey> accounts = GeneratedAccounts(options);
  std::mt19937_64 rng(options.seed);
  std::vector<Pubkey> validators;
  for (size_t i = 0; i < options.validators; ++i) validators.push_back(KeyFrom(rng));
  validators.push_back(Pubkey());  // "any ER"
  const Pubkey owner = KeyFrom(rng);
  std::vector<bool> delegated(accounts.size(), false);

  std::vector<Event> events;
  events.reserve(options.slots * (options.events_per_slot + 1));
  std::uniform_real_distribution<double> unit(0, 1);
  for (size_t s = 0; s < options.slots; ++s) {
    const Slot slot = options.first_slot + s;
    for (size_t e = 0; e < options.events_per_slot; ++e) {
      const size_t i = rng() % accounts.size();
      Slot event_slot = slot;
      if (unit(rng) < options.late_fraction && slot > options.first_slot + 3) {
        event_slot = slot - 1 - rng() % 3;
      }
      if (!delegated[i] || rng() % 4 == 0) {
        DelegatedEvent d;
        d.account = accounts[i];
        d.validator = validators[rng() % validators.size()];
        d.owner_program = owner;
        d.slot = event_slot;
        d.lamports = 1'000'000 + rng() % 1'000'000;
        d.commit_frequency_ms = 30'000;
        d.signature = SignatureFrom(rng);
        events.emplace_back(d);
        delegated[i] = true;
      } else {
        UndelegatedEvent u;
        u.account = accounts[i];
        u.slot = event_slot;
        u.signature = SignatureFrom(rng);
        events.emplace_back(u);
        delegated[i] = false;
      }
    }
    if (unit(rng) < options.gap_probability) {
      events.emplace_back(StreamGapEvent{slot});
      events.emplace_back(ResyncedEvent{slot});
    }
    events.emplace_back(SlotSealedEvent{slot});
  }
  return events;
}

void ReferenceFold::Apply(const Event& event) {
  if (const auto* seal = std::get_if<SlotSealedEvent>(&event)) {
    sealed_digests[seal->slot] = digest;
    return;
  }
  const Pubkey* account = AccountOf(event);
  if (account == nullptr) return;
  ++account_events;
  auto it = accounts.find(*account);
  const AccountState* current = it == accounts.end() ? nullptr : &it->second;
  const ApplyResult result = ApplyAccountEvent(current, event);
  if (result.outcome == ApplyOutcome::kIgnoredStale) {
    ++ignored_stale;
    return;
  }
  if (current != nullptr) digest.Remove(*account, *current);
  digest.Add(*account, result.next);
  accounts[*account] = result.next;
}

std::map<Pubkey, AccountState> ReferenceFold::Delegated() const {
  std::map<Pubkey, AccountState> out;
  for (const auto& [k, v] : accounts) {
    if (v.delegated) out.emplace(k, v);
  }
  return out;
}

}  // namespace switchyard::testing
