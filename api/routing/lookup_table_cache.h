#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "common/pubkey.h"

namespace switchyard {

using LookupTableAddresses = std::shared_ptr<const std::vector<Pubkey>>;

// Address lookup tables fetched from base, kept for `ttl`, at most `capacity` of them (the
// oldest dropped first). Shared by every worker; thread-safe.
class LookupTableCache {
 public:
  LookupTableCache(size_t capacity, absl::Duration ttl, const Clock* clock)
      : capacity_(capacity), ttl_(ttl), clock_(clock) {}

  LookupTableAddresses Find(const Pubkey& table);
  void Insert(const Pubkey& table, std::vector<Pubkey> addresses);

 private:
  struct Entry {
    LookupTableAddresses addresses;
    absl::Duration inserted;
  };
  const size_t capacity_;
  const absl::Duration ttl_;
  const Clock* clock_;
  absl::Mutex mu_;
  absl::flat_hash_map<Pubkey, Entry> entries_ ABSL_GUARDED_BY(mu_);
};

// The addresses of an address-lookup-table account's data: a 56-byte header (u32 type 1,
// then the table's metadata), then 32-byte addresses. InvalidArgument otherwise.
absl::StatusOr<std::vector<Pubkey>> DecodeLookupTableAccount(std::span<const uint8_t> data);

}  // namespace switchyard
