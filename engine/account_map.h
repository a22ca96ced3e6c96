#pragma once

#include <array>
#include <cstddef>
#include <memory>
#include <vector>

#include "common/pubkey.h"
#include "engine/account_state.h"

namespace switchyard {

// Pubkey -> AccountState, split into 4096 shards by the key's first 12 bits; each shard is
// a vector sorted by key. Copying a map shares its shards, and a write clones only the shard
// it touches when that shard is shared: the fold keeps one map and hands cheap copies to
// immutable snapshots. A map value belongs to one thread at a time; the shards it shares
// with other copies are never mutated.
class AccountMap {
 public:
  struct Entry {
    Pubkey key;
    AccountState state;
  };

  AccountMap() = default;

  const AccountState* Find(const Pubkey& key) const;
  // Inserts or replaces.
  void Upsert(const Pubkey& key, const AccountState& state);
  // Appends an entry whose key is greater than every key of its shard (bulk load in key
  // order); falls back to Upsert otherwise.
  void Append(const Pubkey& key, const AccountState& state);
  // Releases spare capacity after a bulk load.
  void ShrinkToFit();

  size_t size() const { return size_; }

  // Visits every entry in key order.
  template <typename F>
  void ForEach(F&& f) const {
    for (const auto& shard : shards_) {
      if (!shard) continue;
      for (const Entry& e : *shard) f(e.key, e.state);
    }
  }

 private:
  static constexpr int kShardBits = 12;
  using Shard = std::vector<Entry>;
  static size_t ShardOf(const Pubkey& key) {
    return (static_cast<size_t>(key.data()[0]) << 4) | (key.data()[1] >> 4);
  }
  Shard& MutableShard(size_t index);

  std::array<std::shared_ptr<Shard>, size_t{1} << kShardBits> shards_;
  size_t size_ = 0;
};

}  // namespace switchyard
