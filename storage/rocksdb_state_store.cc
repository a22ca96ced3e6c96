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
#include <filesystem>
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
#include "spdlog/spdlog.h"
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
// Present while a store of an older schema is being moved to schema 4 (MigrateToSchema4).
constexpr char kMigrationKey[] = "migrating_to_schema_4";
constexpr uint8_t kHistoryIgnored = 1;
// A history value of schema 4: the record is in the history_by_slot row it names. Without this
// flag (schema 3 and older, or a row a migration has not reached yet) the record follows the
// flags.
constexpr uint8_t kHistoryInSlotRow = 2;
// At most this many records share a history_by_slot key, so that reading one account's row
// reads a few kilobytes, not a whole slot.
constexpr size_t kRowsPerSlotKey = 16;

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

// A history key: account | slot | seq.
struct HistoryKeyParts {
  Slot slot = 0;
  uint64_t seq = 0;
};

absl::StatusOr<HistoryKeyParts> ParseHistoryKey(rocksdb::Slice key) {
  if (key.size() != 48) return absl::DataLossError("malformed history row");
  return HistoryKeyParts{LoadU64BE(AsBytes(key.data() + 32)), LoadU64BE(AsBytes(key.data() + 40))};
}

absl::StatusOr<HistoryEntry> MakeEntry(Slot slot, uint64_t seq, uint8_t flags,
                                       std::string_view record) {
  HistoryEntry entry;
  entry.slot = slot;
  entry.seq = seq;
  entry.ignored = (flags & kHistoryIgnored) != 0;
  ASSIGN_OR_RETURN(entry.event, DecodeEvent(record));
  return entry;
}

// A history_by_slot row (schema 4) holds the records of up to kRowsPerSlotKey rows of one
// slot that one commit wrote, in seq order: key slot | seq of its first row -> per row
// account | flags | seq (BE) | record size (LE32) | the record. Every event's record is stored
// once, here; the history row of the account names this key.
constexpr size_t kSlotRowHeader = Pubkey::kSize + 1 + 8 + 4;

void AppendSlotRow(const Pubkey& account, bool ignored, uint64_t seq, std::string_view record,
                   std::string* out) {
  out->append(reinterpret_cast<const char*>(account.data()), Pubkey::kSize);
  out->push_back(static_cast<char>(ignored ? kHistoryIgnored : 0));
  AppendU64BE(out, seq);
  AppendU32LE(out, static_cast<uint32_t>(record.size()));
  out->append(record);
}

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
  absl::StatusOr<std::optional<SlotRow>> Next() {
    if (rest_.empty()) {
      if (!any_) return absl::DataLossError("empty history_by_slot row");
      return std::nullopt;
    }
    if (rest_.size() < kSlotRowHeader) return absl::DataLossError("malformed history_by_slot row");
    const uint8_t* p = AsBytes(rest_.data());
    const uint32_t size = LoadU32LE(p + Pubkey::kSize + 9);
    if (rest_.size() - kSlotRowHeader < size) {
      return absl::DataLossError("malformed history_by_slot row");
    }
    SlotRow row{Pubkey::FromBytes(p), p[Pubkey::kSize], LoadU64BE(p + Pubkey::kSize + 1),
                rest_.substr(kSlotRowHeader, size)};
    rest_.remove_prefix(kSlotRowHeader + size);
    any_ = true;
    return row;
  }

 private:
  std::string_view rest_;
  bool any_ = false;
};

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
                                     const RocksDbStateStoreOptions& options,
                                     std::string ingest_dir)
    : database_(std::move(database)),
      db_(database_->db()),
      state_cf_(database_->family(1)),
      history_cf_(database_->family(2)),
      meta_cf_(database_->family(3)),
      quarantine_cf_(database_->family(4)),
      by_slot_cf_(database_->family(5)),
      sync_commits_(options.sync_commits),
      ingest_min_rows_(options.ingest_min_rows),
      ingest_dir_(std::move(ingest_dir)),
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
  // The table files of large commits are built here, in a directory made by the first of them
  // (a store that only reads, a snapshot's, gets none); what a crash left is removed.
  std::string ingest_dir = absl::StrCat(path, "/ingest");
  if (!options.secondary) {
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(ingest_dir, ec)) {
      std::error_code ignored;
      std::filesystem::remove_all(entry.path(), ignored);
    }
  }
  std::unique_ptr<RocksDbStateStore> store(
      new RocksDbStateStore(std::move(database), options, std::move(ingest_dir)));
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
  if (stored < 4) {
    // Schemas 1 to 3 keep each record in its history row. A secondary cannot move them: it
    // reads each account's history as it is, and its slot-order reads fail until a primary
    // (fold, serve) has opened the store once.
    if (secondary) {
      slot_order_ready_ = false;
      return absl::OkStatus();
    }
    return MigrateToSchema4();
  }
  return absl::OkStatus();
}

