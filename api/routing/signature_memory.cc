#include "api/routing/signature_memory.h"

namespace switchyard {

void SignatureMemory::Remember(const Signature& signature, std::string_view target) {
  if (capacity_ == 0) return;
  absl::MutexLock lock(&mu_);
  RememberLocked(signature, target);
}

void SignatureMemory::Remember(const std::vector<Signature>& signatures, std::string_view target) {
  if (capacity_ == 0 || signatures.empty()) return;
  absl::MutexLock lock(&mu_);
  // The id last, so that it is the most recent and the last of them to be forgotten.
  for (size_t i = signatures.size(); i-- > 0;) RememberLocked(signatures[i], target);
}

void SignatureMemory::RememberLocked(const Signature& signature, std::string_view target) {
  if (auto it = index_.find(signature); it != index_.end()) {
    it->second->second = std::string(target);
    order_.splice(order_.begin(), order_, it->second);
    return;
  }
  order_.emplace_front(signature, std::string(target));
  index_[signature] = order_.begin();
  if (order_.size() > capacity_) {
    index_.erase(order_.back().first);
    order_.pop_back();
  }
}

std::optional<std::string> SignatureMemory::Find(const Signature& signature) {
  absl::MutexLock lock(&mu_);
  auto it = index_.find(signature);
  if (it == index_.end()) return std::nullopt;
  order_.splice(order_.begin(), order_, it->second);
  return it->second->second;
}

size_t SignatureMemory::size() const {
  absl::MutexLock lock(&mu_);
  return order_.size();
}

}  // namespace switchyard
