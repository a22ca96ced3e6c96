#include "api/routing/lookup_table_cache.h"

#include "fmt/format.h"

namespace switchyard {

LookupTableAddresses LookupTableCache::Find(const Pubkey& table) {
  absl::MutexLock lock(&mu_);
  auto it = entries_.find(table);
  if (it == entries_.end()) return nullptr;
  if (clock_->Monotonic() - it->second.inserted > ttl_) {
    entries_.erase(it);
    return nullptr;
  }
  return it->second.addresses;
}

void LookupTableCache::Insert(const Pubkey& table, std::vector<Pubkey> addresses) {
  const absl::Duration now = clock_->Monotonic();
  absl::MutexLock lock(&mu_);
  if (entries_.size() >= capacity_ && !entries_.contains(table)) {
    auto oldest = entries_.begin();
    for (auto it = entries_.begin(); it != entries_.end(); ++it) {
      if (it->second.inserted < oldest->second.inserted) oldest = it;
    }
    if (oldest != entries_.end()) entries_.erase(oldest);
  }
  entries_[table] = Entry{std::make_shared<const std::vector<Pubkey>>(std::move(addresses)), now};
}

absl::StatusOr<std::vector<Pubkey>> DecodeLookupTableAccount(std::span<const uint8_t> data) {
  constexpr size_t kMetaSize = 56;
  if (data.size() < kMetaSize || (data.size() - kMetaSize) % 32 != 0 || data[0] != 1 ||
      data[1] != 0 || data[2] != 0 || data[3] != 0) {
    return absl::InvalidArgumentError(
        fmt::format("not an address lookup table ({} bytes)", data.size()));
  }
  std::vector<Pubkey> addresses;
  for (size_t offset = kMetaSize; offset < data.size(); offset += 32) {
    addresses.push_back(Pubkey::FromBytes(data.data() + offset));
  }
  return addresses;
}

}  // namespace switchyard
