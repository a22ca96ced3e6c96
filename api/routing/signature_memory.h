#pragma once

#include <cstddef>
#include <list>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "common/pubkey.h"

namespace switchyard {

// Where the router sent each transaction: signature → target name, the least recently used
// forgotten first past `capacity`. Shared by every worker; thread-safe.
class SignatureMemory {
 public:
  explicit SignatureMemory(size_t capacity) : capacity_(capacity) {}

  void Remember(const Signature& signature, std::string_view target);
  // Every signature of one transaction (its id first), under one lock: a client may look the
  // transaction up by any of them.
  void Remember(const std::vector<Signature>& signatures, std::string_view target);
  std::optional<std::string> Find(const Signature& signature);
  size_t size() const;

 private:
  using Entry = std::pair<Signature, std::string>;
  void RememberLocked(const Signature& signature, std::string_view target)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  const size_t capacity_;
  mutable absl::Mutex mu_;
  std::list<Entry> order_ ABSL_GUARDED_BY(mu_);  // most recent first
  absl::flat_hash_map<Signature, std::list<Entry>::iterator> index_ ABSL_GUARDED_BY(mu_);
};

}  // namespace switchyard
