#pragma once

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "common/pubkey.h"
#include "localnet/bank.h"
#include "localnet/options.h"
#include "localnet/rpc_json.h"
#include "localnet/types.h"

namespace switchyard::localnet {

// One WebSocket connection as the hub sees it. Send and Close never block; any thread may
// call them.
class NotificationSink {
 public:
  virtual ~NotificationSink() = default;
  virtual void Send(std::string message) = 0;
  virtual void Close() = 0;
};

// The pubsub methods (accountSubscribe, programSubscribe, logsSubscribe, slotSubscribe,
// rootSubscribe, blockSubscribe, signatureSubscribe and their unsubscribes) and the
// notifications after each slot. Owned by Localnet; thread-safe.
class PubSubHub {
 public:
  PubSubHub(Bank* bank, FaultOptions faults);

  void AddSession(const std::shared_ptr<NotificationSink>& session);
  void RemoveSession(const NotificationSink* session);
  // Handles one text message of `session`; replies through session->Send.
  void HandleMessage(const std::shared_ptr<NotificationSink>& session, std::string_view text);
  // Sends the notifications of an applied slot. Called by the slot clock only.
  void Publish(const SlotEffects& effects);
  // Closes every connection (the drop-websockets fault, and shutdown).
  void CloseAll();
  size_t subscription_count() const;

 private:
  enum class Kind { kAccount, kProgram, kLogs, kSlot, kRoot, kBlock, kSignature };
  struct Subscription {
    uint64_t id = 0;
    Kind kind = Kind::kSlot;
    std::weak_ptr<NotificationSink> sink;
    const NotificationSink* owner = nullptr;
    Pubkey key;             // account, program, or the logs (block) mention
    bool logs_all = false;  // logs and blocks: every transaction
    Signature signature;
    AccountConfig config;
    ProgramFilter filter;
  };

  std::string Subscribe(const std::shared_ptr<NotificationSink>& session, std::string_view id,
                        std::string_view method, simdjson::dom::array params,
                        std::string* immediate);
  void Index(const Subscription& sub) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Unindex(const Subscription& sub) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool ShouldDrop() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  Bank* const bank_;
  const FaultOptions faults_;

  mutable absl::Mutex mu_;
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 0;
  std::mt19937_64 drop_rng_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<uint64_t, Subscription> subs_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<Pubkey, absl::flat_hash_set<uint64_t>> by_account_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<Pubkey, absl::flat_hash_set<uint64_t>> by_program_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<Signature, absl::flat_hash_set<uint64_t>> by_signature_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_set<uint64_t> logs_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_set<uint64_t> slots_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_set<uint64_t> roots_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_set<uint64_t> blocks_ ABSL_GUARDED_BY(mu_);
  Hash last_blockhash_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<const NotificationSink*, std::weak_ptr<NotificationSink>> sessions_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace switchyard::localnet
