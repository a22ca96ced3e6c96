#include "app/commands.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "app/event_json.h"
#include "app/log_url.h"
#include "common/clock.h"
#include "common/status.h"
#include "engine/event_codec.h"
#include "engine/fold_runner.h"
#include "storage/embedded_event_log.h"
#include "storage/rocksdb_state_store.h"

namespace switchyard {
namespace {

int Fail(const absl::Status& status) {
  std::cerr << "error: " << status.message() << "\n";
  return 1;
}

absl::StatusOr<std::unique_ptr<EventLog>> OpenLog(const Config& config, bool create_if_missing) {
  return OpenEventLog(config, create_if_missing);
}

absl::StatusOr<std::unique_ptr<RocksDbStateStore>> OpenState(const Config& config,
                                                             const std::string& dir) {
  RocksDbStateStoreOptions options;
  options.sync_commits = config.sync;
  options.block_cache_bytes = config.block_cache_mb << 20;
  options.ingest_min_rows = config.ingest_min_rows;
  return RocksDbStateStore::Open(dir, options);
}

std::string FormatLimbo(const std::optional<Slot>& since) {
  return since ? absl::StrCat(*since) : "none";
}

struct FoldSummary {
  FoldPosition position;
  uint64_t records = 0;
  double seconds = 0;
  uint64_t ingested_commits = 0;  // commits written as table files
};

// Folds the log at config.LogDir() into the state at `state_dir`, from the state's stored
// offsets, until caught up (or, with `stop_at`, until every partition sealed it).
absl::StatusOr<FoldSummary> FoldLog(const Config& config, EventLog& log,
                                    const std::string& state_dir, std::optional<Slot> stop_at) {
  ASSIGN_OR_RETURN(auto store, OpenState(config, state_dir));
  ASSIGN_OR_RETURN(std::unique_ptr<EventLogReader> reader, log.OpenReader());
  SystemClock clock;
  FoldRunnerOptions options = config.fold;
  options.fold.stop_at_slot = stop_at;
  options.poll_timeout = absl::ZeroDuration();
  FoldRunner runner(options, reader.get(), store.get(), nullptr, &clock);
  const absl::Duration start = clock.Monotonic();
  RETURN_IF_ERROR(runner.Init());
  auto records_read = [&runner] {
    int64_t total = 0;
    for (int32_t p = 0; p < runner.fold().partition_count(); ++p) {
      total += runner.fold().read_offset(p);
    }
    return total;
  };
  const int64_t before = records_read();
  RETURN_IF_ERROR(runner.RunUntilCaughtUp());
  FoldSummary summary;
  summary.position = runner.fold().position();
  summary.records = static_cast<uint64_t>(records_read() - before);
  summary.seconds = absl::ToDoubleSeconds(clock.Monotonic() - start);
  summary.ingested_commits = store->ingested_commits();
  return summary;
}

}  // namespace

int RunLogAppend(const Config& config, const LogAppendArgs& args) {
  std::ifstream in(args.jsonl_path);
  if (!in) return Fail(absl::NotFoundError(absl::StrCat("cannot read ", args.jsonl_path)));
  std::vector<Event> events;
  std::string line;
  size_t line_number = 0;
  size_t skipped = 0;
  while (std::getline(in, line)) {
    ++line_number;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    absl::StatusOr<Event> event = ParseEventJson(line);
    if (!event.ok()) {
      if (!args.skip_invalid) {
        return Fail(absl::InvalidArgumentError(absl::StrCat(args.jsonl_path, ":", line_number, ": ",
                                                            event.status().message(),
                                                            " (nothing was appended)")));
      }
      std::cerr << "skipped " << args.jsonl_path << ":" << line_number << ": "
                << event.status().message() << "\n";
      ++skipped;
      continue;
    }
    events.push_back(*std::move(event));
  }
  auto log = OpenLog(config, /*create_if_missing=*/true);
  if (!log.ok()) return Fail(log.status());
  std::vector<OutgoingRecord> records;
  for (const Event& event : events) {
    for (OutgoingRecord& r : ToLogRecords(event, (*log)->partition_count())) {
      records.push_back(std::move(r));
    }
  }
  constexpr size_t kChunk = 10'000;
  for (size_t i = 0; i < records.size(); i += kChunk) {
    const size_t n = std::min(kChunk, records.size() - i);
    if (auto s = (*log)->Append(std::span(records).subspan(i, n)); !s.ok()) return Fail(s);
  }
  std::cout << "appended=" << events.size() << " records=" << records.size()
            << " skipped=" << skipped << " partitions=" << (*log)->partition_count() << "\n";
  return 0;
}

int RunLogDump(const Config& config, const LogDumpArgs& args) {
  auto log = OpenLog(config, /*create_if_missing=*/false);
  if (!log.ok()) return Fail(log.status());
  auto opened = (*log)->OpenReader();
  if (!opened.ok()) return Fail(opened.status());
  EventLogReader* reader = opened->get();
  for (int32_t p = 0; p < reader->partition_count(); ++p) {
    if (auto s = reader->Seek(p, args.from); !s.ok()) return Fail(s);
  }
  int64_t remaining = args.limit.value_or(std::numeric_limits<int64_t>::max());
  while (remaining > 0) {
    auto read =
        reader->Poll(static_cast<size_t>(std::min<int64_t>(remaining, 10'000)),
                     absl::ZeroDuration(), [](const LogRecordView& r) {
                       absl::StatusOr<Event> event = DecodeEvent(r.payload);
                       std::cout << "{\"partition\":" << r.partition << ",\"offset\":" << r.offset;
                       if (event.ok()) {
                         std::cout << ",\"event\":" << EventToJson(*event) << "}\n";
                       } else {
                         std::cout << ",\"error\":\"" << event.status().message() << "\"}\n";
                       }
                     });
    if (!read.ok()) return Fail(read.status());
    if (*read == 0) break;
    remaining -= static_cast<int64_t>(*read);
  }
  return 0;
}

int RunLogDropBefore(const Config& config, const LogDropBeforeArgs& args) {
  if (config.log_url != "embedded") {
    return Fail(absl::InvalidArgumentError(
        "log drop-before is for the embedded log; a Kafka topic's retention drops its records"));
  }
  EmbeddedEventLogOptions options;
  options.sync_appends = config.sync;
  options.create_if_missing = false;
  auto log = EmbeddedEventLog::Open(config.LogDir(), options);
  if (!log.ok()) return Fail(log.status());
  if (auto s = (*log)->DropBefore(args.offset); !s.ok()) return Fail(s);
  std::cout << "start_offset=" << (*log)->start_offset() << " end_offset=" << (*log)->end_offset()
            << "\n";
  return 0;
}

int RunFold(const Config& config) {
  auto log = OpenLog(config, /*create_if_missing=*/true);
  if (!log.ok()) return Fail(log.status());
  auto summary = FoldLog(config, **log, config.StateDir(), std::nullopt);
  if (!summary.ok()) return Fail(summary.status());
  const FoldPosition& p = summary->position;
  std::cout << absl::StrFormat(
      "applied_slot=%d records=%d seconds=%.3f events_per_sec=%.0f digest=%s limbo_since=%s "
      "applied=%d ignored_stale=%d quarantined=%d next_offset=%d ingested_commits=%d\n",
      p.applied_slot, summary->records, summary->seconds,
      summary->seconds > 0 ? summary->records / summary->seconds : 0.0, p.digest.ToHex(),
      FormatLimbo(p.LimboSince()), p.counters.applied, p.counters.ignored_stale,
      p.counters.quarantined, p.partitions.empty() ? 0 : p.partitions[0].next_offset,
      summary->ingested_commits);
  return 0;
}

int RunReplay(const Config& config, const ReplayArgs& args) {
  if (std::filesystem::exists(args.out_dir) && !std::filesystem::is_empty(args.out_dir)) {
    return Fail(absl::AlreadyExistsError(
        absl::StrCat("replay writes a fresh state; ", args.out_dir, " is not empty")));
  }
  auto log = OpenLog(config, /*create_if_missing=*/false);
  if (!log.ok()) return Fail(log.status());
  auto summary = FoldLog(config, **log, args.out_dir, args.to_slot);
  if (!summary.ok()) return Fail(summary.status());
  const FoldPosition& p = summary->position;
  if (p.applied_slot < args.to_slot) {
    return Fail(absl::OutOfRangeError(
        absl::StrCat("the log seals slots only up to ", p.applied_slot, ", not ", args.to_slot)));
  }
  std::cout << "replayed_to_slot=" << p.applied_slot << " records=" << summary->records
            << " digest=" << p.digest.ToHex() << "\n";
  return 0;
}

int RunVerify(const Config& config) {
  FoldPosition live;
  std::optional<StateDigest> sealed;
  {
    auto store = OpenState(config, config.StateDir());
    if (!store.ok()) return Fail(store.status());
    auto position = (*store)->Position();
    if (!position.ok()) return Fail(position.status());
    live = *position;
    auto recorded = (*store)->SealedDigest(live.applied_slot);
    if (!recorded.ok()) return Fail(recorded.status());
    sealed = *recorded;
  }
  if (live.applied_slot == 0) {
    std::cout << "nothing to verify: no slot has been applied\n";
    return 0;
  }
  auto log = OpenLog(config, /*create_if_missing=*/false);
  if (!log.ok()) return Fail(log.status());
  const std::filesystem::path temp =
      std::filesystem::temp_directory_path() /
      absl::StrCat("switchyard-verify-", getpid(), "-", absl::ToUnixNanos(absl::Now()));
  auto summary = FoldLog(config, **log, temp.string(), live.applied_slot);
  std::error_code ec;
  std::filesystem::remove_all(temp, ec);
  if (!summary.ok()) return Fail(summary.status());
  const StateDigest replayed = summary->position.digest;
  const bool match = replayed == live.digest && (!sealed || *sealed == live.digest);
  std::cout << "applied_slot=" << live.applied_slot << " live_digest=" << live.digest.ToHex()
            << " sealed_digest=" << (sealed ? sealed->ToHex() : "none")
            << " replayed_digest=" << replayed.ToHex() << " result=" << (match ? "ok" : "MISMATCH")
            << "\n";
  return match ? 0 : 1;
}

}  // namespace switchyard
