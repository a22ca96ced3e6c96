#include "storage/rocksdb_state_store.h"

#include <rocksdb/db.h>
#include <rocksdb/memtablerep.h>
#include <rocksdb/options.h>
#include <rocksdb/slice.h>
#include <rocksdb/table.h>
#include <rocksdb/utilities/checkpoint.h>
#include <rocksdb/write_batch.h>

#include <algorithm>
#include <deque>
#include <limits>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/endian.h"
#include "common/status.h"
#include "engine/event_codec.h"
#include "storage/internal/rocksdb_database.h"
#include "storage/internal/rocksdb_status.h"

namespace switchyard {
namespace {

using storage_internal::FromRocksDb;

constexpr char kStateCf[] = "state";
constexpr char kHistoryCf[] = "history";
constexpr char kMetaCf[] = "meta";
constexpr char kQuarantineCf[] = "quarantine";
constexpr char kBySlotCf[] = "history_by_slot";
constexpr char kSchemaKey[] = "schema_version";
constexpr char kPositionKey[] = "position";
constexpr char kSealedPrefix[] = "sealed/";
constexpr uint8_t kHistoryIgnored = 1;

rocksdb::Slice AsSlice(const Pubkey& key) {
  return rocksdb::Slice(reinterpret_cast<const char*>(key.data()), Pubkey::kSize);
}

std::string HistoryKey(const Pubkey& account, Slot slot, uint64_t seq) {
  std::string key(reinterpret_cast<const char*>(account.data()), Pubkey::kSize);
  AppendU64BE(&key, slot);
  AppendU64BE(&key, seq);
  return key;
}

std::string BySlotKey(Slot slot, uint64_t seq) {
  std::string key;
  AppendU64BE(&key, slot);
  AppendU64BE(&key, seq);
  return key;
}

std::string SealedKey(Slot slot) {
  std::string key = kSealedPrefix;
  AppendU64BE(&key, slot);
  return key;
}

std::string EncodeDigest(const StateDigest& d) {
  std::string out;
  AppendU64LE(&out, d.high());
  AppendU64LE(&out, d.low());
  return out;
}

std::optional<StateDigest> DecodeDigest(std::string_view v) {
  if (v.size() != 16) return std::nullopt;
  return StateDigest::FromParts(LoadU64LE(AsBytes(v.data())), LoadU64LE(AsBytes(v.data() + 8)));
}

std::string EncodePosition(const FoldPosition& p) {
  std::string out;
  AppendU64LE(&out, p.applied_slot);
  out += EncodeDigest(p.digest);
  AppendU64LE(&out, p.next_seq);
  for (uint64_t c : {p.counters.applied, p.counters.ignored_stale, p.counters.quarantined,
                     p.counters.seals, p.counters.stream_gaps, p.counters.resyncs}) {
    AppendU64LE(&out, c);
  }
  AppendU32LE(&out, static_cast<uint32_t>(p.partitions.size()));
  for (const auto& c : p.partitions) {
    AppendU64LE(&out, static_cast<uint64_t>(c.next_offset));
    AppendU64LE(&out, c.sealed_slot);
    out.push_back(c.limbo_since ? 1 : 0);
    AppendU64LE(&out, c.limbo_since.value_or(0));
  }
  return out;
}

absl::StatusOr<FoldPosition> DecodePosition(std::string_view v) {
  constexpr size_t kFixed = 8 + 16 + 8 + 6 * 8 + 4;
  constexpr size_t kPerPartition = 8 + 8 + 1 + 8;
  auto corrupt = [&] {
    return absl::DataLossError(
        absl::StrCat("stored fold position is malformed (", v.size(), " bytes)"));
  };
  if (v.size() < kFixed) return corrupt();
  const uint8_t* p = AsBytes(v.data());
  FoldPosition pos;
  pos.applied_slot = LoadU64LE(p);
  pos.digest = *DecodeDigest(v.substr(8, 16));
  pos.next_seq = LoadU64LE(p + 24);
  uint64_t* counters[] = {&pos.counters.applied,     &pos.counters.ignored_stale,
                          &pos.counters.quarantined, &pos.counters.seals,
                          &pos.counters.stream_gaps, &pos.counters.resyncs};
  for (int i = 0; i < 6; ++i) *counters[i] = LoadU64LE(p + 32 + 8 * i);
  const uint32_t partitions = LoadU32LE(p + 80);
  if (v.size() != kFixed + partitions * kPerPartition) return corrupt();
  for (uint32_t i = 0; i < partitions; ++i) {
    const uint8_t* q = p + kFixed + i * kPerPartition;
    PartitionCursor c;
    c.next_offset = static_cast<int64_t>(LoadU64LE(q));
    c.sealed_slot = LoadU64LE(q + 8);
    if (q[16] == 1) c.limbo_since = LoadU64LE(q + 17);
    pos.partitions.push_back(c);
  }
  return pos;
}

absl::StatusOr<HistoryEntry> DecodeHistoryRow(rocksdb::Slice key, rocksdb::Slice value) {
  if (key.size() != 48 || value.size() < 1) {
    return absl::DataLossError("malformed history row");
  }
  HistoryEntry entry;
  entry.slot = LoadU64BE(AsBytes(key.data() + 32));
  entry.seq = LoadU64BE(AsBytes(key.data() + 40));
  entry.ignored = (value[0] & kHistoryIgnored) != 0;
  ASSIGN_OR_RETURN(entry.event, DecodeEvent(std::string_view(value.data() + 1, value.size() - 1)));
  return entry;
}

// A history_by_slot row (schema 3) indexes the rows of one slot that one commit wrote:
// key slot | seq of its first row -> per row: account | flags | seq (BE). Rows are in seq
// order, so the keys in order give (slot, seq) order. The records stay in `history` alone:
// every event's bytes are written once.
constexpr size_t kPackedRow = Pubkey::kSize + 1 + 8;

void AppendPackedRow(const Pubkey& account, bool ignored, uint64_t seq, std::string* out) {
  out->append(reinterpret_cast<const char*>(account.data()), Pubkey::kSize);
  out->push_back(static_cast<char>(ignored ? kHistoryIgnored : 0));
  AppendU64BE(out, seq);
}

// The first eight bytes of a key, as an integer in the keys' byte order.
uint64_t KeyPrefix(const Pubkey& account) { return LoadU64BE(account.data()); }

// Sorts `order` by its prefixes, and rows of equal prefix by `less` on their indexes.
template <typename Order, typename Less>
void SortByKey(std::vector<Order>& order, Less less) {
  std::sort(order.begin(), order.end(), [&](const auto& a, const auto& b) {
    if (a.prefix != b.prefix) return a.prefix < b.prefix;
    return less(a.index, b.index);
  });
}

}  // namespace

RocksDbStateStore::RocksDbStateStore(std::unique_ptr<storage_internal::Database> database,
                                     bool sync_commits)
    : database_(std::move(database)),
      db_(database_->db()),
      state_cf_(database_->family(1)),
      history_cf_(database_->family(2)),
      meta_cf_(database_->family(3)),
      quarantine_cf_(database_->family(4)),
      by_slot_cf_(database_->family(5)),
      sync_commits_(sync_commits),
      commit_batch_(std::make_unique<rocksdb::WriteBatch>()) {}

RocksDbStateStore::~RocksDbStateStore() = default;

StateStore::Memory RocksDbStateStore::MemoryUsage() {
  Memory memory;
  // Every column family's memtables, the active and those waiting for a flush.
  db_->GetAggregatedIntProperty(rocksdb::DB::Properties::kSizeAllMemTables, &memory.memtables);
  // One cache shared by the families.
  db_->GetIntProperty(state_cf_, rocksdb::DB::Properties::kBlockCacheUsage, &memory.block_cache);
  return memory;
}

absl::StatusOr<std::unique_ptr<RocksDbStateStore>> RocksDbStateStore::Open(
    const std::string& path, const RocksDbStateStoreOptions& options) {
  rocksdb::DBOptions db_options =
      storage_internal::Database::DefaultOptions(options.create_if_missing);
  db_options.allow_concurrent_memtable_write = false;  // required by the vector memtable
  rocksdb::BlockBasedTableOptions table;
  table.block_cache = rocksdb::NewLRUCache(options.block_cache_bytes);
  table.checksum = rocksdb::kXXH3;
  // A reader beside the primary opens every table file (max_open_files = -1): their index and
  // filter blocks go to the bounded cache, so its memory does not grow with the history.
  table.cache_index_and_filter_blocks = options.secondary;
  rocksdb::ColumnFamilyOptions cf_options;
  cf_options.table_factory.reset(rocksdb::NewBlockBasedTableFactory(table));
  cf_options.compression = rocksdb::kLZ4Compression;
  cf_options.write_buffer_size = 64 << 20;
  // A memtable takes its memory in blocks of this size (RocksDB's default is 1 MiB). The
  // memtable metric counts whole blocks while RSS counts the pages written so far, so with
  // large blocks the two drift apart by up to a block per memtable between steps; small ones
  // keep switchyard_state_memtable_bytes within 64 KiB per memtable of what is resident.
  cf_options.arena_block_size = 64 << 10;
  // History rows are written in bulk and read rarely (audits): an append-only vector
  // memtable, sorted once at flush, takes them in at a fraction of a skiplist's cost.
  rocksdb::ColumnFamilyOptions history_options = cf_options;
  history_options.write_buffer_size = 128 << 20;
  history_options.max_write_buffer_number = 4;  // absorb bursts while a flush runs
  history_options.memtable_factory = std::make_shared<rocksdb::VectorRepFactory>();
  history_options.compression = rocksdb::kNoCompression;  // keys and signatures are random
  // The state is written the same way and read at start-up only (a full scan), so it takes
  // the same memtable.
  rocksdb::ColumnFamilyOptions state_options = cf_options;
  state_options.memtable_factory = std::make_shared<rocksdb::VectorRepFactory>();

  const std::vector<rocksdb::ColumnFamilyDescriptor> families = {
      {rocksdb::kDefaultColumnFamilyName, cf_options},
      {kStateCf, state_options},
      {kHistoryCf, history_options},
      {kMetaCf, cf_options},
      {kQuarantineCf, cf_options},
      {kBySlotCf, history_options}};
  std::unique_ptr<storage_internal::Database> database;
  if (options.secondary) {
    ASSIGN_OR_RETURN(database,
                     storage_internal::Database::OpenSecondary(
                         path, options.secondary_path, "the state store", db_options, families));
    for (size_t i = 0; i + 1 < families.size(); ++i) {
      if (database->family(i) == nullptr) {
        return absl::NotFoundError(
            absl::StrCat("no state store at ", path, " (no column family ", families[i].name, ")"));
      }
    }
  } else {
    ASSIGN_OR_RETURN(
        database, storage_internal::Database::Open(path, "the state store", db_options, families));
  }
  std::unique_ptr<RocksDbStateStore> store(
      new RocksDbStateStore(std::move(database), options.sync_commits));
  RETURN_IF_ERROR(store->CheckSchemaVersion(path, options.secondary));
  return store;
}

absl::Status RocksDbStateStore::CheckSchemaVersion(const std::string& path, bool secondary) {
  std::string value;
  rocksdb::Status s = db_->Get(rocksdb::ReadOptions(), meta_cf_, kSchemaKey, &value);
  if (s.IsNotFound()) {
    if (secondary) return absl::OkStatus();  // a store the primary has just created
    std::string encoded;
    AppendU32LE(&encoded, kSchemaVersion);
    rocksdb::WriteOptions write;
    write.sync = true;
    return FromRocksDb(db_->Put(write, meta_cf_, kSchemaKey, encoded), "writing schema version");
  }
  RETURN_IF_ERROR(FromRocksDb(s, "reading schema version"));
  if (value.size() != 4) return absl::DataLossError("stored schema version is malformed");
  const uint32_t stored = LoadU32LE(AsBytes(value.data()));
  if (stored > kSchemaVersion) {
    return absl::FailedPreconditionError(
        absl::StrCat("the state store at ", path, " has schema version ", stored,
                     ", newer than version ", kSchemaVersion, " that this build reads"));
  }
  if (stored < 3) {
    // Schema 1 had no slot index, schema 2 one row per event in it. A secondary cannot
    // rebuild it: its slot-order reads fail until a primary (fold, serve) has opened the store
    // once.
    if (secondary) {
      by_slot_cf_ = nullptr;
      return absl::OkStatus();
    }
    return BuildSlotIndex();
  }
  return absl::OkStatus();
}

absl::Status RocksDbStateStore::BuildSlotIndex() {
  rocksdb::WriteOptions write;
  write.sync = sync_commits_;
  // Whatever an older schema wrote there goes; every slot-index key is 16 bytes.
  const std::string all_end(17, '\xff');
  RETURN_IF_ERROR(FromRocksDb(db_->DeleteRange(write, by_slot_cf_, rocksdb::Slice(), all_end),
                              "clearing the slot index"));
  rocksdb::ReadOptions read;
  read.fill_cache = false;
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(read, history_cf_));
  rocksdb::WriteBatch wb;
  std::string value;
  // History is in account order: each row gets an index row of its own.
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    const rocksdb::Slice key = it->key();
    if (key.size() != 48 || it->value().empty())
      return absl::DataLossError("malformed history row");
    const Slot slot = LoadU64BE(AsBytes(key.data() + 32));
    const uint64_t seq = LoadU64BE(AsBytes(key.data() + 40));
    value.clear();
    AppendPackedRow(Pubkey::FromBytes(AsBytes(key.data())), (it->value()[0] & kHistoryIgnored) != 0,
                    seq, &value);
    RETURN_IF_ERROR(FromRocksDb(wb.Put(by_slot_cf_, BySlotKey(slot, seq), value), "batch put"));
    if (wb.Count() >= 10'000) {
      RETURN_IF_ERROR(FromRocksDb(db_->Write(write, &wb), "building the slot index"));
      wb.Clear();
    }
  }
  RETURN_IF_ERROR(FromRocksDb(it->status(), "reading history"));
  std::string encoded;
  AppendU32LE(&encoded, kSchemaVersion);
  RETURN_IF_ERROR(FromRocksDb(wb.Put(meta_cf_, kSchemaKey, encoded), "batch put"));
  write.sync = true;
  return FromRocksDb(db_->Write(write, &wb), "building the slot index");
}

