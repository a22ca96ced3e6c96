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

// The zero-length getAccountInfo probe of `account`, at the call's commitment.
std::string ProbeRequest(const RpcCall& call, const Pubkey& account) {
  std::string commitment;
  if (absl::StatusOr<RpcParams> params = ParseRpcParams(call.params); params.ok()) {
    if (std::optional<std::string> level = params->ConfigString(1, "commitment")) {
      commitment = fmt::format(R"(,"commitment":{})", JsonQuote(*level));
    }
  }
  return SubRequest(
      "getAccountInfo",
      fmt::format(R"(["{}",{{"encoding":"base64","dataSlice":{{"offset":0,"length":0}}{}}}])",
                  account.ToBase58(), commitment));
}

}  // namespace

void Router::ReadRecords(const std::vector<Pubkey>& accounts, Records done) {
  std::vector<std::string> pdas;
  std::vector<size_t> all;
  for (const Pubkey& account : accounts) {
    all.push_back(pdas.size());
    pdas.push_back(DelegationRecordPda(account).ToBase58());
  }
  GatherLists(
      {{options_.routing.base,
        SubRequest("getMultipleAccounts", PartParams(pdas, all, R"(,{"encoding":"base64"})"))}},
      RetryPolicy::kSafe,
      [count = accounts.size(),
       done = std::move(done)](std::vector<absl::StatusOr<ListAnswer>> answers) {
        if (!answers[0].ok()) return done(answers[0].status());
        if (answers[0]->is_error()) {
          return done(
              absl::UnavailableError("base answered the delegation records' read "
                                     "with an error"));
        }
        if (!answers[0]->is_list() || answers[0]->values().size() != count) {
          return done(
              absl::DataLossError("base answered the delegation records' read with a "
                                  "list of the wrong shape"));
        }
        std::vector<std::optional<DelegationRecord>> records(count);
        for (size_t i = 0; i < count; ++i) records[i] = RecordOf(answers[0]->values()[i]);
        done(std::move(records));
      });
}

void Router::FindRecordTargets(const std::vector<Pubkey>& accounts, RecordTargets done) {
  ReadRecords(accounts, [this, accounts, done = std::move(done)](
                            absl::StatusOr<std::vector<std::optional<DelegationRecord>>> records) {
    std::vector<std::optional<std::string>> targets(accounts.size());
    if (records.ok()) {
      for (size_t i = 0; i < accounts.size(); ++i) {
        if (!(*records)[i]) continue;
        // A validator without a configured ER leaves the account where it was asked.
        absl::StatusOr<std::string> target =
            TargetForValidator(accounts[i], (*records)[i]->authority, options_.routing);
        if (target.ok()) targets[i] = *std::move(target);
      }
    }
    done(std::move(targets));
  });
}

void Router::ForwardTransactionByRecords(std::shared_ptr<Exchange> exchange, size_t index,
                                         Answer done) {
  metrics_->limbo_transaction_checks.Increment();
  ReadRecords(exchange->decisions[index].writable_in_doubt,
              [this, exchange, index, done = std::move(done)](
                  absl::StatusOr<std::vector<std::optional<DelegationRecord>>> records) {
                const RpcCall& call = exchange->body.calls[index];
                const RouteDecision& decision = exchange->decisions[index];
                const std::vector<Pubkey>& writable = decision.writable_in_doubt;
                if (!records.ok()) {
                  // Base could not say: the transaction cannot be placed safely.
                  return done(RpcErrorResponse(
                                  call.id_or_null(),
                                  MakeRpcStatus(
                                      RpcErrorKind::kInternal,
                                      fmt::format("the delegation state is being repaired and the "
                                                  "delegation records could not be read from "
                                                  "base: {}",
                                                  std::string(records.status().message())))),
                              AtRouter(RpcOutcome::kUpstreamFailure));
                }
                RouteDecision routed = RouteByWritable(
                    writable,
                    [&](size_t i) -> std::optional<Pubkey> {
                      if (!(*records)[i]) return std::nullopt;
                      return (*records)[i]->authority;
                    },
                    options_.routing);
                if (routed.action == RouteAction::kError) {
                  return done(RpcErrorResponse(call.id_or_null(), routed.error),
                              AtRouter(RpcOutcome::kRouterError));
                }
                if (routed.target != decision.target)
                  metrics_->limbo_transaction_reroutes.Increment();
                if (decision.signature)
                  context_->signatures().Remember(*decision.signature, routed.target);
                Forward(routed.target, index, exchange, std::move(done));
              });
}

