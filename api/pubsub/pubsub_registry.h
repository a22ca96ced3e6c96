#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "api/pubsub/pubsub_router.h"
#include "api/pubsub/pubsub_subscription.h"

namespace switchyard {

// The client side of one shard's subscriptions: each subscription by id and by key (identical
// calls share one), the clients in each, and the subscriptions of each client. Pure
// bookkeeping: it opens nothing and sends nothing; the shard closes a subscription's legs
// before it removes the subscription. Owned by one PubsubShard; used on its thread only.
class PubsubRegistry {
 public:
  // `thread_count`: the pubsub threads clients live on.
  explicit PubsubRegistry(size_t thread_count) : thread_count_(thread_count) {}

  // A new subscription with `id` for `request`, whose key no subscription has.
  PubsubSubscription& Add(const SubscribeRequest& request, uint64_t id);
  PubsubSubscription* Find(uint64_t id) const;
  PubsubSubscription* FindByKey(const std::string& key) const;
  // Forgets the subscription (its legs must be closed); `sub` is gone afterwards.
  void Remove(PubsubSubscription& sub);
  // Forgets every subscription.
  void Clear();
  size_t size() const { return subs_.size(); }

  // Adds `client` to `sub`; false when it is there already.
  bool AddClient(PubsubSubscription& sub, const std::shared_ptr<PubsubClient>& client);
  // Takes `client` out of `sub` (and out of its waiters); true when `sub` has no client left.
  bool DropClient(PubsubSubscription& sub, const PubsubClient* client);
  // The ids of the subscriptions `client` is in.
  std::vector<uint64_t> SubscriptionsOf(const PubsubClient* client) const;
  void ForgetClient(const PubsubClient* client) { by_client_.erase(client); }

  // `client` (in `sub` already) is answered `request_id` once the subscription is live.
  void AddWaiter(PubsubSubscription& sub, std::shared_ptr<PubsubClient> client,
                 std::string request_id);
  // The subscription is live: it is answered from now on; returns the clients that waited.
  std::vector<PubsubWaiter> TakeWaiting(PubsubSubscription& sub);

  // The ids of the accountSubscribe subscriptions, which follow routing changes.
  std::vector<uint64_t> AccountSubscriptions() const;

 private:
  void RebuildByThread(PubsubSubscription& sub) const;
  void Unlink(const PubsubClient* client, uint64_t id);

  const size_t thread_count_;
  absl::flat_hash_map<uint64_t, std::unique_ptr<PubsubSubscription>> subs_;
  absl::flat_hash_map<std::string, PubsubSubscription*> by_key_;
  absl::flat_hash_map<const PubsubClient*, absl::flat_hash_set<uint64_t>> by_client_;
  absl::flat_hash_set<uint64_t> accounts_;
};

}  // namespace switchyard
