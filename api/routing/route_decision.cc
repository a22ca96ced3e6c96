#include "api/routing/route_decision.h"

#include <algorithm>

#include "absl/container/flat_hash_set.h"
#include "api/jsonrpc/rpc_errors.h"
#include "api/jsonrpc/rpc_merge.h"
#include "api/jsonrpc/rpc_params.h"
#include "fmt/format.h"
#include "solana/delegation.h"
#include "solana/rpc_methods.h"
#include "solana/transaction.h"

namespace switchyard {
namespace {

RouteDecision Error(absl::Status status) {
  RouteDecision decision;
  decision.action = RouteAction::kError;
  decision.error = std::move(status);
  return decision;
}

RouteDecision Forward(std::string target) {
  RouteDecision decision;
  decision.action = RouteAction::kForward;
  decision.merge = MergeKind::kPassThrough;
  decision.target = std::move(target);
  return decision;
}

RouteDecision Local(LocalMethod method) {
  RouteDecision decision;
  decision.action = RouteAction::kLocal;
  decision.local = method;
  return decision;
}

// Whether owner verification applies: always in limbo, else as configured.
bool Verifies(const Snapshot& snapshot, const RoutingTable& table, bool account_list) {
  if (snapshot.limbo_since()) return true;
  return account_list ? table.verify.account_lists : table.verify.single_reads;
}

absl::Status InvalidParams(std::string_view why) {
  return MakeRpcStatus(RpcErrorKind::kInvalidParams, fmt::format("Invalid params: {}", why));
}

// A router error (-32604), as MagicBlock's router answers its own: a key, a signature or a
// transaction that does not decode, an unknown or offline ER node, conflicting delegations.
absl::Status RouterError(std::string_view why) {
  return MakeRpcStatus(RpcErrorKind::kRouterError, why);
}

absl::StatusOr<Pubkey> ParsePubkey(std::string_view text) {
  absl::StatusOr<Pubkey> key = Pubkey::FromBase58(text);
  if (!key.ok()) return RouterError(fmt::format("invalid public key {}", JsonQuote(text)));
  return key;
}

// The hottest decision: the params are not split, only their first element is read, and the
// account is looked up once.
RouteDecision DecideOneAccount(const RpcCall& call, const Snapshot& snapshot,
                               const RoutingTable& table) {
  // A key written plainly is read where it lies; anything else is parsed.
  std::optional<std::string_view> plain = FirstPlainStringParam(call.params);
  absl::StatusOr<std::string> parsed;
  if (!plain) {
    parsed = FirstStringParam(call.params);
    if (!parsed.ok()) return Error(parsed.status());
    plain = *parsed;
  }
  absl::StatusOr<Pubkey> key = ParsePubkey(*plain);
  if (!key.ok()) return Error(key.status());
  const std::optional<AccountState> delegation = snapshot.FindDelegation(*key);
  absl::StatusOr<std::string> target = table.base;
  if (delegation) target = TargetForValidator(*key, delegation->validator, table);
  if (!target.ok()) return Error(target.status());
  RouteDecision decision = Forward(*std::move(target));
  decision.account = *key;
  decision.delegated = delegation.has_value();
  if (Verifies(snapshot, table, /*account_list=*/false)) {
    decision.verification =
        call.method == "getAccountInfo" ? Verification::kOwnerOfAnswer : Verification::kOwnerProbe;
  }
  return decision;
}

// Groups `targets` (one per key) into parts in first-seen order of target.
std::vector<RoutePart> GroupByTarget(const std::vector<std::string>& targets) {
  std::vector<RoutePart> parts;
  for (size_t i = 0; i < targets.size(); ++i) {
    auto it = std::find_if(parts.begin(), parts.end(),
                           [&](const RoutePart& part) { return part.target == targets[i]; });
    if (it == parts.end()) {
      parts.push_back(RoutePart{targets[i], {}});
      it = parts.end() - 1;
      it->indexes.reserve(targets.size() - i);  // at most the rest: no growth one by one
    }
    it->indexes.push_back(i);
  }
  return parts;
}

// The params after element 0, each with a leading comma.
std::string ParamsAfterList(const RpcParams& params) {
  std::string out;
  for (size_t i = 1; i < params.elements.size(); ++i) {
    out.push_back(',');
    out += params.elements[i];
  }
  return out;
}

RouteDecision DecideAccountList(const RpcCall& call, const Snapshot& snapshot,
                                const RoutingTable& table) {
  absl::StatusOr<ListParams> params = ParseListParams(call.params, table.max_accounts);
  if (!params.ok()) return Error(params.status());
  const std::vector<std::string>& keys = params->items;
  std::vector<std::string> targets;
  std::vector<Pubkey> accounts;
  targets.reserve(keys.size());
  accounts.reserve(keys.size());
  for (const std::string& text : keys) {
    absl::StatusOr<Pubkey> key = ParsePubkey(text);
    if (!key.ok()) return Error(key.status());
    absl::StatusOr<std::string> target = TargetForAccount(*key, snapshot, table);
    if (!target.ok()) return Error(target.status());
    targets.push_back(*std::move(target));
    accounts.push_back(*key);
  }
  std::vector<RoutePart> parts = GroupByTarget(targets);
  RouteDecision decision;
  const bool verify = Verifies(snapshot, table, /*account_list=*/true);
  if (parts.size() <= 1) {
    // One target: forwarded whole; parts and keys stay for owner verification.
    decision = Forward(parts.empty() ? table.base : parts[0].target);
    if (verify && !parts.empty()) {
      decision.verification = Verification::kAccountList;
      decision.merge = MergeKind::kAccountsByKey;
    }
  } else {
    decision.action = RouteAction::kSplitAccounts;
    decision.merge = MergeKind::kAccountsByKey;
    if (verify) decision.verification = Verification::kAccountList;
  }
  decision.parts = std::move(parts);
  decision.keys = std::move(params->items);
  decision.accounts = std::move(accounts);
  decision.params_after_list = std::move(params->rest);
  if (decision.params_after_list.find("minContextSlot") != std::string::npos) {
    absl::StatusOr<ListParams> stripped =
        ParseListParams(ParamsWithoutMinContextSlot(call.params), table.max_accounts);
    if (stripped.ok()) decision.params_after_list_er = std::move(stripped->rest);
  }
  return decision;
}

RouteDecision DecideTransaction(const RpcParams& params, const Snapshot& snapshot,
                                const RoutingTable& table, LookupTableFn lookup_tables) {
  absl::StatusOr<std::string> text = params.String(0);
  if (!text.ok()) return Error(text.status());
  TransactionEncoding encoding = TransactionEncoding::kBase58;
  if (std::optional<std::string> name = params.ConfigString(1, "encoding")) {
    if (*name == "base64") {
      encoding = TransactionEncoding::kBase64;
    } else if (*name != "base58") {
      return Error(InvalidParams(fmt::format("unsupported encoding {}", JsonQuote(*name))));
    }
  }
  absl::StatusOr<Transaction> tx = DecodeTransactionText(*text, encoding);
  if (!tx.ok()) {
    return Error(RouterError(
        fmt::format("failed to decode transaction: {}", std::string(tx.status().message()))));
  }
  const Pubkey delegation_program = DelegationProgramId();
  absl::flat_hash_set<size_t> program_indexes;
  bool calls_delegation_program = false;
  for (const CompiledInstruction& ix : tx->instructions) {
    program_indexes.insert(ix.program_id_index);
    if (ix.program_id_index < tx->static_keys.size() &&
        tx->static_keys[ix.program_id_index] == delegation_program) {
      calls_delegation_program = true;
    }
  }
  RouteDecision decision;
  decision.signature = tx->id();
  decision.signatures = tx->signatures;
  if (calls_delegation_program) {
    decision.action = RouteAction::kForward;
    decision.merge = MergeKind::kPassThrough;
    decision.target = table.base;
    return decision;
  }
  std::vector<Pubkey> writable;
  for (size_t i = 0; i < tx->static_keys.size(); ++i) {
    if (tx->IsStaticWritable(i) && !program_indexes.contains(i)) {
      writable.push_back(tx->static_keys[i]);
    }
  }
  if (!tx->lookups.empty()) {
    for (const AddressTableLookup& lookup : tx->lookups) {
      if (lookup_tables(lookup.table) == nullptr) decision.missing_tables.push_back(lookup.table);
    }
    if (!decision.missing_tables.empty()) {
      decision.action = RouteAction::kNeedLookupTables;
      return decision;
    }
    absl::StatusOr<std::vector<AccountMeta>> metas = ResolveAccountKeys(*tx, lookup_tables);
    if (!metas.ok()) {
      return Error(InvalidParams(std::string(metas.status().message())));
    }
    for (size_t i = tx->static_keys.size(); i < metas->size(); ++i) {
      if ((*metas)[i].writable) writable.push_back((*metas)[i].key);
    }
  }
  RouteDecision routed = RouteByWritable(
      writable,
      [&](size_t i) -> std::optional<Pubkey> {
        std::optional<AccountState> state = snapshot.FindDelegation(writable[i]);
        if (!state) return std::nullopt;
        return state->validator;
      },
      table);
  routed.signature = decision.signature;
  routed.signatures = std::move(decision.signatures);
  if (snapshot.limbo_since() && routed.action == RouteAction::kForward && !writable.empty()) {
    routed.writable_in_doubt = std::move(writable);
    routed.verification = Verification::kByRecords;
  }
  return routed;
}

RouteDecision DecideSignatures(const RpcCall& call, const RpcParams& params,
                               const RoutingTable& table, SignatureTargetFn remembered) {
  std::vector<std::string> texts;
  const bool single = call.method == "getTransaction";
  if (single) {
    absl::StatusOr<std::string> text = params.String(0);
    if (!text.ok()) return Error(text.status());
    texts.push_back(*std::move(text));
  } else {
    absl::StatusOr<std::vector<std::string>> list = params.StringList(0, table.max_signatures);
    if (!list.ok()) return Error(list.status());
    texts = *std::move(list);
  }
  if (texts.empty()) return Forward(table.base);
  RouteDecision decision;
  decision.action = RouteAction::kSignatures;
  decision.merge = single ? MergeKind::kFirstTransaction : MergeKind::kStatusesBySignature;
  std::vector<std::string> known_targets;
  std::vector<size_t> known_indexes;
  for (size_t i = 0; i < texts.size(); ++i) {
    absl::StatusOr<Signature> signature = Signature::FromBase58(texts[i]);
    if (!signature.ok()) {
      return Error(RouterError(fmt::format("invalid signature {}", JsonQuote(texts[i]))));
    }
    if (std::optional<std::string> target = remembered(*signature)) {
      known_targets.push_back(*std::move(target));
      known_indexes.push_back(i);
    } else {
      decision.unknown.push_back(i);
    }
  }
  for (RoutePart& part : GroupByTarget(known_targets)) {
    for (size_t& index : part.indexes) index = known_indexes[index];
    decision.parts.push_back(std::move(part));
  }
  // Everything remembered in one place, or nothing to fan out with no ER: plain forward.
  if (decision.unknown.empty() && decision.parts.size() == 1) {
    return Forward(decision.parts[0].target);
  }
  if (decision.parts.empty() && table.er_targets.empty()) return Forward(table.base);
  decision.keys = std::move(texts);
  decision.params_after_list = ParamsAfterList(params);
  return decision;
}

}  // namespace

absl::StatusOr<std::string> TargetForAccount(const Pubkey& account, const Snapshot& snapshot,
                                             const RoutingTable& table) {
  std::optional<AccountState> state = snapshot.FindDelegation(account);
  if (!state) return table.base;
  return TargetForValidator(account, state->validator, table);
}

absl::StatusOr<std::string> TargetForValidator(const Pubkey& account, const Pubkey& validator,
                                               const RoutingTable& table) {
  if (validator.IsZero()) {
    if (table.default_er.empty()) {
      return RouterError(
          fmt::format("account {} is delegated to any ER, and no ER is reachable and active for it",
                      account.ToBase58()));
    }
    return table.default_er;
  }
  auto it = table.er_by_identity.find(validator);
  if (it == table.er_by_identity.end()) {
    if (auto wrong = table.misaddressed_ers.find(validator);
        wrong != table.misaddressed_ers.end()) {
      return RouterError(fmt::format(
          "account {} is delegated to ER node {}, whose endpoint answers as validator {}",
          account.ToBase58(), validator.ToBase58(), wrong->second.ToBase58()));
    }
    if (table.offline_ers.contains(validator)) {
      return RouterError(fmt::format("account {} is delegated to ER node {}, which is offline",
                                     account.ToBase58(), validator.ToBase58()));
    }
    return RouterError(fmt::format("account {} is delegated to unknown ER node {}",
                                   account.ToBase58(), validator.ToBase58()));
  }
  return it->second;
}

RouteDecision RouteByWritable(const std::vector<Pubkey>& writable, DelegateOfFn delegate_of,
                              const RoutingTable& table) {
  std::string er_target;
  std::optional<Pubkey> undelegated_example;
  std::optional<Pubkey> delegated_example;
  for (size_t i = 0; i < writable.size(); ++i) {
    const Pubkey& key = writable[i];
    std::optional<Pubkey> validator = delegate_of(i);
    if (!validator) {
      if (!undelegated_example) undelegated_example = key;
      continue;
    }
    absl::StatusOr<std::string> target = TargetForValidator(key, *validator, table);
    if (!target.ok()) return Error(target.status());
    if (er_target.empty()) {
      er_target = *target;
      delegated_example = key;
    } else if (er_target != *target) {
      return Error(RouterError(
          fmt::format("transaction writes accounts delegated to two ERs ({} on {}, {} on {})",
                      delegated_example->ToBase58(), er_target, key.ToBase58(), *target)));
    }
  }
  if (!er_target.empty() && undelegated_example) {
    return Error(RouterError(
        fmt::format("transaction writes both delegated ({} on {}) and undelegated ({}) accounts",
                    delegated_example->ToBase58(), er_target, undelegated_example->ToBase58())));
  }
  return Forward(er_target.empty() ? table.base : er_target);
}

std::optional<std::string> TargetForMethod(std::string_view method, const RoutingTable& table) {
  const MethodRule* best = nullptr;
  size_t best_length = 0;
  bool best_exact = false;
  for (const MethodRule& rule : table.method_rules) {
    std::string_view pattern = rule.pattern;
    if (!pattern.empty() && pattern.back() == '*') {
      pattern.remove_suffix(1);
      if (method.substr(0, pattern.size()) == pattern && !best_exact &&
          (best == nullptr || pattern.size() > best_length)) {
        best = &rule;
        best_length = pattern.size();
      }
    } else if (pattern == method) {
      best = &rule;
      best_exact = true;
    }
  }
  if (best != nullptr) return best->target;
  if (ClassifyMethod(method) == RoutingClass::kUnknown && !table.forward_unknown_methods) {
    return std::nullopt;
  }
  return table.base;
}

Resend ResendOf(std::string_view method) {
  if (method == "sendTransaction") return Resend::kOtherEndpointOnly;
  if (method == "requestAirdrop") return Resend::kNever;
  return Resend::kSafe;
}

std::vector<UpstreamBatch> PlanUpstreamBatches(const RpcBody& body,
                                               const std::vector<RouteDecision>& decisions,
                                               const std::vector<bool>* settled) {
  std::vector<UpstreamBatch> batches;
  if (!body.batch) return batches;
  for (size_t i = 0; i < body.calls.size(); ++i) {
    if (settled != nullptr && (*settled)[i]) continue;
    const RpcCall& call = body.calls[i];
    const RouteDecision& decision = decisions[i];
    if (decision.action != RouteAction::kForward || !call.id || decision.signature ||
        decision.resend != Resend::kSafe ||
        (decision.verification != Verification::kNone &&
         decision.verification != Verification::kOwnerOfAnswer &&
         decision.verification != Verification::kOwnerProbe)) {
      continue;
    }
    auto it = std::find_if(batches.begin(), batches.end(), [&](const UpstreamBatch& batch) {
      return batch.target == decision.target;
    });
    if (it == batches.end()) {
      batches.push_back(UpstreamBatch{decision.target, {}});
      it = batches.end() - 1;
    }
    it->calls.push_back(i);
  }
  std::erase_if(batches, [](const UpstreamBatch& batch) { return batch.calls.size() < 2; });
  return batches;
}

namespace {

// getBlockhashForAccounts [[pubkeys]]: the latest blockhash of the ER the first delegated
// account is on, else of base.
RouteDecision DecideBlockhashForAccounts(const RpcParams& params, const Snapshot& snapshot,
                                         const RoutingTable& table) {
  absl::StatusOr<std::vector<std::string>> keys = params.StringList(0, table.max_accounts);
  if (!keys.ok()) return Error(keys.status());
  RouteDecision decision;
  decision.action = RouteAction::kLatestBlockhash;
  decision.merge = MergeKind::kResultValue;
  decision.target = table.base;
  for (const std::string& text : *keys) {
    absl::StatusOr<Pubkey> key = ParsePubkey(text);
    if (!key.ok()) return Error(key.status());
    absl::StatusOr<std::string> target = TargetForAccount(*key, snapshot, table);
    if (target.ok() && *target != table.base) {
      decision.target = *std::move(target);
      break;
    }
  }
  return decision;
}

// The methods the router answers itself: getIdentity, getRoutes, getDelegationStatus and (any
// other) getBlockhashForAccounts.
RouteDecision DecideRouterMethod(const RpcCall& call, const Snapshot& snapshot,
                                 const RoutingTable& table) {
  if (call.method == "getIdentity" || call.method == "getClosestValidator") {
    return Local(LocalMethod::kIdentity);
  }
  if (call.method == "getRoutes") return Local(LocalMethod::kRoutes);
  absl::StatusOr<RpcParams> params = ParseRpcParams(call.params);
  if (!params.ok()) return Error(params.status());
  const bool history = call.method == "getDelegationHistory";
  if (call.method != "getDelegationStatus" && !history) {
    return DecideBlockhashForAccounts(*params, snapshot, table);
  }
  absl::StatusOr<std::string> text = params->String(0);
  if (!text.ok()) return Error(text.status());
  absl::StatusOr<Pubkey> key = ParsePubkey(*text);
  if (!key.ok()) return Error(key.status());
  // The config object's members are read where the history is (api/rpc).
  const bool at_slot = params->elements.size() > 1 && JsonMember(params->elements[1], "slot").ok();
  RouteDecision decision = Local(history   ? LocalMethod::kDelegationHistory
                                 : at_slot ? LocalMethod::kDelegationStatusAt
                                           : LocalMethod::kDelegationStatus);
  decision.account = *key;
  return decision;
}

RouteDecision DecideCall(const RpcCall& call, const Snapshot& snapshot, const RoutingTable& table,
                         LookupTableFn lookup_tables, SignatureTargetFn remembered) {
  if (!call.error.ok()) return Error(call.error);
  const RoutingClass routing = ClassifyMethod(call.method);
  if (routing == RoutingClass::kBaseOnly || routing == RoutingClass::kUnknown) {
    std::optional<std::string> target = TargetForMethod(call.method, table);
    if (!target) {
      return Error(MakeRpcStatus(RpcErrorKind::kMethodNotFound,
                                 fmt::format("Method not found: {}", call.method)));
    }
    return Forward(*std::move(target));
  }
  if (routing == RoutingClass::kRouter) return DecideRouterMethod(call, snapshot, table);
  if (routing == RoutingClass::kOneAccount) return DecideOneAccount(call, snapshot, table);
  if (routing == RoutingClass::kAccountList) return DecideAccountList(call, snapshot, table);
  absl::StatusOr<RpcParams> params = ParseRpcParams(call.params);
  if (!params.ok()) return Error(params.status());
  switch (routing) {
    case RoutingClass::kTransaction:
      return DecideTransaction(*params, snapshot, table, lookup_tables);
    case RoutingClass::kSignature:
      return DecideSignatures(call, *params, table, remembered);
    default:
      break;
  }
  return Forward(table.base);
}

}  // namespace

RouteDecision DecideRoute(const RpcCall& call, const Snapshot& snapshot, const RoutingTable& table,
                          LookupTableFn lookup_tables, SignatureTargetFn remembered) {
  RouteDecision decision = DecideCall(call, snapshot, table, lookup_tables, remembered);
  decision.resend = ResendOf(call.method);
  return decision;
}

}  // namespace switchyard