absl::Status RocksDbStateStore::Commit(const FoldBatch& batch) {
  absl::MutexLock lock(&commit_mu_);
  // One batch reused across commits: its buffer keeps its pages.
  rocksdb::WriteBatch& wb = *commit_batch_;
  wb.Clear();
  std::string& value = commit_value_;
  // Only the last write of each account in the batch matters. Abseil's clear() frees a table
  // of more than 127 slots: sized once here, it is not grown again through every power of two
  // on each commit.
  written_.clear();
  written_.reserve(batch.accounts.size());
  order_.clear();
  for (size_t i = batch.accounts.size(); i-- > 0;) {
    const Pubkey& account = batch.accounts[i].account;
    if (written_.insert(account).second) order_.push_back({KeyPrefix(account), i});
  }
  // The rows go into the batch in key order, sorted here in one small array: each vector
  // memtable then holds one run of ordered keys per commit, so the flush's sort and its walk
  // read the arena in a few sequential streams instead of at random. bench/README.md,
  // "Commits in key order": a long fold gains, a short burst loses a little.
  SortByKey(order_, [&](size_t a, size_t b) {
    return batch.accounts[a].account < batch.accounts[b].account;
  });
  for (const KeyOrder& o : order_) {
    const FoldBatch::AccountWrite& write = batch.accounts[o.index];
    value.clear();
    EncodeAccountState(write.state, &value);
    RETURN_IF_ERROR(FromRocksDb(wb.Put(state_cf_, AsSlice(write.account), value), "batch put"));
  }
  order_.clear();
  for (size_t i = 0; i < batch.history.size(); ++i) {
    order_.push_back({KeyPrefix(batch.history[i].account), i});
  }
  SortByKey(order_, [&](size_t a, size_t b) {
    const FoldBatch::HistoryRow& x = batch.history[a];
    const FoldBatch::HistoryRow& y = batch.history[b];
    return std::tie(x.account, x.slot, x.seq) < std::tie(y.account, y.slot, y.seq);
  });
  for (const KeyOrder& o : order_) {
    const FoldBatch::HistoryRow& row = batch.history[o.index];
    value.clear();
    value.push_back(static_cast<char>(row.ignored ? kHistoryIgnored : 0));
    value += row.record;
    RETURN_IF_ERROR(FromRocksDb(
        wb.Put(history_cf_, HistoryKey(row.account, row.slot, row.seq), value), "batch put"));
  }
  RETURN_IF_ERROR(PutSlotIndex(batch.history, wb));
  for (const auto& q : batch.quarantine) {
    std::string key;
    AppendU64BE(&key, static_cast<uint32_t>(q.partition));
    AppendU64BE(&key, static_cast<uint64_t>(q.offset));
    value.clear();
    AppendU32LE(&value, static_cast<uint32_t>(q.reason.size()));
    value += q.reason;
    value += q.record;
    RETURN_IF_ERROR(FromRocksDb(wb.Put(quarantine_cf_, key, value), "batch put"));
  }
  for (const auto& [slot, digest] : batch.sealed_digests) {
    RETURN_IF_ERROR(
        FromRocksDb(wb.Put(meta_cf_, SealedKey(slot), EncodeDigest(digest)), "batch put"));
  }
  RETURN_IF_ERROR(
      FromRocksDb(wb.Put(meta_cf_, kPositionKey, EncodePosition(batch.position)), "batch put"));
  rocksdb::WriteOptions write;
  write.sync = sync_commits_;
  return database_->Write(write, &wb, "committing a fold batch to the state store");
}

