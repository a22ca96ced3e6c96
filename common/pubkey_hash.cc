#include "common/pubkey_hash.h"

#define XXH_INLINE_ALL
#include <xxhash.h>

#include <cstdint>
#include <random>

namespace switchyard {
namespace {

const uint64_t kSeed = [] {
  std::random_device device;
  return (uint64_t{device()} << 32) | device();
}();

}  // namespace

size_t PubkeyHash::operator()(const Pubkey& key) const {
  return XXH3_64bits_withSeed(key.data(), key.size(), kSeed);
}

}  // namespace switchyard
