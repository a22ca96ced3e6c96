#include "api/pubsub/pubsub_shard.h"

#include <algorithm>
#include <chrono>
#include <optional>

#include "api/jsonrpc/jsonrpc.h"
#include "api/jsonrpc/rpc_errors.h"
#include "api/routing/route_decision.h"
#include "common/clock.h"
#include "fmt/format.h"
#include "spdlog/spdlog.h"

namespace switchyard {

namespace asio = boost::asio;

PubsubShard::PubsubShard(size_t index, PubsubRouter* router)
    : index_(index),
      router_(router),
      io_(router->thread(index)),
      context_(router->context()),
      metrics_(router->metrics()),
      options_(router->options()),
      registry_(router->thread_count()),
      links_(router, io_, this),
      // The baselines' HTTP upstreams, on the shard's thread (no endpoint health of their own).
      baselines_(io_, router->context()->NewUpstreamSet(io_, /*with_health=*/false),
                 router->metrics(), router->options(), this),
      flush_timer_(io_) {}

PubsubShard::~PubsubShard() = default;

void PubsubShard::Start() {
  links_.Start(weak_from_this());
  baselines_.Start(weak_from_this());
  std::weak_ptr<PubsubShard> weak = weak_from_this();
  asio::io_context* io = &io_;
  listener_id_ = context_->snapshots()->AddListener(
      [weak, io](const std::shared_ptr<const Snapshot>& snapshot) {
        asio::post(*io, [weak, snapshot] {
          if (auto self = weak.lock()) self->OnSnapshot(snapshot);
        });
      });
}

void PubsubShard::Shutdown() {
  if (shut_down_) return;
  shut_down_ = true;
  context_->snapshots()->RemoveListener(listener_id_);
  flush_timer_.cancel();
  FlushMetrics();
  for (auto& weak : timers_) {
    if (auto timer = weak.lock()) timer->cancel();
  }
  timers_.clear();
  links_.Shutdown();
  registry_.Clear();
  baselines_.Shutdown();
}

std::shared_ptr<const Snapshot> PubsubShard::CurrentSnapshot() const {
  std::shared_ptr<const Snapshot> snapshot = context_->snapshots()->Current();
  if (!snapshot) {
    snapshot = std::make_shared<const Snapshot>(AccountMap(), 0, StateDigest(), std::nullopt, 0);
  }
  return snapshot;
}

void PubsubShard::Subscribe(std::shared_ptr<PubsubClient> client, SubscribeRequest request) {
  if (shut_down_ || client->closed()) return;
  PubsubSubscription* sub = registry_.FindByKey(request.key);
  if (sub == nullptr) {
    absl::StatusOr<PubsubSubscription*> created = Create(request);
    if (!created.ok()) {
      Refuse(client, request.request_id, std::move(request.key), request.method, created.status());
      return;
    }
    sub = *created;
  }
  registry_.AddClient(*sub, client);
  if (sub->answered) {
    Answer(client, request.request_id, *sub);
  } else {
    registry_.AddWaiter(*sub, client, std::move(request.request_id));
  }
}

absl::StatusOr<std::vector<std::string>> PubsubShard::TargetsFor(const SubscribeRequest& request) {
  // The ERs as the directory knows them now: configured and discovered from the registry.
  const std::shared_ptr<const ErTable> ers = context_->ers()->Current();
  const RoutingTable& routing = ers->routing;
  std::vector<std::string> targets;
  switch (request.method->routing) {
    case PubsubRouting::kAccount: {
      absl::StatusOr<std::string> target =
          TargetForAccount(*request.params.account, *CurrentSnapshot(), routing);
      if (!target.ok()) return target.status();
      targets.push_back(*target);
      break;
    }
    case PubsubRouting::kPassThrough:
      targets.push_back(routing.base);
      break;
    case PubsubRouting::kSignature:
      if (std::optional<std::string> remembered =
              context_->signatures().Find(*request.params.signature)) {
        targets.push_back(*remembered);
      } else {
        metrics_->signature_fanouts.Increment();
        targets.push_back(routing.base);
        for (const std::string& er : routing.er_targets) {
          if (std::find(targets.begin(), targets.end(), er) == targets.end()) {
            targets.push_back(er);
          }
        }
      }
      break;
  }
  for (const std::string& target : targets) {
    if (router_->EndpointsOf(target).empty()) {
      return MakeRpcStatus(RpcErrorKind::kInternal,
                           fmt::format("no pubsub endpoint for upstream {}", target));
    }
  }
  return targets;
}

absl::StatusOr<PubsubSubscription*> PubsubShard::Create(const SubscribeRequest& request) {
  const uint64_t id = router_->NextId();
  absl::StatusOr<std::vector<std::string>> targets = TargetsFor(request);
  if (!targets.ok()) return targets.status();
  PubsubSubscription& sub = registry_.Add(request, id);
  if (request.method->routing == PubsubRouting::kSignature) {
    for (const std::string& target : *targets) sub.fanout.push_back(links_.NewLeg(sub, target));
    for (auto& leg : sub.fanout) links_.Open(*leg);
  } else {
    sub.active = links_.NewLeg(sub, targets->front());
    links_.Open(*sub.active);
  }
  return &sub;
}

void PubsubShard::Answer(const std::shared_ptr<PubsubClient>& client, const std::string& request_id,
                         const PubsubSubscription& sub) {
  std::string answer = RpcResultResponse(request_id, std::to_string(sub.id));
  ToClient(client, [client, answer = std::move(answer), key = sub.key, index = index_,
                    method = sub.method, id = sub.id]() mutable {
    client->OnSubscribeAnswer(std::move(answer), std::move(key), index, method, id);
  });
}

void PubsubShard::Refuse(const std::shared_ptr<PubsubClient>& client, const std::string& request_id,
                         std::string key, const PubsubMethod* method, const absl::Status& why) {
  std::string answer = RpcErrorResponse(request_id, why);
  ToClient(client, [client, answer = std::move(answer), key = std::move(key), index = index_,
                    method]() mutable {
    client->OnSubscribeAnswer(std::move(answer), std::move(key), index, method, std::nullopt);
  });
}

void PubsubShard::Fail(PubsubSubscription& sub, const absl::Status& why) {
  spdlog::debug("pubsub: {} subscription {} closed: {}", sub.method->subscribe, sub.id,
                std::string(why.message()));
  for (const PubsubWaiter& w : sub.waiting) {
    Refuse(w.client, w.request_id, sub.key, sub.method, why);
  }
  const RpcError error = RpcErrorFromStatus(why);
  auto message = std::make_shared<const std::string>(fmt::format(
      R"({{"jsonrpc":"2.0","error":{{"code":{},"message":{},"data":{{"subscription":{}}}}},"id":null}})",
      error.code, JsonQuote(fmt::format("subscription {} closed: {}", sub.id, error.message)),
      sub.id));
  for (const auto& client : sub.clients) {
    const bool waiting = std::any_of(sub.waiting.begin(), sub.waiting.end(),
                                     [&](const PubsubWaiter& w) { return w.client == client; });
    if (waiting) continue;
    metrics_->subscriptions_failed.Increment();
    ToClient(client, [client, message, id = sub.id] { client->OnSubscriptionClosed(id, message); });
  }
  sub.waiting.clear();
  Destroy(sub);
}

void PubsubShard::Finish(PubsubSubscription& sub, const std::shared_ptr<const std::string>& last) {
  for (const auto& client : sub.clients) {
    metrics_->notifications_sent.Increment();
    ToClient(client, [client, last, id = sub.id] { client->OnSubscriptionClosed(id, last); });
  }
  Destroy(sub);
}

void PubsubShard::Destroy(PubsubSubscription& sub) {
  links_.Close(sub.active);
  links_.Close(sub.pending);
  for (auto& leg : sub.fanout) links_.Close(leg);
  registry_.Remove(sub);
}

void PubsubShard::DropClient(PubsubSubscription& sub, PubsubClient* client) {
  if (registry_.DropClient(sub, client)) Destroy(sub);
}

void PubsubShard::Unsubscribe(PubsubClient* client, uint64_t id) {
  if (shut_down_) return;
  if (PubsubSubscription* sub = registry_.Find(id)) DropClient(*sub, client);
}

void PubsubShard::RemoveClient(PubsubClient* client) {
  if (shut_down_) return;
  for (uint64_t id : registry_.SubscriptionsOf(client)) {
    if (PubsubSubscription* sub = registry_.Find(id)) DropClient(*sub, client);
  }
  registry_.ForgetClient(client);
}

void PubsubShard::OnSnapshot(std::shared_ptr<const Snapshot> snapshot) {
  if (shut_down_) return;
  // Only the newest snapshot matters; older posts are skipped.
  if (snapshot != context_->snapshots()->Current()) return;
  for (uint64_t id : registry_.AccountSubscriptions()) {
    if (PubsubSubscription* sub = registry_.Find(id)) Follow(*sub, *snapshot);
  }
}

void PubsubShard::Follow(PubsubSubscription& sub, const Snapshot& snapshot) {
  if (!sub.active) return;
  absl::StatusOr<std::string> target =
      TargetForAccount(*sub.params.account, snapshot, context_->ers()->Current()->routing);
  if (!target.ok()) {
    Fail(sub, target.status());
    return;
  }
  links_.Follow(sub, *target);
}

void PubsubShard::SwitchFailed(PubsubSubscription& sub, const absl::Status& why) {
  const std::string target = links_.AbandonSwitch(sub);
  if (sub.switch_failures >= options_.max_switch_failures) {
    Fail(sub,
         MakeRpcStatus(RpcErrorKind::kInternal, fmt::format("cannot follow the account to {}: {}",
                                                            target, std::string(why.message()))));
    return;
  }
  spdlog::debug("pubsub: subscription {} cannot switch to {} yet (attempt {}): {}", sub.id, target,
                sub.switch_failures, std::string(why.message()));
  absl::Duration delay = options_.baseline_retry_delay;
  for (int i = 1; i < sub.switch_failures; ++i) delay *= 2;
  RetryLater(sub.id, delay, [this](PubsubSubscription& s) { Follow(s, *CurrentSnapshot()); });
}

void PubsubShard::RetryLater(uint64_t id, absl::Duration delay,
                             std::function<void(PubsubSubscription&)> then) {
  auto timer = std::make_shared<asio::steady_timer>(io_, ToChrono(delay));
  std::erase_if(timers_, [](const auto& weak) { return weak.expired(); });
  timers_.push_back(timer);
  timer->async_wait(
      [weak = weak_from_this(), timer, id, then = std::move(then)](boost::system::error_code ec) {
        auto self = weak.lock();
        if (ec || !self || self->shut_down_) return;
        if (PubsubSubscription* sub = self->registry_.Find(id)) then(*sub);
      });
}

void PubsubShard::OnLegLive(PubsubLeg& leg, bool reconnected) {
  PubsubSubscription& sub = *leg.sub;
  if (!sub.answered) {
    for (const PubsubWaiter& w : registry_.TakeWaiting(sub)) Answer(w.client, w.request_id, sub);
  }
  if (sub.method->routing != PubsubRouting::kAccount) return;
  if (&leg == sub.pending.get()) {
    baselines_.Read(leg, BaselineKind::kSwitch);
  } else if (&leg == sub.active.get()) {
    baselines_.Read(leg, reconnected ? BaselineKind::kResync : BaselineKind::kSilent);
  }
}

void PubsubShard::OnLegFailed(PubsubLeg& leg, const absl::Status& why) {
  PubsubSubscription& sub = *leg.sub;
  switch (sub.method->routing) {
    case PubsubRouting::kSignature: {
      auto it = std::find_if(sub.fanout.begin(), sub.fanout.end(),
                             [&leg](const auto& l) { return l.get() == &leg; });
      if (sub.fanout.size() > 1 && it != sub.fanout.end()) {
        links_.Close(*it);
        sub.fanout.erase(it);
        return;
      }
      Fail(sub, why);
      return;
    }
    case PubsubRouting::kAccount:
      if (&leg == sub.pending.get()) {
        SwitchFailed(sub, why);
        return;
      }
      Fail(sub, why);
      return;
    case PubsubRouting::kPassThrough:
      Fail(sub, why);
      return;
  }
}

void PubsubShard::OnBaselineFailed(PubsubLeg& leg, BaselineKind kind, const absl::Status& why) {
  PubsubSubscription& sub = *leg.sub;
  switch (kind) {
    case BaselineKind::kSilent:
      spdlog::debug("pubsub: subscription {}: {}", sub.id, std::string(why.message()));
      return;
    case BaselineKind::kSwitch:
      SwitchFailed(sub, why);
      return;
    case BaselineKind::kResync:
      Fail(sub, why);
      return;
    case BaselineKind::kNone:
      return;
  }
}

void PubsubShard::ArmMetricsFlush() {
  flush_armed_ = true;
  flush_timer_.expires_after(std::chrono::milliseconds(100));
  flush_timer_.async_wait([weak = weak_from_this()](boost::system::error_code ec) {
    auto self = weak.lock();
    if (!self) return;
    self->flush_armed_ = false;
    if (!ec) self->FlushMetrics();
  });
}

void PubsubShard::FlushMetrics() {
  metrics_->upstream_notifications.Increment(unflushed_upstream_);
  metrics_->notifications_sent.Increment(unflushed_sent_);
  unflushed_upstream_ = 0;
  unflushed_sent_ = 0;
}

void PubsubShard::OnNotification(PubsubLeg* leg, std::string_view message,
                                 const UpstreamMessage& parsed) {
  ++unflushed_upstream_;
  if (!flush_armed_) ArmMetricsFlush();
  if (leg == nullptr) return;
  PubsubSubscription& sub = *leg->sub;
  switch (sub.method->routing) {
    case PubsubRouting::kPassThrough:
      Fanout(sub,
             std::make_shared<const std::string>(RewriteSubscription(message, parsed, sub.id)));
      return;
    case PubsubRouting::kAccount:
      baselines_.OnNotification(*leg, message, parsed);
      return;
    case PubsubRouting::kSignature:
      OnSignatureNotification(*leg, message, parsed);
      return;
  }
}

void PubsubShard::OnSignatureNotification(PubsubLeg& leg, std::string_view message,
                                          const UpstreamMessage& parsed) {
  PubsubSubscription& sub = *leg.sub;
  auto rewritten =
      std::make_shared<const std::string>(RewriteSubscription(message, parsed, sub.id));
  if (parsed.value_is_string) {
    // "receivedSignature": shown once, the subscription stays.
    if (sub.received_sent) return;
    sub.received_sent = true;
    Fanout(sub, rewritten);
    return;
  }
  // The final notification: the upstream ended its subscription itself; the other legs are
  // unsubscribed.
  links_.MarkEnded(leg);
  Finish(sub, rewritten);
}

void PubsubShard::Fanout(PubsubSubscription& sub,
                         const std::shared_ptr<const std::string>& message) {
  for (size_t t = 0; t < sub.by_thread.size(); ++t) {
    const std::shared_ptr<const PubsubClientList>& list = sub.by_thread[t];
    if (!list) continue;
    unflushed_sent_ += list->size();
    if (t == index_) {
      for (const auto& client : *list) {
        if (!client->closed()) client->Deliver(message);
      }
    } else {
      asio::post(router_->thread(t), [list, message] {
        for (const auto& client : *list) {
          if (!client->closed()) client->Deliver(message);
        }
      });
    }
  }
}

}  // namespace switchyard
