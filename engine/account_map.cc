#include "engine/account_map.h"

namespace switchyard {
namespace {

constexpr size_t kMinCapacity = 8;

size_t HashOf(const Pubkey& key) { return PubkeyHash()(key); }

}  // namespace

AccountMap::AccountMap() : interner_(std::make_shared<Interner>()) {}

std::optional<AccountState> AccountMap::Find(const Pubkey& key) const {
  const size_t hash = HashOf(key);
  const Root& root = roots_[hash >> (64 - kShardBits)];
  if (root.cells == nullptr) return std::nullopt;
  for (size_t i = Home(hash, root.capacity);;) {
    const Cell& cell = root.cells[i];
    if (!cell.occupied()) return std::nullopt;
    if (cell.key == key) return Expand(cell);
    if (++i == root.capacity) i = 0;
  }
}

AccountState AccountMap::Expand(const Cell& cell) const {
  AccountState s;
  s.validator = interner_->keys[cell.validator_id];
  s.owner_program = interner_->keys[cell.owner_id];
  s.delegation_slot = cell.delegation_slot;
  s.lamports = cell.lamports;
  s.commit_frequency_ms = cell.commit_frequency_ms;
  s.last_event_slot = cell.last_event_slot;
  s.delegated = (cell.flags & kDelegated) != 0;
  return s;
}

uint32_t AccountMap::Intern(const Pubkey& key, InternMemo& memo) {
  if (memo.valid && memo.key == key) return memo.id;
  memo.key = key;
  memo.valid = true;
  auto it = interner_->ids.find(key);
  if (it != interner_->ids.end()) return memo.id = it->second;
  // Snapshots share the intern table; ids they hold stay valid because ids only grow.
  if (interner_.use_count() > 1) interner_ = std::make_shared<Interner>(*interner_);
  const auto id = static_cast<uint32_t>(interner_->keys.size());
  interner_->keys.push_back(key);
  interner_->ids.emplace(key, id);
  return memo.id = id;
}

void AccountMap::InsertCell(Table& table, const Cell& cell, size_t hash) {
  const size_t capacity = table.cells.size();
  for (size_t i = Home(hash, capacity);;) {
    if (!table.cells[i].occupied()) {
      table.cells[i] = cell;
      ++table.size;
      return;
    }
    if (++i == capacity) i = 0;
  }
}

void AccountMap::Rehash(size_t shard, size_t capacity) {
  Root& root = roots_[shard];
  auto grown = std::make_shared<Table>();
  grown->cells.resize(capacity);
  if (root.table) {
    for (const Cell& c : root.table->cells) {
      if (c.occupied()) InsertCell(*grown, c, HashOf(c.key));
    }
  }
  root.table = std::move(grown);
  root.cells = root.table->cells.data();
  root.capacity = capacity;
}

void AccountMap::Prefetch(const Pubkey& key) const {
  const size_t hash = HashOf(key);
  const Root& root = roots_[hash >> (64 - kShardBits)];
  if (root.cells != nullptr) __builtin_prefetch(&root.cells[Home(hash, root.capacity)], 1);
}

void AccountMap::UpsertMany(std::span<const std::pair<Pubkey, AccountState>> entries) {
  // Random cells in a large map each cost a cache miss; asking for them a few entries ahead
  // overlaps the misses.
  constexpr size_t kAhead = 8;
  for (size_t i = 0; i < entries.size() && i < kAhead; ++i) Prefetch(entries[i].first);
  for (size_t i = 0; i < entries.size(); ++i) {
    if (i + kAhead < entries.size()) Prefetch(entries[i + kAhead].first);
    Upsert(entries[i].first, entries[i].second);
  }
}

void AccountMap::Reserve(size_t accounts) {
  if (accounts == 0) return;
  const size_t per_shard = accounts / roots_.size() + 1;
  // A load of at most 3/4 after the expected inserts, with some slack for uneven shards.
  const size_t capacity = std::max(kMinCapacity, per_shard * 3 / 2);
  for (size_t shard = 0; shard < roots_.size(); ++shard) {
    if (!roots_[shard].table || roots_[shard].capacity < capacity) Rehash(shard, capacity);
  }
}

AccountMap::Table& AccountMap::MutableTable(size_t shard) {
  Root& root = roots_[shard];
  if (!root.table) {
    root.table = std::make_shared<Table>();
    root.table->cells.resize(kMinCapacity);
  } else if (root.table.use_count() > 1) {
    // Shared with a snapshot: copy before writing. A count of one cannot grow behind our
    // back, since every other copy of this map was made from us.
    root.table = std::make_shared<Table>(*root.table);
  }
  root.cells = root.table->cells.data();
  root.capacity = root.table->cells.size();
  return *root.table;
}

AccountMap::Cell AccountMap::MakeCell(const Pubkey& key, const AccountState& state) {
  Cell cell;
  cell.key = key;
  cell.validator_id = Intern(state.validator, validator_memo_);
  cell.owner_id = Intern(state.owner_program, owner_memo_);
  cell.delegation_slot = state.delegation_slot;
  cell.lamports = state.lamports;
  cell.commit_frequency_ms = state.commit_frequency_ms;
  cell.last_event_slot = state.last_event_slot;
  cell.flags = kOccupied | (state.delegated ? kDelegated : 0);
  return cell;
}

AccountMap::Builder::Builder(size_t expected_accounts) : shards_(map_.roots_.size()) {
  if (expected_accounts == 0) return;
  // A little over the mean, so that few shard lists grow.
  const size_t per_shard = expected_accounts / shards_.size() * 9 / 8 + 8;
  for (std::vector<Cell>& shard : shards_) shard.reserve(per_shard);
}

void AccountMap::Builder::Add(const Pubkey& key, const AccountState& state) {
  shards_[HashOf(key) >> (64 - kShardBits)].push_back(map_.MakeCell(key, state));
}

AccountMap AccountMap::Builder::Build() && {
  for (size_t shard = 0; shard < shards_.size(); ++shard) {
    std::vector<Cell>& cells = shards_[shard];
    if (cells.empty()) continue;
    // A load of at most 3/4, as Upsert keeps it.
    map_.Rehash(shard, std::max(kMinCapacity, (cells.size() * 4 + 2) / 3 + 1));
    Table& table = *map_.roots_[shard].table;
    const size_t capacity = table.cells.size();
    for (const Cell& cell : cells) {
      for (size_t i = Home(HashOf(cell.key), capacity);;) {
        Cell& slot = table.cells[i];
        if (!slot.occupied()) {
          slot = cell;
          ++table.size;
          ++map_.size_;
          break;
        }
        if (slot.key == cell.key) {
          slot = cell;
          break;
        }
        if (++i == capacity) i = 0;
      }
    }
    std::vector<Cell>().swap(cells);
  }
  return std::move(map_);
}

void AccountMap::Upsert(const Pubkey& key, const AccountState& state) {
  const Cell cell = MakeCell(key, state);

  const size_t hash = HashOf(key);
  const size_t shard = hash >> (64 - kShardBits);
  Table* table = &MutableTable(shard);
  const size_t capacity = table->cells.size();
  for (size_t i = Home(hash, capacity);;) {
    Cell& existing = table->cells[i];
    if (!existing.occupied()) break;
    if (existing.key == key) {
      existing = cell;
      return;
    }
    if (++i == capacity) i = 0;
  }
  // A new key. Keep the load at or below 3/4 so that probes stay short.
  if ((table->size + 1) * 4 > capacity * 3) {
    Rehash(shard, capacity * 2);
    table = roots_[shard].table.get();
  }
  InsertCell(*table, cell, hash);
  ++size_;
}

}  // namespace switchyard