void Router::ForwardVerified(std::shared_ptr<Exchange> exchange, size_t index, Answer done) {
  const RouteDecision& decision = exchange->decisions[index];
  const Pubkey account = *decision.account;
  const bool delegated = decision.delegated;
  Forward(decision.target, index, exchange,
          [this, exchange, index, account, delegated, done = std::move(done)](
              std::string answer, CallOutcome outcome) mutable {
            // An answer that cannot call for a re-route needs no parsing: from base, one that
            // does not mention the delegation program; from the ER, one without a null value.
            if (answer.find(delegated ? "null" : kDelegationProgramId) == std::string::npos) {
              return done(std::move(answer), outcome);
            }
            std::optional<std::string> value = ResultValue(ParseUpstreamAnswer(answer));
            RerouteByOwner(exchange, index, account, delegated, value, std::move(answer), outcome,
                           std::move(done));
          });
}

void Router::ForwardProbed(std::shared_ptr<Exchange> exchange, size_t index, Answer done) {
  const RouteDecision& decision = exchange->decisions[index];
  // Both answers are awaited; whichever comes second decides. One worker thread: no lock.
  struct Join {
    std::optional<std::pair<std::string, CallOutcome>> answer;
    std::optional<std::optional<std::string>> value;  // the account as the probe showed it
    Answer done;
  };
  auto join = std::make_shared<Join>();
  join->done = std::move(done);
  const RpcCall& call = exchange->body.calls[index];
  auto decide = [this, exchange, index, join, account = *decision.account,
                 delegated = decision.delegated] {
    if (!join->answer || !join->value) return;
    RerouteByOwner(exchange, index, account, delegated, *join->value,
                   std::move(join->answer->first), join->answer->second, std::move(join->done));
  };
  Forward(decision.target, index, exchange,
          [join, decide](std::string answer, CallOutcome outcome) {
            join->answer.emplace(std::move(answer), outcome);
            decide();
          });
  Gather({{decision.target, ProbeRequest(call, *decision.account)}}, RetryPolicy::kSafe,
         [join, decide](std::vector<absl::StatusOr<UpstreamAnswer>> answers) {
           join->value = ResultValue(answers[0]);
           decide();
         });
}

void Router::RerouteByOwner(std::shared_ptr<Exchange> exchange, size_t index, const Pubkey& account,
                            bool delegated, const std::optional<std::string>& value,
                            std::string answer, CallOutcome outcome, Answer done) {
  const RpcCall& call = exchange->body.calls[index];
  const VerifiedRead read = ReadOf(call.method);
  if (!value) return done(std::move(answer), outcome);
  if (delegated && IsJsonNull(*value)) {
    // The ER does not have it: the state is behind; base knows the account.
    metrics_->owner_reroutes.Increment();
    metrics_->OwnerReroutes(read, /*to_er=*/false).Increment();
    Forward(options_.routing.base, index, exchange, std::move(done));
    return;
  }
  if (delegated || !OwnedByDelegationProgram(*value)) return done(std::move(answer), outcome);
  // Base says delegated, the state does not know yet: find the ER by the record.
  FindRecordTargets(
      {account}, [this, exchange, index, read, answer = std::move(answer), outcome,
                  done = std::move(done)](std::vector<std::optional<std::string>> targets) mutable {
        if (!targets[0]) return done(std::move(answer), outcome);
        metrics_->owner_reroutes.Increment();
        metrics_->OwnerReroutes(read, /*to_er=*/true).Increment();
        Forward(*targets[0], index, exchange, std::move(done));
      });
}

