#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/metrics.h"
#include "common/pubkey.h"
#include "common/slot.h"

namespace switchyard {

// The response cache and in-flight coalescing (docs/architecture.md §19): answers of reads
// kept by their finality, checked against the delegation state on every hit, shared by every
// worker; identical reads in flight share one upstream call.

// How the answers of a method may be kept.
enum class CacheClass : uint8_t {
  kNever,        // never kept, never coalesced (writes, blockhashes, health, ...)
  kCoalesce,     // not kept, but identical reads in flight share one call
  kFinal,        // can no longer change once final: kept final_ttl
  kSlotBounded,  // kept slot_ttl, and only until the target's slot moves past the answer's
};
std::string_view CacheClassName(CacheClass cache_class);

struct CacheMethodRule {
  std::string pattern;  // a method name, or a prefix ending in '*'
  CacheClass cache_class = CacheClass::kNever;
};

struct CacheOptions {
  bool enabled = true;   // keep answers in memory
  bool coalesce = true;  // share identical reads in flight
  size_t max_bytes = 64 << 20;
  size_t max_entry_bytes = 256 << 10;  // bigger answers are not kept
  absl::Duration final_ttl = absl::Hours(1);
  absl::Duration slot_ttl = absl::Milliseconds(400);  // per target: see slot_ttl_by_target
  // "Not found" (a null result) of a final method is kept this long; zero: not kept.
  absl::Duration negative_ttl = absl::Milliseconds(500);
  // Targets whose slots run faster than the base layer's (ERs: their block time).
  std::vector<std::pair<std::string, absl::Duration>> slot_ttl_by_target;
  // Overrides of the default table, longest prefix first as for routing.
  std::vector<CacheMethodRule> rules;
  // The shared tier (redis://HOST:PORT[/DB]); empty: none.
  std::string redis_url;
  absl::Duration redis_timeout = absl::Milliseconds(5);
};

// The default class of `method` (the table in docs/architecture.md §19).
CacheClass DefaultCacheClass(std::string_view method);

// How the delegation of one account stood when an answer naming it was kept.
struct DelegationMark {
  Pubkey account;
  bool delegated = false;
  Pubkey validator;
  Slot delegation_slot = 0;
  friend bool operator==(const DelegationMark&, const DelegationMark&) = default;
};

// What the cache keeps of one answer.
struct CachedAnswer {
  std::string result;         // the raw JSON of the answer's result
  Slot context_slot = 0;      // the answer's context.slot; 0: none
  bool slot_bounded = false;  // good only while context_slot is the target's latest slot
  uint64_t write_epoch = 0;   // slot-bounded: the target's WriteEpoch when the read started
  std::string target;
  std::vector<DelegationMark> marks;
};

// The in-memory store: a byte budget over shards, each a segmented LRU (new entries on
// probation; a second hit promotes to the protected segment, which takes at most 80 % of
// the shard), so a scan of cold keys cannot push out the hot ones. Thread-safe.
class ResponseCache {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;

  // `targets`: every upstream target, whose latest answered slots the cache follows.
  ResponseCache(CacheOptions options, const std::vector<std::string>& targets,
                MetricsRegistry* registry);

  // The most advanced context slot any answer from `target` showed (0: none yet). A
  // slot-bounded answer is good only while its slot is still the target's latest.
  Slot LatestSlot(std::string_view target) const;
  void NoteSlot(std::string_view target, Slot slot);
  // Writes through the router (sendTransaction, requestAirdrop) end the slot-bounded answers
  // of their target kept before them: a client reads its own writes. WriteEpoch is read when
  // a read starts and kept with its answer.
  uint64_t WriteEpoch(std::string_view target) const;
  void NoteWrite(std::string_view target);

  const CacheOptions& options() const { return options_; }
  CacheClass ClassOf(std::string_view method) const;
  // The key of a read: target, method and params with insignificant whitespace removed.
  static std::string KeyOf(std::string_view target, std::string_view method,
                           std::string_view params);
  // How long an answer of `cache_class` from `target` is kept; zero: not at all.
  absl::Duration TtlOf(CacheClass cache_class, std::string_view target, bool not_found) const;

  // The answer kept under `key` that is still good at `now`: not expired, not slot-bounded
  // with its target already past it (`target_slot`), at or above `min_context_slot`, and
  // accepted by `valid` (the delegation check). An entry that is no longer good is dropped.
  // The answer is shared with the cache, not copied: a hit costs a reference count.
  std::shared_ptr<const CachedAnswer> Find(const std::string& key, TimePoint now,
                                           Slot min_context_slot, Slot target_slot,
                                           const std::function<bool(const CachedAnswer&)>& valid);
  // Keeps `answer` under `key` until `now + ttl` (replacing what was there); too big or
  // zero ttl: not kept.
  void Put(const std::string& key, CachedAnswer answer, TimePoint now, absl::Duration ttl);

