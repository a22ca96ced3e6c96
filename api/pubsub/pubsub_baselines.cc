#include "api/pubsub/pubsub_baselines.h"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/post.hpp>

#include "api/jsonrpc/jsonrpc.h"
#include "api/jsonrpc/rpc_errors.h"
#include "api/jsonrpc/rpc_merge.h"
#include "fmt/format.h"

namespace switchyard {

namespace asio = boost::asio;

namespace {

// Baselines are read with getMultipleAccounts, up to Solana's limit of accounts per call.
constexpr size_t kBaselineBatch = 100;
constexpr size_t kBaselinesInFlight = 4;  // per shard

// A getMultipleAccounts answer for `count` accounts: its context (raw), its values (raw) and
// the slot of its context.
struct BaselineAnswer {
  ContextList list;
  uint64_t slot = 0;
};

absl::StatusOr<BaselineAnswer> ParseBaselineAnswer(const absl::StatusOr<UpstreamResponse>& response,
                                                   size_t count) {
  if (!response.ok()) return response.status();
  absl::StatusOr<UpstreamAnswer> answer = ParseUpstreamAnswer(response->body);
  if (!answer.ok()) return answer.status();
  if (answer->is_error()) {
    return absl::InternalError(fmt::format("getMultipleAccounts: {}", answer->error));
  }
  absl::StatusOr<ContextList> list = ParseContextList(answer->result);
  if (!list.ok()) return list.status();
  if (list->values.size() != count) {
    return absl::InternalError("getMultipleAccounts answered a different number of accounts");
  }
  absl::StatusOr<ContextValue> context =
      ParseContextValue(fmt::format("{{\"context\":{},\"value\":null}}", list->context));
  if (!context.ok()) return context.status();
  return BaselineAnswer{*std::move(list), context->slot};
}

}  // namespace

PubsubBaselines::PubsubBaselines(asio::io_context& io, std::unique_ptr<UpstreamClient> http,
                                 PubsubMetrics* metrics, const PubsubRouterOptions& options,
                                 Owner* owner)
    : io_(io), owner_(owner), metrics_(metrics), options_(options), http_(std::move(http)) {}

PubsubBaselines::~PubsubBaselines() = default;

void PubsubBaselines::Start(std::weak_ptr<void> lifetime) { lifetime_ = std::move(lifetime); }

void PubsubBaselines::Shutdown() {
  shut_down_ = true;
  http_->Shutdown();
}

void PubsubBaselines::Read(PubsubLeg& leg, BaselineKind kind) {
  leg.baseline.kind = kind;
  leg.baseline.attempts = 0;
  ++leg.baseline.generation;
  leg.baseline.held.clear();
  Queue(leg);
}

void PubsubBaselines::OnNotification(PubsubLeg& leg, std::string_view message,
                                     const UpstreamMessage& parsed) {
  PubsubSubscription& sub = *leg.sub;
  LegBaseline& baseline = leg.baseline;
  const uint64_t slot = parsed.context_slot.value_or(0);
  if (baseline.floor_slot && parsed.context_slot && slot <= *baseline.floor_slot) {
    metrics_->duplicates_dropped.Increment();
    return;
  }
  size_t value_offset = 0;
  auto rewritten = std::make_shared<const std::string>(
      RewriteSubscription(message, parsed, sub.id, &value_offset));
  if (baseline.kind == BaselineKind::kSwitch || baseline.kind == BaselineKind::kResync) {
    baseline.held.push_back(
        HeldNotification{slot, std::move(rewritten), value_offset, parsed.value_size});
    if (baseline.held.size() > options_.max_buffered_notifications) {
      baseline.held.pop_front();
      metrics_->duplicates_dropped.Increment();
    }
    return;
  }
  if (&leg != sub.active.get()) return;
  Deliver(sub, std::move(rewritten), value_offset, parsed.value_size);
}

void PubsubBaselines::Deliver(PubsubSubscription& sub, std::shared_ptr<const std::string> message,
                              size_t value_offset, size_t value_size) {
  owner_->Fanout(sub, message);
  sub.RememberValue(std::move(message), value_offset, value_size);
}

void PubsubBaselines::Queue(PubsubLeg& leg) {
  queue_[{leg.target, leg.sub->params.account_config}].emplace_back(leg.serial,
                                                                    leg.baseline.generation);
  // Everything queued in this turn of the event loop goes out together.
  if (posted_) return;
  posted_ = true;
  asio::post(io_, [this, lifetime = lifetime_] {
    if (auto alive = lifetime.lock()) {
      posted_ = false;
      SendQueued();
    }
  });
}

PubsubLeg* PubsubBaselines::Awaiting(const QueuedRead& read) const {
  PubsubLeg* leg = owner_->FindLeg(read.first);
  if (leg == nullptr || leg->baseline.generation != read.second ||
      leg->baseline.kind == BaselineKind::kNone) {
    return nullptr;
  }
  return leg;
}

void PubsubBaselines::SendQueued() {
  if (shut_down_) return;
  for (auto it = queue_.begin(); it != queue_.end() && in_flight_ < kBaselinesInFlight;) {
    std::vector<QueuedRead>& queued = it->second;
    std::vector<QueuedRead> batch;
    std::string keys;
    while (!queued.empty() && batch.size() < kBaselineBatch) {
      const QueuedRead read = queued.back();
      queued.pop_back();
      PubsubLeg* leg = Awaiting(read);
      if (leg == nullptr) continue;
      if (!keys.empty()) keys.push_back(',');
      keys += JsonQuote(leg->sub->params.account->ToBase58());
      batch.push_back(read);
    }
    const auto [target, config] = it->first;
    if (queued.empty()) {
      queue_.erase(it++);
    } else {
      ++it;
    }
    if (batch.empty()) continue;
    const std::string body =
        SubRequest("getMultipleAccounts", config.empty() ? fmt::format("[[{}]]", keys)
                                                         : fmt::format("[[{}],{}]", keys, config));
    ++in_flight_;
    asio::co_spawn(io_, ReadBatch(lifetime_, target, body, std::move(batch)), asio::detached);
  }
}

Task<void> PubsubBaselines::ReadBatch(std::weak_ptr<void> lifetime, std::string target,
                                      std::string body, std::vector<QueuedRead> batch) {
  absl::StatusOr<UpstreamResponse> response =
      absl::UnavailableError(fmt::format("no HTTP upstream named {}", target));
  // (Not a conditional expression: GCC 12 destroys the temporaries of a co_await in one twice.)
  if (http_->Has(target)) {
    response = co_await SendAsync(*http_, target, std::move(body), RetryPolicy::kSafe);
  }
  // The shard, and this with it, may be gone by the time the answer is in.
  if (auto alive = lifetime.lock()) OnRead(batch, response);
}

void PubsubBaselines::OnRead(const std::vector<QueuedRead>& batch,
                             const absl::StatusOr<UpstreamResponse>& response) {
  if (shut_down_) return;
  --in_flight_;
  const absl::StatusOr<BaselineAnswer> answer = ParseBaselineAnswer(response, batch.size());
  for (size_t i = 0; i < batch.size(); ++i) {
    PubsubLeg* leg = Awaiting(batch[i]);
    if (leg == nullptr) continue;
    if (!answer.ok()) {
      Failed(*leg, answer.status());
      continue;
    }
    const std::string& value = answer->list.values[i];
    Apply(*leg, answer->slot, value,
          fmt::format("{{\"context\":{},\"value\":{}}}", answer->list.context, value));
  }
  SendQueued();
}

void PubsubBaselines::Failed(PubsubLeg& leg, const absl::Status& failure) {
  if (++leg.baseline.attempts < options_.max_baseline_attempts) {
    owner_->RetryLater(
        leg.sub->id, options_.baseline_retry_delay,
        [this, read = QueuedRead(leg.serial, leg.baseline.generation)](PubsubSubscription&) {
          if (PubsubLeg* again = Awaiting(read)) Queue(*again);
        });
    return;
  }
  const BaselineKind kind = leg.baseline.kind;
  leg.baseline.kind = BaselineKind::kNone;
  owner_->OnBaselineFailed(leg, kind,
                           MakeRpcStatus(RpcErrorKind::kInternal,
                                         fmt::format("cannot read the account from {}: {}",
                                                     leg.target, std::string(failure.message()))));
}

void PubsubBaselines::Apply(PubsubLeg& leg, uint64_t slot, const std::string& value,
                            const std::string& result_json) {
  PubsubSubscription& sub = *leg.sub;
  const BaselineKind kind = leg.baseline.kind;
  leg.baseline.kind = BaselineKind::kNone;
  metrics_->baselines_read.Increment();
  switch (kind) {
    case BaselineKind::kNone:
      return;
    case BaselineKind::kSilent:
      if (!sub.have_last) {
        sub.RememberValue(std::make_shared<const std::string>(value), 0, value.size());
      }
      return;
    case BaselineKind::kResync:
      leg.baseline.floor_slot = slot;
      Emit(sub, value, result_json);
      Release(leg, slot);
      return;
    case BaselineKind::kSwitch:
      leg.baseline.floor_slot = slot;
      owner_->CompleteSwitch(sub);
      Emit(sub, value, result_json);
      Release(*sub.active, slot);
      return;
  }
}

void PubsubBaselines::Emit(PubsubSubscription& sub, const std::string& value,
                           const std::string& result_json) {
  if (value == "null") return;  // nothing to show (the chain does not have the account)
  if (sub.have_last && SameJsonValue(sub.last_value(), value)) {
    metrics_->duplicates_dropped.Increment();
    return;
  }
  metrics_->baselines_sent.Increment();
  owner_->Fanout(sub, std::make_shared<const std::string>(
                          MakeNotification("accountNotification", result_json, sub.id)));
  sub.RememberValue(std::make_shared<const std::string>(value), 0, value.size());
}

void PubsubBaselines::Release(PubsubLeg& leg, uint64_t floor) {
  std::deque<HeldNotification> held = std::move(leg.baseline.held);
  leg.baseline.held.clear();
  for (HeldNotification& notification : held) {
    if (notification.slot <= floor) {
      metrics_->duplicates_dropped.Increment();
      continue;
    }
    Deliver(*leg.sub, std::move(notification.message), notification.value_offset,
            notification.value_size);
  }
}

}  // namespace switchyard
