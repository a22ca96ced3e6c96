#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "api/pubsub/pubsub_baselines.h"
#include "api/pubsub/pubsub_links.h"
#include "api/pubsub/pubsub_metrics.h"
#include "api/pubsub/pubsub_registry.h"
#include "api/pubsub/pubsub_router.h"
#include "api/pubsub/pubsub_subscription.h"
#include "api/rpc/router.h"

namespace switchyard {

// The subscriptions of one shard of the PubsubRouter (pubsub_router.h) and their upstream
// connections. It coordinates three parts: the registry (which client is in which
// subscription), the links (the legs of each subscription on upstream connections, and their
// moves between chains) and the baselines (the account reads that make a switch or a
// reconnect lose and repeat nothing); it answers subscribe calls, writes notifications to the
// clients and closes subscriptions. Owned (shared) by the PubsubRouter; lives on one pubsub
// thread, and every member is touched only there (the router and the snapshot listener post
// to it).
class PubsubShard : public PubsubLinks::Owner,
                    public PubsubBaselines::Owner,
                    public std::enable_shared_from_this<PubsubShard> {
 public:
  PubsubShard(size_t index, PubsubRouter* router);
  ~PubsubShard() override;
  PubsubShard(const PubsubShard&) = delete;
  PubsubShard& operator=(const PubsubShard&) = delete;

  // Listens for snapshots. Called once, after the shard is held by a shared_ptr.
  void Start();
  void Shutdown();
  void Subscribe(std::shared_ptr<PubsubClient> client, SubscribeRequest request);
  void Unsubscribe(PubsubClient* client, uint64_t id);
  void RemoveClient(PubsubClient* client);
  void OnSnapshot(std::shared_ptr<const Snapshot> snapshot);

 private:
  // PubsubLinks::Owner
  void OnLegLive(PubsubLeg& leg, bool reconnected) override;
  void OnLegFailed(PubsubLeg& leg, const absl::Status& why) override;
  void OnNotification(PubsubLeg* leg, std::string_view message,
                      const UpstreamMessage& parsed) override;
  // PubsubBaselines::Owner
  void Fanout(PubsubSubscription& sub, const std::shared_ptr<const std::string>& message) override;
  void OnBaselineFailed(PubsubLeg& leg, BaselineKind kind, const absl::Status& why) override;
  void RetryLater(uint64_t id, absl::Duration delay,
                  std::function<void(PubsubSubscription&)> then) override;
  PubsubLeg* FindLeg(uint64_t serial) const override { return links_.FindLeg(serial); }
  void CompleteSwitch(PubsubSubscription& sub) override { links_.CompleteSwitch(sub); }

  template <typename F>
  void ToClient(const std::shared_ptr<PubsubClient>& client, F&& f) {
    if (client->thread() == index_) {
      f();
    } else {
      boost::asio::post(router_->thread(client->thread()), std::forward<F>(f));
    }
  }

  std::shared_ptr<const Snapshot> CurrentSnapshot() const;
  // The targets a new subscription starts on: where the account is routed, where the
  // transaction was sent (else base and every ER), or base.
  absl::StatusOr<std::vector<std::string>> TargetsFor(const SubscribeRequest& request);
  absl::StatusOr<PubsubSubscription*> Create(const SubscribeRequest& request);
  void Answer(const std::shared_ptr<PubsubClient>& client, const std::string& request_id,
              const PubsubSubscription& sub);
  void Refuse(const std::shared_ptr<PubsubClient>& client, const std::string& request_id,
              std::string key, const PubsubMethod* method, const absl::Status& why);
  void Fail(PubsubSubscription& sub, const absl::Status& why);
  void Finish(PubsubSubscription& sub, const std::shared_ptr<const std::string>& last);
  void Destroy(PubsubSubscription& sub);
  void DropClient(PubsubSubscription& sub, PubsubClient* client);
  // Account subscriptions: moves `sub` to where `snapshot` routes its account.
  void Follow(PubsubSubscription& sub, const Snapshot& snapshot);
  void SwitchFailed(PubsubSubscription& sub, const absl::Status& why);
  void OnSignatureNotification(PubsubLeg& leg, std::string_view message,
                               const UpstreamMessage& parsed);
  // The per-notification counters are kept here and added to the shared ones every 100 ms, so
  // that shards do not contend for their cache lines on every notification.
  void ArmMetricsFlush();
  void FlushMetrics();

  const size_t index_;
  PubsubRouter* const router_;
  boost::asio::io_context& io_;
  RouterContext* const context_;
  PubsubMetrics* const metrics_;
  const PubsubRouterOptions& options_;
  PubsubRegistry registry_;
  PubsubLinks links_;
  PubsubBaselines baselines_;
  std::vector<std::weak_ptr<boost::asio::steady_timer>> timers_;
  boost::asio::steady_timer flush_timer_;
  bool flush_armed_ = false;
  uint64_t unflushed_upstream_ = 0;
  uint64_t unflushed_sent_ = 0;
  uint64_t listener_id_ = 0;
  bool shut_down_ = false;
};

}  // namespace switchyard