void Router::ForwardAccountListVerified(std::shared_ptr<Exchange> exchange, size_t index,
                                        Answer done) {
  const RouteDecision& decision = exchange->decisions[index];
  Forward(
      decision.target, index, exchange,
      [this, exchange, index, done = std::move(done)](std::string answer,
                                                      CallOutcome outcome) mutable {
        const std::string& target = exchange->decisions[index].target;
        const size_t count = exchange->decisions[index].keys.size();
        const bool on_base = target == options_.routing.base;
        // Nothing to verify: base shows no account owned by the delegation program, or an
        // ER answered no null.
        if (outcome.outcome != RpcOutcome::kOk ||
            answer.find(on_base ? kDelegationProgramId : "null") == std::string::npos) {
          return done(std::move(answer), outcome);
        }
        absl::StatusOr<ListAnswer> list = ListAnswer::Parse(answer);
        if (!list.ok() || list->is_error() || !list->is_list() || list->values().size() != count) {
          return done(std::move(answer), outcome);
        }
        AccountList merged;
        merged.context = list->context();
        merged.context_from_base = on_base;
        merged.values = list->values();
        merged.sources.push_back(*std::move(list));
        std::vector<std::string> key_targets(count, target);
        VerifyAccountList(exchange, index, std::move(key_targets), std::move(merged),
                          std::move(answer), outcome, std::move(done));
      });
}

// The state of one VerifyAccountList while its re-asks are out: the list the answers are
// spliced into, and the join of its branches (base for null ER elements; the records of base
// elements owned by the delegation program, then their ERs). One worker thread: no lock.
struct Router::ListVerification {
  std::shared_ptr<Exchange> exchange;
  size_t index = 0;
  AccountList list;
  std::string original;
  CallOutcome outcome;
  Answer done;
  int branches = 0;
  size_t rerouted = 0;
  bool answered = false;
};

