#include "api/access/address_buckets.h"

#include <algorithm>

#include "absl/hash/hash.h"

namespace switchyard {

AddressBuckets::AddressBuckets(RateLimit limit, size_t max_addresses)
    : interval_ns_(std::max<int64_t>(1, static_cast<int64_t>(1e9 / limit.per_second))),
      tolerance_ns_(
          static_cast<int64_t>(limit.effective_burst() * static_cast<double>(interval_ns_))),
      max_per_shard_(std::max<size_t>(1, max_addresses / kShards)),
      shards_(new Shard[kShards]) {}

int64_t AddressBuckets::Take(const boost::asio::ip::address& peer, int64_t now_ns, uint32_t cost) {
  AddressKey key{};
  if (peer.is_v4()) {
    const auto bytes = peer.to_v4().to_bytes();
    std::copy(bytes.begin(), bytes.end(), key.begin());
    key[15] = 4;
  } else if (peer.is_v6()) {
    const auto bytes = peer.to_v6().to_bytes();
    std::copy(bytes.begin(), bytes.begin() + 8, key.begin());
    key[15] = 6;
  }
  Shard& shard = shards_[absl::HashOf(key) % kShards];
  absl::MutexLock lock(&shard.mu);
  int64_t* tat = nullptr;
  if (auto it = shard.tat.find(key); it != shard.tat.end()) {
    tat = &it->second;
  } else {
    if (shard.tat.size() >= max_per_shard_) {
      // A bucket whose arrival time has passed is full: forgetting it changes nothing.
      absl::erase_if(shard.tat, [now_ns](const auto& entry) { return entry.second <= now_ns; });
    }
    tat = shard.tat.size() < max_per_shard_ ? &shard.tat.emplace(key, 0).first->second
                                            : &shard.overflow_tat;
  }
  const int64_t next = std::max(*tat, now_ns) + static_cast<int64_t>(cost) * interval_ns_;
  const int64_t over = next - now_ns - tolerance_ns_;
  if (over > 0) return over;
  *tat = next;
  return 0;
}

}  // namespace switchyard
