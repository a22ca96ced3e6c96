#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "common/pubkey.h"
#include "common/pubkey_hash.h"
#include "engine/account_state.h"

namespace switchyard {

// Pubkey -> AccountState, built for the router's lookups: 4096 shards chosen by the key's
// hash, each an open-addressing table of compact cells (the validator and owner program are
// interned to 32-bit ids), so that a lookup costs about one cache miss.
//
// Copying a map shares its shards and its intern table; a write clones only the shard it
// touches when that shard is shared. The fold keeps one map and hands cheap copies to
// immutable snapshots. A map value belongs to one thread at a time; the parts it shares with
// other copies are never mutated.
class AccountMap {
 public:
  AccountMap();

  std::optional<AccountState> Find(const Pubkey& key) const;
  // Asks the cache for the cell where `key` lives or would go, so that a Find or Upsert of it
  // a little later does not wait for memory. A hint only: the map does not change.
  void Prefetch(const Pubkey& key) const;
  // Inserts or replaces.
  void Upsert(const Pubkey& key, const AccountState& state);
  // Sizes the tables for about `accounts` entries, so that a bulk load does not rehash.
  void Reserve(size_t accounts);
  // Upserts many entries, prefetching each one's cell ahead of the write (bulk loads).
  void UpsertMany(std::span<const std::pair<Pubkey, AccountState>> entries);

  size_t size() const { return size_; }

  // Builds a whole map faster than Upsert one entry at a time (below).
  class Builder;

  // Visits every entry, in no particular order.
  template <typename F>
  void ForEach(F&& f) const {
    for (const Root& root : roots_) {
      if (!root.table) continue;
      for (const Cell& cell : root.table->cells) {
        if (cell.occupied()) f(cell.key, Expand(cell));
      }
    }
  }

 private:
  static constexpr int kShardBits = 12;
  static constexpr uint8_t kOccupied = 1;
  static constexpr uint8_t kDelegated = 2;

  // 80 bytes: the key and the account's state with interned keys.
  struct Cell {
    Pubkey key;
    uint32_t validator_id = 0;
    uint32_t owner_id = 0;
    uint64_t delegation_slot = 0;
    uint64_t lamports = 0;
    uint64_t commit_frequency_ms = 0;
    uint64_t last_event_slot = 0;
    uint8_t flags = 0;
    bool occupied() const { return (flags & kOccupied) != 0; }
  };
  struct Table {
    std::vector<Cell> cells;  // linear probing from Home(), wrapping at the end
    size_t size = 0;
  };
  // Everything a lookup needs, so that it touches only the cell it probes.
  struct Root {
    std::shared_ptr<Table> table;
    const Cell* cells = nullptr;
    size_t capacity = 0;
  };
  // The first cell to probe: the hash's low 32 bits scaled to the capacity (the top bits
  // chose the shard), so capacities need not be powers of two.
  static size_t Home(size_t hash, size_t capacity) {
    return static_cast<size_t>((static_cast<uint64_t>(static_cast<uint32_t>(hash)) * capacity) >>
                               32);
  }
  struct Interner {
    std::vector<Pubkey> keys;
    absl::flat_hash_map<Pubkey, uint32_t, PubkeyHash> ids;
  };
  // The last key interned for one field of the cell and its id: events often come in runs for
  // one validator and owner program (a program delegating many accounts to one ER), and the
  // comparison costs less than a lookup.
  struct InternMemo {
    Pubkey key;
    uint32_t id = 0;
    bool valid = false;
  };

  AccountState Expand(const Cell& cell) const;
  Cell MakeCell(const Pubkey& key, const AccountState& state);
  uint32_t Intern(const Pubkey& key, InternMemo& memo);
  Table& MutableTable(size_t shard);
  static void InsertCell(Table& table, const Cell& cell, size_t hash);
  void Rehash(size_t shard, size_t capacity);

  std::array<Root, size_t{1} << kShardBits> roots_;
  std::shared_ptr<Interner> interner_;
  InternMemo validator_memo_;
  InternMemo owner_memo_;
  size_t size_ = 0;
};

// Builds a whole map (a state loaded at start-up) faster than Upsert one entry at a time:
// each entry's cell is appended to its shard's list as it comes, and each shard's table is
// then filled at once, within the cache, instead of each entry missing the cache in a table
// of the whole map. A later entry for a key replaces an earlier one. One thread.
class AccountMap::Builder {
 public:
  // `expected_accounts` sizes the shard lists (0: unknown).
  explicit Builder(size_t expected_accounts = 0);
  void Add(const Pubkey& key, const AccountState& state);
  AccountMap Build() &&;

 private:
  AccountMap map_;  // for its intern table
  std::vector<std::vector<Cell>> shards_;
};

}  // namespace switchyard
