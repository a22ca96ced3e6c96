#pragma once

#include <cstddef>

#include "common/pubkey.h"

namespace switchyard {

// The hash of the tables that hold many public keys (the account map and its intern table, the
// set of accounts a commit writes): XXH3 of the 32 bytes with a seed drawn at start-up, so
// that keys chosen to collide in one process do not collide in another. About 36 instructions
// a key, where absl::Hash spends about 60. Not stable across processes: never stored.
struct PubkeyHash {
  size_t operator()(const Pubkey& key) const;
};

}  // namespace switchyard