absl::Status RocksDbStateStore::PutSlotIndex(const std::vector<FoldBatch::HistoryRow>& rows,
                                             rocksdb::WriteBatch& wb) {
  // The rows of one slot go into one packed row. A batch holds the rows of few slots,
  // nearly always in slot order: consecutive rows of a slot are packed together, and a slot
  // met again later in the batch (a late record) is gathered by a second pass.
  std::string& packed = commit_packed_;
  slot_rows_.clear();
  for (size_t i = 0; i < rows.size(); ++i) slot_rows_.emplace_back(rows[i].slot, i);
  auto by_slot = [](const auto& a, const auto& b) { return a.first < b.first; };
  if (!std::is_sorted(slot_rows_.begin(), slot_rows_.end(), by_slot)) {
    std::stable_sort(slot_rows_.begin(), slot_rows_.end(), by_slot);
  }
  for (size_t i = 0; i < slot_rows_.size();) {
    const Slot slot = slot_rows_[i].first;
    const uint64_t first_seq = rows[slot_rows_[i].second].seq;
    packed.clear();
    for (; i < slot_rows_.size() && slot_rows_[i].first == slot; ++i) {
      const FoldBatch::HistoryRow& row = rows[slot_rows_[i].second];
      AppendPackedRow(row.account, row.ignored, row.seq, &packed);
    }
    RETURN_IF_ERROR(
        FromRocksDb(wb.Put(by_slot_cf_, BySlotKey(slot, first_seq), packed), "batch put"));
  }
  return absl::OkStatus();
}

