#include "api/pubsub/pubsub_registry.h"

#include <algorithm>
#include <utility>

namespace switchyard {

PubsubSubscription& PubsubRegistry::Add(const SubscribeRequest& request, uint64_t id) {
  auto owned = std::make_unique<PubsubSubscription>();
  PubsubSubscription& sub = *owned;
  sub.id = id;
  sub.method = request.method;
  sub.key = request.key;
  sub.params = request.params;
  sub.by_thread.resize(thread_count_);
  subs_[id] = std::move(owned);
  by_key_[sub.key] = &sub;
  if (sub.method->routing == PubsubRouting::kAccount) accounts_.insert(id);
  return sub;
}

PubsubSubscription* PubsubRegistry::Find(uint64_t id) const {
  auto it = subs_.find(id);
  return it == subs_.end() ? nullptr : it->second.get();
}

PubsubSubscription* PubsubRegistry::FindByKey(const std::string& key) const {
  auto it = by_key_.find(key);
  return it == by_key_.end() ? nullptr : it->second;
}

void PubsubRegistry::Remove(PubsubSubscription& sub) {
  const uint64_t id = sub.id;
  for (const auto& client : sub.clients) Unlink(client.get(), id);
  by_key_.erase(sub.key);
  accounts_.erase(id);
  subs_.erase(id);
}

void PubsubRegistry::Clear() {
  by_key_.clear();
  by_client_.clear();
  accounts_.clear();
  subs_.clear();
}

bool PubsubRegistry::AddClient(PubsubSubscription& sub,
                               const std::shared_ptr<PubsubClient>& client) {
  if (std::find(sub.clients.begin(), sub.clients.end(), client) != sub.clients.end()) {
    return false;
  }
  sub.clients.push_back(client);
  by_client_[client.get()].insert(sub.id);
  RebuildByThread(sub);
  return true;
}

bool PubsubRegistry::DropClient(PubsubSubscription& sub, const PubsubClient* client) {
  std::erase_if(sub.clients, [client](const auto& c) { return c.get() == client; });
  std::erase_if(sub.waiting, [client](const PubsubWaiter& w) { return w.client.get() == client; });
  Unlink(client, sub.id);
  if (sub.clients.empty()) return true;
  RebuildByThread(sub);
  return false;
}

std::vector<uint64_t> PubsubRegistry::SubscriptionsOf(const PubsubClient* client) const {
  auto it = by_client_.find(client);
  if (it == by_client_.end()) return {};
  return std::vector<uint64_t>(it->second.begin(), it->second.end());
}

void PubsubRegistry::AddWaiter(PubsubSubscription& sub, std::shared_ptr<PubsubClient> client,
                               std::string request_id) {
  sub.waiting.push_back(PubsubWaiter{std::move(client), std::move(request_id)});
}

std::vector<PubsubWaiter> PubsubRegistry::TakeWaiting(PubsubSubscription& sub) {
  sub.answered = true;
  std::vector<PubsubWaiter> waiting = std::move(sub.waiting);
  sub.waiting.clear();
  return waiting;
}

std::vector<uint64_t> PubsubRegistry::AccountSubscriptions() const {
  return std::vector<uint64_t>(accounts_.begin(), accounts_.end());
}

void PubsubRegistry::RebuildByThread(PubsubSubscription& sub) const {
  std::vector<PubsubClientList> lists(thread_count_);
  for (const auto& client : sub.clients) lists[client->thread()].push_back(client);
  for (size_t t = 0; t < lists.size(); ++t) {
    sub.by_thread[t] =
        lists[t].empty() ? nullptr : std::make_shared<const PubsubClientList>(std::move(lists[t]));
  }
}

void PubsubRegistry::Unlink(const PubsubClient* client, uint64_t id) {
  auto it = by_client_.find(client);
  if (it == by_client_.end()) return;
  it->second.erase(id);
  if (it->second.empty()) by_client_.erase(it);
}

}  // namespace switchyard
