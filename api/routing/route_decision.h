#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "api/jsonrpc/jsonrpc.h"
#include "common/pubkey.h"
#include "engine/snapshot.h"

namespace switchyard {

// A method rule: `pattern` is a method name, or a prefix when it ends in '*'. The longest
// matching pattern wins; an exact name beats any prefix.
struct MethodRule {
  std::string pattern;
  std::string target;
};

// Which owner verification (docs/architecture.md §10) is configured outside limbo; in limbo it
// is always on.
struct OwnerVerification {
  bool single_reads = true;    // getAccountInfo, getBalance, getTokenAccountBalance
  bool account_lists = false;  // getMultipleAccounts
};

// The targets the router knows and how methods map onto them. The configured part is built
// once from the config; the ER part (er_by_identity, er_targets, offline_ers,
// misaddressed_ers, and default_er
// when the config pins none) is filled by the ErDirectory into each ErTable it publishes.
// Immutable once published, so any thread may read it.
struct RoutingTable {
  std::string base = "base";
  // ER validator identity → target name.
  absl::flat_hash_map<Pubkey, std::string> er_by_identity;
  // The ER for accounts delegated with an all-zero authority ("any ER"); empty: none.
  std::string default_er;
  // Every ER target, in config order (asked about unknown signatures).
  std::vector<std::string> er_targets;
  // ERs whose record says Offline: identity → target. Their accounts get an error naming the
  // ER instead of a route.
  absl::flat_hash_map<Pubkey, std::string> offline_ers;
  // ERs whose endpoint answers the probe with another validator's identity: identity → the
  // identity it answered. Their accounts get an error naming both.
  absl::flat_hash_map<Pubkey, Pubkey> misaddressed_ers;
  // Overrides for base-layer and unknown methods (for example "getAsset*" → "indexer").
  std::vector<MethodRule> method_rules;
  // Unknown methods without a rule: false answers -32601, true forwards them to base.
  bool forward_unknown_methods = false;
  size_t max_accounts = 100;    // getMultipleAccounts
  size_t max_signatures = 256;  // getSignatureStatuses
  // RouterContext::Create sets it from RouterOptions::verify_owner and verify_owner_multiple.
  OwnerVerification verify;
};

// What the router does with a call. Together with `verification` and `merge` it is the whole
// plan: the router executes it without looking at the method again.
enum class RouteAction {
  kForward,           // send the call as the client wrote it to `target`
  kSplitAccounts,     // getMultipleAccounts: one request per part, in parallel
  kSignatures,        // known signatures to their parts; unknown ones to base and every ER
  kLatestBlockhash,   // getBlockhashForAccounts: getLatestBlockhash of `target`
  kLocal,             // answered by the router itself (`local` says which)
  kNeedLookupTables,  // fetch `missing_tables` from base, then decide again
  kError,             // answer `error`
};

// The methods the router answers from its configuration or the snapshot (kLocal).
enum class LocalMethod {
  kNone,
  kIdentity,          // getIdentity
  kRoutes,            // getRoutes
  kDelegationStatus,  // getDelegationStatus of `account`
  // From the history, off the workers: getDelegationStatus [pubkey, {"slot": S}] (the
  // delegation as of a past slot) and getDelegationHistory [pubkey, {...}] of `account`.
  kDelegationStatusAt,
  kDelegationHistory,
};

// Which owner verification applies to the answers of a call.
enum class Verification {
  kNone,
  kOwnerOfAnswer,  // getAccountInfo: the answer's owner may send the call elsewhere
  kOwnerProbe,     // getBalance, getTokenAccountBalance: judged by a zero-length probe beside
  kAccountList,    // getMultipleAccounts, whole or split: each element's owner is checked
  kByRecords,      // a transaction in limbo: placed by its delegation records on base first
};

// How the upstream answers become the call's answer.
enum class MergeKind {
  kNone,                 // no upstream answer (kLocal, kError, kNeedLookupTables)
  kPassThrough,          // the one upstream answer, under the call's id
  kAccountsByKey,        // list parts spliced in key order; `context` base's when it had one
  kFirstTransaction,     // getTransaction: the first non-null answer, base first
  kStatusesBySignature,  // each element from the first answer that has it
  kResultValue,          // the `value` of the result (getBlockhashForAccounts)
};

// Whether a call may be sent again after an attempt whose outcome is unknown.
enum class Resend {
  kSafe,               // a read: once more
  kOtherEndpointOnly,  // sendTransaction: only to another endpoint
  kNever,              // requestAirdrop
};

// A subset of a key list that goes to one target; `indexes` into the request's list.
struct RoutePart {
  std::string target;
  std::vector<size_t> indexes;
};

// The plan for one call: what to do, which verification applies, how to merge. A value type.
struct RouteDecision {
  RouteAction action = RouteAction::kError;
  Verification verification = Verification::kNone;
  MergeKind merge = MergeKind::kNone;
  Resend resend = Resend::kSafe;
  LocalMethod local = LocalMethod::kNone;
  std::string target;  // kForward, kLatestBlockhash
  // kSplitAccounts, kSignatures (known signatures); getMultipleAccounts forwarded to one
  // target has one part.
  std::vector<RoutePart> parts;
  std::vector<size_t> unknown;    // kSignatures: indexes nobody remembers
  std::vector<std::string> keys;  // getMultipleAccounts, kSignatures: the request's list
  // getMultipleAccounts: each of `keys` decoded, in the same order.
  std::vector<Pubkey> accounts;
  // getMultipleAccounts, kSignatures: the params after the list as the client wrote them,
  // each with a leading comma (`,{"encoding":"base64"}`), for PartParams.
  std::string params_after_list;
  // The same without minContextSlot, for the parts sent to an ER (an ER's slots run on its
  // own clock); empty when params_after_list holds none.
  std::string params_after_list_er;
  std::vector<Pubkey> missing_tables;
  absl::Status error;
  // Single-account reads and getDelegationStatus: the account, and whether the snapshot
  // calls it delegated.
  std::optional<Pubkey> account;
  bool delegated = false;
  // Transactions: the id to remember with the target, and every signature (the id first).
  std::optional<Signature> signature;
  std::vector<Signature> signatures;
  // Transactions decided in limbo (Verification::kByRecords): the accounts they write, whose
  // state may be stale. The router decides again from their delegation records on base before
  // it forwards.
  std::vector<Pubkey> writable_in_doubt;

