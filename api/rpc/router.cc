#include "api/rpc/router.h"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/post.hpp>

#include "absl/strings/numbers.h"
#include "api/rpc/internal/router.h"
#include "fmt/format.h"
#include "solana/rpc_methods.h"
#include "spdlog/spdlog.h"

namespace switchyard {

namespace asio = boost::asio;

namespace {

HttpResponse JsonResponse(unsigned status, std::string body, Slot applied_slot) {
  HttpResponse response;
  response.status = status;
  response.body = std::move(body);
  response.headers.emplace_back("X-Delegation-Slot", std::to_string(applied_slot));
  return response;
}

// The slot the endpoint chosen for `call` sent to `target` must have reached (docs/architecture.md
// §11): its minContextSlot, and X-Min-Slot on the base layer (an ER's slots run on its own
// clock).
Slot MinSlotFor(const RpcCall& call, const std::string& target, const std::string& base,
                Slot header_min_slot) {
  // Both are slots of the base layer: they say nothing about an ER's endpoints.
  if (target != base) return 0;
  return std::max<Slot>(call.min_context_slot.value_or(0), header_min_slot);
}

// What the choice of endpoint and connection must respect for `call` sent to `target`: its
// minimum slot, and whether its answer may be large (not pipelined with other requests).
SendOptions SendOptionsFor(RetryPolicy policy, const RpcCall& call, const std::string& target,
                           const std::string& base, Slot header_min_slot) {
  SendOptions options(policy);
  options.min_slot = MinSlotFor(call, target, base, header_min_slot);
  options.large_answer = MayAnswerLarge(call.method);
  return options;
}

// The answer to a request the access control refused: 401 (no valid key) or 429 (over a
// limit, with Retry-After), one error per call (id null for a body that did not parse).
HttpResponse RefusalResponse(const AccessControl::Admission& admission, const RpcBody* body,
                             Slot applied_slot) {
  const bool limited = admission.verdict == AccessControl::Verdict::kLimited;
  const absl::Status status =
      MakeRpcStatus(limited ? RpcErrorKind::kRateLimited : RpcErrorKind::kUnauthorized);
  std::string text;
  if (body == nullptr || !body->batch) {
    const std::string_view id =
        body != nullptr && !body->calls.empty() ? body->calls[0].id_or_null() : "null";
    text = RpcErrorResponse(id, status);
  } else {
    std::vector<std::string> answers;
    answers.reserve(body->calls.size());
    for (const RpcCall& call : body->calls) {
      answers.push_back(RpcErrorResponse(call.id_or_null(), status));
    }
    text = JoinBatch(answers);
  }
  HttpResponse response = JsonResponse(limited ? 429 : 401, std::move(text), applied_slot);
  if (limited) {
    response.headers.emplace_back("Retry-After", std::to_string(admission.retry_after_seconds));
  }
  return response;
}

RetryPolicy PolicyOf(Resend resend) {
  switch (resend) {
    case Resend::kOtherEndpointOnly:
      return RetryPolicy::kOtherEndpointOnly;
    case Resend::kNever:
      return RetryPolicy::kNever;
    case Resend::kSafe:
      break;
  }
  return RetryPolicy::kSafe;
}

}  // namespace

absl::Status UpstreamFailure(const std::string& target, const absl::Status& status) {
  if (IsConsensusError(status)) return status;  // it says what the endpoints answered
  return MakeRpcStatus(RpcErrorKind::kInternal, fmt::format("upstream {} failed: {}", target,
                                                            std::string(status.message())));
}

Router::Router(asio::io_context& io_context, RouterContext* context,
               std::unique_ptr<UpstreamClient> upstreams)
    : io_context_(io_context),
      context_(context),
      options_(context->options()),
      metrics_(context->metrics()),
      calls_(context->call_metrics()),
      upstreams_(std::move(upstreams)),
      gate_(std::make_shared<ConsistencyGate>(options_.max_gate_waiters)),
      gate_timer_(io_context),
      history_return_(std::make_shared<HistoryReturn>()) {
  {
    absl::MutexLock lock(&history_return_->mu);
    history_return_->io_context = &io_context;
  }
  if (context_->access() != nullptr) access_.emplace(context_->access());
  listener_id_ = context_->snapshots()->AddListener(
      [&io_context, weak = std::weak_ptr<ConsistencyGate>(gate_)](
          const std::shared_ptr<const Snapshot>& snapshot) {
        asio::post(io_context, [weak, slot = snapshot->applied_slot()] {
          if (auto gate = weak.lock()) gate->OnApplied(slot);
        });
      });
}

Router::~Router() {
  context_->snapshots()->RemoveListener(listener_id_);
  absl::MutexLock lock(&history_return_->mu);
  history_return_->io_context = nullptr;
}

void Router::Shutdown() {
  gate_timer_.cancel();
  gate_->Shutdown();
  // Reads waiting for a batch leave now, so that the upstreams' shutdown answers them too.
  FlushCoalesced();
  upstreams_->Shutdown();
}

HttpResponse Router::LocalAnswer(unsigned status, std::string_view reason) {
  std::shared_ptr<const Snapshot> snapshot = context_->snapshots()->Current();
  return JsonResponse(
      status, RpcErrorResponse("null", MakeRpcStatus(RpcErrorKind::kInvalidRequest, reason)),
      snapshot ? snapshot->applied_slot() : 0);
}

void Router::Handle(HttpRequest request, Done done) {
  std::shared_ptr<const Snapshot> snapshot = context_->snapshots()->Current();
  const Slot applied = snapshot ? snapshot->applied_slot() : 0;
  if (request.method != "POST") {
    done(JsonResponse(
        405, RpcErrorResponse("null", MakeRpcStatus(RpcErrorKind::kInvalidRequest, "use POST")),
        applied));
    return;
  }
  const absl::Duration start = context_->clock()->Monotonic();
  absl::StatusOr<RpcBody> body =
      ParseRpcBody(request.body, options_.codec, request.body.capacity());
  if (access_) {
    std::vector<RpcCall> none;
    const AccessControl::Admission admission =
        access_->AdmitHttp(request.target, request.Header("x-api-key"), request.peer,
                           body.ok() ? &body->calls : &none);
    if (admission.verdict != AccessControl::Verdict::kAllowed) {
      done(RefusalResponse(admission, body.ok() ? &*body : nullptr, applied));
      return;
    }
  }
  if (!body.ok()) {
    metrics_->rpc_errors.Increment();
    calls_->Record(calls_->MethodId(RpcCallMetrics::kOtherMethod),
                   AtRouter(RpcOutcome::kRouterError), context_->clock()->Monotonic() - start);
    done(JsonResponse(200, RpcErrorResponse("null", body.status()), applied));
    return;
  }
  Slot min_slot = 0;
  std::optional<ConsensusRule> consensus;
  if (absl::Status headers = ReadHeaders(request, &min_slot, &consensus); !headers.ok()) {
    const absl::Duration latency = context_->clock()->Monotonic() - start;
    for (const RpcCall& call : body->calls) {
      metrics_->rpc_errors.Increment();
      calls_->Record(calls_->MethodId(call.method), AtRouter(RpcOutcome::kRouterError), latency);
    }
    done(JsonResponse(400, RpcErrorResponse("null", headers), applied));
    return;
  }
  const Slot header_min_slot = min_slot;
  for (const RpcCall& call : body->calls) {
    if (call.min_context_slot) min_slot = std::max(min_slot, *call.min_context_slot);
  }
  auto exchange = std::make_shared<Exchange>();
  exchange->body = *std::move(body);
  exchange->done = std::move(done);
  exchange->start = start;
  exchange->header_min_slot = header_min_slot;
  exchange->consensus = consensus;
  exchange->gzip_pass_through = request.accepts_gzip && options_.upstream_gzip &&
                                !exchange->body.batch && exchange->body.calls.size() == 1 &&
                                ForwardsVerbatim(exchange->body.calls[0]);
  metrics_->rpc_calls.Increment(exchange->body.calls.size());
  if (min_slot <= applied) {
    Dispatch(std::move(exchange));
    return;
  }
  metrics_->gate_waits.Increment();
  const absl::Duration now = context_->clock()->Monotonic();
  gate_->Wait(applied, min_slot, now, now + options_.max_gate_wait,
              [this, exchange](bool reached) { OnGate(exchange, reached); });
  ArmGateTimer();
}

void Router::OnGate(const std::shared_ptr<Exchange>& exchange, bool reached) {
  if (reached) {
    Dispatch(exchange);
    return;
  }
  metrics_->gate_rejections.Increment();
  std::shared_ptr<const Snapshot> now = context_->snapshots()->Current();
  const Slot slot = now ? now->applied_slot() : 0;
  if (exchange->header_min_slot <= slot) {
    // Only Solana's minContextSlot is unmet: answered as a Solana node does, HTTP 200 with
    // -32016 for each call asking for more, and the other calls of a batch go on.
    exchange->gate_gave_up_at = slot;
    Dispatch(exchange);
    return;
  }
  // X-Min-Slot, the request's precondition on the delegation state, is unmet: 412.
  const absl::Duration latency = context_->clock()->Monotonic() - exchange->start;
  std::vector<std::string> answers;
  for (const RpcCall& call : exchange->body.calls) {
    calls_->Record(calls_->MethodId(call.method), AtRouter(RpcOutcome::kRejected), latency);
    if (call.is_notification()) continue;
    answers.push_back(RpcErrorResponse(call.id_or_null(), MinContextSlotStatus(slot)));
  }
  std::string body = exchange->body.batch ? JoinBatch(answers)
                     : answers.empty()    ? std::string()
                                          : answers[0];
  exchange->done(JsonResponse(412, std::move(body), slot));
}

absl::Status Router::ReadHeaders(const HttpRequest& request, Slot* min_slot,
                                 std::optional<ConsensusRule>* consensus) const {
  if (std::optional<std::string_view> header = request.Header("X-Min-Slot")) {
    if (!absl::SimpleAtoi(std::string(*header), min_slot)) {
      return MakeRpcStatus(RpcErrorKind::kInvalidRequest, "X-Min-Slot is not a slot");
    }
  }
  if (!options_.integrity.consensus_header) return absl::OkStatus();
  if (std::optional<std::string_view> header = request.Header("X-Switchyard-Consensus")) {
    absl::StatusOr<ConsensusRule> rule = ParseConsensusRule(*header);
    if (!rule.ok()) {
      return MakeRpcStatus(
          RpcErrorKind::kInvalidRequest,
          fmt::format("X-Switchyard-Consensus: {}", std::string(rule.status().message())));
    }
    *consensus = *rule;
  }
  return absl::OkStatus();
}

void Router::ArmGateTimer() {
  const std::optional<absl::Duration> next = gate_->NextDeadline();
  if (!next || (gate_timer_at_ && *gate_timer_at_ <= *next)) return;
  gate_timer_at_ = next;
  gate_timer_.expires_after(ToChrono(*next - context_->clock()->Monotonic()));
  gate_timer_.async_wait([this](boost::system::error_code ec) {
    if (ec) return;  // cancelled: the router is shutting down
    gate_timer_at_.reset();
    gate_->Expire(context_->clock()->Monotonic());
    ArmGateTimer();
  });
}

void Router::Dispatch(std::shared_ptr<Exchange> exchange) {
  exchange->snapshot = context_->snapshots()->Current();
  exchange->ers = context_->ers()->Current();
  if (!exchange->snapshot) {
    exchange->snapshot =
        std::make_shared<const Snapshot>(AccountMap(), 0, StateDigest(), std::nullopt, 0);
  }
  const size_t n = exchange->body.calls.size();
  exchange->answers.resize(n);
  exchange->decisions.resize(n);
  exchange->remaining = n;
  for (size_t i = 0; i < n; ++i) {
    Decide(*exchange, i);
    RpcCall& call = exchange->body.calls[i];
    if (!call.min_context_slot) continue;
    RouteDecision& decision = exchange->decisions[i];
    if (exchange->gate_gave_up_at && *call.min_context_slot > *exchange->gate_gave_up_at) {
      decision = RouteDecision();
      decision.action = RouteAction::kError;
      decision.error = MinContextSlotStatus(*exchange->gate_gave_up_at);
    } else if (decision.action == RouteAction::kForward &&
               decision.target != options_.routing.base) {
      // The minimum is a slot of the base layer; an ER's slots run on their own clock.
      DropMinContextSlot(call);
    }
  }
  if (context_->cache() != nullptr) {
    ServeFromCache(exchange);
    return;
  }
  SendRest(exchange);
}

void Router::SendRest(const std::shared_ptr<Exchange>& exchange) {
  const size_t n = exchange->body.calls.size();
  std::vector<bool> settled(n, false);
  for (size_t i = 0; i < exchange->cache.size(); ++i) settled[i] = exchange->cache[i].settled;
  std::vector<UpstreamBatch> batches =
      PlanUpstreamBatches(exchange->body, exchange->decisions, &settled);
  std::vector<bool> batched(n, false);
  for (const UpstreamBatch& batch : batches) {
    for (size_t i : batch.calls) batched[i] = true;
  }
  for (UpstreamBatch& batch : batches) ForwardBatch(exchange, std::move(batch));
  for (size_t i = 0; i < n; ++i) {
    if (!batched[i] && !settled[i]) Execute(exchange, i, 0);
  }
}

Slot Router::MinSlotOf(const RpcCall& call, const std::string& target, Slot header_min_slot) const {
  return MinSlotFor(call, target, options_.routing.base, header_min_slot);
}

void Router::Finish(const std::shared_ptr<Exchange>& exchange, absl::Duration now) {
  std::vector<std::string> answers;
  for (size_t i = 0; i < exchange->answers.size(); ++i) {
    if (exchange->body.calls[i].is_notification()) continue;
    answers.push_back(std::move(exchange->answers[i]));
  }
  const Slot applied = exchange->snapshot->applied_slot();
  metrics_->rpc_latency_seconds.Observe(absl::ToDoubleSeconds(now - exchange->start));
  if (answers.empty()) {
    HttpResponse response = JsonResponse(204, std::string(), applied);
    exchange->done(std::move(response));
    return;
  }
  HttpResponse response =
      JsonResponse(200, exchange->body.batch ? JoinBatch(answers) : std::move(answers[0]), applied);
  response.gzip = exchange->answer_gzip;
  exchange->done(std::move(response));
}

Router::Answer Router::AnswerTo(const std::shared_ptr<Exchange>& exchange, size_t index) {
  return [this, exchange, index, method = calls_->MethodId(exchange->body.calls[index].method)](
             std::string answer, CallOutcome outcome) {
    if (!exchange->cache.empty() && exchange->cache[index].leader) {
      OnLeaderAnswer(exchange, index, answer, outcome);
    }
    exchange->answers[index] = std::move(answer);
    if (outcome.outcome == RpcOutcome::kRouterError ||
        outcome.outcome == RpcOutcome::kUpstreamFailure) {
      metrics_->rpc_errors.Increment();
    }
    const absl::Duration now = context_->clock()->Monotonic();
    calls_->Record(method, outcome, now - exchange->start);
    if (--exchange->remaining == 0) Finish(exchange, now);
  };
}

void Router::Decide(Exchange& exchange, size_t index) {
  std::vector<LookupTableAddresses> held;
  exchange.decisions[index] = DecideRoute(
      exchange.body.calls[index], *exchange.snapshot, exchange.ers->routing,
      [&](const Pubkey& table) -> const std::vector<Pubkey>* {
        LookupTableAddresses addresses = context_->lookup_tables().Find(table);
        if (!addresses) return nullptr;
        held.push_back(addresses);
        return addresses.get();
      },
      [&](const Signature& signature) { return context_->signatures().Find(signature); });
}

void Router::Execute(std::shared_ptr<Exchange> exchange, size_t index, int round) {
  const RpcCall& call = exchange->body.calls[index];
  const RouteDecision& decision = exchange->decisions[index];
  Answer done = AnswerTo(exchange, index);
  switch (decision.action) {
    case RouteAction::kError:
      done(RpcErrorResponse(call.id_or_null(), decision.error),
           AtRouter(IsMinContextSlotError(decision.error) ? RpcOutcome::kRejected
                                                          : RpcOutcome::kRouterError));
      return;
    case RouteAction::kForward:
      ExecuteForward(std::move(exchange), index, std::move(done));
      return;
    case RouteAction::kSplitAccounts:
      metrics_->rpc_split_accounts.Increment();
      Run(exchange, index, SplitAccounts(exchange, index));
      return;
    case RouteAction::kSignatures:
      metrics_->rpc_signature_fanouts.Increment();
      Run(exchange, index, Signatures(exchange, index));
      return;
    case RouteAction::kLatestBlockhash:
      Run(exchange, index, ForwardLatestBlockhash(exchange, index));
      return;
    case RouteAction::kLocal: {
      if (decision.local == LocalMethod::kDelegationStatusAt ||
          decision.local == LocalMethod::kDelegationHistory) {
        AnswerFromHistory(std::move(exchange), index, std::move(done));
        return;
      }
      CallAnswer answer = AnswerLocal(*exchange, index);
      done(std::move(answer.answer), answer.outcome);
      return;
    }
    case RouteAction::kNeedLookupTables:
      if (round > 0) {
        done(RpcErrorResponse(
                 call.id_or_null(),
                 MakeRpcStatus(RpcErrorKind::kInvalidParams,
                               fmt::format("address lookup table {} could not be loaded from base",
                                           decision.missing_tables[0].ToBase58()))),
             AtRouter(RpcOutcome::kRouterError));
        return;
      }
      asio::co_spawn(io_context_, FetchLookupTablesThenExecute(exchange, index), asio::detached);
      return;
  }
}

void Router::ExecuteForward(std::shared_ptr<Exchange> exchange, size_t index, Answer done) {
  const RouteDecision& decision = exchange->decisions[index];
  if (decision.signature && decision.verification != Verification::kByRecords) {
    context_->signatures().Remember(decision.signatures, decision.target);
  }
  switch (decision.verification) {
    case Verification::kByRecords:
      Run(exchange, index, ForwardTransactionByRecords(exchange, index));
      return;
    case Verification::kOwnerOfAnswer:
      ForwardVerified(exchange, index, std::move(done));
      return;
    case Verification::kOwnerProbe:
      Run(exchange, index, ForwardProbed(exchange, index));
      return;
    case Verification::kAccountList:
      Run(exchange, index, ForwardAccountListVerified(exchange, index));
      return;
    case Verification::kNone:
      Forward(decision.target, index, exchange, std::move(done));
      return;
  }
}

void Router::Run(const std::shared_ptr<Exchange>& exchange, size_t index, Task<CallAnswer> plan) {
  asio::co_spawn(io_context_, std::move(plan),
                 [exchange, index, done = AnswerTo(exchange, index)](std::exception_ptr error,
                                                                     CallAnswer answer) {
                   if (error) {
                     // Nothing in a plan throws but a failed allocation; the call still gets
                     // its answer.
                     answer = {RpcErrorResponse(exchange->body.calls[index].id_or_null(),
                                                MakeRpcStatus(RpcErrorKind::kInternal,
                                                              "the router failed the call")),
                               AtRouter(RpcOutcome::kRouterError)};
                   }
                   done(std::move(answer.answer), answer.outcome);
                 });
}

Router::CallAnswer Router::AnswerFromResponse(
    const std::string& target, const RpcCall& call,
    const absl::StatusOr<UpstreamResponse>& response) const {
  const int target_id = calls_->TargetId(target);
  if (!response.ok()) {
    return {RpcErrorResponse(call.id_or_null(), UpstreamFailure(target, response.status())),
            CallOutcome{target_id, RpcOutcome::kUpstreamFailure}};
  }
  bool is_error = false;
  absl::StatusOr<std::string> answer = AnswerFromUpstream(response->body, call, &is_error);
  if (!answer.ok()) {
    return {RpcErrorResponse(call.id_or_null(),
                             MakeRpcStatus(RpcErrorKind::kInternal,
                                           fmt::format("upstream {} answered HTTP {} without a "
                                                       "JSON-RPC answer",
                                                       target, response->status))),
            CallOutcome{target_id, RpcOutcome::kUpstreamFailure}};
  }
  return {*std::move(answer),
          CallOutcome{target_id, is_error ? RpcOutcome::kRpcError : RpcOutcome::kOk}};
}

void Router::Forward(const std::string& target, size_t index, std::shared_ptr<Exchange> exchange,
                     Answer done, bool may_batch) {
  const RpcCall& call = exchange->body.calls[index];
  if (!upstreams_->Has(target)) {
    done(RpcErrorResponse(
             call.id_or_null(),
             MakeRpcStatus(RpcErrorKind::kInternal, fmt::format("no upstream named {}", target))),
         AtRouter(RpcOutcome::kRouterError));
    return;
  }
  SendOptions send = SendOptionsFor(PolicyOf(exchange->decisions[index].resend), call, target,
                                    options_.routing.base, exchange->header_min_slot);
  // The answer's bytes may pass through compressed unless the cache keeps them or gives them
  // to followers (a leader's answer is read).
  send.accept_gzip =
      exchange->gzip_pass_through && (exchange->cache.empty() || !exchange->cache[index].leader);
  if (options_.integrity.consensus() && send.policy == RetryPolicy::kSafe) {
    // A consensus read (docs/architecture.md §22): the request's header, else the method's rule.
    std::optional<ConsensusRule> rule = exchange->consensus;
    if (!rule) rule = options_.integrity.ConsensusFor(call.method);
    if (rule && rule->of > 1) {
      send.consensus_needs = rule->needs;
      send.consensus_of = rule->of;
      send.accept_gzip = false;  // its answers are compared
      may_batch = false;
    }
  }
  TargetLoad& load = loads_[target];
  if (may_batch && JoinCoalesced(target, load, send, exchange, index, done)) return;
  ++load.in_flight;
  upstreams_->Send(
      target, ForwardBody(call), send,
      [this, exchange, &call, target, &load,
       done = std::move(done)](absl::StatusOr<UpstreamResponse> response) {
        --load.in_flight;
        if (response.ok() && response->gzip) {
          // Unread: counted as an answer, whether it holds a result or an error.
          exchange->answer_gzip = true;
          done(std::move(response->body), CallOutcome{calls_->TargetId(target), RpcOutcome::kOk});
          return;
        }
        CallAnswer answer = AnswerFromResponse(target, call, response);
        done(std::move(answer.answer), answer.outcome);
      });
}

Task<Router::CallAnswer> Router::ForwardAsync(std::string target,
                                              std::shared_ptr<Exchange> exchange, size_t index) {
  const RpcCall& call = exchange->body.calls[index];
  if (!upstreams_->Has(target)) {
    co_return CallAnswer{
        RpcErrorResponse(
            call.id_or_null(),
            MakeRpcStatus(RpcErrorKind::kInternal, fmt::format("no upstream named {}", target))),
        AtRouter(RpcOutcome::kRouterError)};
  }
  absl::StatusOr<UpstreamResponse> response =
      co_await SendAsync(*upstreams_, target, ForwardBody(call),
                         SendOptionsFor(PolicyOf(exchange->decisions[index].resend), call, target,
                                        options_.routing.base, exchange->header_min_slot));
  co_return AnswerFromResponse(target, call, response);
}

namespace {
// How long a target that refused a whole upstream batch gets its calls one by one.
constexpr absl::Duration kBatchRefusalMemory = absl::Minutes(5);
}  // namespace

bool Router::TakesBatches(const std::string& target) {
  auto it = batches_refused_until_.find(target);
  if (it == batches_refused_until_.end()) return true;
  if (context_->clock()->Monotonic() < it->second) return false;
  batches_refused_until_.erase(it);  // time to try a batch again
  return true;
}

void Router::RefuseBatches(const std::string& target) {
  batches_refused_until_[target] = context_->clock()->Monotonic() + kBatchRefusalMemory;
}

Router::CallAnswer Router::AnswerFromElement(int target_id, std::string_view id,
                                             const UpstreamAnswer& element) {
  return element.is_error() ? CallAnswer{UpstreamErrorResponse(id, element.error),
                                         CallOutcome{target_id, RpcOutcome::kRpcError}}
                            : CallAnswer{RpcResultResponse(id, element.result),
                                         CallOutcome{target_id, RpcOutcome::kOk}};
}

bool Router::JoinCoalescedBatch(const std::shared_ptr<Exchange>& exchange,
                                const UpstreamBatch& batch) {
  const TargetLoad& load = loads_[batch.target];
  if (options_.integrity.consensus()) return false;  // a consensus read goes alone
  for (size_t i : batch.calls) {
    const RpcCall& call = exchange->body.calls[i];
    if (PolicyOf(exchange->decisions[i].resend) != RetryPolicy::kSafe || !call.id.has_value() ||
        !MayCoalesce(batch.target, load, call.method)) {
      return false;
    }
  }
  for (size_t i : batch.calls) {
    if (exchange->decisions[i].verification == Verification::kOwnerProbe) {
      JoinProbed(exchange, i);
    } else {
      Forward(batch.target, i, exchange, BatchedAnswerTo(exchange, i), /*may_batch=*/true);
    }
  }
  return true;
}

void Router::ForwardBatch(std::shared_ptr<Exchange> exchange, UpstreamBatch batch) {
  if (!upstreams_->Has(batch.target) || !TakesBatches(batch.target)) {
    for (size_t i : batch.calls) SendAlone(exchange, batch.target, i);
    return;
  }
  if (JoinCoalescedBatch(exchange, batch)) return;
  metrics_->upstream_batches.Increment();
  metrics_->upstream_batch_calls.Increment(batch.calls.size());
  // A call judged by a probe (getBalance) takes its probe along: element calls.size() + j is
  // the probe of calls[probed[j]].
  std::vector<size_t> probed;
  std::vector<std::pair<std::string_view, std::string>> probes;
  for (size_t k = 0; k < batch.calls.size(); ++k) {
    const RouteDecision& decision = exchange->decisions[batch.calls[k]];
    if (decision.verification == Verification::kOwnerProbe && decision.account) {
      probed.push_back(k);
      probes.emplace_back("getAccountInfo", OwnerProbeParams(exchange->body.calls[batch.calls[k]],
                                                             *decision.account));
    }
  }
  std::string body = UpstreamBatchBody(exchange->body.calls, batch.calls, probes);
  const std::string target = batch.target;  // `batch` moves into the callback
  SendOptions send(RetryPolicy::kSafe);
  for (size_t i : batch.calls) {
    const RpcCall& call = exchange->body.calls[i];
    send.large_answer = send.large_answer || MayAnswerLarge(call.method);
    send.min_slot = std::max(
        send.min_slot, MinSlotFor(call, target, options_.routing.base, exchange->header_min_slot));
  }
  // In flight for the adaptive batching: the client batches that follow it while it is out
  // join the batch waiting for the target (JoinCoalescedBatch).
  TargetLoad& load = loads_[target];
  load.in_flight += batch.calls.size();
  upstreams_->Send(target, std::move(body), send,
                   [this, exchange, &load, batch = std::move(batch),
                    probed = std::move(probed)](absl::StatusOr<UpstreamResponse> response) {
                     load.in_flight -= batch.calls.size();
                     OnBatchAnswer(exchange, batch, probed, std::move(response));
                   });
}

void Router::SendAlone(const std::shared_ptr<Exchange>& exchange, const std::string& target,
                       size_t index) {
  if (exchange->decisions[index].verification == Verification::kOwnerProbe) {
    Run(exchange, index, ForwardProbed(exchange, index));
  } else {
    // Alone means alone: not coalesced into another batch with the other calls sent again.
    Forward(target, index, exchange, BatchedAnswerTo(exchange, index), /*may_batch=*/false);
  }
}

void Router::OnBatchAnswer(const std::shared_ptr<Exchange>& exchange, const UpstreamBatch& batch,
                           const std::vector<size_t>& probed,
                           absl::StatusOr<UpstreamResponse> response) {
  const int target_id = calls_->TargetId(batch.target);
  if (!response.ok()) {
    const absl::Status failure = UpstreamFailure(batch.target, response.status());
    for (size_t i : batch.calls) {
      BatchedAnswerTo(exchange, i)(RpcErrorResponse(exchange->body.calls[i].id_or_null(), failure),
                                   CallOutcome{target_id, RpcOutcome::kUpstreamFailure});
    }
    return;
  }
  absl::StatusOr<std::vector<std::optional<UpstreamAnswer>>> answers =
      response->status == 200
          ? ParseUpstreamBatchAnswer(response->body, batch.calls.size() + probed.size())
          : absl::UnavailableError(fmt::format("HTTP {}", response->status));
  std::vector<size_t> alone;
  for (size_t k = 0; k < batch.calls.size(); ++k) {
    const size_t i = batch.calls[k];
    if (!answers.ok() || !(*answers)[k]) {
      alone.push_back(i);
      continue;
    }
    CallAnswer call_answer =
        AnswerFromElement(target_id, exchange->body.calls[i].id_or_null(), *(*answers)[k]);
    const auto probe = std::find(probed.begin(), probed.end(), k);
    if (probe != probed.end()) {
      AnswerProbedInBatch(exchange, i, std::move(call_answer),
                          (*answers)[batch.calls.size() + (probe - probed.begin())]);
    } else {
      BatchedAnswerTo(exchange, i)(std::move(call_answer.answer), call_answer.outcome);
    }
  }
  if (alone.empty()) return;
  metrics_->upstream_batch_fallbacks.Increment(alone.size());
  if (response->status != 200) {  // batches refused as such (HTTP 400, 405, 413...)
    RefuseBatches(batch.target);
  }
  if (batch_fallbacks_logged_.insert(batch.target).second) {
    spdlog::warn(
        "upstream {} did not answer every call of a JSON-RPC batch ({}); such calls are sent "
        "again one by one (switchyard_api_upstream_batch_fallbacks_total; logged once per "
        "upstream and worker); after an HTTP error for a whole batch this worker sends that "
        "upstream no batch for 5 minutes",
        batch.target,
        answers.ok() ? fmt::format("{} of {} calls missing", alone.size(), batch.calls.size())
                     : std::string(answers.status().message()));
  }
  for (size_t i : alone) SendAlone(exchange, batch.target, i);
}

Task<absl::StatusOr<UpstreamResponse>> Router::SendOne(SubCall sub, RetryPolicy policy) {
  if (!upstreams_->Has(sub.target)) {
    co_return MakeRpcStatus(RpcErrorKind::kInternal,
                            fmt::format("no upstream named {}", sub.target));
  }
  std::string target = sub.target;
  absl::StatusOr<UpstreamResponse> response =
      co_await AwaitCallback<absl::StatusOr<UpstreamResponse>>(
          [this, &sub, policy](UpstreamCallback done) {
            SendSubCall(std::move(sub), policy, std::move(done));
          });
  if (!response.ok()) co_return UpstreamFailure(target, response.status());
  co_return response;
}

Task<std::vector<absl::StatusOr<UpstreamResponse>>> Router::SendAll(Requests requests,
                                                                    RetryPolicy policy) {
  if (requests.size() == 1) {  // no join needed
    std::vector<absl::StatusOr<UpstreamResponse>> responses;
    responses.push_back(co_await SendOne(std::move(requests[0]), policy));
    co_return responses;
  }
  std::vector<Task<absl::StatusOr<UpstreamResponse>>> sends;
  sends.reserve(requests.size());
  for (SubCall& sub : requests) sends.push_back(SendOne(std::move(sub), policy));
  co_return co_await AwaitEach(std::move(sends));
}

namespace {

// Each response parsed by `parse`, a failed one kept as its status.
template <typename T, typename Parse>
std::vector<absl::StatusOr<T>> ParseEach(
    const std::vector<absl::StatusOr<UpstreamResponse>>& responses, Parse parse) {
  std::vector<absl::StatusOr<T>> answers;
  answers.reserve(responses.size());
  for (const absl::StatusOr<UpstreamResponse>& response : responses) {
    if (response.ok()) {
      answers.push_back(parse(response->body));
    } else {
      answers.push_back(response.status());
    }
  }
  return answers;
}

}  // namespace

Task<std::vector<absl::StatusOr<UpstreamAnswer>>> Router::Gather(Requests requests,
                                                                 RetryPolicy policy) {
  std::vector<absl::StatusOr<UpstreamResponse>> responses =
      co_await SendAll(std::move(requests), policy);
  co_return ParseEach<UpstreamAnswer>(
      responses, [](std::string_view body) { return ParseUpstreamAnswer(body); });
}

Task<absl::StatusOr<ListAnswer>> Router::SendList(SubCall sub) {
  if (!upstreams_->Has(sub.target)) {
    co_return MakeRpcStatus(RpcErrorKind::kInternal,
                            fmt::format("no upstream named {}", sub.target));
  }
  co_return co_await AwaitCallback<absl::StatusOr<ListAnswer>>(
      [this, &sub](ListCallback done) { SendListSubCall(std::move(sub), std::move(done)); });
}

Task<std::vector<absl::StatusOr<ListAnswer>>> Router::GatherLists(Requests requests) {
  if (requests.size() == 1) {  // no join needed
    std::vector<absl::StatusOr<ListAnswer>> answers;
    answers.push_back(co_await SendList(std::move(requests[0])));
    co_return answers;
  }
  std::vector<Task<absl::StatusOr<ListAnswer>>> sends;
  sends.reserve(requests.size());
  for (SubCall& sub : requests) sends.push_back(SendList(std::move(sub)));
  co_return co_await AwaitEach(std::move(sends));
}

}  // namespace switchyard