absl::Status RocksDbStateStore::MigrateToSchema4() {
  rocksdb::WriteOptions write;
  write.sync = true;
  std::string marker;
  rocksdb::Status s = db_->Get(rocksdb::ReadOptions(), meta_cf_, kMigrationKey, &marker);
  if (s.IsNotFound()) {
    // Whatever an older schema kept in history_by_slot (an index without the records) goes,
    // in one write with the marker: a migration cut short resumes without clearing the rows
    // it has already moved.
    rocksdb::WriteBatch wb;
    const std::string all_end(17, '\xff');  // every slot key is 16 bytes
    RETURN_IF_ERROR(FromRocksDb(wb.DeleteRange(by_slot_cf_, rocksdb::Slice(), all_end),
                                "clearing the slot rows"));
    RETURN_IF_ERROR(FromRocksDb(wb.Put(meta_cf_, kMigrationKey, ""), "batch put"));
    RETURN_IF_ERROR(FromRocksDb(db_->Write(write, &wb), "starting the move to schema 4"));
  } else {
    RETURN_IF_ERROR(FromRocksDb(s, "reading the migration marker"));
  }
  rocksdb::ReadOptions read;
  read.fill_cache = false;
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(read, history_cf_));
  rocksdb::WriteBatch wb;
  std::string packed;
  std::string value;
  // History is in account order: each record moves to a history_by_slot row of its own, and
  // its history row is rewritten to name it, in the same write.
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    const rocksdb::Slice key = it->key();
    ASSIGN_OR_RETURN(HistoryKeyParts parts, ParseHistoryKey(key));
    const rocksdb::Slice old = it->value();
    if (old.empty()) return absl::DataLossError("malformed history row");
    const auto flags = static_cast<uint8_t>(old[0]);
    if ((flags & kHistoryInSlotRow) != 0) continue;  // moved before the migration was cut short
    packed.clear();
    AppendSlotRow(Pubkey::FromBytes(AsBytes(key.data())), (flags & kHistoryIgnored) != 0, parts.seq,
                  std::string_view(old.data() + 1, old.size() - 1), &packed);
    RETURN_IF_ERROR(
        FromRocksDb(wb.Put(by_slot_cf_, BySlotKey(parts.slot, parts.seq), packed), "batch put"));
    value.clear();
    value.push_back(static_cast<char>(flags | kHistoryInSlotRow));
    AppendU64BE(&value, parts.seq);
    RETURN_IF_ERROR(FromRocksDb(wb.Put(history_cf_, key, value), "batch put"));
    if (wb.Count() >= 20'000) {
      RETURN_IF_ERROR(FromRocksDb(db_->Write(write, &wb), "moving history to schema 4"));
      wb.Clear();
    }
  }
  RETURN_IF_ERROR(FromRocksDb(it->status(), "reading history"));
  std::string encoded;
  AppendU32LE(&encoded, kSchemaVersion);
  RETURN_IF_ERROR(FromRocksDb(wb.Put(meta_cf_, kSchemaKey, encoded), "batch put"));
  RETURN_IF_ERROR(FromRocksDb(wb.Delete(meta_cf_, kMigrationKey), "batch delete"));
  return FromRocksDb(db_->Write(write, &wb), "moving history to schema 4");
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
  RETURN_IF_ERROR(PutSlotRows(batch.history, wb));
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
    value.push_back(static_cast<char>((row.ignored ? kHistoryIgnored : 0) | kHistoryInSlotRow));
    AppendU64BE(&value, slot_key_of_[o.index]);
    RETURN_IF_ERROR(FromRocksDb(
        wb.Put(history_cf_, HistoryKey(row.account, row.slot, row.seq), value), "batch put"));
  }
  // Each family's rows go in key order, as table files need them: the quarantine's by
  // partition and offset, and in meta the position before the sealed digests.
  order_.clear();
  for (size_t i = 0; i < batch.quarantine.size(); ++i) order_.push_back({0, i});
  SortByKey(order_, [&](size_t a, size_t b) {
    const QuarantineEntry& x = batch.quarantine[a];
    const QuarantineEntry& y = batch.quarantine[b];
    return std::tie(x.partition, x.offset) < std::tie(y.partition, y.offset);
  });
  for (const KeyOrder& o : order_) {
    const QuarantineEntry& q = batch.quarantine[o.index];
    std::string key;
    AppendU64BE(&key, static_cast<uint32_t>(q.partition));
    AppendU64BE(&key, static_cast<uint64_t>(q.offset));
    value.clear();
    AppendU32LE(&value, static_cast<uint32_t>(q.reason.size()));
    value += q.reason;
    value += q.record;
    RETURN_IF_ERROR(FromRocksDb(wb.Put(quarantine_cf_, key, value), "batch put"));
  }
  static_assert(std::string_view(kPositionKey) < std::string_view(kSealedPrefix));
  RETURN_IF_ERROR(
      FromRocksDb(wb.Put(meta_cf_, kPositionKey, EncodePosition(batch.position)), "batch put"));
  for (const auto& [slot, digest] : batch.sealed_digests) {
    RETURN_IF_ERROR(
        FromRocksDb(wb.Put(meta_cf_, SealedKey(slot), EncodeDigest(digest)), "batch put"));
  }
  if (ingest_min_rows_ > 0 && batch.history.size() >= ingest_min_rows_) {
    std::error_code ec;
    std::filesystem::create_directories(ingest_dir_, ec);
    absl::Status ingested = ec ? absl::InternalError(absl::StrCat("cannot make the directory ",
                                                                  ingest_dir_, ": ", ec.message()))
                               : database_->IngestAsTableFiles(
                                     wb, ingest_dir_, "committing a fold batch to the state store");
    if (ingested.ok()) {
      ingested_commits_.fetch_add(1);
      return ingested;
    }
    // Nothing of the batch was applied: it is written as a small commit is.
    spdlog::warn("{}; writing it through the write-ahead log instead", ingested.ToString());
  }
  rocksdb::WriteOptions write;
  write.sync = sync_commits_;
  return database_->Write(write, &wb, "committing a fold batch to the state store");
}

