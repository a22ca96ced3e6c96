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
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/endian.h"
#include "common/status.h"
#include "engine/event_codec.h"
#include "storage/internal/rocksdb_database.h"
#include "storage/internal/rocksdb_status.h"
#include "storage/internal/state_rows.h"

namespace switchyard {
namespace {

using storage_internal::AppendSlotRow;
using storage_internal::AsSlice;
using storage_internal::BySlotKey;
using storage_internal::DecodeDigest;
using storage_internal::DecodePosition;
using storage_internal::FromRocksDb;
using storage_internal::HistoryKey;
using storage_internal::HistoryKeyParts;
using storage_internal::kBySlotCf;
using storage_internal::kHistoryCf;
using storage_internal::kHistoryIgnored;
using storage_internal::kHistoryInSlotRow;
using storage_internal::kMetaCf;
using storage_internal::kMigrationKey;
using storage_internal::kPositionKey;
using storage_internal::kQuarantineCf;
using storage_internal::kSchemaKey;
using storage_internal::kSealedPrefix;
using storage_internal::kStateCf;
using storage_internal::MakeEntry;
using storage_internal::ParseHistoryKey;
using storage_internal::SealedKey;
using storage_internal::SlotRow;
using storage_internal::SlotRowReader;
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
      spare_batch_(std::make_unique<rocksdb::WriteBatch>()) {}

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
