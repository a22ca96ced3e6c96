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

// A sub-request of `method` for the listed items of a decision's key or signature list.
std::string PartRequest(std::string_view method, const RouteDecision& decision,
                        const std::vector<size_t>& indexes) {
  return SubRequest(method, PartParams(decision.keys, indexes, decision.params_after_list));
}

// The fqdn of the configured ER at `target`; empty when none is.
std::string FqdnOf(const RouterOptions& options, const std::string& target) {
  for (const ErRoute& er : options.ers) {
    if (er.target == target) return er.fqdn;
  }
  return {};
}

// getIdentity: MagicBlock's router answers the identity and fqdn of an ER validator (the SDK's
// getClosestValidator, whose identity clients delegate to). `router.identity` overrides it;
// without one, the default ER's (else the first configured ER's).
std::string IdentityResult(const RouterOptions& options) {
  Pubkey identity = options.identity;
  std::string fqdn = options.fqdn;
  if (identity.IsZero() && !options.ers.empty()) {
    const ErRoute* chosen = &options.ers.front();
    for (const ErRoute& er : options.ers) {
      if (er.target == options.routing.default_er) {
        chosen = &er;
        break;
      }
    }
    identity = chosen->identity;
    fqdn = chosen->fqdn;
  }
  return fmt::format(R"({{"identity":"{}","fqdn":{}}})", identity.ToBase58(), JsonQuote(fqdn));
}

// getRoutes: every configured ER.
std::string RoutesResult(const RouterOptions& options) {
  std::vector<std::string> routes;
  for (const ErRoute& er : options.ers) {
    routes.push_back(fmt::format(
        R"({{"identity":"{}","fqdn":{},"baseFee":{},"blockTimeMs":{},"countryCode":{}}})",
        er.identity.ToBase58(), JsonQuote(er.fqdn), er.base_fee, er.block_time_ms,
        JsonQuote(er.country_code)));
  }
  return fmt::format("[{}]", JoinRaw(routes));
}

}  // namespace

