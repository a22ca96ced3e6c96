// The parts of the Router that fan a call out and merge the answers, and the methods the
// router answers itself.
#include "api/jsonrpc/rpc_params.h"
#include "api/rpc/internal/router.h"
#include "fmt/format.h"
#include "solana/base64.h"

namespace switchyard {
namespace {

std::string ErrorAnswer(const RpcCall& call, const absl::Status& status) {
  return RpcErrorResponse(call.id_or_null(), status);
}

// The answer for an upstream's JSON-RPC error, under the call's id.
std::string UpstreamErrorAnswer(const RpcCall& call, std::string_view error_json) {
  return UpstreamErrorResponse(call.id_or_null(), error_json);
}

std::string JoinRaw(const std::vector<std::string>& values) {
  std::string out;
  for (size_t i = 0; i < values.size(); ++i) {
    if (i > 0) out.push_back(',');
    out += values[i];
  }
  return out;
}

// The params of a sub-request for the listed items of a decision's key or signature list.
// `target` is where it goes: an ER's part leaves out the base layer's minContextSlot.
std::string PartRequestParams(const RouteDecision& decision, const std::vector<size_t>& indexes,
                              std::string_view target, std::string_view base) {
  return PartParams(decision.keys, indexes, decision.ParamsAfterListFor(target, base));
}

// getIdentity and getClosestValidator: MagicBlock's router answers the identity and fqdn of
// the ER new work should go to (the SDK's getClosestValidator, whose identity clients delegate
// to). `router.identity` overrides it; without one, the ER `routing.default_er` pins, else the
// closest reachable Active ER by probe latency. An error when there is none.
std::optional<std::string> IdentityResult(const RouterOptions& options, const ErTable& ers) {
  Pubkey identity = options.identity;
  std::string fqdn = options.fqdn;
  if (identity.IsZero()) {
    if (ers.chosen < 0) return std::nullopt;
    const ErRoute& chosen = ers.ers[ers.chosen].route;
    identity = chosen.identity;
    fqdn = chosen.fqdn;
  }
  return fmt::format(R"({{"identity":"{}","fqdn":{}}})", identity.ToBase58(), JsonQuote(fqdn));
}

// getRoutes: every ER that takes new work (Active and reachable), closest first.
std::string RoutesResult(const ErTable& ers) {
  std::vector<const ErEntry*> open;
  for (const ErEntry& er : ers.ers) {
    if (er.status == ErStatus::kActive && er.latency.reachable) open.push_back(&er);
  }
  std::stable_sort(open.begin(), open.end(), [](const ErEntry* a, const ErEntry* b) {
    if (a->latency.measured != b->latency.measured) return a->latency.measured;
    return a->latency.ewma_ms < b->latency.ewma_ms;
  });
  std::vector<std::string> routes;
  for (const ErEntry* er : open) {
    routes.push_back(fmt::format(
        R"({{"identity":"{}","fqdn":{},"baseFee":{},"blockTimeMs":{},"countryCode":{}}})",
        er->route.identity.ToBase58(), JsonQuote(er->route.fqdn), er->route.base_fee,
        er->route.block_time_ms, JsonQuote(er->route.country_code)));
  }
  return fmt::format("[{}]", JoinRaw(routes));
}

}  // namespace

Task<Router::CallAnswer> Router::SplitAccounts(std::shared_ptr<Exchange> exchange, size_t index) {
  const RpcCall& call = exchange->body.calls[index];
  const RouteDecision& decision = exchange->decisions[index];
  Requests requests;
  requests.reserve(decision.parts.size());
  for (const RoutePart& part : decision.parts) {
    requests.push_back(
        SubCall{part.target, call.method,
                PartRequestParams(decision, part.indexes, part.target, options_.routing.base)});
  }
  std::vector<absl::StatusOr<ListAnswer>> answers =
      co_await GatherAccountParts(exchange, index, std::move(requests));
  std::variant<AccountList, CallAnswer> merged = MergeParts(*exchange, index, std::move(answers));
  if (CallAnswer* failed = std::get_if<CallAnswer>(&merged)) co_return std::move(*failed);
  AccountList& list = std::get<AccountList>(merged);
  const CallOutcome ok{RpcCallMetrics::kSplitTarget, RpcOutcome::kOk};
  if (decision.verification != Verification::kAccountList)
    co_return CallAnswer{list.Render(call), ok};
  std::vector<std::string> key_targets(decision.keys.size());
  for (const RoutePart& part : decision.parts) {
    for (size_t i : part.indexes) key_targets[i] = part.target;
  }
  CallAnswer original{std::string(), ok};  // none: the merged list is the answer
  co_return co_await VerifyAccountList(exchange, index, std::move(key_targets), std::move(list),
                                       std::move(original));
}

std::variant<Router::AccountList, Router::CallAnswer> Router::MergeParts(
    const Exchange& exchange, size_t index, std::vector<absl::StatusOr<ListAnswer>> answers) {
  const RpcCall& call = exchange.body.calls[index];
  const RouteDecision& decision = exchange.decisions[index];
  const std::vector<RoutePart>& parts = decision.parts;
  AccountList merged;
  merged.values.assign(decision.keys.size(), "null");
  merged.sources.reserve(parts.size());
  for (size_t p = 0; p < parts.size(); ++p) {
    if (!answers[p].ok()) {
      return CallAnswer{ErrorAnswer(call, answers[p].status()),
                        CallOutcome{RpcCallMetrics::kSplitTarget, RpcOutcome::kUpstreamFailure}};
    }
    const ListAnswer& list = *answers[p];
    if (list.is_error()) {
      return CallAnswer{UpstreamErrorAnswer(call, list.error()),
                        CallOutcome{RpcCallMetrics::kSplitTarget, RpcOutcome::kRpcError}};
    }
    if (!list.is_list() || list.values().size() != parts[p].indexes.size()) {
      return CallAnswer{
          ErrorAnswer(call, MakeRpcStatus(RpcErrorKind::kInternal,
                                          fmt::format("upstream {} answered a list of the wrong "
                                                      "shape",
                                                      parts[p].target))),
          CallOutcome{RpcCallMetrics::kSplitTarget, RpcOutcome::kUpstreamFailure}};
    }
    // context.slot is the base layer's when base has a part (ER slots differ).
    const bool on_base = parts[p].target == options_.routing.base;
    if (merged.context.empty() || on_base) {
      merged.context = list.context();
      merged.context_from_base = on_base;
    }
    for (size_t k = 0; k < parts[p].indexes.size(); ++k) {
      merged.values[parts[p].indexes[k]] = list.values()[k];
    }
    // The views stay valid: a ListAnswer owns its text, and moving it does not move it.
    merged.sources.push_back(*std::move(answers[p]));
  }
  return merged;
}

Task<Router::CallAnswer> Router::Signatures(std::shared_ptr<Exchange> exchange, size_t index) {
  const RpcCall& call = exchange->body.calls[index];
  const RouteDecision& decision = exchange->decisions[index];
  std::vector<std::string> everyone = {options_.routing.base};
  for (const std::string& er : exchange->ers->routing.er_targets) everyone.push_back(er);
  const bool single = decision.merge == MergeKind::kFirstTransaction;

  Requests requests;
  for (const RoutePart& part : decision.parts) {
    requests.push_back(
        SubCall{part.target, call.method,
                PartRequestParams(decision, part.indexes, part.target, options_.routing.base)});
  }
  const size_t known_parts = requests.size();
  if (!decision.unknown.empty()) {
    const std::string params =
        single ? call.params
               : PartRequestParams(decision, decision.unknown, options_.routing.base,
                                   options_.routing.base);
    for (const std::string& target : everyone) {
      requests.push_back(SubCall{target, call.method, params});
    }
  }
  std::vector<std::string> targets;
  for (const SubCall& request : requests) targets.push_back(request.target);
  // Signatures nobody remembers are asked of everyone; else the known ones are split.
  const int label =
      decision.unknown.empty() ? RpcCallMetrics::kSplitTarget : RpcCallMetrics::kFanoutTarget;
  if (single) {
    std::vector<absl::StatusOr<UpstreamAnswer>> answers =
        co_await Gather(std::move(requests), RetryPolicy::kSafe);
    co_return FirstTransaction(call, answers, label);
  }
  std::vector<absl::StatusOr<ListAnswer>> answers = co_await GatherLists(std::move(requests));
  co_return MergedStatuses(*exchange, index, known_parts, targets, label, answers);
}

Router::CallAnswer Router::FirstTransaction(
    const RpcCall& call, const std::vector<absl::StatusOr<UpstreamAnswer>>& answers, int label) {
  // First non-null transaction in the order base, ERs; else base's answer.
  const absl::StatusOr<UpstreamAnswer>* fallback = nullptr;
  for (const auto& answer : answers) {
    if (!answer.ok()) continue;
    if (!fallback) fallback = &answer;
    if (!answer->is_error() && !IsJsonNull(answer->result)) {
      return {RpcResultResponse(call.id_or_null(), answer->result),
              CallOutcome{label, RpcOutcome::kOk}};
    }
  }
  if (fallback == nullptr) {
    return {ErrorAnswer(call, answers[0].status()),
            CallOutcome{label, RpcOutcome::kUpstreamFailure}};
  }
  if ((*fallback)->is_error()) {
    return {UpstreamErrorAnswer(call, (*fallback)->error),
            CallOutcome{label, RpcOutcome::kRpcError}};
  }
  return {RpcResultResponse(call.id_or_null(), (*fallback)->result),
          CallOutcome{label, RpcOutcome::kOk}};
}

Router::CallAnswer Router::MergedStatuses(
    const Exchange& exchange, size_t index, size_t known_parts,
    const std::vector<std::string>& targets, int label,
    const std::vector<absl::StatusOr<ListAnswer>>& answers) const {
  const RpcCall& call = exchange.body.calls[index];
  const RouteDecision& decision = exchange.decisions[index];
  std::vector<std::string_view> values(decision.keys.size(), "null");
  std::string_view context;
  bool any = false;
  for (size_t a = 0; a < answers.size(); ++a) {
    if (!answers[a].ok() || answers[a]->is_error()) continue;
    const ListAnswer& list = *answers[a];
    const std::vector<size_t>& indexes =
        a < known_parts ? decision.parts[a].indexes : decision.unknown;
    if (!list.is_list() || list.values().size() != indexes.size()) continue;
    any = true;
    if (context.empty() || targets[a] == options_.routing.base) context = list.context();
    for (size_t k = 0; k < indexes.size(); ++k) {
      std::string_view& slot = values[indexes[k]];
      if (IsJsonNull(slot)) slot = list.values()[k];
    }
  }
  if (!any) {
    for (const auto& answer : answers) {
      if (answer.ok() && answer->is_error()) {
        return {UpstreamErrorAnswer(call, answer->error()),
                CallOutcome{label, RpcOutcome::kRpcError}};
      }
    }
    return {ErrorAnswer(call, answers[0].ok() ? MakeRpcStatus(RpcErrorKind::kInternal,
                                                              "upstream answered a result "
                                                              "without context or value")
                                              : answers[0].status()),
            CallOutcome{label, RpcOutcome::kUpstreamFailure}};
  }
  // `values` and `context` view `answers`, alive until the answer is written.
  return {ContextListResponse(call.id_or_null(), context, values),
          CallOutcome{label, RpcOutcome::kOk}};
}

Task<void> Router::FetchLookupTablesThenExecute(std::shared_ptr<Exchange> exchange, size_t index) {
  const std::vector<Pubkey> tables = exchange->decisions[index].missing_tables;
  Requests requests;
  for (const Pubkey& table : tables) {
    metrics_->lookup_table_fetches.Increment();
    requests.push_back(SubCall{options_.routing.base, "getAccountInfo",
                               fmt::format(R"(["{}",{{"encoding":"base64"}}])", table.ToBase58())});
  }
  std::vector<absl::StatusOr<UpstreamAnswer>> answers =
      co_await Gather(std::move(requests), RetryPolicy::kSafe);
  for (size_t i = 0; i < answers.size(); ++i) {
    if (!answers[i].ok() || answers[i]->is_error()) continue;
    absl::StatusOr<std::string> value = JsonMember(answers[i]->result, "value");
    if (!value.ok() || IsJsonNull(*value)) continue;
    absl::StatusOr<std::string> data = JsonMember(*value, "data");
    if (!data.ok()) continue;
    absl::StatusOr<std::string> text = FirstString(*data);
    if (!text.ok()) continue;
    absl::StatusOr<std::string> bytes = Base64Decode(*text);
    if (!bytes.ok()) continue;
    absl::StatusOr<std::vector<Pubkey>> addresses = DecodeLookupTableAccount(
        std::span(reinterpret_cast<const uint8_t*>(bytes->data()), bytes->size()));
    if (!addresses.ok()) continue;
    context_->lookup_tables().Insert(tables[i], *std::move(addresses));
  }
  Decide(*exchange, index);
  Execute(exchange, index, 1);
}

Router::CallAnswer Router::AnswerLocal(const Exchange& exchange, size_t index) const {
  const RpcCall& call = exchange.body.calls[index];
  switch (exchange.decisions[index].local) {
    case LocalMethod::kIdentity: {
      std::optional<std::string> identity = IdentityResult(options_, *exchange.ers);
      if (!identity) {
        return {RpcErrorResponse(call.id_or_null(),
                                 MakeRpcStatus(RpcErrorKind::kRouterError,
                                               "no ER is reachable and active for new work")),
                AtRouter(RpcOutcome::kRouterError)};
      }
      return {RpcResultResponse(call.id_or_null(), *identity), AtRouter(RpcOutcome::kOk)};
    }
    case LocalMethod::kRoutes:
      return {RpcResultResponse(call.id_or_null(), RoutesResult(*exchange.ers)),
              AtRouter(RpcOutcome::kOk)};
    case LocalMethod::kDelegationStatus:
    case LocalMethod::kDelegationStatusAt:  // answered by AnswerFromHistory
    case LocalMethod::kDelegationHistory:
    case LocalMethod::kNone:
      break;
  }
  return AnswerDelegationStatus(exchange, index);
}

Router::CallAnswer Router::AnswerDelegationStatus(const Exchange& exchange, size_t index) const {
  const RpcCall& call = exchange.body.calls[index];
  const Pubkey& key = *exchange.decisions[index].account;
  const Snapshot& snapshot = *exchange.snapshot;
  std::optional<AccountState> state = snapshot.FindDelegation(key);
  if (!state) {
    return {RpcResultResponse(call.id_or_null(), R"({"isDelegated":false})"),
            AtRouter(RpcOutcome::kOk)};
  }
  std::string fqdn;
  if (absl::StatusOr<std::string> target = TargetForAccount(key, snapshot, exchange.ers->routing);
      target.ok()) {
    if (const ErEntry* er = exchange.ers->FindTarget(*target)) fqdn = er->route.fqdn;
  }
  return {RpcResultResponse(
              call.id_or_null(),
              fmt::format(
                  R"({{"isDelegated":true,{}"delegationRecord":{{"authority":"{}","owner":"{}",)"
                  R"("delegationSlot":{},"lamports":{}}}}})",
                  fqdn.empty() ? "" : fmt::format("\"fqdn\":{},", JsonQuote(fqdn)),
                  state->validator.ToBase58(), state->owner_program.ToBase58(),
                  state->delegation_slot, state->lamports)),
          AtRouter(RpcOutcome::kOk)};
}

Task<Router::CallAnswer> Router::ForwardLatestBlockhash(std::shared_ptr<Exchange> exchange,
                                                        size_t index) {
  const RpcCall& call = exchange->body.calls[index];
  const std::string target = exchange->decisions[index].target;
  const int target_id = calls_->TargetId(target);
  Requests requests;
  requests.push_back(SubCall{target, "getLatestBlockhash", "[]"});
  std::vector<absl::StatusOr<UpstreamAnswer>> answers =
      co_await Gather(std::move(requests), RetryPolicy::kSafe);
  const CallOutcome failed{target_id, RpcOutcome::kUpstreamFailure};
  if (!answers[0].ok()) co_return CallAnswer{ErrorAnswer(call, answers[0].status()), failed};
  if (answers[0]->is_error()) {
    co_return CallAnswer{UpstreamErrorAnswer(call, answers[0]->error),
                         CallOutcome{target_id, RpcOutcome::kRpcError}};
  }
  absl::StatusOr<std::string> value = JsonMember(answers[0]->result, "value");
  if (!value.ok()) {
    co_return CallAnswer{
        ErrorAnswer(call, MakeRpcStatus(RpcErrorKind::kInternal, "upstream answered no blockhash")),
        failed};
  }
  co_return CallAnswer{RpcResultResponse(call.id_or_null(), *value),
                       CallOutcome{target_id, RpcOutcome::kOk}};
}

}  // namespace switchyard
