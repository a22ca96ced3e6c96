#include "storage/internal/state_rows.h"

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "engine/event_codec.h"

namespace switchyard::storage_internal {

void AssignHistoryKey(const Pubkey& account, Slot slot, uint64_t seq, std::string* key) {
  key->assign(reinterpret_cast<const char*>(account.data()), Pubkey::kSize);
  AppendU64BE(key, slot);
  AppendU64BE(key, seq);
}

std::string HistoryKey(const Pubkey& account, Slot slot, uint64_t seq) {
  std::string key;
  AssignHistoryKey(account, slot, seq, &key);
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

void AppendSlotRow(const Pubkey& account, bool ignored, uint64_t seq, std::string_view record,
                   std::string* out) {
  out->append(reinterpret_cast<const char*>(account.data()), Pubkey::kSize);
  out->push_back(static_cast<char>(ignored ? kHistoryIgnored : 0));
  AppendU64BE(out, seq);
  AppendU32LE(out, static_cast<uint32_t>(record.size()));
  out->append(record);
}

absl::StatusOr<std::optional<SlotRow>> SlotRowReader::Next() {
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

}  // namespace switchyard::storage_internal
