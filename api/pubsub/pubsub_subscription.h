#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "api/jsonrpc/pubsub_json.h"
#include "api/pubsub/pubsub_router.h"

namespace switchyard {

// The state a subscription of the pubsub router is made of, shared by the parts of a shard
// (pubsub_shard.h): the registry owns the subscriptions, the links make their legs upstream,
// the baselines read and apply account baselines. Plain data, used on the shard's thread only.

// What an account baseline (the account read after its upstream subscription is live) is for.
enum class BaselineKind {
  kNone,
  kSilent,  // the first subscription: remembers the value the clients start from
  kSwitch,  // the chain being switched to: the switch happens when it arrives
  kResync,  // after a reconnect: shows what changed while the connection was down
};

// A notification held back while its leg's baseline is read.
struct HeldNotification {
  uint64_t slot = 0;
  std::shared_ptr<const std::string> message;
  size_t value_offset = 0;
  size_t value_size = 0;
};

// The baseline state of one leg. Written by PubsubBaselines; a lost connection cancels it.
struct LegBaseline {
  BaselineKind kind = BaselineKind::kNone;
  // Bumped by every new read and every cancel: a read answered for an older generation is
  // ignored.
  uint64_t generation = 0;
  int attempts = 0;
  std::optional<uint64_t> floor_slot;  // notifications at or below it are covered
  std::deque<HeldNotification> held;

  void Cancel() {
    ++generation;
    kind = BaselineKind::kNone;
    held.clear();
  }
};

struct PubsubLink;
struct PubsubSubscription;

// One upstream subscription of a router subscription, on one target. Made and closed by
// PubsubLinks.
struct PubsubLeg {
  uint64_t serial = 0;  // unique in the shard; callbacks find the leg by it
  PubsubSubscription* sub = nullptr;
  std::string target;
  PubsubLink* link = nullptr;
  uint64_t upstream_id = 0;
  bool live = false;
  bool ever_live = false;
  bool counted = false;     // in the upstream subscription gauge
  uint64_t call_token = 0;  // of the subscribe call in flight; 0 when none
  LegBaseline baseline;
};

using PubsubClientList = std::vector<std::shared_ptr<PubsubClient>>;

// A client whose subscribe call is answered once the subscription is live upstream.
struct PubsubWaiter {
  std::shared_ptr<PubsubClient> client;
  std::string request_id;  // raw JSON
};

// One router subscription: a key (method and params), its id, the clients that share it and
// its legs.
struct PubsubSubscription {
  uint64_t id = 0;
  const PubsubMethod* method = nullptr;
  std::string key;
  SubscribeParams params;
  PubsubClientList clients;
  // The clients again by the pubsub thread they live on (null where none), rebuilt when a
  // client comes or goes, so that a notification is one post per thread.
  std::vector<std::shared_ptr<const PubsubClientList>> by_thread;
  std::vector<PubsubWaiter> waiting;
  bool answered = false;
  // Accounts and pass-through: `active` delivers, `pending` is the chain being switched to.
  std::unique_ptr<PubsubLeg> active;
  std::unique_ptr<PubsubLeg> pending;
  // Signatures: a leg on each chain the transaction may be on.
  std::vector<std::unique_ptr<PubsubLeg>> fanout;
  // Accounts: the value the clients last saw, `last_size` bytes at `last_offset` of `last`.
  std::shared_ptr<const std::string> last;
  size_t last_offset = 0;
  size_t last_size = 0;
  bool have_last = false;
  int switch_failures = 0;
  std::chrono::steady_clock::time_point switch_started;
  // Signatures.
  bool received_sent = false;

  void RememberValue(std::shared_ptr<const std::string> text, size_t offset, size_t size) {
    last = std::move(text);
    last_offset = offset;
    last_size = size;
    have_last = true;
  }
  std::string_view last_value() const {
    return std::string_view(*last).substr(last_offset, last_size);
  }
};

}  // namespace switchyard