absl::StatusOr<FoldPosition> RocksDbStateStore::Position() {
  std::string value;
  rocksdb::Status s = db_->Get(rocksdb::ReadOptions(), meta_cf_, kPositionKey, &value);
  if (s.IsNotFound()) return FoldPosition();
  RETURN_IF_ERROR(FromRocksDb(s, "reading the fold position"));
  return DecodePosition(value);
}

absl::StatusOr<LoadedState> RocksDbStateStore::Load() {
  LoadedState loaded;
  ASSIGN_OR_RETURN(loaded.position, Position());
  uint64_t estimated = 0;
  if (!db_->GetIntProperty(state_cf_, "rocksdb.estimate-num-keys", &estimated)) estimated = 0;
  // Start-up time is serve's time to its first answer: the scan (read, decompress, decode)
  // runs on a thread of its own, handing chunks of rows to this one, which builds the map.
  constexpr size_t kChunkRows = 8192;
  constexpr size_t kMaxChunks = 8;  // the queue's bound
  using Chunk = std::vector<std::pair<Pubkey, AccountState>>;
  absl::Mutex mu;
  std::deque<Chunk> queue;  // guarded by mu
  bool done = false;        // guarded by mu
  absl::Status scanned;     // written by the scanner before done
  std::thread scanner([&] {
    rocksdb::ReadOptions read;
    read.fill_cache = false;
    read.readahead_size = 4 << 20;
    std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(read, state_cf_));
    Chunk chunk;
    chunk.reserve(kChunkRows);
    auto hand_over = [&] {
      absl::MutexLock lock(&mu);
      auto room = [&] { return queue.size() < kMaxChunks; };
      mu.Await(absl::Condition(&room));
      queue.push_back(std::move(chunk));
      chunk = Chunk();
      chunk.reserve(kChunkRows);
    };
    for (it->SeekToFirst(); it->Valid(); it->Next()) {
      const rocksdb::Slice key = it->key();
      std::optional<AccountState> state =
          DecodeAccountState(std::string_view(it->value().data(), it->value().size()));
      if (key.size() != Pubkey::kSize || !state) {
        scanned =
            absl::DataLossError(absl::StrCat("malformed state row of ", key.size(), " bytes"));
        break;
      }
      chunk.emplace_back(Pubkey::FromBytes(AsBytes(key.data())), *state);
      if (chunk.size() == kChunkRows) hand_over();
    }
    if (scanned.ok()) scanned = FromRocksDb(it->status(), "loading the state");
    if (scanned.ok() && !chunk.empty()) hand_over();
    absl::MutexLock lock(&mu);
    done = true;
  });
  AccountMap::Builder accounts(estimated);
  for (;;) {
    Chunk chunk;
    {
      absl::MutexLock lock(&mu);
      auto ready = [&] { return !queue.empty() || done; };
      mu.Await(absl::Condition(&ready));
      if (queue.empty()) break;  // done, and everything handed over is built
      chunk = std::move(queue.front());
      queue.pop_front();
    }
    for (const auto& [key, state] : chunk) accounts.Add(key, state);
  }
  scanner.join();
  RETURN_IF_ERROR(scanned);
  loaded.accounts = std::move(accounts).Build();
  return loaded;
}

