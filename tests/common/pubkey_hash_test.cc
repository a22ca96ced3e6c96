#include "common/pubkey_hash.h"

#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <random>
#include <unordered_set>

#include "common/pubkey.h"

namespace switchyard {
namespace {

Pubkey RandomKey(std::mt19937_64& rng) {
  std::array<uint8_t, 32> bytes;
  for (uint8_t& b : bytes) b = static_cast<uint8_t>(rng());
  return Pubkey(bytes);
}

TEST(PubkeyHashTest, EqualKeysHashEqual) {
  std::mt19937_64 rng(1);
  const Pubkey key = RandomKey(rng);
  const Pubkey copy = key;
  EXPECT_EQ(PubkeyHash()(key), PubkeyHash()(copy));
}

// The tables take the shard from the top bits and the cell from the low ones: a change in any
// byte of the key changes the hash, and nearly always both parts of it (a change that keeps
// the top 12 bits happens once in 4096).
TEST(PubkeyHashTest, EveryByteOfTheKeyCounts) {
  std::mt19937_64 rng(2);
  const Pubkey key = RandomKey(rng);
  const size_t hash = PubkeyHash()(key);
  size_t shard_moved = 0;
  for (size_t i = 0; i < key.size(); ++i) {
    Pubkey changed = key;
    changed.data()[i] ^= 1;
    const size_t other = PubkeyHash()(changed);
    EXPECT_NE(other, hash) << "byte " << i;
    EXPECT_NE(static_cast<uint32_t>(other), static_cast<uint32_t>(hash)) << "byte " << i;
    if (other >> 52 != hash >> 52) ++shard_moved;
  }
  EXPECT_GE(shard_moved, 28u);
}

// Keys alike in all but three bytes, which a hash that read only part of the key would put in
// one shard, spread over the 4096 shards of the account map.
TEST(PubkeyHashTest, KeysAlikeButForOneWordSpreadOverTheShards) {
  Pubkey key;
  std::unordered_set<size_t> shards;
  for (uint32_t i = 0; i < 20'000; ++i) {
    key.data()[28] = static_cast<uint8_t>(i);
    key.data()[29] = static_cast<uint8_t>(i >> 8);
    key.data()[30] = static_cast<uint8_t>(i >> 16);
    shards.insert(PubkeyHash()(key) >> 52);
  }
  // 20 000 keys thrown at random into 4096 shards leave about 30 of them empty.
  EXPECT_GT(shards.size(), 4000u);
}

}  // namespace
}  // namespace switchyard
