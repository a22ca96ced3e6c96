// storage_internal's row helpers: history keys, and the walk that puts a commit's rows in key
// order.
#include "storage/internal/state_rows.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace switchyard {
namespace {

using storage_internal::AssignHistoryKey;
using storage_internal::HistoryKey;
using storage_internal::KeyPrefix;
using storage_internal::ParseHistoryKey;
using storage_internal::PutInKeyOrder;
using storage_internal::SortByKey;

Pubkey KeyOf(uint8_t first, uint8_t last) {
  Pubkey key;
  key.data()[0] = first;
  key.data()[Pubkey::kSize - 1] = last;
  return key;
}

TEST(StateRowsTest, AssignHistoryKeyReusesItsBufferAndMatchesHistoryKey) {
  std::string key(100, 'x');  // longer than a key: what was there must not stay
  AssignHistoryKey(KeyOf(1, 2), 300, 7, &key);
  EXPECT_EQ(key, HistoryKey(KeyOf(1, 2), 300, 7));
  ASSERT_EQ(key.size(), Pubkey::kSize + 16);
  auto parts = ParseHistoryKey(key);
  ASSERT_TRUE(parts.ok()) << parts.status();
  EXPECT_EQ(parts->slot, 300u);
  EXPECT_EQ(parts->seq, 7u);
  AssignHistoryKey(KeyOf(9, 9), 1, 2, &key);
  EXPECT_EQ(key, HistoryKey(KeyOf(9, 9), 1, 2));
}

struct Order {
  uint64_t prefix = 0;
  size_t index = 0;
};

// Items larger than a cache line, so that the walk prefetches several lines of each.
struct Item {
  Pubkey key;
  std::string name;
  char padding[100] = {};
};

TEST(StateRowsTest, PutInKeyOrderVisitsEveryRowInKeyOrderWithItsIndex) {
  std::vector<Item> items;
  // Keys that share their first eight bytes in pairs, so that the tie-break decides too.
  for (int i = 0; i < 40; ++i) {
    items.push_back({KeyOf(static_cast<uint8_t>((i * 7) % 20), static_cast<uint8_t>(i)),
                     "item" + std::to_string(i)});
  }
  std::vector<Order> order;
  for (size_t i = 0; i < items.size(); ++i) order.push_back({KeyPrefix(items[i].key), i});
  std::vector<Order> rows;
  std::vector<uint32_t> ends;
  SortByKey(
      order, [&](size_t a, size_t b) { return items[a].key < items[b].key; }, rows, ends);

  std::vector<size_t> visited;
  absl::Status s = PutInKeyOrder(order, items, [&](size_t index, const Item& item) {
    EXPECT_EQ(&item, &items[index]);
    visited.push_back(index);
    return absl::OkStatus();
  });
  ASSERT_TRUE(s.ok()) << s;
  ASSERT_EQ(visited.size(), items.size());
  for (size_t k = 1; k < visited.size(); ++k) {
    EXPECT_TRUE(items[visited[k - 1]].key < items[visited[k]].key) << "row " << k;
  }
}

TEST(StateRowsTest, SortByKeyInBucketsOrdersAsAComparisonSortDoes) {
  // Enough rows for the buckets. Prefixes: spread at random, repeated (the tie-break decides),
  // and a fifth of them crowded into one bucket (the same top 16 bits).
  std::mt19937_64 random(7);
  std::vector<uint64_t> prefixes;
  for (size_t i = 0; i < 30'000; ++i) {
    uint64_t prefix = random();
    if (i % 5 == 1) prefix = (prefix >> 16) | (uint64_t{0xABCD} << 48);
    if (i % 7 == 3 && i > 0) prefix = prefixes[i / 2];
    prefixes.push_back(prefix);
  }
  // The tie-break puts equal prefixes in reverse index order, which no stable pass gives.
  auto less = [](size_t a, size_t b) { return a > b; };
  std::vector<Order> order;
  for (size_t i = 0; i < prefixes.size(); ++i) order.push_back({prefixes[i], i});
  std::vector<Order> expected = order;
  std::sort(expected.begin(), expected.end(), [&](const Order& a, const Order& b) {
    return a.prefix != b.prefix ? a.prefix < b.prefix : less(a.index, b.index);
  });
  std::vector<Order> rows;
  std::vector<uint32_t> ends;
  for (int round = 0; round < 2; ++round) {  // the scratch of one sort serves the next
    std::vector<Order> sorted = order;
    SortByKey(sorted, less, rows, ends);
    ASSERT_EQ(sorted.size(), expected.size());
    for (size_t k = 0; k < sorted.size(); ++k) {
      ASSERT_EQ(sorted[k].index, expected[k].index) << "row " << k << ", round " << round;
    }
  }
}

TEST(StateRowsTest, PutInKeyOrderStopsAtTheFirstFailedPut) {
  std::vector<Item> items(20);
  std::vector<Order> order;
  for (size_t i = 0; i < items.size(); ++i) order.push_back({i, i});
  size_t calls = 0;
  absl::Status s = PutInKeyOrder(order, items, [&](size_t index, const Item&) {
    ++calls;
    return index == 5 ? absl::InternalError("disk full") : absl::OkStatus();
  });
  EXPECT_EQ(s, absl::InternalError("disk full"));
  EXPECT_EQ(calls, 6u);
}

}  // namespace
}  // namespace switchyard
