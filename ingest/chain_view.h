#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "common/pubkey.h"
#include "common/slot.h"
#include "engine/account_state.h"
#include "engine/event.h"
#include "solana/delegation.h"

namespace switchyard {

// One account as getProgramAccounts returns it, with its data decoded from base64.
struct ChainAccount {
  Pubkey pubkey;
  Pubkey owner;
  uint64_t lamports = 0;
  std::string data;
};

// The delegation program's accounts at one slot.
struct ProgramAccountsSnapshot {
  Slot context_slot = 0;
  std::vector<ChainAccount> accounts;
};

// Parses a JSON-RPC response to getProgramAccounts(program, {"encoding":"base64",
// "withContext":true}). A response with an error, a missing context slot or a malformed
// account is an InvalidArgument error that says which.
absl::StatusOr<ProgramAccountsSnapshot> ParseProgramAccountsResponse(std::string_view body);

// The account a pubsub message carries when it is a programNotification (base64 encoding);
// nullopt for any other message (a subscription's confirmation, another notification).
// InvalidArgument for a notification that is malformed.
absl::StatusOr<std::optional<ChainAccount>> ParseProgramNotification(std::string_view message);

// What reading the program's accounts found, besides the delegations.
struct ChainViewCounters {
  uint64_t records_malformed = 0;  // a record PDA whose data is not a delegation record
};

// The Delegated event a delegation record of `account` stands for.
DelegatedEvent DelegatedEventOf(const Pubkey& account, const DelegationRecord& record,
                                const Signature& signature = Signature());

// The delegations the program's accounts describe: every account owned by the delegation
// program whose delegation-record PDA is among the accounts and holds a valid record. Pure.
// The events carry the record's delegation slot and a zero signature.
std::vector<DelegatedEvent> DelegationsOf(const ProgramAccountsSnapshot& snapshot,
                                          ChainViewCounters* counters);

// The corrective events that make `state` (the delegated accounts the log says) equal to
// `chain` (the delegations on the base layer at `slot`): a Delegated for every chain
// delegation that the state lacks or holds differently, and an Undelegated at `slot` for
// every state delegation the chain no longer has. Sorted by account. Pure.
std::vector<Event> Reconcile(const std::map<Pubkey, AccountState>& state,
                             const std::vector<DelegatedEvent>& chain, Slot slot);

}  // namespace switchyard
