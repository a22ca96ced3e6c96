#pragma once

// The rows of the state store in RocksDB: the column families, their keys and values
// (docs/architecture.md, "The state in RocksDB"). Shared by the store's reads, its commits and
// its schema moves.

#include <rocksdb/slice.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/endian.h"
#include "engine/state_store.h"

namespace switchyard::storage_internal {

inline constexpr char kStateCf[] = "state";
inline constexpr char kHistoryCf[] = "history";
inline constexpr char kMetaCf[] = "meta";
inline constexpr char kQuarantineCf[] = "quarantine";
inline constexpr char kBySlotCf[] = "history_by_slot";
inline constexpr char kSchemaKey[] = "schema_version";
inline constexpr char kPositionKey[] = "position";
inline constexpr char kSealedPrefix[] = "sealed/";
// Present while a store of an older schema is being moved to schema 4 (MigrateToSchema4).
inline constexpr char kMigrationKey[] = "migrating_to_schema_4";
inline constexpr uint8_t kHistoryIgnored = 1;
// A history value of schema 4: the record is in the history_by_slot row it names. Without this
// flag (schema 3 and older, or a row a migration has not reached yet) the record follows the
// flags.
inline constexpr uint8_t kHistoryInSlotRow = 2;
// At most this many records share a history_by_slot key, so that reading one account's row
// reads a few kilobytes, not a whole slot.
inline constexpr size_t kRowsPerSlotKey = 16;

inline rocksdb::Slice AsSlice(const Pubkey& key) {
  return rocksdb::Slice(reinterpret_cast<const char*>(key.data()), Pubkey::kSize);
}

// account | slot (BE) | seq (BE)
std::string HistoryKey(const Pubkey& account, Slot slot, uint64_t seq);
// The same into `key`, whose buffer is reused.
void AssignHistoryKey(const Pubkey& account, Slot slot, uint64_t seq, std::string* key);
// slot (BE) | seq (BE)
std::string BySlotKey(Slot slot, uint64_t seq);
// "sealed/" | slot (BE)
std::string SealedKey(Slot slot);

std::string EncodeDigest(const StateDigest& d);
std::optional<StateDigest> DecodeDigest(std::string_view v);
std::string EncodePosition(const FoldPosition& p);
absl::StatusOr<FoldPosition> DecodePosition(std::string_view v);

// A history key: account | slot | seq.
struct HistoryKeyParts {
  Slot slot = 0;
  uint64_t seq = 0;
};
absl::StatusOr<HistoryKeyParts> ParseHistoryKey(rocksdb::Slice key);

// A history entry from its parts and its record.
absl::StatusOr<HistoryEntry> MakeEntry(Slot slot, uint64_t seq, uint8_t flags,
                                       std::string_view record);

// A history_by_slot row (schema 4) holds the records of up to kRowsPerSlotKey rows of one
// slot that one commit wrote, in seq order: key slot | seq of its first row -> per row
// account | flags | seq (BE) | record size (LE32) | the record. Every event's record is stored
// once, here; the history row of the account names this key.
inline constexpr size_t kSlotRowHeader = Pubkey::kSize + 1 + 8 + 4;

void AppendSlotRow(const Pubkey& account, bool ignored, uint64_t seq, std::string_view record,
                   std::string* out);

// One record of a history_by_slot row.
struct SlotRow {
  Pubkey account;
  uint8_t flags = 0;
  uint64_t seq = 0;
  std::string_view record;
};

// Reads the records of a history_by_slot row in order.
class SlotRowReader {
 public:
  explicit SlotRowReader(rocksdb::Slice value) : rest_(value.data(), value.size()) {}

  // The next record, nullopt after the last; DataLoss if the row is malformed or empty.
  absl::StatusOr<std::optional<SlotRow>> Next();

 private:
  std::string_view rest_;
  bool any_ = false;
};

// The first eight bytes of a key, as an integer in the keys' byte order.
inline uint64_t KeyPrefix(const Pubkey& account) { return LoadU64BE(account.data()); }

// Sorts `order` (rows with a `prefix`, the first eight bytes of their key, and an `index`) by
// prefix, and rows of equal prefix by `less` on their indexes. A large one is first spread
// over 65,536 buckets by its prefix's top 16 bits in one counting pass; each bucket, a row or
// two for keys spread as public keys are, is then sorted by comparison. A comparison sort of
// the whole took a tenth of a commit (bench/README.md, "Commits sorted in buckets"). `rows` and
// `ends` are scratch, kept by the caller so that their memory serves every sort.
template <typename Order, typename Less>
void SortByKey(std::vector<Order>& order, Less less, std::vector<Order>& rows,
               std::vector<uint32_t>& ends) {
  auto by_key = [&](const Order& a, const Order& b) {
    if (a.prefix != b.prefix) return a.prefix < b.prefix;
    return less(a.index, b.index);
  };
  constexpr int kBits = 16;
  constexpr size_t kBuckets = size_t{1} << kBits;
  // Below this many rows, clearing and walking the buckets costs more than it saves.
  if (order.size() < kBuckets / 8 || order.size() > UINT32_MAX) {
    std::sort(order.begin(), order.end(), by_key);
    return;
  }
  auto bucket = [](const Order& row) { return static_cast<size_t>(row.prefix >> (64 - kBits)); };
  ends.assign(kBuckets + 1, 0);
  for (const Order& row : order) ++ends[bucket(row) + 1];
  for (size_t b = 0; b < kBuckets; ++b) ends[b + 1] += ends[b];
  // ends[b] is where bucket b starts; placing its rows moves it to where the bucket ends.
  rows.resize(order.size());
  for (const Order& row : order) rows[ends[bucket(row)]++] = row;
  size_t start = 0;
  for (size_t b = 0; b < kBuckets; ++b) {
    const size_t end = ends[b];
    if (end - start > 1) std::sort(rows.begin() + start, rows.begin() + end, by_key);
    start = end;
  }
  order.swap(rows);
}

// Calls `put(index, items[index])` for the index of each row of `order` in turn, stopping at
// the first error. Sorted by key, `order` reads `items` at random: each item is prefetched a
// few rows ahead, so that the walk does not wait on memory for every row (bench/README.md,
// "Rows prefetched in key order").
template <typename Order, typename Item, typename Put>
absl::Status PutInKeyOrder(const std::vector<Order>& order, const std::vector<Item>& items,
                           Put put) {
  constexpr size_t kAhead = 8;
  constexpr size_t kLine = 64;
  for (size_t k = 0; k < order.size(); ++k) {
    if (k + kAhead < order.size()) {
      const char* ahead = reinterpret_cast<const char*>(&items[order[k + kAhead].index]);
      for (size_t at = 0; at < sizeof(Item); at += kLine) __builtin_prefetch(ahead + at);
    }
    const size_t index = order[k].index;
    if (absl::Status s = put(index, items[index]); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace switchyard::storage_internal