void Router::VerifyAccountList(std::shared_ptr<Exchange> exchange, size_t index,
                               std::vector<std::string> key_targets, AccountList list,
                               std::string original, CallOutcome outcome, Answer done) {
  ListReasks reasks = FindListReasks(key_targets, list);
  if (reasks.to_er.empty() && reasks.to_base.empty()) {
    const RpcCall& call = exchange->body.calls[index];
    done(original.empty() ? list.Render(call) : std::move(original), outcome);
    return;
  }
  // The re-asks run in parallel: base for `to_base`; the records of `to_er`, then their ERs.
  // Every answer is spliced into `list` in place of the element it replaces.
  auto verification = std::make_shared<ListVerification>();
  verification->exchange = std::move(exchange);
  verification->index = index;
  verification->list = std::move(list);
  verification->original = std::move(original);
  verification->outcome = outcome;
  verification->done = std::move(done);
  verification->branches = (reasks.to_er.empty() ? 0 : 1) + (reasks.to_base.empty() ? 0 : 1);
  if (!reasks.to_base.empty()) {
    ReaskListParts(verification, {RoutePart{options_.routing.base, std::move(reasks.to_base)}});
  }
  if (!reasks.to_er.empty()) ReaskListOfRecordErs(verification, std::move(reasks.to_er));
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

void Router::ReaskListOfRecordErs(std::shared_ptr<ListVerification> verification,
                                  std::vector<size_t> to_er) {
  // The keys as the decision decoded them.
  const std::vector<Pubkey>& decoded =
      verification->exchange->decisions[verification->index].accounts;
  std::vector<Pubkey> accounts;
  for (size_t i : to_er) accounts.push_back(decoded[i]);
  FindRecordTargets(accounts, [this, verification, asked = std::move(to_er)](
                                  std::vector<std::optional<std::string>> targets) {
    std::vector<RoutePart> parts;
    for (size_t k = 0; k < targets.size(); ++k) {
      if (!targets[k]) continue;  // no record or no ER for it: base's answer stands
      auto it = std::find_if(parts.begin(), parts.end(),
                             [&](const RoutePart& part) { return part.target == *targets[k]; });
      if (it == parts.end()) {
        parts.push_back(RoutePart{*targets[k], {}});
        it = parts.end() - 1;
      }
      it->indexes.push_back(asked[k]);
    }
    if (parts.empty()) return FinishListBranch(verification);
    ReaskListParts(verification, std::move(parts));
  });
}

void Router::ReaskListParts(std::shared_ptr<ListVerification> verification,
                            std::vector<RoutePart> parts) {
  const RouteDecision& decision = verification->exchange->decisions[verification->index];
  std::vector<std::pair<std::string, std::string>> requests;
  for (const RoutePart& part : parts) {
    requests.emplace_back(
        part.target, SubRequest("getMultipleAccounts", PartParams(decision.keys, part.indexes,
                                                                  decision.params_after_list)));
  }
  GatherLists(std::move(requests), RetryPolicy::kSafe,
              [this, verification,
               parts = std::move(parts)](std::vector<absl::StatusOr<ListAnswer>> answers) {
                if (!SpliceReasked(*verification, parts, answers)) return;
                FinishListBranch(verification);
              });
}

bool Router::SpliceReasked(ListVerification& verification, const std::vector<RoutePart>& parts,
                           std::vector<absl::StatusOr<ListAnswer>>& answers) {
  const RpcCall& call = verification.exchange->body.calls[verification.index];
  const CallOutcome failed{RpcCallMetrics::kSplitTarget, RpcOutcome::kUpstreamFailure};
  for (size_t p = 0; p < parts.size() && !verification.answered; ++p) {
    if (!answers[p].ok()) {
      verification.answered = true;
      verification.done(RpcErrorResponse(call.id_or_null(), answers[p].status()), failed);
      return false;
    }
    const ListAnswer& answer = *answers[p];
    if (answer.is_error()) {
      verification.answered = true;
      verification.done(UpstreamErrorResponse(call.id_or_null(), answer.error()),
                        CallOutcome{RpcCallMetrics::kSplitTarget, RpcOutcome::kRpcError});
      return false;
    }
    if (!answer.is_list() || answer.values().size() != parts[p].indexes.size()) {
      verification.answered = true;
      verification.done(RpcErrorResponse(call.id_or_null(),
                                         MakeRpcStatus(RpcErrorKind::kInternal,
                                                       fmt::format("upstream {} answered a list of "
                                                                   "the wrong shape",
                                                                   parts[p].target))),
                        failed);
      return false;
    }
    const bool to_base = parts[p].target == options_.routing.base;
    if (to_base && !verification.list.context_from_base) {
      verification.list.context = answer.context();
      verification.list.context_from_base = true;
    }
    for (size_t k = 0; k < parts[p].indexes.size(); ++k) {
      verification.list.values[parts[p].indexes[k]] = answer.values()[k];
    }
    verification.list.sources.push_back(*std::move(answers[p]));
    const size_t n = parts[p].indexes.size();
    verification.rerouted += n;
    metrics_->owner_reroutes.Increment(n);
    metrics_->OwnerReroutes(VerifiedRead::kGetMultipleAccounts, !to_base).Increment(n);
  }
  return true;
}

void Router::FinishListBranch(const std::shared_ptr<ListVerification>& verification) {
  if (--verification->branches > 0 || verification->answered) return;
  verification->answered = true;
  const RpcCall& call = verification->exchange->body.calls[verification->index];
  if (verification->rerouted == 0 && !verification->original.empty()) {
    verification->done(std::move(verification->original), verification->outcome);
    return;
  }
  verification->done(verification->list.Render(call),
                     verification->rerouted == 0
                         ? verification->outcome
                         : CallOutcome{RpcCallMetrics::kSplitTarget, RpcOutcome::kOk});
}

}  // namespace switchyard
