// Owner verification (docs/architecture.md §10): a base answer showing the delegation program
// as owner is re-asked of the account's ER; an ER that does not have an account the state calls
// delegated is re-asked of base.
#include <algorithm>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "api/jsonrpc/rpc_params.h"
#include "api/rpc/internal/router.h"
#include "fmt/format.h"
#include "solana/base64.h"
#include "solana/delegation.h"

namespace switchyard {
namespace {

// The `value` of the result of an upstream answer, or nullopt when it has none.
std::optional<std::string> ResultValue(const absl::StatusOr<UpstreamAnswer>& answer) {
  if (!answer.ok() || answer->is_error()) return std::nullopt;
  absl::StatusOr<std::string> value = JsonMember(answer->result, "value");
  if (!value.ok()) return std::nullopt;
  return *std::move(value);
}

// Whether an answer (or a probe's) may call for a re-route, by its text alone: from base, one
// that mentions the delegation program; from the ER, one with a null. Any other needs no
// parsing: RerouteByOwner would keep it as it is.
bool MayCallForReroute(bool delegated, std::string_view text) {
  return text.find(delegated ? "null" : kDelegationProgramId) != std::string_view::npos;
}

bool OwnedByDelegationProgram(std::string_view value) {
  // Most values do not mention the program at all; those need no parsing.
  if (value.find(kDelegationProgramId) == std::string_view::npos || IsJsonNull(value)) {
    return false;
  }
  absl::StatusOr<std::string> owner = JsonMember(value, "owner");
  return owner.ok() && *owner == fmt::format("\"{}\"", kDelegationProgramId);
}

// The delegation record in an account value with base64 data; nullopt when it is none.
std::optional<DelegationRecord> RecordOf(std::string_view value) {
  if (IsJsonNull(value)) return std::nullopt;
  absl::StatusOr<std::string> data = JsonMember(value, "data");
  absl::StatusOr<std::string> text = data.ok() ? FirstString(*data) : data.status();
  absl::StatusOr<std::string> bytes = text.ok() ? Base64Decode(*text) : text.status();
  if (!bytes.ok()) return std::nullopt;
  absl::StatusOr<DelegationRecord> record = DecodeDelegationRecord(
      std::span(reinterpret_cast<const uint8_t*>(bytes->data()), bytes->size()));
  if (!record.ok()) return std::nullopt;
  return *record;
}

VerifiedRead ReadOf(std::string_view method) {
  if (method == "getBalance") return VerifiedRead::kGetBalance;
  if (method == "getTokenAccountBalance") return VerifiedRead::kGetTokenAccountBalance;
  if (method == "getMultipleAccounts") return VerifiedRead::kGetMultipleAccounts;
  return VerifiedRead::kGetAccountInfo;
}

}  // namespace

std::string OwnerProbeParams(const RpcCall& call, const Pubkey& account) {
  std::string out = "[";
  // The key as the call wrote it, when plainly (the text the decision decoded), else encoded.
  if (std::optional<std::string_view> key = FirstPlainStringParam(call.params)) {
    AppendJsonQuoted(out, *key);
  } else {
    AppendJsonQuoted(out, account.ToBase58());
  }
  out += R"(,{"encoding":"base64","dataSlice":{"offset":0,"length":0})";
  if (call.params.find("commitment") != std::string::npos) {
    if (absl::StatusOr<RpcParams> params = ParseRpcParams(call.params); params.ok()) {
      if (std::optional<std::string> level = params->ConfigString(1, "commitment")) {
        out += R"(,"commitment":)";
        AppendJsonQuoted(out, *level);
      }
    }
  }
  out += "}]";
  return out;
}

Task<Router::Records> Router::ReadRecords(std::vector<Pubkey> accounts) {
  std::vector<std::string> pdas;
  std::vector<size_t> all;
  for (const Pubkey& account : accounts) {
    all.push_back(pdas.size());
    pdas.push_back(DelegationRecordPda(account).ToBase58());
  }
  Requests requests;
  requests.push_back(SubCall{options_.routing.base, "getMultipleAccounts",
                             PartParams(pdas, all, R"(,{"encoding":"base64"})")});
  std::vector<absl::StatusOr<ListAnswer>> answers = co_await GatherLists(std::move(requests));
  const size_t count = accounts.size();
  if (!answers[0].ok()) co_return answers[0].status();
  if (answers[0]->is_error()) {
    co_return absl::UnavailableError("base answered the delegation records' read with an error");
  }
  if (!answers[0]->is_list() || answers[0]->values().size() != count) {
    co_return absl::DataLossError(
        "base answered the delegation records' read with a list of the wrong shape");
  }
  std::vector<std::optional<DelegationRecord>> records(count);
  for (size_t i = 0; i < count; ++i) records[i] = RecordOf(answers[0]->values()[i]);
  co_return records;
}

Task<std::vector<std::optional<std::string>>> Router::FindRecordTargets(
    std::vector<Pubkey> accounts) {
  Records records = co_await ReadRecords(accounts);
  std::vector<std::optional<std::string>> targets(accounts.size());
  if (!records.ok()) co_return targets;
  const std::shared_ptr<const ErTable> ers = context_->ers()->Current();
  for (size_t i = 0; i < accounts.size(); ++i) {
    if (!(*records)[i]) continue;
    // A validator without a configured ER leaves the account where it was asked.
    absl::StatusOr<std::string> target =
        TargetForValidator(accounts[i], (*records)[i]->authority, ers->routing);
    if (target.ok()) targets[i] = *std::move(target);
  }
  co_return targets;
}

Task<Router::CallAnswer> Router::ForwardTransactionByRecords(std::shared_ptr<Exchange> exchange,
                                                             size_t index) {
  metrics_->limbo_transaction_checks.Increment();
  const RpcCall& call = exchange->body.calls[index];
  const RouteDecision& decision = exchange->decisions[index];
  const std::vector<Pubkey>& writable = decision.writable_in_doubt;
  Records records = co_await ReadRecords(writable);
  if (!records.ok()) {
    // Base could not say: the transaction cannot be placed safely.
    co_return CallAnswer{
        RpcErrorResponse(call.id_or_null(),
                         MakeRpcStatus(RpcErrorKind::kInternal,
                                       fmt::format("the delegation state is being repaired and "
                                                   "the delegation records could not be read "
                                                   "from base: {}",
                                                   std::string(records.status().message())))),
        AtRouter(RpcOutcome::kUpstreamFailure)};
  }
  RouteDecision routed = RouteByWritable(
      writable,
      [&](size_t i) -> std::optional<Pubkey> {
        if (!(*records)[i]) return std::nullopt;
        return (*records)[i]->authority;
      },
      context_->ers()->Current()->routing);
  if (routed.action == RouteAction::kError) {
    co_return CallAnswer{RpcErrorResponse(call.id_or_null(), routed.error),
                         AtRouter(RpcOutcome::kRouterError)};
  }
  if (routed.target != decision.target) metrics_->limbo_transaction_reroutes.Increment();
  if (decision.signature) context_->signatures().Remember(decision.signatures, routed.target);
  co_return co_await ForwardAsync(routed.target, exchange, index);
}

void Router::ForwardVerified(std::shared_ptr<Exchange> exchange, size_t index, Answer done) {
  const std::string& target = exchange->decisions[index].target;
  Forward(target, index, exchange, CheckOwnerOfAnswer(exchange, index, std::move(done)));
}

Router::Answer Router::CheckOwnerOfAnswer(std::shared_ptr<Exchange> exchange, size_t index,
                                          Answer done) {
  // A plain callback: most answers need no re-route, and they cost no coroutine. Only an
  // answer that may call for one goes on in RerouteByOwner.
  return [this, exchange = std::move(exchange), index, done = std::move(done)](
             std::string answer, CallOutcome outcome) mutable {
    if (!MayCallForReroute(exchange->decisions[index].delegated, answer)) {
      return done(std::move(answer), outcome);
    }
    std::optional<std::string> value = ResultValue(ParseUpstreamAnswer(answer));
    Run(exchange, index,
        RerouteByOwner(exchange, index, std::move(value), CallAnswer{std::move(answer), outcome}));
  };
}

void Router::AnswerProbedInBatch(std::shared_ptr<Exchange> exchange, size_t index,
                                 CallAnswer answer, const std::optional<UpstreamAnswer>& probe) {
  // A probe missing from the batch answer leaves the answer as it is, as a failed probe does;
  // so does one that cannot call for a re-route (as in CheckOwnerOfAnswer), with no parsing.
  if (!probe || probe->is_error() ||
      !MayCallForReroute(exchange->decisions[index].delegated, probe->result)) {
    AnswerTo(exchange, index)(std::move(answer.answer), answer.outcome);
    return;
  }
  std::optional<std::string> value = ResultValue(absl::StatusOr<UpstreamAnswer>(*probe));
  Run(exchange, index, RerouteByOwner(exchange, index, std::move(value), std::move(answer)));
}

Router::Answer Router::BatchedAnswerTo(const std::shared_ptr<Exchange>& exchange, size_t index) {
  Answer done = AnswerTo(exchange, index);
  if (exchange->decisions[index].verification != Verification::kOwnerOfAnswer) return done;
  return CheckOwnerOfAnswer(exchange, index, std::move(done));
}

Router::SubCall Router::ProbeOf(const Exchange& exchange, size_t index) {
  const RouteDecision& decision = exchange.decisions[index];
  // The zero-length getAccountInfo probe of the account, at the call's commitment.
  return SubCall{decision.target, "getAccountInfo",
                 OwnerProbeParams(exchange.body.calls[index], *decision.account)};
}

Task<std::optional<std::string>> Router::Probe(std::shared_ptr<Exchange> exchange, size_t index) {
  Requests requests;
  requests.push_back(ProbeOf(*exchange, index));
  std::vector<absl::StatusOr<UpstreamAnswer>> answers =
      co_await Gather(std::move(requests), RetryPolicy::kSafe);
  co_return ResultValue(answers[0]);
}

Task<Router::CallAnswer> Router::ForwardProbed(std::shared_ptr<Exchange> exchange, size_t index) {
  // The call and the probe go out together; the probe's answer decides.
  auto [answer, value] = co_await AwaitBoth(
      ForwardAsync(exchange->decisions[index].target, exchange, index), Probe(exchange, index));
  co_return co_await RerouteByOwner(exchange, index, std::move(value), std::move(answer));
}

void Router::JoinProbed(const std::shared_ptr<Exchange>& exchange, size_t index) {
  // Both join the waiting batch now, in this turn of the loop; the probe decides once both
  // answers are in.
  struct Join {
    std::optional<CallAnswer> answer;
    std::optional<absl::StatusOr<UpstreamResponse>> probe;
  };
  auto join = std::make_shared<Join>();
  auto decide = [this, exchange, index, join] {
    if (!join->answer || !join->probe) return;
    const absl::StatusOr<UpstreamResponse>& probe = *join->probe;
    if (!probe.ok() || !MayCallForReroute(exchange->decisions[index].delegated, probe->body)) {
      // No probe, or one that cannot call for a re-route: the answer as it is.
      AnswerTo(exchange, index)(std::move(join->answer->answer), join->answer->outcome);
      return;
    }
    std::optional<std::string> value = ResultValue(ParseUpstreamAnswer(probe->body));
    Run(exchange, index,
        RerouteByOwner(exchange, index, std::move(value), *std::move(join->answer)));
  };
  const RouteDecision& decision = exchange->decisions[index];
  const RpcCall& call = exchange->body.calls[index];
  Coalesce(decision.target, MinSlotOf(call, decision.target, exchange->header_min_slot),
           Coalesced{exchange,
                     index,
                     [join, decide](std::string answer, CallOutcome outcome) {
                       join->answer = CallAnswer{std::move(answer), outcome};
                       decide();
                     },
                     {},
                     {},
                     {},
                     {}});
  SendSubCall(ProbeOf(*exchange, index), RetryPolicy::kSafe,
              [join, decide](absl::StatusOr<UpstreamResponse> response) {
                join->probe = std::move(response);
                decide();
              });
}

Task<Router::CallAnswer> Router::RerouteByOwner(std::shared_ptr<Exchange> exchange, size_t index,
                                                std::optional<std::string> value,
                                                CallAnswer answer) {
  const RouteDecision& decision = exchange->decisions[index];
  const VerifiedRead read = ReadOf(exchange->body.calls[index].method);  // the metrics' label
  if (!value) co_return answer;
  if (decision.delegated && IsJsonNull(*value)) {
    // The ER does not have it: the state is behind; base knows the account.
    metrics_->owner_reroutes.Increment();
    metrics_->OwnerReroutes(read, /*to_er=*/false).Increment();
    co_return co_await ForwardAsync(options_.routing.base, exchange, index);
  }
  if (decision.delegated || !OwnedByDelegationProgram(*value)) co_return answer;
  // Base says delegated, the state does not know yet: find the ER by the record.
  std::vector<Pubkey> accounts(1, *decision.account);
  std::vector<std::optional<std::string>> targets = co_await FindRecordTargets(std::move(accounts));
  if (!targets[0]) co_return answer;
  metrics_->owner_reroutes.Increment();
  metrics_->OwnerReroutes(read, /*to_er=*/true).Increment();
  co_return co_await ForwardAsync(*targets[0], exchange, index);
}

Task<Router::CallAnswer> Router::ForwardAccountListVerified(std::shared_ptr<Exchange> exchange,
                                                            size_t index) {
  const RouteDecision& decision = exchange->decisions[index];
  CallAnswer answer = co_await ForwardAsync(decision.target, exchange, index);
  const size_t count = decision.keys.size();
  const bool on_base = decision.target == options_.routing.base;
  // Nothing to verify: base shows no account owned by the delegation program, or an ER
  // answered no null.
  if (answer.outcome.outcome != RpcOutcome::kOk ||
      answer.answer.find(on_base ? kDelegationProgramId : "null") == std::string::npos) {
    co_return answer;
  }
  absl::StatusOr<ListAnswer> list = ListAnswer::Parse(answer.answer);
  if (!list.ok() || list->is_error() || !list->is_list() || list->values().size() != count) {
    co_return answer;
  }
  AccountList merged;
  merged.context = list->context();
  merged.context_from_base = on_base;
  merged.values = list->values();
  merged.sources.push_back(*std::move(list));
  std::vector<std::string> key_targets(count, decision.target);
  co_return co_await VerifyAccountList(exchange, index, std::move(key_targets), std::move(merged),
                                       std::move(answer));
}

Task<Router::CallAnswer> Router::VerifyAccountList(std::shared_ptr<Exchange> exchange, size_t index,
                                                   std::vector<std::string> key_targets,
                                                   AccountList list, CallAnswer original) {
  const RpcCall& call = exchange->body.calls[index];
  ListReasks reasks = FindListReasks(key_targets, list);
  if (reasks.to_er.empty() && reasks.to_base.empty()) {
    if (original.answer.empty()) original.answer = list.Render(call);
    co_return original;
  }
  // The re-asks run at once: base for `to_base`; the records of `to_er`, then their ERs.
  std::vector<Task<Reasked>> branches;
  if (!reasks.to_base.empty()) {
    std::vector<RoutePart> to_base(1, RoutePart{options_.routing.base, std::move(reasks.to_base)});
    branches.push_back(ReaskParts(exchange, index, std::move(to_base)));
  }
  if (!reasks.to_er.empty()) {
    branches.push_back(ReaskRecordErs(exchange, index, std::move(reasks.to_er)));
  }
  std::vector<Reasked> reasked = co_await AwaitEach(std::move(branches));
  // Every answer is spliced into `list` in place of the element it replaces.
  size_t rerouted = 0;
  std::optional<CallAnswer> failed;
  for (size_t b = 0; b < reasked.size() && !failed; ++b) {
    failed = SpliceReasked(call, reasked[b], list, rerouted);
  }
  if (failed) co_return *std::move(failed);
  if (rerouted == 0 && !original.answer.empty()) co_return original;
  co_return CallAnswer{list.Render(call),
                       rerouted == 0 ? original.outcome
                                     : CallOutcome{RpcCallMetrics::kSplitTarget, RpcOutcome::kOk}};
}

Router::ListReasks Router::FindListReasks(const std::vector<std::string>& key_targets,
                                          const AccountList& list) const {
  ListReasks reasks;
  for (size_t i = 0; i < key_targets.size(); ++i) {
    if (key_targets[i] == options_.routing.base) {
      if (OwnedByDelegationProgram(list.values[i])) reasks.to_er.push_back(i);
    } else if (IsJsonNull(list.values[i])) {
      reasks.to_base.push_back(i);
    }
  }
  return reasks;
}

Task<Router::Reasked> Router::ReaskRecordErs(std::shared_ptr<Exchange> exchange, size_t index,
                                             std::vector<size_t> to_er) {
  // The keys as the decision decoded them.
  const std::vector<Pubkey>& decoded = exchange->decisions[index].accounts;
  std::vector<Pubkey> accounts;
  for (size_t i : to_er) accounts.push_back(decoded[i]);
  std::vector<std::optional<std::string>> targets = co_await FindRecordTargets(std::move(accounts));
  std::vector<RoutePart> parts;
  for (size_t k = 0; k < targets.size(); ++k) {
    if (!targets[k]) continue;  // no record or no ER for it: base's answer stands
    auto it = std::find_if(parts.begin(), parts.end(),
                           [&](const RoutePart& part) { return part.target == *targets[k]; });
    if (it == parts.end()) {
      parts.push_back(RoutePart{*targets[k], {}});
      it = parts.end() - 1;
    }
    it->indexes.push_back(to_er[k]);
  }
  if (parts.empty()) co_return Reasked{};
  co_return co_await ReaskParts(exchange, index, std::move(parts));
}

Task<Router::Reasked> Router::ReaskParts(std::shared_ptr<Exchange> exchange, size_t index,
                                         std::vector<RoutePart> parts) {
  const RouteDecision& decision = exchange->decisions[index];
  Requests requests;
  for (const RoutePart& part : parts) {
    requests.push_back(
        SubCall{part.target, "getMultipleAccounts",
                PartParams(decision.keys, part.indexes,
                           decision.ParamsAfterListFor(part.target, options_.routing.base))});
  }
  Reasked reasked;
  reasked.answers = co_await GatherLists(std::move(requests));
  reasked.parts = std::move(parts);
  co_return reasked;
}

std::optional<Router::CallAnswer> Router::SpliceReasked(const RpcCall& call, Reasked& reasked,
                                                        AccountList& list, size_t& rerouted) {
  const CallOutcome failed{RpcCallMetrics::kSplitTarget, RpcOutcome::kUpstreamFailure};
  for (size_t p = 0; p < reasked.parts.size(); ++p) {
    const RoutePart& part = reasked.parts[p];
    if (!reasked.answers[p].ok()) {
      return CallAnswer{RpcErrorResponse(call.id_or_null(), reasked.answers[p].status()), failed};
    }
    const ListAnswer& answer = *reasked.answers[p];
    if (answer.is_error()) {
      return CallAnswer{UpstreamErrorResponse(call.id_or_null(), answer.error()),
                        CallOutcome{RpcCallMetrics::kSplitTarget, RpcOutcome::kRpcError}};
    }
    if (!answer.is_list() || answer.values().size() != part.indexes.size()) {
      return CallAnswer{
          RpcErrorResponse(call.id_or_null(),
                           MakeRpcStatus(RpcErrorKind::kInternal,
                                         fmt::format("upstream {} answered a list of the wrong "
                                                     "shape",
                                                     part.target))),
          failed};
    }
    const bool to_base = part.target == options_.routing.base;
    if (to_base && !list.context_from_base) {
      list.context = answer.context();
      list.context_from_base = true;
    }
    for (size_t k = 0; k < part.indexes.size(); ++k) {
      list.values[part.indexes[k]] = answer.values()[k];
    }
    list.sources.push_back(*std::move(reasked.answers[p]));
    const size_t n = part.indexes.size();
    rerouted += n;
    metrics_->owner_reroutes.Increment(n);
    metrics_->OwnerReroutes(VerifiedRead::kGetMultipleAccounts, !to_base).Increment(n);
  }
  return std::nullopt;
}

}  // namespace switchyard
