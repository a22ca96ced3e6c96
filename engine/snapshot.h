#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "common/pubkey.h"
#include "common/slot.h"
#include "engine/account_map.h"
#include "engine/state_digest.h"

namespace switchyard {

// What changed from the snapshot the fold made before this one. `generation` counts the fold's
// snapshots from 1; `accounts` lists every account whose state the fold wrote since generation
// - 1 (an account may appear more than once), or is null when that is not known: the fold's
// first snapshot, a snapshot with more changes than the fold lists, or one not made by a fold
// (generation 0). A reader that missed a generation must treat the list as unknown.
struct SnapshotChanges {
  uint64_t generation = 0;
  std::shared_ptr<const std::vector<Pubkey>> accounts;
};

// The delegation state at one whole applied slot, as the router reads it. Immutable once
// built, so any number of threads may read it without locking.
class Snapshot {
 public:
  Snapshot(AccountMap accounts, Slot applied_slot, StateDigest digest,
           std::optional<Slot> limbo_since, size_t delegated_count, SnapshotChanges changes = {})
      : accounts_(std::move(accounts)),
        applied_slot_(applied_slot),
        digest_(digest),
        limbo_since_(limbo_since),
        delegated_count_(delegated_count),
        changes_(std::move(changes)) {}

  // The delegation of `account`, or nullopt when the account is not delegated.
  // The account's state whether delegated or not (an undelegated one keeps its history).
  std::optional<AccountState> FindAccount(const Pubkey& account) const {
    return accounts_.Find(account);
  }
  std::optional<AccountState> FindDelegation(const Pubkey& account) const {
    std::optional<AccountState> state = accounts_.Find(account);
    if (state && !state->delegated) return std::nullopt;
    return state;
  }

  Slot applied_slot() const { return applied_slot_; }
  const StateDigest& digest() const { return digest_; }
  // Set between a StreamGap and the next Resynced: the slot the stream was lost at.
  std::optional<Slot> limbo_since() const { return limbo_since_; }
  size_t delegated_count() const { return delegated_count_; }
  const SnapshotChanges& changes() const { return changes_; }

 private:
  const AccountMap accounts_;
  const Slot applied_slot_;
  const StateDigest digest_;
  const std::optional<Slot> limbo_since_;
  const size_t delegated_count_;
  const SnapshotChanges changes_;
};

// The current snapshot. The fold publishes; readers on any thread take the current one
// with one atomic load and keep it as long as they need it. Listeners (for example the
// router's consistency gate, which waits for an applied slot) are told of each publication
// on the publishing thread and must not block.
class SnapshotHolder {
 public:
  using Listener = std::function<void(const std::shared_ptr<const Snapshot>&)>;

  std::shared_ptr<const Snapshot> Current() const {
    return current_.load(std::memory_order_acquire);
  }

  void Publish(std::shared_ptr<const Snapshot> snapshot) {
    current_.store(snapshot, std::memory_order_release);
    absl::MutexLock lock(&mu_);
    for (const auto& [id, listener] : listeners_) listener(snapshot);
  }

  // Returns an id for RemoveListener.
  uint64_t AddListener(Listener listener) {
    absl::MutexLock lock(&mu_);
    listeners_.emplace_back(next_id_, std::move(listener));
    return next_id_++;
  }
  void RemoveListener(uint64_t id) {
    absl::MutexLock lock(&mu_);
    std::erase_if(listeners_, [id](const auto& entry) { return entry.first == id; });
  }

 private:
  std::atomic<std::shared_ptr<const Snapshot>> current_;
  absl::Mutex mu_;
  std::vector<std::pair<uint64_t, Listener>> listeners_ ABSL_GUARDED_BY(mu_);
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
};

}  // namespace switchyard
