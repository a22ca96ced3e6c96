#include "api/pubsub_router.h"

#include <simdjson.h>

#include <boost/asio/post.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <deque>
#include <functional>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/hash/hash.h"
#include "absl/strings/numbers.h"
#include "absl/synchronization/notification.h"
#include "api/internal/raw_json.h"
#include "api/jsonrpc.h"
#include "api/route_decision.h"
#include "api/rpc_merge.h"
#include "common/clock.h"
#include "fmt/format.h"
#include "spdlog/spdlog.h"

namespace switchyard {

namespace asio = boost::asio;

namespace {

// What an account baseline (the account read after its upstream subscription is live) is for.
enum class Baseline {
  kNone,
  kSilent,  // the first subscription: remembers the value the clients start from
  kSwitch,  // the chain being switched to: the switch happens when it arrives
  kResync,  // after a reconnect: shows what changed while the connection was down
};

// A notification held back while its subscription's baseline is read.
struct Buffered {
  uint64_t slot = 0;
  std::shared_ptr<const std::string> message;
  size_t value_offset = 0;
  size_t value_size = 0;
};

using ClientList = std::vector<std::shared_ptr<PubsubClient>>;

// Baselines are read with getMultipleAccounts, up to Solana's limit of accounts per call.
constexpr size_t kBaselineBatch = 100;
constexpr size_t kBaselinesInFlight = 4;  // per shard

// A JSON-RPC error object from an upstream, as a Status (rpc_errors.h decides the kind).
absl::Status StatusFromUpstreamError(std::string_view raw) {
  simdjson::dom::parser parser;
  simdjson::dom::element error;
  int64_t code = -32603;
  std::string_view message = "upstream error";
  if (parser.parse(raw.data(), raw.size()).get(error) == simdjson::SUCCESS) {
    if (error["code"].get_int64().get(code) != simdjson::SUCCESS) code = -32603;
    if (error["message"].get_string().get(message) != simdjson::SUCCESS) message = "upstream error";
  }
  return RpcStatusFromUpstreamError(code, message);
}

}  // namespace

// The subscriptions of one shard and their upstream connections. Lives on one pubsub thread;
// every member is touched only there (the snapshot listener posts to it).
class PubsubShard : public PubsubUpstream::Listener,
                    public std::enable_shared_from_this<PubsubShard> {
 public:
  PubsubShard(size_t index, PubsubRouter* router);

  void Start();
  void Shutdown();
  void Subscribe(std::shared_ptr<PubsubClient> client, SubscribeRequest request);
  void Unsubscribe(PubsubClient* client, uint64_t id);
  void RemoveClient(PubsubClient* client);
  void OnSnapshot(std::shared_ptr<const Snapshot> snapshot);

  void OnUpstreamOpen(PubsubUpstream& upstream, bool reconnected) override;
  void OnUpstreamLost(PubsubUpstream& upstream, const absl::Status& why) override;
  void OnUpstreamFailed(PubsubUpstream& upstream, const absl::Status& why) override;
  void OnUpstreamNotification(PubsubUpstream& upstream, std::string_view message,
                              const UpstreamMessage& parsed) override;

 private:
  struct Link;
  struct Subscription;

  // One upstream subscription of a router subscription, on one target.
  struct Leg {
    uint64_t serial = 0;
    Subscription* sub = nullptr;
    std::string target;
    Link* link = nullptr;
    uint64_t upstream_id = 0;
    bool live = false;
    bool ever_live = false;
    bool counted = false;     // in the upstream subscription gauge
    uint64_t call_token = 0;  // of the subscribe call in flight; 0 when none
    Baseline baseline = Baseline::kNone;
    uint64_t baseline_generation = 0;
    int baseline_attempts = 0;
    std::optional<uint64_t> floor_slot;  // notifications at or below it are covered
    std::deque<Buffered> buffer;
  };

  struct Link {
    std::shared_ptr<PubsubUpstream> upstream;
    absl::flat_hash_map<uint64_t, Leg*> by_upstream_id;
    absl::flat_hash_set<Leg*> legs;
  };

  struct Waiting {
    std::shared_ptr<PubsubClient> client;
    std::string request_id;
  };

  struct Subscription {
    uint64_t id = 0;
    const PubsubMethod* method = nullptr;
    std::string key;
    SubscribeParams params;
    ClientList clients;
    std::vector<std::shared_ptr<const ClientList>> by_thread;
    std::vector<Waiting> waiting;
    bool answered = false;
    std::unique_ptr<Leg> active;
    std::unique_ptr<Leg> pending;
    std::vector<std::unique_ptr<Leg>> fanout;
    // Accounts: the value the clients last saw.
    std::shared_ptr<const std::string> last;
    size_t last_offset = 0;
    size_t last_size = 0;
    bool have_last = false;
    int switch_failures = 0;
    std::chrono::steady_clock::time_point switch_started;
    // Signatures.
    bool received_sent = false;
  };

  template <typename F>
  void ToClient(const std::shared_ptr<PubsubClient>& client, F&& f) {
    if (client->thread() == index_) {
      f();
    } else {
      asio::post(router_->thread(client->thread()), std::forward<F>(f));
    }
  }

  std::shared_ptr<const Snapshot> CurrentSnapshot() const;
  absl::StatusOr<Subscription*> Create(const SubscribeRequest& request);
  Link& LinkFor(const std::string& target);
  std::unique_ptr<Leg> NewLeg(Subscription* sub, const std::string& target);
  void OpenLeg(Leg* leg);
  void SubscribeLeg(Leg* leg);
  void OnSubscribed(uint64_t serial, uint64_t token, std::weak_ptr<PubsubUpstream> upstream,
                    std::string_view unsubscribe, absl::StatusOr<PubsubUpstream::Answer> answer);
  void LegLive(Leg* leg);
  void LegFailed(Leg* leg, const absl::Status& why);
  void CloseLeg(std::unique_ptr<Leg>& leg, bool unsubscribe = true);
  void AddClient(Subscription* sub, const std::shared_ptr<PubsubClient>& client);
  void DropClient(Subscription* sub, PubsubClient* client);
  void RebuildFanout(Subscription* sub);
  void Fanout(Subscription* sub, const std::shared_ptr<const std::string>& message);
  void Answer(const std::shared_ptr<PubsubClient>& client, const std::string& request_id,
              Subscription* sub);
  void Fail(Subscription* sub, const absl::Status& why);
  void Finish(Subscription* sub, std::shared_ptr<const std::string> last);
  void Destroy(Subscription* sub);
  void Evaluate(Subscription* sub, const Snapshot& snapshot);
  void SwitchFailed(Subscription* sub, const absl::Status& why);
  void RetryLater(uint64_t id, absl::Duration delay, std::function<void(Subscription*)> then);
  void OnAccountNotification(Leg* leg, std::string_view message, const UpstreamMessage& parsed);
  void OnSignatureNotification(Leg* leg, std::string_view message, const UpstreamMessage& parsed);
  void DeliverAccount(Subscription* sub, std::shared_ptr<const std::string> message,
                      size_t value_offset, size_t value_size);
  void StartBaseline(Leg* leg, Baseline kind);
  void QueueBaseline(Leg* leg);
  void SendBaselines();
  void OnBaselines(std::vector<std::pair<uint64_t, uint64_t>> legs,
                   absl::StatusOr<UpstreamResponse> response);
  void BaselineFailed(Leg* leg, const absl::Status& failure);
  void ApplyBaseline(Leg* leg, uint64_t slot, const std::string& value,
                     const std::string& result_json);
  void EmitBaseline(Subscription* sub, const std::string& value, const std::string& result_json);
  void Flush(Leg* leg, uint64_t floor);
  // The per-notification counters are kept here and added to the shared ones every 100 ms, so
  // that shards do not contend for their cache lines on every notification.
  void ArmMetricsFlush();
  void FlushMetrics();
  Leg* FindLeg(uint64_t serial) {
    auto it = legs_.find(serial);
    return it == legs_.end() ? nullptr : it->second;
  }

  const size_t index_;
  PubsubRouter* const router_;
  asio::io_context& io_;
  RouterContext* const context_;
  const RoutingTable& routing_;
  PubsubMetrics* const metrics_;
  const PubsubRouterOptions& options_;
  std::unique_ptr<UpstreamSet> http_;
  absl::flat_hash_map<std::string, std::unique_ptr<Link>> links_;
  absl::flat_hash_map<const PubsubUpstream*, Link*> link_of_;
  absl::flat_hash_map<uint64_t, std::unique_ptr<Subscription>> subs_;
  absl::flat_hash_map<std::string, Subscription*> by_key_;
  absl::flat_hash_map<PubsubClient*, absl::flat_hash_set<uint64_t>> by_client_;
  absl::flat_hash_set<uint64_t> accounts_;
  absl::flat_hash_map<uint64_t, Leg*> legs_;
  std::vector<std::weak_ptr<asio::steady_timer>> timers_;
  // Baselines waiting to be read, by target and account config: (leg serial, generation).
  // They go out as getMultipleAccounts of up to kBaselineBatch accounts, at most
  // kBaselinesInFlight requests at a time.
  absl::flat_hash_map<std::string, std::vector<std::pair<uint64_t, uint64_t>>> baseline_queue_;
  size_t baselines_in_flight_ = 0;
  bool baselines_posted_ = false;
  asio::steady_timer flush_timer_;
  bool flush_armed_ = false;
  uint64_t unflushed_upstream_ = 0;
  uint64_t unflushed_sent_ = 0;
  uint64_t next_serial_ = 1;
  uint64_t next_token_ = 1;
  uint64_t listener_id_ = 0;
  bool shut_down_ = false;
};

PubsubShard::PubsubShard(size_t index, PubsubRouter* router)
    : index_(index),
      router_(router),
      io_(router->thread(index)),
      context_(router->context()),
      routing_(router->context()->options().routing),
      metrics_(router->metrics()),
      options_(router->options()),
      flush_timer_(io_) {
  const RouterOptions& options = context_->options();
  absl::StatusOr<std::unique_ptr<UpstreamSet>> http = UpstreamSet::Create(
      io_, options.upstreams, options.upstream, context_->tls(), context_->metrics());
  // RouterContext::Create checked every URL; an empty set makes baselines fail, not crash.
  http_ = http.ok() ? *std::move(http) : std::make_unique<UpstreamSet>();
}

void PubsubShard::Start() {
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
  for (auto& [target, link] : links_) link->upstream->Close();
  for (auto& [id, sub] : subs_) {
    for (auto* leg : {sub->active.get(), sub->pending.get()}) {
      if (leg != nullptr && leg->counted) {
        metrics_->UpstreamSubscriptions(sub->method->label, leg->target).Add(-1);
      }
    }
    for (auto& leg : sub->fanout) {
      if (leg->counted) metrics_->UpstreamSubscriptions(sub->method->label, leg->target).Add(-1);
    }
  }
  legs_.clear();
  by_key_.clear();
  by_client_.clear();
  accounts_.clear();
  subs_.clear();
  link_of_.clear();
  links_.clear();
  http_->Shutdown();
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
  Subscription* sub = nullptr;
  if (auto it = by_key_.find(request.key); it != by_key_.end()) {
    sub = it->second;
  } else {
    absl::StatusOr<Subscription*> created = Create(request);
    if (!created.ok()) {
      std::string answer = RpcErrorResponse(request.request_id, created.status());
      ToClient(client, [client, answer = std::move(answer), key = std::move(request.key),
                        index = index_, method = request.method]() mutable {
        client->OnSubscribeAnswer(std::move(answer), std::move(key), index, method, std::nullopt);
      });
      return;
    }
    sub = *created;
  }
  AddClient(sub, client);
  if (sub->answered) {
    Answer(client, request.request_id, sub);
  } else {
    sub->waiting.push_back(Waiting{client, std::move(request.request_id)});
  }
}

absl::StatusOr<PubsubShard::Subscription*> PubsubShard::Create(const SubscribeRequest& request) {
  auto owned = std::make_unique<Subscription>();
  Subscription* sub = owned.get();
  sub->id = router_->NextId();
  sub->method = request.method;
  sub->key = request.key;
  sub->params = request.params;
  sub->by_thread.resize(router_->thread_count());
  std::vector<std::string> targets;
  switch (request.method->routing) {
    case PubsubRouting::kAccount: {
      absl::StatusOr<std::string> target =
          TargetForAccount(*request.params.account, *CurrentSnapshot(), routing_);
      if (!target.ok()) return target.status();
      targets.push_back(*target);
      break;
    }
    case PubsubRouting::kPassThrough:
      targets.push_back(routing_.base);
      break;
    case PubsubRouting::kSignature:
      if (std::optional<std::string> remembered =
              context_->signatures().Find(*request.params.signature)) {
        targets.push_back(*remembered);
      } else {
        metrics_->signature_fanouts.Increment();
        targets.push_back(routing_.base);
        for (const std::string& er : routing_.er_targets) {
          if (std::find(targets.begin(), targets.end(), er) == targets.end()) {
            targets.push_back(er);
          }
        }
      }
      break;
  }
  for (const std::string& target : targets) {
    if (router_->EndpointsOf(target) == nullptr) {
      return MakeRpcStatus(RpcErrorKind::kInternal,
                           fmt::format("no pubsub endpoint for upstream {}", target));
    }
  }
  subs_[sub->id] = std::move(owned);
  by_key_[sub->key] = sub;
  if (request.method->routing == PubsubRouting::kAccount) accounts_.insert(sub->id);
  if (request.method->routing == PubsubRouting::kSignature) {
    for (const std::string& target : targets) sub->fanout.push_back(NewLeg(sub, target));
    for (auto& leg : sub->fanout) OpenLeg(leg.get());
  } else {
    sub->active = NewLeg(sub, targets[0]);
    OpenLeg(sub->active.get());
  }
  return sub;
}

PubsubShard::Link& PubsubShard::LinkFor(const std::string& target) {
  auto it = links_.find(target);
  if (it != links_.end()) return *it->second;
  auto link = std::make_unique<Link>();
  link->upstream = std::make_shared<PubsubUpstream>(io_, target, *router_->EndpointsOf(target),
                                                    options_.upstream, router_->tls(), this);
  link_of_[link->upstream.get()] = link.get();
  return *links_.emplace(target, std::move(link)).first->second;
}

std::unique_ptr<PubsubShard::Leg> PubsubShard::NewLeg(Subscription* sub,
                                                      const std::string& target) {
  auto leg = std::make_unique<Leg>();
  leg->serial = next_serial_++;
  leg->sub = sub;
  leg->target = target;
  leg->link = &LinkFor(target);
  legs_[leg->serial] = leg.get();
  leg->link->legs.insert(leg.get());
  return leg;
}

void PubsubShard::OpenLeg(Leg* leg) {
  if (leg->link->upstream->open()) {
    SubscribeLeg(leg);
  } else {
    leg->link->upstream->Start();
  }
}

void PubsubShard::SubscribeLeg(Leg* leg) {
  const uint64_t token = next_token_++;
  leg->call_token = token;
  std::weak_ptr<PubsubShard> weak = weak_from_this();
  std::weak_ptr<PubsubUpstream> upstream = leg->link->upstream;
  leg->link->upstream->Call(
      leg->sub->method->subscribe, leg->sub->params.params,
      [weak, serial = leg->serial, token, upstream,
       unsubscribe = leg->sub->method->unsubscribe](absl::StatusOr<PubsubUpstream::Answer> answer) {
        if (auto self = weak.lock()) {
          self->OnSubscribed(serial, token, upstream, unsubscribe, std::move(answer));
        }
      });
}

void PubsubShard::OnSubscribed(uint64_t serial, uint64_t token,
                               std::weak_ptr<PubsubUpstream> upstream, std::string_view unsubscribe,
                               absl::StatusOr<PubsubUpstream::Answer> answer) {
  if (shut_down_) return;
  Leg* leg = FindLeg(serial);
  uint64_t upstream_id = 0;
  const bool has_id =
      answer.ok() && answer->error.empty() &&
      absl::SimpleAtoi(std::string(api_internal::Trim(answer->result)), &upstream_id);
  if (leg == nullptr || leg->call_token != token) {
    // The subscription went away while the call was in flight: undo it upstream.
    if (has_id) {
      if (auto connection = upstream.lock(); connection && connection->open()) {
        connection->Call(unsubscribe, fmt::format("[{}]", upstream_id), nullptr);
      }
    }
    return;
  }
  leg->call_token = 0;
  if (!answer.ok()) {
    // A lost connection re-creates its subscriptions when it opens again (or fails them).
    if (absl::IsUnavailable(answer.status())) return;
    LegFailed(leg, MakeRpcStatus(RpcErrorKind::kInternal,
                                 fmt::format("upstream {}: {}", leg->target,
                                             std::string(answer.status().message()))));
    return;
  }
  if (!answer->error.empty()) {
    LegFailed(leg, StatusFromUpstreamError(answer->error));
    return;
  }
  if (!has_id) {
    LegFailed(leg, MakeRpcStatus(RpcErrorKind::kInternal,
                                 fmt::format("upstream {} answered {} with {}", leg->target,
                                             leg->sub->method->subscribe, answer->result)));
    return;
  }
  leg->upstream_id = upstream_id;
  leg->live = true;
  leg->link->by_upstream_id[upstream_id] = leg;
  leg->counted = true;
  metrics_->UpstreamSubscriptions(leg->sub->method->label, leg->target).Add(1);
  LegLive(leg);
}

void PubsubShard::LegLive(Leg* leg) {
  Subscription* sub = leg->sub;
  const bool reconnected = leg->ever_live;
  leg->ever_live = true;
  if (!sub->answered) {
    sub->answered = true;
    std::vector<Waiting> waiting = std::move(sub->waiting);
    sub->waiting.clear();
    for (const Waiting& w : waiting) Answer(w.client, w.request_id, sub);
  }
  if (sub->method->routing != PubsubRouting::kAccount) return;
  if (leg == sub->pending.get()) {
    StartBaseline(leg, Baseline::kSwitch);
  } else if (leg == sub->active.get()) {
    StartBaseline(leg, reconnected ? Baseline::kResync : Baseline::kSilent);
  }
}

void PubsubShard::LegFailed(Leg* leg, const absl::Status& why) {
  Subscription* sub = leg->sub;
  switch (sub->method->routing) {
    case PubsubRouting::kSignature: {
      auto it = std::find_if(sub->fanout.begin(), sub->fanout.end(),
                             [leg](const auto& l) { return l.get() == leg; });
      if (sub->fanout.size() > 1 && it != sub->fanout.end()) {
        CloseLeg(*it);
        sub->fanout.erase(it);
        return;
      }
      Fail(sub, why);
      return;
    }
    case PubsubRouting::kAccount:
      if (leg == sub->pending.get()) {
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

void PubsubShard::CloseLeg(std::unique_ptr<Leg>& leg, bool unsubscribe) {
  if (!leg) return;
  Link* link = leg->link;
  if (leg->live) {
    link->by_upstream_id.erase(leg->upstream_id);
    if (unsubscribe) {
      link->upstream->Call(leg->sub->method->unsubscribe, fmt::format("[{}]", leg->upstream_id),
                           nullptr);
    }
  }
  if (leg->counted) metrics_->UpstreamSubscriptions(leg->sub->method->label, leg->target).Add(-1);
  link->legs.erase(leg.get());
  legs_.erase(leg->serial);
  leg.reset();
}

void PubsubShard::AddClient(Subscription* sub, const std::shared_ptr<PubsubClient>& client) {
  for (const auto& c : sub->clients) {
    if (c == client) return;
  }
  sub->clients.push_back(client);
  by_client_[client.get()].insert(sub->id);
  RebuildFanout(sub);
}

void PubsubShard::DropClient(Subscription* sub, PubsubClient* client) {
  std::erase_if(sub->clients, [client](const auto& c) { return c.get() == client; });
  std::erase_if(sub->waiting, [client](const Waiting& w) { return w.client.get() == client; });
  if (auto it = by_client_.find(client); it != by_client_.end()) {
    it->second.erase(sub->id);
    if (it->second.empty()) by_client_.erase(it);
  }
  if (sub->clients.empty()) {
    Destroy(sub);
  } else {
    RebuildFanout(sub);
  }
}

void PubsubShard::RebuildFanout(Subscription* sub) {
  std::vector<ClientList> lists(router_->thread_count());
  for (const auto& client : sub->clients) lists[client->thread()].push_back(client);
  for (size_t t = 0; t < lists.size(); ++t) {
    sub->by_thread[t] =
        lists[t].empty() ? nullptr : std::make_shared<const ClientList>(std::move(lists[t]));
  }
}

void PubsubShard::Fanout(Subscription* sub, const std::shared_ptr<const std::string>& message) {
  for (size_t t = 0; t < sub->by_thread.size(); ++t) {
    const std::shared_ptr<const ClientList>& list = sub->by_thread[t];
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

void PubsubShard::Answer(const std::shared_ptr<PubsubClient>& client, const std::string& request_id,
                         Subscription* sub) {
  std::string answer = RpcResultResponse(request_id, std::to_string(sub->id));
  ToClient(client, [client, answer = std::move(answer), key = sub->key, index = index_,
                    method = sub->method, id = sub->id]() mutable {
    client->OnSubscribeAnswer(std::move(answer), std::move(key), index, method, id);
  });
}

void PubsubShard::Fail(Subscription* sub, const absl::Status& why) {
  spdlog::debug("pubsub: {} subscription {} closed: {}", sub->method->subscribe, sub->id,
                std::string(why.message()));
  for (const Waiting& w : sub->waiting) {
    std::string answer = RpcErrorResponse(w.request_id, why);
    ToClient(w.client, [client = w.client, answer = std::move(answer), key = sub->key,
                        index = index_, method = sub->method]() mutable {
      client->OnSubscribeAnswer(std::move(answer), std::move(key), index, method, std::nullopt);
    });
  }
  const RpcError error = RpcErrorFromStatus(why);
  auto message = std::make_shared<const std::string>(fmt::format(
      R"({{"jsonrpc":"2.0","error":{{"code":{},"message":{},"data":{{"subscription":{}}}}},"id":null}})",
      error.code, JsonQuote(fmt::format("subscription {} closed: {}", sub->id, error.message)),
      sub->id));
  for (const auto& client : sub->clients) {
    const bool waiting = std::any_of(sub->waiting.begin(), sub->waiting.end(),
                                     [&](const Waiting& w) { return w.client == client; });
    if (waiting) continue;
    metrics_->subscriptions_failed.Increment();
    ToClient(client,
             [client, message, id = sub->id] { client->OnSubscriptionClosed(id, message); });
  }
  sub->waiting.clear();
  Destroy(sub);
}

void PubsubShard::Finish(Subscription* sub, std::shared_ptr<const std::string> last) {
  for (const auto& client : sub->clients) {
    metrics_->notifications_sent.Increment();
    ToClient(client, [client, last, id = sub->id] { client->OnSubscriptionClosed(id, last); });
  }
  Destroy(sub);
}

void PubsubShard::Destroy(Subscription* sub) {
  CloseLeg(sub->active);
  CloseLeg(sub->pending);
  for (auto& leg : sub->fanout) CloseLeg(leg);
  for (const auto& client : sub->clients) {
    if (auto it = by_client_.find(client.get()); it != by_client_.end()) {
      it->second.erase(sub->id);
      if (it->second.empty()) by_client_.erase(it);
    }
  }
  by_key_.erase(sub->key);
  accounts_.erase(sub->id);
  subs_.erase(sub->id);
}

void PubsubShard::Unsubscribe(PubsubClient* client, uint64_t id) {
  if (shut_down_) return;
  auto it = subs_.find(id);
  if (it == subs_.end()) return;
  DropClient(it->second.get(), client);
}

void PubsubShard::RemoveClient(PubsubClient* client) {
  if (shut_down_) return;
  auto it = by_client_.find(client);
  if (it == by_client_.end()) return;
  const std::vector<uint64_t> ids(it->second.begin(), it->second.end());
  for (uint64_t id : ids) {
    auto sub = subs_.find(id);
    if (sub != subs_.end()) DropClient(sub->second.get(), client);
  }
  by_client_.erase(client);
}

void PubsubShard::OnSnapshot(std::shared_ptr<const Snapshot> snapshot) {
  if (shut_down_) return;
  // Only the newest snapshot matters; older posts are skipped.
  if (snapshot != context_->snapshots()->Current()) return;
  const std::vector<uint64_t> ids(accounts_.begin(), accounts_.end());
  for (uint64_t id : ids) {
    auto it = subs_.find(id);
    if (it != subs_.end()) Evaluate(it->second.get(), *snapshot);
  }
}

void PubsubShard::Evaluate(Subscription* sub, const Snapshot& snapshot) {
  if (!sub->active) return;
  absl::StatusOr<std::string> target = TargetForAccount(*sub->params.account, snapshot, routing_);
  if (!target.ok()) {
    Fail(sub, target.status());
    return;
  }
  if (*target == sub->active->target) {
    CloseLeg(sub->pending);
    return;
  }
  if (sub->pending && sub->pending->target == *target) return;
  CloseLeg(sub->pending);
  if (!sub->answered) {
    // Nobody has the subscription yet: move it without a switch.
    CloseLeg(sub->active);
    sub->active = NewLeg(sub, *target);
    OpenLeg(sub->active.get());
    return;
  }
  sub->switch_started = std::chrono::steady_clock::now();
  sub->pending = NewLeg(sub, *target);
  OpenLeg(sub->pending.get());
}

void PubsubShard::SwitchFailed(Subscription* sub, const absl::Status& why) {
  metrics_->switch_failures.Increment();
  const std::string target = sub->pending ? sub->pending->target : "?";
  CloseLeg(sub->pending);
  if (++sub->switch_failures >= options_.max_switch_failures) {
    Fail(sub,
         MakeRpcStatus(RpcErrorKind::kInternal, fmt::format("cannot follow the account to {}: {}",
                                                            target, std::string(why.message()))));
    return;
  }
  spdlog::debug("pubsub: subscription {} cannot switch to {} yet (attempt {}): {}", sub->id, target,
                sub->switch_failures, std::string(why.message()));
  absl::Duration delay = options_.baseline_retry_delay;
  for (int i = 1; i < sub->switch_failures; ++i) delay *= 2;
  RetryLater(sub->id, delay, [this](Subscription* s) { Evaluate(s, *CurrentSnapshot()); });
}

void PubsubShard::RetryLater(uint64_t id, absl::Duration delay,
                             std::function<void(Subscription*)> then) {
  auto timer = std::make_shared<asio::steady_timer>(io_, ToChrono(delay));
  std::erase_if(timers_, [](const auto& weak) { return weak.expired(); });
  timers_.push_back(timer);
  timer->async_wait(
      [weak = weak_from_this(), timer, id, then = std::move(then)](boost::system::error_code ec) {
        auto self = weak.lock();
        if (ec || !self || self->shut_down_) return;
        auto it = self->subs_.find(id);
        if (it != self->subs_.end()) then(it->second.get());
      });
}

void PubsubShard::OnUpstreamOpen(PubsubUpstream& upstream, bool reconnected) {
  auto found = link_of_.find(&upstream);
  if (found == link_of_.end()) return;
  Link* link = found->second;
  if (reconnected) {
    metrics_->upstream_reconnects.Increment();
    spdlog::info("pubsub: upstream {} reconnected; re-creating {} subscriptions", upstream.target(),
                 link->legs.size());
  }
  const std::vector<Leg*> legs(link->legs.begin(), link->legs.end());
  for (Leg* leg : legs) {
    if (!leg->live && leg->call_token == 0) SubscribeLeg(leg);
  }
}

void PubsubShard::OnUpstreamLost(PubsubUpstream& upstream, const absl::Status& why) {
  auto found = link_of_.find(&upstream);
  if (found == link_of_.end()) return;
  Link* link = found->second;
  metrics_->upstream_disconnects.Increment();
  spdlog::warn("pubsub: upstream {} lost ({} subscriptions): {}", upstream.target(),
               link->legs.size(), std::string(why.message()));
  link->by_upstream_id.clear();
  for (Leg* leg : link->legs) {
    leg->live = false;
    leg->call_token = 0;
    if (leg->counted) {
      leg->counted = false;
      metrics_->UpstreamSubscriptions(leg->sub->method->label, leg->target).Add(-1);
    }
    ++leg->baseline_generation;
    leg->baseline = Baseline::kNone;
    leg->buffer.clear();
  }
}

void PubsubShard::OnUpstreamFailed(PubsubUpstream& upstream, const absl::Status& why) {
  auto found = link_of_.find(&upstream);
  if (found == link_of_.end()) return;
  metrics_->upstream_failures.Increment();
  spdlog::warn("pubsub: giving up on upstream {}: {}", upstream.target(),
               std::string(why.message()));
  std::vector<uint64_t> serials;
  for (Leg* leg : found->second->legs) serials.push_back(leg->serial);
  const absl::Status status = MakeRpcStatus(RpcErrorKind::kInternal, std::string(why.message()));
  for (uint64_t serial : serials) {
    if (Leg* leg = FindLeg(serial)) LegFailed(leg, status);
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

void PubsubShard::OnUpstreamNotification(PubsubUpstream& upstream, std::string_view message,
                                         const UpstreamMessage& parsed) {
  ++unflushed_upstream_;
  if (!flush_armed_) ArmMetricsFlush();
  auto found = link_of_.find(&upstream);
  if (found == link_of_.end()) return;
  auto it = found->second->by_upstream_id.find(parsed.subscription);
  if (it == found->second->by_upstream_id.end()) return;
  Leg* leg = it->second;
  Subscription* sub = leg->sub;
  switch (sub->method->routing) {
    case PubsubRouting::kPassThrough:
      Fanout(sub,
             std::make_shared<const std::string>(RewriteSubscription(message, parsed, sub->id)));
      return;
    case PubsubRouting::kAccount:
      OnAccountNotification(leg, message, parsed);
      return;
    case PubsubRouting::kSignature:
      OnSignatureNotification(leg, message, parsed);
      return;
  }
}

void PubsubShard::OnAccountNotification(Leg* leg, std::string_view message,
                                        const UpstreamMessage& parsed) {
  Subscription* sub = leg->sub;
  const uint64_t slot = parsed.context_slot.value_or(0);
  if (leg->floor_slot && parsed.context_slot && slot <= *leg->floor_slot) {
    metrics_->duplicates_dropped.Increment();
    return;
  }
  size_t value_offset = 0;
  auto rewritten = std::make_shared<const std::string>(
      RewriteSubscription(message, parsed, sub->id, &value_offset));
  if (leg->baseline == Baseline::kSwitch || leg->baseline == Baseline::kResync) {
    leg->buffer.push_back(Buffered{slot, std::move(rewritten), value_offset, parsed.value_size});
    if (leg->buffer.size() > options_.max_buffered_notifications) {
      leg->buffer.pop_front();
      metrics_->duplicates_dropped.Increment();
    }
    return;
  }
  if (leg != sub->active.get()) return;
  DeliverAccount(sub, std::move(rewritten), value_offset, parsed.value_size);
}

void PubsubShard::DeliverAccount(Subscription* sub, std::shared_ptr<const std::string> message,
                                 size_t value_offset, size_t value_size) {
  Fanout(sub, message);
  sub->last = std::move(message);
  sub->last_offset = value_offset;
  sub->last_size = value_size;
  sub->have_last = true;
}

void PubsubShard::OnSignatureNotification(Leg* leg, std::string_view message,
                                          const UpstreamMessage& parsed) {
  Subscription* sub = leg->sub;
  auto rewritten =
      std::make_shared<const std::string>(RewriteSubscription(message, parsed, sub->id));
  if (parsed.value_is_string) {
    // "receivedSignature": shown once, the subscription stays.
    if (sub->received_sent) return;
    sub->received_sent = true;
    Fanout(sub, rewritten);
    return;
  }
  // The final notification: the upstream ended its subscription itself; the other legs are
  // unsubscribed.
  leg->link->by_upstream_id.erase(leg->upstream_id);
  leg->live = false;
  Finish(sub, std::move(rewritten));
}

void PubsubShard::StartBaseline(Leg* leg, Baseline kind) {
  leg->baseline = kind;
  leg->baseline_attempts = 0;
  ++leg->baseline_generation;
  leg->buffer.clear();
  QueueBaseline(leg);
}

void PubsubShard::QueueBaseline(Leg* leg) {
  const std::string key = fmt::format("{}\n{}", leg->target, leg->sub->params.account_config);
  auto& queued = baseline_queue_[key];
  queued.emplace_back(leg->serial, leg->baseline_generation);
  // Everything queued in this turn of the event loop goes out together.
  if (!baselines_posted_) {
    baselines_posted_ = true;
    asio::post(io_, [weak = weak_from_this()] {
      if (auto self = weak.lock()) {
        self->baselines_posted_ = false;
        self->SendBaselines();
      }
    });
  }
}

void PubsubShard::SendBaselines() {
  if (shut_down_) return;
  for (auto it = baseline_queue_.begin();
       it != baseline_queue_.end() && baselines_in_flight_ < kBaselinesInFlight;) {
    std::vector<std::pair<uint64_t, uint64_t>>& queued = it->second;
    std::vector<std::pair<uint64_t, uint64_t>> batch;
    std::string keys;
    std::string target;
    while (!queued.empty() && batch.size() < kBaselineBatch) {
      const auto [serial, generation] = queued.back();
      queued.pop_back();
      Leg* leg = FindLeg(serial);
      if (leg == nullptr || leg->baseline_generation != generation ||
          leg->baseline == Baseline::kNone) {
        continue;
      }
      if (!keys.empty()) keys.push_back(',');
      keys += JsonQuote(leg->sub->params.account->ToBase58());
      target = leg->target;
      batch.emplace_back(serial, generation);
    }
    const std::string batch_key = it->first;
    if (queued.empty()) {
      baseline_queue_.erase(it++);
    } else {
      ++it;
    }
    if (batch.empty()) continue;
    const std::string config = batch_key.substr(batch_key.find('\n') + 1);
    const std::string body =
        SubRequest("getMultipleAccounts", config.empty() ? fmt::format("[[{}]]", keys)
                                                         : fmt::format("[[{}],{}]", keys, config));
    ++baselines_in_flight_;
    auto done = [weak = weak_from_this(), batch](absl::StatusOr<UpstreamResponse> response) {
      auto self = weak.lock();
      if (!self) return;
      // Send may answer at once: take the answer on a fresh stack.
      asio::post(self->io_, [weak, batch, response = std::move(response)]() mutable {
        if (auto self = weak.lock()) self->OnBaselines(batch, std::move(response));
      });
    };
    UpstreamPool* pool = http_->Find(target);
    if (pool == nullptr) {
      done(absl::UnavailableError(fmt::format("no HTTP upstream named {}", target)));
    } else {
      pool->Send(body, RetryPolicy::kSafe, std::move(done));
    }
  }
}

void PubsubShard::OnBaselines(std::vector<std::pair<uint64_t, uint64_t>> legs,
                              absl::StatusOr<UpstreamResponse> response) {
  if (shut_down_) return;
  --baselines_in_flight_;
  absl::Status failure;
  ContextList list;
  uint64_t slot = 0;
  if (!response.ok()) {
    failure = response.status();
  } else {
    absl::StatusOr<UpstreamAnswer> answer = ParseUpstreamAnswer(response->body);
    if (!answer.ok()) {
      failure = answer.status();
    } else if (answer->is_error()) {
      failure = absl::InternalError(fmt::format("getMultipleAccounts: {}", answer->error));
    } else if (absl::StatusOr<ContextList> parsed = ParseContextList(answer->result);
               !parsed.ok()) {
      failure = parsed.status();
    } else if (parsed->values.size() != legs.size()) {
      failure = absl::InternalError("getMultipleAccounts answered a different number of accounts");
    } else {
      list = *std::move(parsed);
      absl::StatusOr<ContextValue> context =
          ParseContextValue(fmt::format("{{\"context\":{},\"value\":null}}", list.context));
      if (context.ok()) {
        slot = context->slot;
      } else {
        failure = context.status();
      }
    }
  }
  for (size_t i = 0; i < legs.size(); ++i) {
    Leg* leg = FindLeg(legs[i].first);
    if (leg == nullptr || leg->baseline_generation != legs[i].second ||
        leg->baseline == Baseline::kNone) {
      continue;
    }
    if (!failure.ok()) {
      BaselineFailed(leg, failure);
      continue;
    }
    ApplyBaseline(leg, slot, list.values[i],
                  fmt::format("{{\"context\":{},\"value\":{}}}", list.context, list.values[i]));
  }
  SendBaselines();
}

void PubsubShard::BaselineFailed(Leg* leg, const absl::Status& failure) {
  if (++leg->baseline_attempts < options_.max_baseline_attempts) {
    RetryLater(leg->sub->id, options_.baseline_retry_delay,
               [weak = weak_from_this(), serial = leg->serial,
                generation = leg->baseline_generation](Subscription*) {
                 auto self = weak.lock();
                 if (!self) return;
                 Leg* leg = self->FindLeg(serial);
                 if (leg != nullptr && leg->baseline_generation == generation &&
                     leg->baseline != Baseline::kNone) {
                   self->QueueBaseline(leg);
                 }
               });
    return;
  }
  const Baseline kind = leg->baseline;
  leg->baseline = Baseline::kNone;
  Subscription* sub = leg->sub;
  const absl::Status why = MakeRpcStatus(
      RpcErrorKind::kInternal, fmt::format("cannot read the account from {}: {}", leg->target,
                                           std::string(failure.message())));
  switch (kind) {
    case Baseline::kSilent:
      spdlog::debug("pubsub: subscription {}: {}", sub->id, std::string(why.message()));
      return;
    case Baseline::kSwitch:
      SwitchFailed(sub, why);
      return;
    case Baseline::kResync:
      Fail(sub, why);
      return;
    case Baseline::kNone:
      return;
  }
}

void PubsubShard::ApplyBaseline(Leg* leg, uint64_t slot, const std::string& value,
                                const std::string& result_json) {
  Subscription* sub = leg->sub;
  const Baseline kind = leg->baseline;
  leg->baseline = Baseline::kNone;
  metrics_->baselines_read.Increment();
  switch (kind) {
    case Baseline::kNone:
      return;
    case Baseline::kSilent:
      if (!sub->have_last) {
        sub->last = std::make_shared<const std::string>(value);
        sub->last_offset = 0;
        sub->last_size = value.size();
        sub->have_last = true;
      }
      return;
    case Baseline::kResync:
      leg->floor_slot = slot;
      EmitBaseline(sub, value, result_json);
      Flush(leg, slot);
      return;
    case Baseline::kSwitch: {
      leg->floor_slot = slot;
      CloseLeg(sub->active);
      sub->active = std::move(sub->pending);
      sub->switch_failures = 0;
      metrics_->switches.Increment();
      metrics_->switch_seconds.Observe(
          std::chrono::duration<double>(std::chrono::steady_clock::now() - sub->switch_started)
              .count());
      Leg* active = sub->active.get();
      EmitBaseline(sub, value, result_json);
      Flush(active, slot);
      return;
    }
  }
}

void PubsubShard::EmitBaseline(Subscription* sub, const std::string& value,
                               const std::string& result_json) {
  if (value == "null") return;  // nothing to show (the chain does not have the account)
  if (sub->have_last &&
      SameJsonValue(std::string_view(*sub->last).substr(sub->last_offset, sub->last_size), value)) {
    metrics_->duplicates_dropped.Increment();
    return;
  }
  metrics_->baselines_sent.Increment();
  Fanout(sub, std::make_shared<const std::string>(
                  MakeNotification("accountNotification", result_json, sub->id)));
  sub->last = std::make_shared<const std::string>(value);
  sub->last_offset = 0;
  sub->last_size = value.size();
  sub->have_last = true;
}

void PubsubShard::Flush(Leg* leg, uint64_t floor) {
  std::deque<Buffered> buffer = std::move(leg->buffer);
  leg->buffer.clear();
  for (Buffered& b : buffer) {
    if (b.slot <= floor) {
      metrics_->duplicates_dropped.Increment();
      continue;
    }
    DeliverAccount(leg->sub, std::move(b.message), b.value_offset, b.value_size);
  }
}

// --- PubsubRouter ---

PubsubRouter::PubsubRouter(PubsubRouterOptions options, RouterContext* context,
                           PubsubMetrics* metrics, std::vector<asio::io_context*> threads)
    : options_(std::move(options)),
      context_(context),
      metrics_(metrics),
      threads_(std::move(threads)) {}

PubsubRouter::~PubsubRouter() = default;

absl::StatusOr<std::unique_ptr<PubsubRouter>> PubsubRouter::Create(
    PubsubRouterOptions options, RouterContext* context, PubsubMetrics* metrics,
    std::vector<asio::io_context*> threads) {
  if (threads.empty()) return absl::InvalidArgumentError("pubsub: no threads");
  std::unique_ptr<PubsubRouter> router(
      new PubsubRouter(std::move(options), context, metrics, std::move(threads)));
  bool needs_tls = false;
  for (const auto& [name, urls] : router->options_.endpoints) {
    bool known = false;
    for (const UpstreamTarget& target : context->options().upstreams) known |= target.name == name;
    if (!known) {
      return absl::InvalidArgumentError(
          fmt::format("pubsub.upstreams.{}: no upstream named \"{}\" is configured", name, name));
    }
  }
  for (const UpstreamTarget& target : context->options().upstreams) {
    std::vector<std::string> urls;
    for (const auto& [name, list] : router->options_.endpoints) {
      if (name == target.name) urls = list;
    }
    if (urls.empty()) {
      for (const UpstreamEndpoint& endpoint : target.endpoints) {
        absl::StatusOr<std::string> url = PubsubUrlFor(endpoint.url);
        if (!url.ok()) {
          return absl::InvalidArgumentError(
              fmt::format("upstreams.{}: {}", target.name, std::string(url.status().message())));
        }
        urls.push_back(*url);
      }
    }
    std::vector<WsEndpoint> endpoints;
    for (const std::string& url : urls) {
      absl::StatusOr<WsEndpoint> endpoint = ParseWsUrl(url);
      if (!endpoint.ok()) {
        return absl::InvalidArgumentError(fmt::format("pubsub.upstreams.{}: {}", target.name,
                                                      std::string(endpoint.status().message())));
      }
      needs_tls |= endpoint->tls;
      endpoints.push_back(*std::move(endpoint));
    }
    router->endpoints_.emplace_back(target.name, std::move(endpoints));
  }
  router->tls_ = context->tls();
  if (needs_tls && router->tls_ == nullptr) {
    router->own_tls_ = MakeClientTlsContext(router->options_.upstream.verify_tls);
    router->tls_ = router->own_tls_.get();
  }
  return router;
}

const std::vector<WsEndpoint>* PubsubRouter::EndpointsOf(std::string_view target) const {
  for (const auto& [name, endpoints] : endpoints_) {
    if (name == target) return &endpoints;
  }
  return nullptr;
}

void PubsubRouter::Start() {
  for (size_t i = 0; i < threads_.size(); ++i) {
    shards_.push_back(std::make_shared<PubsubShard>(i, this));
  }
  for (auto& shard : shards_) shard->Start();
}

void PubsubRouter::Shutdown() {
  std::vector<std::unique_ptr<absl::Notification>> done;
  for (size_t i = 0; i < shards_.size(); ++i) {
    done.push_back(std::make_unique<absl::Notification>());
    asio::post(*threads_[i], [shard = shards_[i], n = done.back().get()] {
      shard->Shutdown();
      n->Notify();
    });
  }
  for (auto& n : done) n->WaitForNotificationWithTimeout(absl::Seconds(10));
}

size_t PubsubRouter::ShardFor(std::string_view key) const {
  return absl::Hash<std::string_view>()(key) % threads_.size();
}

void PubsubRouter::Subscribe(std::shared_ptr<PubsubClient> client, SubscribeRequest request) {
  const size_t shard = ShardFor(request.key);
  asio::post(*threads_[shard], [s = shards_[shard], client = std::move(client),
                                request = std::move(request)]() mutable {
    s->Subscribe(std::move(client), std::move(request));
  });
}

void PubsubRouter::Unsubscribe(std::shared_ptr<PubsubClient> client, size_t shard, uint64_t id) {
  asio::post(*threads_[shard], [s = shards_[shard], client = std::move(client), id] {
    s->Unsubscribe(client.get(), id);
  });
}

void PubsubRouter::RemoveClient(std::shared_ptr<PubsubClient> client) {
  for (size_t i = 0; i < shards_.size(); ++i) {
    asio::post(*threads_[i], [s = shards_[i], client] { s->RemoveClient(client.get()); });
  }
}

}  // namespace switchyard
