#include "engine/account_map.h"

#include <algorithm>

namespace switchyard {
namespace {

bool KeyLess(const AccountMap::Entry& e, const Pubkey& key) { return e.key < key; }

}  // namespace

const AccountState* AccountMap::Find(const Pubkey& key) const {
  const auto& shard = shards_[ShardOf(key)];
  if (!shard) return nullptr;
  auto it = std::lower_bound(shard->begin(), shard->end(), key, KeyLess);
  if (it == shard->end() || it->key != key) return nullptr;
  return &it->state;
}

AccountMap::Shard& AccountMap::MutableShard(size_t index) {
  auto& shard = shards_[index];
  if (!shard) {
    shard = std::make_shared<Shard>();
  } else if (shard.use_count() > 1) {
    // Shared with a snapshot: copy before writing. A count of one cannot grow behind our
    // back, since every other copy of this map was made from us.
    shard = std::make_shared<Shard>(*shard);
  }
  return *shard;
}

void AccountMap::Upsert(const Pubkey& key, const AccountState& state) {
  Shard& shard = MutableShard(ShardOf(key));
  auto it = std::lower_bound(shard.begin(), shard.end(), key, KeyLess);
  if (it != shard.end() && it->key == key) {
    it->state = state;
    return;
  }
  shard.insert(it, Entry{key, state});
  ++size_;
}

void AccountMap::Append(const Pubkey& key, const AccountState& state) {
  Shard& shard = MutableShard(ShardOf(key));
  if (!shard.empty() && !(shard.back().key < key)) {
    Upsert(key, state);
    return;
  }
  shard.push_back(Entry{key, state});
  ++size_;
}

void AccountMap::ShrinkToFit() {
  for (size_t i = 0; i < shards_.size(); ++i) {
    if (shards_[i]) MutableShard(i).shrink_to_fit();
  }
}

}  // namespace switchyard