  // Drops every kept answer that names an account whose delegation `holds` no longer accepts
  // (docs/architecture.md §19): with `accounts`, the answers naming one of them (the accounts a
  // snapshot publish changed); with null, every answer that names any account. Returns the
  // answers dropped. Called on the publishing thread; each shard is locked in turn.
  size_t DropChanged(const std::vector<Pubkey>* accounts,
                     const std::function<bool(const DelegationMark&)>& holds);

  // In-flight coalescing. The first caller of a key leads (true); later ones (false) are kept
  // as waiters and get the leader's answer through Complete.
  using Waiter = std::function<void(const std::string& answer)>;
  bool Lead(const std::string& key, Waiter waiter_if_following);
  // The leader's answer: every waiter of `key` is called (on the leader's thread; a waiter
  // posts to its own) and the key is free again.
  void Complete(const std::string& key, const std::string& answer);

  struct Stats {
    uint64_t entries = 0;
    uint64_t bytes = 0;
    uint64_t hits = 0;
    uint64_t misses = 0;
    uint64_t coalesced = 0;
    uint64_t evictions = 0;
    uint64_t invalidations = 0;  // dropped by DropChanged
  };
  Stats stats() const;

  // Counted per method by the router (label values from a fixed list: other methods are
  // "other").
  void CountHit(std::string_view method);
  void CountMiss(std::string_view method);
  void CountCoalesced(std::string_view method);
  // A shared-tier value that is not an answer this cache wrote (another writer, corruption).
  void CountBadSharedEntry() { bad_shared_->Increment(); }

 private:
  static constexpr size_t kShards = 16;
  struct Entry {
    std::string key;
    std::shared_ptr<const CachedAnswer> answer;
    TimePoint expires;
    size_t bytes = 0;
    bool is_protected = false;
    std::list<Entry*>::iterator position;
  };
  struct Shard {
    absl::Mutex mu;
    absl::flat_hash_map<std::string, std::unique_ptr<Entry>> entries ABSL_GUARDED_BY(mu);
    std::list<Entry*> probation ABSL_GUARDED_BY(mu);  // most recent first
    std::list<Entry*> protected_ ABSL_GUARDED_BY(mu);
    size_t bytes ABSL_GUARDED_BY(mu) = 0;
    size_t protected_bytes ABSL_GUARDED_BY(mu) = 0;
    absl::flat_hash_map<std::string, std::vector<Waiter>> in_flight ABSL_GUARDED_BY(mu);
    // The entries of this shard that name each account (in their marks).
    absl::flat_hash_map<Pubkey, std::vector<Entry*>> by_account ABSL_GUARDED_BY(mu);
  };
  struct MethodCounters {
    Counter* hits = nullptr;
    Counter* misses = nullptr;
    Counter* coalesced = nullptr;
  };
  Shard& ShardOf(const std::string& key);
  void EraseLocked(Shard& shard, Entry* entry) ABSL_EXCLUSIVE_LOCKS_REQUIRED(shard.mu);
  void EvictLocked(Shard& shard) ABSL_EXCLUSIVE_LOCKS_REQUIRED(shard.mu);
  const MethodCounters& CountersOf(std::string_view method) const;

  const CacheOptions options_;
  const size_t shard_budget_;
  // Fixed after construction; the values move.
  struct TargetState {
    std::atomic<Slot> latest_slot{0};
    std::atomic<uint64_t> write_epoch{0};
  };
  absl::flat_hash_map<std::string, std::unique_ptr<TargetState>> targets_;
  const TargetState* StateOf(std::string_view target) const;
  std::array<Shard, kShards> shards_;
  absl::flat_hash_map<std::string, MethodCounters> by_method_;
  MethodCounters other_;
  // Drops `entry` when one of its marks for `account` (any account when null) fails `holds`.
  bool DropIfChangedLocked(Shard& shard, Entry* entry, const Pubkey* account,
                           const std::function<bool(const DelegationMark&)>& holds)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(shard.mu);
  Counter* evictions_ = nullptr;
  Counter* invalidations_ = nullptr;
  Counter* bad_shared_ = nullptr;
  Gauge* bytes_ = nullptr;
  Gauge* entries_ = nullptr;
  std::atomic<uint64_t> hits_{0};
  std::atomic<uint64_t> misses_{0};
  std::atomic<uint64_t> coalesced_{0};
  std::atomic<uint64_t> evicted_{0};
  std::atomic<uint64_t> invalidated_{0};
  std::atomic<int64_t> total_bytes_{0};
  std::atomic<int64_t> total_entries_{0};
};

// The context.slot of a result (`{"context":{"slot":N,...},"value":...}`); 0 when it has none.
Slot ContextSlotOf(std::string_view result);
// An answer as the shared tier keeps it, and back; nullopt for bytes that are not one.
std::string EncodeCachedAnswer(const CachedAnswer& answer);
std::optional<CachedAnswer> DecodeCachedAnswer(std::string_view bytes);

// Whether every status of a getSignatureStatuses result is final (finalized), so the answer
// can no longer change.
bool AllStatusesFinal(std::string_view result);

}  // namespace switchyard