absl::StatusOr<std::optional<AccountState>> RocksDbStateStore::GetAccount(const Pubkey& account) {
  std::string value;
  rocksdb::Status s = db_->Get(rocksdb::ReadOptions(), state_cf_, AsSlice(account), &value);
  if (s.IsNotFound()) return std::optional<AccountState>();
  RETURN_IF_ERROR(FromRocksDb(s, "reading an account"));
  std::optional<AccountState> state = DecodeAccountState(value);
  if (!state) return absl::DataLossError("malformed state row");
  return state;
}

absl::StatusOr<std::vector<HistoryEntry>> RocksDbStateStore::History(const Pubkey& account) {
  return HistoryBetween(account, 0, std::numeric_limits<Slot>::max(),
                        std::numeric_limits<size_t>::max());
}

absl::StatusOr<std::vector<HistoryEntry>> RocksDbStateStore::HistoryBetween(const Pubkey& account,
                                                                            Slot from_slot,
                                                                            Slot to_slot,
                                                                            size_t limit) {
  std::vector<HistoryEntry> out;
  if (from_slot > to_slot || limit == 0) return out;
  // The upper bound is exclusive: past every sequence of to_slot.
  std::string upper = HistoryKey(account, to_slot, std::numeric_limits<uint64_t>::max());
  upper.push_back('\0');
  rocksdb::Slice upper_slice(upper);
  rocksdb::ReadOptions read;
  read.iterate_upper_bound = &upper_slice;
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(read, history_cf_));
  for (it->Seek(HistoryKey(account, from_slot, 0)); it->Valid() && out.size() < limit; it->Next()) {
    ASSIGN_OR_RETURN(HistoryEntry entry, DecodeHistoryRow(it->key(), it->value()));
    out.push_back(std::move(entry));
  }
  RETURN_IF_ERROR(FromRocksDb(it->status(), "reading history"));
  // Rows sort by slot; within a slot by sequence, which is fold order.
  return out;
}