void Router::SplitAccounts(std::shared_ptr<Exchange> exchange, size_t index, Answer done) {
  const RpcCall& call = exchange->body.calls[index];
  const RouteDecision& decision = exchange->decisions[index];
  std::vector<std::pair<std::string, std::string>> requests;
  requests.reserve(decision.parts.size());
  for (const RoutePart& part : decision.parts) {
    requests.emplace_back(part.target, PartRequest(call.method, decision, part.indexes));
  }
  const bool verify = decision.verification == Verification::kAccountList;
  GatherLists(
      std::move(requests), RetryPolicy::kSafe,
      [this, exchange, index, verify,
       done = std::move(done)](std::vector<absl::StatusOr<ListAnswer>> answers) mutable {
        const RpcCall& call = exchange->body.calls[index];
        const RouteDecision& decision = exchange->decisions[index];
        const std::vector<RoutePart>& parts = decision.parts;
        AccountList merged;
        merged.values.assign(decision.keys.size(), "null");
        merged.sources.reserve(parts.size());
        for (size_t p = 0; p < parts.size(); ++p) {
          if (!answers[p].ok()) {
            done(ErrorAnswer(call, answers[p].status()),
                 CallOutcome{RpcCallMetrics::kSplitTarget, RpcOutcome::kUpstreamFailure});
            return;
          }
          const ListAnswer& list = *answers[p];
          if (list.is_error()) {
            done(UpstreamErrorAnswer(call, list.error()),
                 CallOutcome{RpcCallMetrics::kSplitTarget, RpcOutcome::kRpcError});
            return;
          }
          if (!list.is_list() || list.values().size() != parts[p].indexes.size()) {
            done(ErrorAnswer(call, MakeRpcStatus(RpcErrorKind::kInternal,
                                                 fmt::format("upstream {} answered a list of "
                                                             "the wrong shape",
                                                             parts[p].target))),
                 CallOutcome{RpcCallMetrics::kSplitTarget, RpcOutcome::kUpstreamFailure});
            return;
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
        const CallOutcome ok{RpcCallMetrics::kSplitTarget, RpcOutcome::kOk};
        if (!verify) return done(merged.Render(call), ok);
        std::vector<std::string> key_targets(decision.keys.size());
        for (const RoutePart& part : parts) {
          for (size_t i : part.indexes) key_targets[i] = part.target;
        }
        VerifyAccountList(exchange, index, std::move(key_targets), std::move(merged), std::string(),
                          ok, std::move(done));
      });
}

void Router::Signatures(std::shared_ptr<Exchange> exchange, size_t index, Answer done) {
  const RpcCall& call = exchange->body.calls[index];
  const RouteDecision& decision = exchange->decisions[index];
  std::vector<std::string> everyone = {options_.routing.base};
  for (const std::string& er : options_.routing.er_targets) everyone.push_back(er);
  const bool single = decision.merge == MergeKind::kFirstTransaction;

  std::vector<std::pair<std::string, std::string>> requests;
  for (const RoutePart& part : decision.parts) {
    requests.emplace_back(part.target, PartRequest(call.method, decision, part.indexes));
  }
  const size_t known_parts = requests.size();
  if (!decision.unknown.empty()) {
    const std::string body = single ? SubRequest(call.method, call.params)
                                    : PartRequest(call.method, decision, decision.unknown);
    for (const std::string& target : everyone) requests.emplace_back(target, body);
  }
  std::vector<std::string> targets;
  for (const auto& request : requests) targets.push_back(request.first);
  // Signatures nobody remembers are asked of everyone; else the known ones are split.
  const int label =
      decision.unknown.empty() ? RpcCallMetrics::kSplitTarget : RpcCallMetrics::kFanoutTarget;
  if (single) {
    Gather(std::move(requests), RetryPolicy::kSafe,
           [exchange, index, label,
            done = std::move(done)](std::vector<absl::StatusOr<UpstreamAnswer>> answers) {
             AnswerFirstTransaction(exchange->body.calls[index], answers, label, done);
           });
    return;
  }
  GatherLists(std::move(requests), RetryPolicy::kSafe,
              [this, exchange, index, known_parts, targets, label,
               done = std::move(done)](std::vector<absl::StatusOr<ListAnswer>> answers) {
                AnswerMergedStatuses(*exchange, index, known_parts, targets, label, answers, done);
              });
}

void Router::AnswerFirstTransaction(const RpcCall& call,
                                    const std::vector<absl::StatusOr<UpstreamAnswer>>& answers,
                                    int label, const Answer& done) {
  // First non-null transaction in the order base, ERs; else base's answer.
  const absl::StatusOr<UpstreamAnswer>* fallback = nullptr;
  for (const auto& answer : answers) {
    if (!answer.ok()) continue;
    if (!fallback) fallback = &answer;
    if (!answer->is_error() && !IsJsonNull(answer->result)) {
      done(RpcResultResponse(call.id_or_null(), answer->result),
           CallOutcome{label, RpcOutcome::kOk});
      return;
    }
  }
  if (fallback == nullptr) {
    done(ErrorAnswer(call, answers[0].status()), CallOutcome{label, RpcOutcome::kUpstreamFailure});
  } else if ((*fallback)->is_error()) {
    done(UpstreamErrorAnswer(call, (*fallback)->error), CallOutcome{label, RpcOutcome::kRpcError});
  } else {
    done(RpcResultResponse(call.id_or_null(), (*fallback)->result),
         CallOutcome{label, RpcOutcome::kOk});
  }
}

void Router::AnswerMergedStatuses(const Exchange& exchange, size_t index, size_t known_parts,
                                  const std::vector<std::string>& targets, int label,
                                  const std::vector<absl::StatusOr<ListAnswer>>& answers,
                                  const Answer& done) const {
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
        done(UpstreamErrorAnswer(call, answer->error()), CallOutcome{label, RpcOutcome::kRpcError});
        return;
      }
    }
    done(ErrorAnswer(call, answers[0].ok() ? MakeRpcStatus(RpcErrorKind::kInternal,
                                                           "upstream answered a result without "
                                                           "context or value")
                                           : answers[0].status()),
         CallOutcome{label, RpcOutcome::kUpstreamFailure});
    return;
  }
  // `values` and `context` view `answers`, alive until `done` returns.
  done(ContextListResponse(call.id_or_null(), context, values),
       CallOutcome{label, RpcOutcome::kOk});
}

