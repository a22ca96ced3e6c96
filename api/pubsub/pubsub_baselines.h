#pragma once

#include <boost/asio/io_context.hpp>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "api/jsonrpc/pubsub_json.h"
#include "api/pubsub/pubsub_metrics.h"
#include "api/pubsub/pubsub_router.h"
#include "api/pubsub/pubsub_subscription.h"
#include "api/upstream/upstream_await.h"
#include "api/upstream/upstream_client.h"

namespace switchyard {

// The account baselines of one shard, and the account notifications they govern: what makes
// the stream of an accountSubscribe "no gap, no duplicate" (pubsub_router.h). When a leg goes
// live its account is read over HTTP (getMultipleAccounts, batched per target and config);
// until the read arrives the leg's notifications are held. The baseline is shown to the
// clients when its value differs from the last one they saw, then the held notifications
// above its slot follow; on a switch the pending leg becomes the active one first. Owned by
// one PubsubShard; used on its thread only.
class PubsubBaselines {
 public:
  // The shard. Called on its thread.
  class Owner {
   public:
    virtual ~Owner() = default;
    // Writes `message` to every client of `sub`.
    virtual void Fanout(PubsubSubscription& sub,
                        const std::shared_ptr<const std::string>& message) = 0;
    // The baseline of `leg`, of `kind`, could not be read after every attempt.
    virtual void OnBaselineFailed(PubsubLeg& leg, BaselineKind kind, const absl::Status& why) = 0;
    // Runs `then` after `delay` unless subscription `id` is gone by then.
    virtual void RetryLater(uint64_t id, absl::Duration delay,
                            std::function<void(PubsubSubscription&)> then) = 0;
    // The leg of `serial`, or null when it is closed.
    virtual PubsubLeg* FindLeg(uint64_t serial) const = 0;
    // Makes the pending leg of `sub` its active one: its baseline arrived.
    virtual void CompleteSwitch(PubsubSubscription& sub) = 0;
  };

  // The account reads go through `http` only (the shard's UpstreamSet; a fake in tests).
  PubsubBaselines(boost::asio::io_context& io, std::unique_ptr<UpstreamClient> http,
                  PubsubMetrics* metrics, const PubsubRouterOptions& options, Owner* owner);
  ~PubsubBaselines();
  PubsubBaselines(const PubsubBaselines&) = delete;
  PubsubBaselines& operator=(const PubsubBaselines&) = delete;

  // `lifetime` is the shard's: reads that answer after it is gone are dropped.
  void Start(std::weak_ptr<void> lifetime);
  void Shutdown();

  // Reads the baseline of `leg` (an account leg just live); what it is for is `kind`. A read
  // already under way for the leg is forgotten.
  void Read(PubsubLeg& leg, BaselineKind kind);
  // An accountNotification of `leg`: dropped when its baseline covers it, held while the
  // baseline is read, else delivered when `leg` is the active one.
  void OnNotification(PubsubLeg& leg, std::string_view message, const UpstreamMessage& parsed);

 private:
  // Queued reads: (leg serial, baseline generation).
  using QueuedRead = std::pair<uint64_t, uint64_t>;

  void Queue(PubsubLeg& leg);
  void SendQueued();
  // One getMultipleAccounts for `batch`, and what its answer makes of each leg still waiting.
  Task<void> ReadBatch(std::weak_ptr<void> lifetime, std::string target, std::string body,
                       std::vector<QueuedRead> batch);
  void OnRead(const std::vector<QueuedRead>& batch,
              const absl::StatusOr<UpstreamResponse>& response);
  void Failed(PubsubLeg& leg, const absl::Status& failure);
  void Apply(PubsubLeg& leg, uint64_t slot, const std::string& value,
             const std::string& result_json);
  void Emit(PubsubSubscription& sub, const std::string& value, const std::string& result_json);
  void Release(PubsubLeg& leg, uint64_t floor);
  void Deliver(PubsubSubscription& sub, std::shared_ptr<const std::string> message,
               size_t value_offset, size_t value_size);
  PubsubLeg* Awaiting(const QueuedRead& read) const;

  boost::asio::io_context& io_;
  Owner* const owner_;
  PubsubMetrics* const metrics_;
  const PubsubRouterOptions& options_;
  std::weak_ptr<void> lifetime_;
  std::unique_ptr<UpstreamClient> http_;  // the account reads go through this interface only
  // Reads waiting to be sent, by target and account config (minified, or ""). They go out as
  // getMultipleAccounts of up to kBaselineBatch accounts, at most kBaselinesInFlight requests
  // at a time.
  absl::flat_hash_map<std::pair<std::string, std::string>, std::vector<QueuedRead>> queue_;
  size_t in_flight_ = 0;
  bool posted_ = false;
  bool shut_down_ = false;
};

}  // namespace switchyard