absl::Status RocksDbStateStore::ForEachHistoryRow(
    Slot from_slot, Slot to_slot, absl::FunctionRef<absl::Status(const HistoryEntry&)> row) {
  if (by_slot_cf_ == nullptr) {
    return absl::FailedPreconditionError(
        "this state store has no slot index of schema 3 yet; run `switchyard fold` or serve on it "
        "once to build it");
  }
  if (from_slot > to_slot) return absl::OkStatus();
  std::string upper = BySlotKey(to_slot, std::numeric_limits<uint64_t>::max());
  upper.push_back('\0');
  rocksdb::Slice upper_slice(upper);
  rocksdb::ReadOptions read;
  read.iterate_upper_bound = &upper_slice;
  read.fill_cache = false;  // a scan: keep the block cache for point reads
  read.readahead_size = 2 << 20;
  // The index and the rows it names are read from one view of the store. A secondary's view
  // stays as it was at open (and it has no snapshots).
  std::optional<rocksdb::ManagedSnapshot> snapshot;
  if (!database_->secondary()) {
    snapshot.emplace(db_);
    read.snapshot = snapshot->snapshot();
  }
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(read, by_slot_cf_));
  for (it->Seek(BySlotKey(from_slot, 0)); it->Valid(); it->Next()) {
    RETURN_IF_ERROR(ReadIndexedRows(read, it->key(), it->value(), row));
  }
  return FromRocksDb(it->status(), "reading history by slot");
}

