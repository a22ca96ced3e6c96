#include "engine/account_map.h"

#include <gtest/gtest.h>

#include <map>
#include <random>

#include "tests/support/event_generator.h"

namespace switchyard {
namespace {

AccountState StateFor(std::mt19937_64& rng, const std::vector<Pubkey>& validators) {
  AccountState s;
  s.delegated = rng() % 3 != 0;
  s.validator = validators[rng() % validators.size()];
  s.owner_program = testing::TestKey(0xAA);
  s.delegation_slot = rng() % 1000;
  s.lamports = rng();
  s.commit_frequency_ms = 30'000;
  s.last_event_slot = s.delegation_slot + 1;
  return s;
}

// The builder (start-up loads) and Upsert give the same map, later entries winning, whether
// or not the expected size is right.
TEST(AccountMapTest, BuilderGivesTheMapUpsertGives) {
  testing::GeneratorOptions options;
  options.accounts = 20'000;
  const std::vector<Pubkey> keys = testing::GeneratedAccounts(options);
  const std::vector<Pubkey> validators = {testing::TestKey(1), testing::TestKey(2), Pubkey()};
  std::mt19937_64 rng(3);
  std::vector<std::pair<Pubkey, AccountState>> entries;
  for (const Pubkey& key : keys) entries.emplace_back(key, StateFor(rng, validators));
  for (int i = 0; i < 5'000; ++i) {  // repeats of earlier keys
    entries.emplace_back(keys[rng() % keys.size()], StateFor(rng, validators));
  }
  std::map<Pubkey, AccountState> expected;
  AccountMap upserted;
  for (const auto& [key, state] : entries) {
    expected[key] = state;
    upserted.Upsert(key, state);
  }
  for (size_t expected_accounts : {size_t{0}, size_t{100}, keys.size()}) {
    AccountMap::Builder builder(expected_accounts);
    for (const auto& [key, state] : entries) builder.Add(key, state);
    const AccountMap built = std::move(builder).Build();
    ASSERT_EQ(built.size(), expected.size()) << expected_accounts;
    ASSERT_EQ(upserted.size(), expected.size());
    for (const auto& [key, state] : expected) {
      ASSERT_EQ(built.Find(key), state) << expected_accounts;
    }
    size_t visited = 0;
    built.ForEach([&](const Pubkey& key, const AccountState& state) {
      ++visited;
      EXPECT_EQ(expected.at(key), state);
    });
    EXPECT_EQ(visited, expected.size());
    EXPECT_FALSE(built.Find(testing::TestKey(0x77)).has_value());
    // A built map takes writes as any other.
    AccountMap copy = built;
    copy.Upsert(testing::TestKey(0x77), entries[0].second);
    EXPECT_EQ(copy.size(), expected.size() + 1);
    EXPECT_FALSE(built.Find(testing::TestKey(0x77)).has_value());
  }
}

}  // namespace
}  // namespace switchyard