  // The params after the list for a part sent to `target`.
  std::string_view ParamsAfterListFor(std::string_view target, std::string_view base) const {
    return target == base || params_after_list_er.empty() ? params_after_list
                                                          : params_after_list_er;
  }
};

// Whether an upstream may be asked `method` again after an attempt whose outcome is unknown:
// everything but sendTransaction and requestAirdrop, which act on the chain.
Resend ResendOf(std::string_view method);

// Calls of one client batch that go to `target` together, as one upstream JSON-RPC batch.
struct UpstreamBatch {
  std::string target;
  std::vector<size_t> calls;  // indexes into the body's calls, in request order
};

// The upstream batches of a client batch (`decisions[i]` is the decision for call i): the calls
// whose decision is a forward, without verification or checked by the owner in its own answer
// (the check runs on the element's answer), of a call with an id that is safe to repeat and is
// not a transaction, grouped by target in first-seen order. A target with only
// one such call gets no batch: that call is forwarded alone. Empty when `body` is not a batch.
// Calls marked in `settled` (answered already: from the cache, or sharing an identical read in
// flight) are left out.
std::vector<UpstreamBatch> PlanUpstreamBatches(const RpcBody& body,
                                               const std::vector<RouteDecision>& decisions,
                                               const std::vector<bool>* settled = nullptr);

// The target for `account`: its ER when delegated (an all-zero authority → the default
// ER), else base. Fails with a -32604 status naming the validator when it has no ER, or an offline
// one.
absl::StatusOr<std::string> TargetForAccount(const Pubkey& account, const Snapshot& snapshot,
                                             const RoutingTable& table);

// The target for an account delegated to `validator`: its ER (an all-zero validator → the
// default ER). Fails with a -32604 status naming the validator when it has no ER, or an offline
// one.
absl::StatusOr<std::string> TargetForValidator(const Pubkey& account, const Pubkey& validator,
                                               const RoutingTable& table);

// The validator each writable account of a transaction is delegated to (nullopt: none).
using DelegateOfFn = absl::FunctionRef<std::optional<Pubkey>(size_t index)>;
// Where a transaction that writes `writable` goes: base when none of them is delegated, the
// one ER that all of them are delegated to, else an error (two ERs, or delegated and
// undelegated accounts together).
RouteDecision RouteByWritable(const std::vector<Pubkey>& writable, DelegateOfFn delegate_of,
                              const RoutingTable& table);

// The target for a method that is not routed by account (base unless a rule says otherwise),
// or nullopt for an unknown method that is not forwarded.
std::optional<std::string> TargetForMethod(std::string_view method, const RoutingTable& table);

// Addresses of a lookup table, or nullptr when not cached.
using LookupTableFn = absl::FunctionRef<const std::vector<Pubkey>*(const Pubkey& table)>;
// Where the router sent a signature, or nullopt.
using SignatureTargetFn = absl::FunctionRef<std::optional<std::string>(const Signature&)>;

// The pure routing decision for one call (docs/architecture.md §9): the complete plan. No I/O;
// thread-safe.
RouteDecision DecideRoute(const RpcCall& call, const Snapshot& snapshot, const RoutingTable& table,
                          LookupTableFn lookup_tables, SignatureTargetFn remembered);

}  // namespace switchyard