absl::Status RocksDbStateStore::ReadIndexedRows(
    const rocksdb::ReadOptions& read, rocksdb::Slice key, rocksdb::Slice value,
    absl::FunctionRef<absl::Status(const HistoryEntry&)> row) {
  if (key.size() != 16 || value.empty() || value.size() % kPackedRow != 0) {
    return absl::DataLossError("malformed history_by_slot row");
  }
  const Slot slot = LoadU64BE(AsBytes(key.data()));
  const size_t count = value.size() / kPackedRow;
  // The rows are read in bounded chunks, one MultiGet each.
  constexpr size_t kChunk = 512;
  std::vector<std::string> keys;
  std::vector<rocksdb::Slice> slices;
  std::vector<rocksdb::PinnableSlice> values(std::min(count, kChunk));
  std::vector<rocksdb::Status> statuses(values.size());
  for (size_t first = 0; first < count; first += kChunk) {
    const size_t n = std::min(kChunk, count - first);
    keys.clear();
    slices.clear();
    for (size_t i = 0; i < n; ++i) {
      const uint8_t* p = AsBytes(value.data() + (first + i) * kPackedRow);
      keys.push_back(HistoryKey(Pubkey::FromBytes(p), slot, LoadU64BE(p + Pubkey::kSize + 1)));
    }
    for (const std::string& k : keys) slices.emplace_back(k);
    db_->MultiGet(read, history_cf_, n, slices.data(), values.data(), statuses.data());
    for (size_t i = 0; i < n; ++i) {
      if (statuses[i].IsNotFound()) {
        return absl::DataLossError(absl::StrCat("history_by_slot names a history row at slot ",
                                                slot, " that history does not hold"));
      }
      RETURN_IF_ERROR(FromRocksDb(statuses[i], "reading history by slot"));
      ASSIGN_OR_RETURN(HistoryEntry entry, DecodeHistoryRow(slices[i], values[i]));
      values[i].Reset();
      RETURN_IF_ERROR(row(entry));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::optional<AccountState>> RocksDbStateStore::GetAccountAt(const Pubkey& account,
                                                                            Slot slot) {
  ASSIGN_OR_RETURN(std::vector<HistoryEntry> history, History(account));
  // History rows are in (slot, seq) order; the fold's order within an account is seq order,
  // and a stale event (lower slot, higher seq) is marked ignored, so slot order is fold order
  // for every row that counts.
  return AccountStateAt(history, slot);
}

absl::StatusOr<std::optional<StateDigest>> RocksDbStateStore::SealedDigest(Slot slot) {
  std::string value;
  rocksdb::Status s = db_->Get(rocksdb::ReadOptions(), meta_cf_, SealedKey(slot), &value);
  if (s.IsNotFound()) return std::optional<StateDigest>();
  RETURN_IF_ERROR(FromRocksDb(s, "reading a sealed digest"));
  std::optional<StateDigest> digest = DecodeDigest(value);
  if (!digest) return absl::DataLossError("malformed sealed digest");
  return digest;
}

absl::StatusOr<std::vector<SealedDigestAt>> RocksDbStateStore::LastSealedDigests(Slot at_or_below,
                                                                                 size_t count) {
  std::vector<SealedDigestAt> out;
  if (count == 0) return out;
  const std::string lower(kSealedPrefix);
  rocksdb::Slice lower_slice(lower);
  rocksdb::ReadOptions read;
  read.iterate_lower_bound = &lower_slice;
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(read, meta_cf_));
  const rocksdb::Slice prefix(kSealedPrefix);
  for (it->SeekForPrev(SealedKey(at_or_below));
       it->Valid() && it->key().starts_with(prefix) && out.size() < count; it->Prev()) {
    const rocksdb::Slice key = it->key();
    std::optional<StateDigest> digest =
        DecodeDigest(std::string_view(it->value().data(), it->value().size()));
    if (key.size() != prefix.size() + 8 || !digest) {
      return absl::DataLossError("malformed sealed digest row");
    }
    out.push_back({LoadU64BE(AsBytes(key.data() + prefix.size())), *digest});
  }
  RETURN_IF_ERROR(FromRocksDb(it->status(), "reading sealed digests"));
  std::reverse(out.begin(), out.end());
  return out;
}

absl::StatusOr<std::vector<std::pair<Slot, StateDigest>>> RocksDbStateStore::SealedDigests() {
  std::vector<std::pair<Slot, StateDigest>> out;
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions(), meta_cf_));
  const rocksdb::Slice prefix(kSealedPrefix);
  for (it->Seek(prefix); it->Valid() && it->key().starts_with(prefix); it->Next()) {
    const rocksdb::Slice key = it->key();
    std::optional<StateDigest> digest =
        DecodeDigest(std::string_view(it->value().data(), it->value().size()));
    if (key.size() != prefix.size() + 8 || !digest) {
      return absl::DataLossError("malformed sealed digest row");
    }
    out.emplace_back(LoadU64BE(AsBytes(key.data() + prefix.size())), *digest);
  }
  RETURN_IF_ERROR(FromRocksDb(it->status(), "reading sealed digests"));
  return out;
}

