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

// The Delegated event a delegation record of `account` stands for, learned from `source`.
DelegatedEvent DelegatedEventOf(const Pubkey& account, const DelegationRecord& record,
                                std::optional<Signature> signature, EventSource source);

// One entry of a getSignaturesForAddress answer.
struct AddressSignature {
  Signature signature;
  Slot slot = 0;
  bool failed = false;  // err was set
};

// Parses a JSON-RPC response to getSignaturesForAddress (newest first, as the node lists
// them). A node error is Unavailable; anything malformed is InvalidArgument.
absl::StatusOr<std::vector<AddressSignature>> ParseSignaturesResponse(std::string_view body);

// The transactions among one page of `signatures` (newest first) that may have created the
// delegation record of a delegation made at `delegation_slot`: the successful ones at that
// slot, in the order listed.
std::vector<Signature> DelegateCandidates(const std::vector<AddressSignature>& signatures,
                                          Slot delegation_slot);

// The delegations the program's accounts describe: every account owned by the delegation
// program whose delegation-record PDA is among the accounts and holds a valid record. Pure.
// The events carry the record's delegation slot, no signature and the source kBackfill (the
// caller looks the signatures up and says where the accounts were read).
std::vector<DelegatedEvent> DelegationsOf(const ProgramAccountsSnapshot& snapshot,
                                          ChainViewCounters* counters);

// The corrective events that make `state` (the delegated accounts the log says) equal to
// `chain` (the delegations on the base layer at `slot`): a Delegated for every chain
// delegation that the state lacks or holds differently, and an Undelegated at `slot` (with no
// signature) for every state delegation the chain no longer has. Every event carries
// `source`. Sorted by account. Pure.
std::vector<Event> Reconcile(const std::map<Pubkey, AccountState>& state,
                             const std::vector<DelegatedEvent>& chain, Slot slot,
                             EventSource source = EventSource::kReconciliation);

}  // namespace switchyard