void Router::FetchLookupTables(const std::vector<Pubkey>& tables, std::function<void()> then) {
  std::vector<std::pair<std::string, std::string>> requests;
  for (const Pubkey& table : tables) {
    metrics_->lookup_table_fetches.Increment();
    requests.emplace_back(
        options_.routing.base,
        SubRequest("getAccountInfo",
                   fmt::format(R"(["{}",{{"encoding":"base64"}}])", table.ToBase58())));
  }
  Gather(
      std::move(requests), RetryPolicy::kSafe,
      [this, tables, then = std::move(then)](std::vector<absl::StatusOr<UpstreamAnswer>> answers) {
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
        then();
      });
}

void Router::AnswerLocal(const Exchange& exchange, size_t index, Answer done) {
  const RpcCall& call = exchange.body.calls[index];
  switch (exchange.decisions[index].local) {
    case LocalMethod::kIdentity:
      return done(RpcResultResponse(call.id_or_null(), IdentityResult(options_)),
                  AtRouter(RpcOutcome::kOk));
    case LocalMethod::kRoutes:
      return done(RpcResultResponse(call.id_or_null(), RoutesResult(options_)),
                  AtRouter(RpcOutcome::kOk));
    case LocalMethod::kDelegationStatus:
    case LocalMethod::kNone:
      break;
  }
  AnswerDelegationStatus(exchange, index, std::move(done));
}

void Router::AnswerDelegationStatus(const Exchange& exchange, size_t index, Answer done) {
  const RpcCall& call = exchange.body.calls[index];
  const Pubkey& key = *exchange.decisions[index].account;
  const Snapshot& snapshot = *exchange.snapshot;
  std::optional<AccountState> state = snapshot.FindDelegation(key);
  if (!state) {
    done(RpcResultResponse(call.id_or_null(), R"({"isDelegated":false})"),
         AtRouter(RpcOutcome::kOk));
    return;
  }
  std::string fqdn;
  if (absl::StatusOr<std::string> target = TargetForAccount(key, snapshot, options_.routing);
      target.ok()) {
    fqdn = FqdnOf(options_, *target);
  }
  done(RpcResultResponse(
           call.id_or_null(),
           fmt::format(
               R"({{"isDelegated":true,{}"delegationRecord":{{"authority":"{}","owner":"{}",)"
               R"("delegationSlot":{},"lamports":{}}}}})",
               fqdn.empty() ? "" : fmt::format("\"fqdn\":{},", JsonQuote(fqdn)),
               state->validator.ToBase58(), state->owner_program.ToBase58(), state->delegation_slot,
               state->lamports)),
       AtRouter(RpcOutcome::kOk));
}

void Router::ForwardLatestBlockhash(std::shared_ptr<Exchange> exchange, size_t index, Answer done) {
  const RpcCall& call = exchange->body.calls[index];
  const std::string& target = exchange->decisions[index].target;
  Gather(
      {{target, SubRequest("getLatestBlockhash", "[]")}}, RetryPolicy::kSafe,
      [exchange, &call, target_id = calls_->TargetId(target),
       done = std::move(done)](std::vector<absl::StatusOr<UpstreamAnswer>> answers) {
        const CallOutcome failed{target_id, RpcOutcome::kUpstreamFailure};
        if (!answers[0].ok()) return done(ErrorAnswer(call, answers[0].status()), failed);
        if (answers[0]->is_error()) {
          return done(UpstreamErrorAnswer(call, answers[0]->error),
                      CallOutcome{target_id, RpcOutcome::kRpcError});
        }
        absl::StatusOr<std::string> value = JsonMember(answers[0]->result, "value");
        if (!value.ok()) {
          return done(ErrorAnswer(call, MakeRpcStatus(RpcErrorKind::kInternal,
                                                      "upstream answered no blockhash")),
                      failed);
        }
        done(RpcResultResponse(call.id_or_null(), *value), CallOutcome{target_id, RpcOutcome::kOk});
      });
}

}  // namespace switchyard