absl::Status RocksDbStateStore::PutSlotRows(const std::vector<FoldBatch::HistoryRow>& rows,
                                            rocksdb::WriteBatch& wb) {
  // A batch holds the rows of few slots, nearly always in slot order: consecutive rows of a
  // slot are packed together, and a slot met again later in the batch (a late record) is
  // gathered by a second pass.
  std::string& packed = commit_packed_;
  slot_rows_.clear();
  for (size_t i = 0; i < rows.size(); ++i) slot_rows_.emplace_back(rows[i].slot, i);
  auto by_slot = [](const auto& a, const auto& b) { return a.first < b.first; };
  if (!std::is_sorted(slot_rows_.begin(), slot_rows_.end(), by_slot)) {
    std::stable_sort(slot_rows_.begin(), slot_rows_.end(), by_slot);
  }
  slot_key_of_.resize(rows.size());
  for (size_t i = 0; i < slot_rows_.size();) {
    const Slot slot = slot_rows_[i].first;
    const uint64_t first_seq = rows[slot_rows_[i].second].seq;
    packed.clear();
    for (size_t n = 0; i < slot_rows_.size() && slot_rows_[i].first == slot && n < kRowsPerSlotKey;
         ++i, ++n) {
      const size_t index = slot_rows_[i].second;
      const FoldBatch::HistoryRow& row = rows[index];
      AppendSlotRow(row.account, row.ignored, row.seq, row.record, &packed);
      slot_key_of_[index] = first_seq;
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
  // The rows and the records they name are read from one view of the store. A secondary's
  // view stays as it was at open (and it has no snapshots).
  std::optional<rocksdb::ManagedSnapshot> snapshot;
  if (!database_->secondary()) {
    snapshot.emplace(db_);
    read.snapshot = snapshot->snapshot();
  }
  std::vector<RecordRef> refs;
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(read, history_cf_));
  // Rows sort by slot; within a slot by sequence, which is fold order.
  for (it->Seek(HistoryKey(account, from_slot, 0)); it->Valid() && out.size() < limit; it->Next()) {
    ASSIGN_OR_RETURN(HistoryKeyParts parts, ParseHistoryKey(it->key()));
    const rocksdb::Slice value = it->value();
    if (value.empty()) return absl::DataLossError("malformed history row");
    const auto flags = static_cast<uint8_t>(value[0]);
    if ((flags & kHistoryInSlotRow) == 0) {  // a row of schema 3 or older: the record follows
      ASSIGN_OR_RETURN(HistoryEntry entry,
                       MakeEntry(parts.slot, parts.seq, flags,
                                 std::string_view(value.data() + 1, value.size() - 1)));
      out.push_back(std::move(entry));
      continue;
    }
    if (value.size() != 9) return absl::DataLossError("malformed history row");
    refs.push_back({out.size(), parts.slot, parts.seq, LoadU64BE(AsBytes(value.data() + 1))});
    out.emplace_back();
  }
  RETURN_IF_ERROR(FromRocksDb(it->status(), "reading history"));
  RETURN_IF_ERROR(ReadRecords(read, refs, out));
  return out;
}

absl::Status RocksDbStateStore::ReadRecords(const rocksdb::ReadOptions& read,
                                            const std::vector<RecordRef>& refs,
                                            std::vector<HistoryEntry>& out) {
  if (refs.empty()) return absl::OkStatus();
  if (by_slot_cf_ == nullptr) {
    return absl::DataLossError("history rows name slot rows, but the store has no history_by_slot");
  }
  // One MultiGet per bounded group of rows; rows of one slot row often follow each other, and
  // each key is asked for once per group.
  constexpr size_t kGroup = 512;
  std::vector<std::string> keys;
  std::vector<rocksdb::Slice> slices;
  std::vector<size_t> key_of;  // per ref of the group: its key's index
  std::vector<rocksdb::PinnableSlice> values;
  std::vector<rocksdb::Status> statuses;
  for (size_t first = 0; first < refs.size(); first += kGroup) {
    const size_t n = std::min(kGroup, refs.size() - first);
    keys.clear();
    key_of.clear();
    for (size_t i = first; i < first + n; ++i) {
      std::string key = BySlotKey(refs[i].slot, refs[i].slot_key_seq);
      if (keys.empty() || keys.back() != key) keys.push_back(std::move(key));
      key_of.push_back(keys.size() - 1);
    }
    slices.assign(keys.begin(), keys.end());
    values.clear();
    values.resize(keys.size());
    statuses.assign(keys.size(), rocksdb::Status());
    db_->MultiGet(read, by_slot_cf_, keys.size(), slices.data(), values.data(), statuses.data());
    for (size_t i = first; i < first + n; ++i) {
      const RecordRef& ref = refs[i];
      const size_t k = key_of[i - first];
      if (statuses[k].IsNotFound()) {
        return absl::DataLossError(
            absl::StrCat("a history row at slot ", ref.slot,
                         " names a slot row that history_by_slot does not hold"));
      }
      RETURN_IF_ERROR(FromRocksDb(statuses[k], "reading history records"));
      SlotRowReader reader(values[k]);
      for (;;) {
        ASSIGN_OR_RETURN(std::optional<SlotRow> row, reader.Next());
        if (!row) {
          return absl::DataLossError(absl::StrCat("the slot row of a history row at slot ",
                                                  ref.slot, " does not hold its record"));
        }
        if (row->seq != ref.seq) continue;
        ASSIGN_OR_RETURN(out[ref.index], MakeEntry(ref.slot, ref.seq, row->flags, row->record));
        break;
      }
    }
  }
  return absl::OkStatus();
}

absl::Status RocksDbStateStore::ForEachHistoryRow(
    Slot from_slot, Slot to_slot, absl::FunctionRef<absl::Status(const HistoryEntry&)> row) {
  if (!slot_order_ready_ || by_slot_cf_ == nullptr) {
    return absl::FailedPreconditionError(
        "this state store is of a schema older than 4, without its records in slot order; run "
        "`switchyard fold` or serve on it once to move them");
  }
  if (from_slot > to_slot) return absl::OkStatus();
  std::string upper = BySlotKey(to_slot, std::numeric_limits<uint64_t>::max());
  upper.push_back('\0');
  rocksdb::Slice upper_slice(upper);
  rocksdb::ReadOptions read;
  read.iterate_upper_bound = &upper_slice;
  read.fill_cache = false;  // a scan: keep the block cache for point reads
  read.readahead_size = 2 << 20;
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(read, by_slot_cf_));
  for (it->Seek(BySlotKey(from_slot, 0)); it->Valid(); it->Next()) {
    if (it->key().size() != 16) return absl::DataLossError("malformed history_by_slot key");
    const Slot slot = LoadU64BE(AsBytes(it->key().data()));
    SlotRowReader reader(it->value());
    for (;;) {
      ASSIGN_OR_RETURN(std::optional<SlotRow> r, reader.Next());
      if (!r) break;
      ASSIGN_OR_RETURN(HistoryEntry entry, MakeEntry(slot, r->seq, r->flags, r->record));
      RETURN_IF_ERROR(row(entry));
    }
  }
  return FromRocksDb(it->status(), "reading history by slot");
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
