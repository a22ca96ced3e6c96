#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "api/access/token_bucket.h"
#include "boost/asio/ip/address.hpp"

namespace switchyard {

// A token bucket per client address (an IPv6 client by its /64, which one subscriber usually
// holds whole), in 64 shards, each under its own mutex held for one hash lookup, so workers
// rarely meet. At most `max_addresses` buckets: when a shard is full, its full buckets (those
// of clients idle long enough) are dropped, and if none is, new addresses share one bucket of
// the shard. Any thread may call Take.
class AddressBuckets {
 public:
  AddressBuckets(RateLimit limit, size_t max_addresses);

  // As TokenBucket::Take, for `peer`'s bucket.
  int64_t Take(const boost::asio::ip::address& peer, int64_t now_ns, uint32_t cost);

 private:
  static constexpr size_t kShards = 64;
  using AddressKey = std::array<uint8_t, 16>;
  struct alignas(64) Shard {
    absl::Mutex mu;
    // The theoretical arrival time of each address's GCRA bucket.
    absl::flat_hash_map<AddressKey, int64_t> tat ABSL_GUARDED_BY(mu);
    int64_t overflow_tat ABSL_GUARDED_BY(mu) = 0;
  };

  int64_t interval_ns_;
  int64_t tolerance_ns_;
  size_t max_per_shard_;
  std::unique_ptr<Shard[]> shards_;
};

}  // namespace switchyard