absl::StatusOr<std::vector<QuarantineEntry>> RocksDbStateStore::Quarantine() {
  std::vector<QuarantineEntry> out;
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions(), quarantine_cf_));
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    const rocksdb::Slice key = it->key();
    const rocksdb::Slice value = it->value();
    if (key.size() != 16 || value.size() < 4)
      return absl::DataLossError("malformed quarantine row");
    const uint32_t reason_size = LoadU32LE(AsBytes(value.data()));
    if (value.size() < 4 + size_t{reason_size})
      return absl::DataLossError("malformed quarantine row");
    QuarantineEntry q;
    q.partition = static_cast<int32_t>(LoadU64BE(AsBytes(key.data())));
    q.offset = static_cast<int64_t>(LoadU64BE(AsBytes(key.data() + 8)));
    q.reason.assign(value.data() + 4, reason_size);
    q.record.assign(value.data() + 4 + reason_size, value.size() - 4 - reason_size);
    out.push_back(std::move(q));
  }
  RETURN_IF_ERROR(FromRocksDb(it->status(), "reading quarantine"));
  return out;
}

absl::StatusOr<uint64_t> RocksDbStateStore::CountHistoryRows() {
  uint64_t count = 0;
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions(), history_cf_));
  for (it->SeekToFirst(); it->Valid(); it->Next()) ++count;
  RETURN_IF_ERROR(FromRocksDb(it->status(), "counting history"));
  return count;
}

absl::StatusOr<RocksDbStateStore::StateScan> RocksDbStateStore::ScanState() {
  StateScan scan;
  rocksdb::ReadOptions read;
  read.fill_cache = false;
  read.readahead_size = 4 << 20;
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(read, state_cf_));
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    const rocksdb::Slice key = it->key();
    std::optional<AccountState> state =
        DecodeAccountState(std::string_view(it->value().data(), it->value().size()));
    if (key.size() != Pubkey::kSize || !state) {
      return absl::DataLossError(absl::StrCat("malformed state row of ", key.size(), " bytes"));
    }
    ++scan.accounts;
    if (state->delegated) {
      ++scan.delegated;
      scan.digest.Add(Pubkey::FromBytes(AsBytes(key.data())), *state);
    }
  }
  RETURN_IF_ERROR(FromRocksDb(it->status(), "scanning the state"));
  return scan;
}

absl::Status RocksDbStateStore::CreateCheckpoint(const std::string& dir) {
  rocksdb::Checkpoint* raw = nullptr;
  RETURN_IF_ERROR(FromRocksDb(rocksdb::Checkpoint::Create(db_, &raw), "making a checkpoint"));
  std::unique_ptr<rocksdb::Checkpoint> checkpoint(raw);
  return FromRocksDb(checkpoint->CreateCheckpoint(dir),
                     absl::StrCat("writing a checkpoint of the state store to ", dir));
}

}  // namespace switchyard
