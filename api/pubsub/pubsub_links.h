#pragma once

#include <boost/asio/io_context.hpp>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "api/pubsub/pubsub_metrics.h"
#include "api/pubsub/pubsub_router.h"
#include "api/pubsub/pubsub_subscription.h"
#include "api/upstream/pubsub_upstream.h"

namespace switchyard {

// The connection of one shard to one upstream target, and the legs made on it.
struct PubsubLink {
  std::shared_ptr<PubsubUpstream> upstream;
  absl::flat_hash_map<uint64_t, PubsubLeg*> by_upstream_id;  // the live legs
  absl::flat_hash_set<PubsubLeg*> legs;
};

// The upstream side of one shard: a WebSocket connection per target (opened on first use and
// reopened by PubsubUpstream after a loss), the legs made on each, and the move of an account
// subscription from one target's leg to another's when its delegation changes. A connection
// that opens again makes each of its legs again; one given up fails each of them. What the
// shard must act on is told to its Owner. Owned by one PubsubShard; used on its thread only.
class PubsubLinks : public PubsubUpstream::Listener {
 public:
  // The shard. Called on its thread.
  class Owner {
   public:
    virtual ~Owner() = default;
    // The leg is subscribed upstream, for the first time or again after a reconnect.
    virtual void OnLegLive(PubsubLeg& leg, bool reconnected) = 0;
    // The leg cannot be made (an upstream error, an unusable answer, a connection given up).
    virtual void OnLegFailed(PubsubLeg& leg, const absl::Status& why) = 0;
    // Every notification of an upstream; `leg` is null when the notification names no live
    // leg (one closed while the notification was on its way).
    virtual void OnNotification(PubsubLeg* leg, std::string_view message,
                                const UpstreamMessage& parsed) = 0;
  };

  PubsubLinks(PubsubRouter* router, boost::asio::io_context& io, Owner* owner);
  ~PubsubLinks() override;
  PubsubLinks(const PubsubLinks&) = delete;
  PubsubLinks& operator=(const PubsubLinks&) = delete;

  // `lifetime` is the shard's: answers that arrive after it is gone are dropped.
  void Start(std::weak_ptr<void> lifetime);
  // Closes every connection and forgets every leg (the subscriptions that own them are
  // dropped next).
  void Shutdown();

  // A leg of `sub` on `target`, not yet subscribed: Open() does that.
  std::unique_ptr<PubsubLeg> NewLeg(PubsubSubscription& sub, const std::string& target);
  // Subscribes the leg upstream, now when its connection is open, else once it opens.
  void Open(PubsubLeg& leg);
  // Unsubscribes the leg upstream (unless `unsubscribe` is false) and destroys it; a null leg
  // is left alone.
  void Close(std::unique_ptr<PubsubLeg>& leg, bool unsubscribe = true);
  // The upstream ended the leg's subscription itself (a final signatureNotification): closing
  // the leg sends no unsubscribe.
  void MarkEnded(PubsubLeg& leg);
  PubsubLeg* FindLeg(uint64_t serial) const;

  // Account subscriptions. Moves `sub` towards `target`, where the routing now sends its
  // account: nothing when its active leg is there; a pending leg there when the subscription
  // has been answered (it becomes the active one when its baseline arrives, CompleteSwitch);
  // else the active leg itself, since nobody has seen a notification yet.
  void Follow(PubsubSubscription& sub, const std::string& target);
  // The pending leg's baseline arrived: it replaces the active leg.
  void CompleteSwitch(PubsubSubscription& sub);
  // The pending leg failed: it is closed and the failure counted. Returns its target.
  std::string AbandonSwitch(PubsubSubscription& sub);

  void OnUpstreamOpen(PubsubUpstream& upstream, bool reconnected) override;
  void OnUpstreamLost(PubsubUpstream& upstream, const absl::Status& why) override;
  void OnUpstreamFailed(PubsubUpstream& upstream, const absl::Status& why) override;
  void OnUpstreamNotification(PubsubUpstream& upstream, std::string_view message,
                              const UpstreamMessage& parsed) override;

 private:
  PubsubLink& LinkFor(const std::string& target);
  PubsubLink* LinkOf(const PubsubUpstream& upstream) const;
  void Subscribe(PubsubLeg& leg);
  void OnSubscribed(uint64_t serial, uint64_t token, const std::weak_ptr<PubsubUpstream>& upstream,
                    std::string_view unsubscribe, absl::StatusOr<PubsubUpstream::Answer> answer);
  void CountLeg(PubsubLeg& leg, bool counted);

  PubsubRouter* const router_;
  boost::asio::io_context& io_;
  PubsubMetrics* const metrics_;
  Owner* const owner_;
  std::weak_ptr<void> lifetime_;
  absl::flat_hash_map<std::string, std::unique_ptr<PubsubLink>> links_;
  absl::flat_hash_map<const PubsubUpstream*, PubsubLink*> link_of_;
  absl::flat_hash_map<uint64_t, PubsubLeg*> legs_;
  uint64_t next_serial_ = 1;
  uint64_t next_token_ = 1;
  bool shut_down_ = false;
};

}  // namespace switchyard
