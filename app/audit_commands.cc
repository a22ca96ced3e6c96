#include "app/audit_commands.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <iostream>
#include <limits>
#include <memory>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "app/peer_digests.h"
#include "common/status.h"
#include "engine/audit_digest.h"
#include "engine/event_text.h"
#include "engine/history_diff.h"
#include "engine/peer_check.h"
#include "fmt/format.h"
#include "storage/rocksdb_state_store.h"

namespace switchyard {
namespace {

constexpr Slot kLastSlot = std::numeric_limits<Slot>::max();

int Fail(const absl::Status& status) {
  std::cerr << "error: " << status.message() << "\n";
  return 1;
}

// The state opened as a RocksDB secondary instance, with the directory of its own info log,
// removed on close.
class StateReader {
 public:
  static absl::StatusOr<std::unique_ptr<StateReader>> Open(const Config& config) {
    const std::string dir = config.StateDir();
    if (!std::filesystem::exists(std::filesystem::path(dir) / "CURRENT")) {
      return absl::NotFoundError(
          absl::StrCat("no state at ", dir, " (fold the log or run serve first)"));
    }
    auto reader = std::unique_ptr<StateReader>(new StateReader());
    reader->secondary_dir_ =
        std::filesystem::temp_directory_path() /
        absl::StrCat("switchyard-reader-", getpid(), "-", absl::ToUnixNanos(absl::Now()));
    RocksDbStateStoreOptions options;
    options.block_cache_bytes = config.block_cache_mb << 20;
    options.create_if_missing = false;
    options.secondary = true;
    options.secondary_path = reader->secondary_dir_.string();
    ASSIGN_OR_RETURN(reader->store_, RocksDbStateStore::Open(dir, options));
    return reader;
  }
  ~StateReader() {
    store_.reset();
    std::error_code ec;
    std::filesystem::remove_all(secondary_dir_, ec);
  }
  RocksDbStateStore& store() { return *store_; }

 private:
  StateReader() = default;
  std::filesystem::path secondary_dir_;
  std::unique_ptr<RocksDbStateStore> store_;
};

absl::Status CheckFormat(const std::string& format, std::initializer_list<std::string_view> ok) {
  for (std::string_view f : ok) {
    if (format == f) return absl::OkStatus();
  }
  std::string names;
  for (std::string_view f : ok) names += fmt::format("{}{}", names.empty() ? "" : ", ", f);
  return absl::InvalidArgumentError(fmt::format("--format {} is not one of {}", format, names));
}

std::string ValidatorOf(const HistoryEntry& entry) {
  const auto* d = std::get_if<DelegatedEvent>(&entry.event);
  return d ? d->validator.ToBase58() : "-";
}

std::string SignatureOf(const HistoryEntry& entry) {
  if (const auto* d = std::get_if<DelegatedEvent>(&entry.event)) return SignatureText(d->signature);
  if (const auto* u = std::get_if<UndelegatedEvent>(&entry.event)) {
    return SignatureText(u->signature);
  }
  return "-";
}

std::string_view SourceOf(const HistoryEntry& entry) {
  if (const auto* d = std::get_if<DelegatedEvent>(&entry.event)) return SourceName(d->source);
  if (const auto* u = std::get_if<UndelegatedEvent>(&entry.event)) return SourceName(u->source);
  return "-";
}

std::string TextRow(std::string_view slot, std::string_view seq, std::string_view kind,
                    std::string_view source, std::string_view validator,
                    std::string_view signature) {
  return fmt::format("{:<10} {:<8} {:<19} {:<14} {:<44} {}\n", slot, seq, kind, source, validator,
                     signature);
}

std::string TextHeader() {
  return TextRow("slot", "seq", "kind", "source", "validator", "signature");
}

std::string TextRow(const HistoryEntry& entry) {
  return TextRow(std::to_string(entry.slot), std::to_string(entry.seq),
                 fmt::format("{}{}", KindName(KindOf(entry.event)), entry.ignored ? "(stale)" : ""),
                 SourceOf(entry), ValidatorOf(entry), SignatureOf(entry));
}

// One line of `state get`: the account's delegation, and the event that made it so.
std::string AccountLine(const Pubkey& account, const AccountStateAtSlot& at) {
  const std::optional<AccountState>& state = at.state;
  if (!state) return fmt::format("account={} status=unknown\n", account.ToBase58());
  const std::string cause =
      at.cause
          ? fmt::format(" {}={} source={}", state->delegated ? "delegated_by" : "undelegated_by",
                        SignatureOf(*at.cause), SourceOf(*at.cause))
          : "";
  if (!state->delegated) {
    return fmt::format("account={} status=undelegated last_event_slot={}{}\n", account.ToBase58(),
                       state->last_event_slot, cause);
  }
  return fmt::format(
      "account={} status=delegated validator={} owner={} delegation_slot={} lamports={} "
      "commit_frequency_ms={} last_event_slot={}{}\n",
      account.ToBase58(), state->validator.ToBase58(), state->owner_program.ToBase58(),
      state->delegation_slot, state->lamports, state->commit_frequency_ms, state->last_event_slot,
      cause);
}

// An account state as JSON, for the diff: {"delegated":false} or the delegation.
std::string StateJson(const std::optional<AccountState>& state) {
  if (!state || !state->delegated) return R"({"delegated":false})";
  return fmt::format(R"({{"delegated":true,"validator":"{}","delegation_slot":{}}})",
                     state->validator.ToBase58(), state->delegation_slot);
}

std::string StateText(const std::optional<AccountState>& state) {
  if (!state || !state->delegated) return "-";
  return state->validator.ToBase58();
}

}  // namespace

int RunStateGet(const Config& config, const StateGetArgs& args) {
  absl::StatusOr<Pubkey> account = Pubkey::FromBase58(args.account);
  if (!account.ok()) return Fail(account.status());
  auto reader = StateReader::Open(config);
  if (!reader.ok()) return Fail(reader.status());
  auto history = (*reader)->store().History(*account);
  if (!history.ok()) return Fail(history.status());
  AccountStateAtSlot at = AccountStateWithCauseAt(*history, args.at_slot.value_or(kLastSlot));
  if (!args.at_slot) {
    // The state row is what the fold holds now; the history says which event made it so.
    auto now = (*reader)->store().GetAccount(*account);
    if (!now.ok()) return Fail(now.status());
    at.state = *now;
  }
  std::cout << AccountLine(*account, at);
  return 0;
}

int RunAudit(const Config& config, const AuditArgs& args) {
  absl::StatusOr<Pubkey> account = Pubkey::FromBase58(args.account);
  if (!account.ok()) return Fail(account.status());
  if (absl::Status s = CheckFormat(args.format, {"text", "json", "csv"}); !s.ok()) return Fail(s);
  auto reader = StateReader::Open(config);
  if (!reader.ok()) return Fail(reader.status());
  auto history =
      (*reader)->store().HistoryBetween(*account, args.from_slot, args.to_slot.value_or(kLastSlot),
                                        std::numeric_limits<size_t>::max());
  if (!history.ok()) return Fail(history.status());
  if (args.format == "json") {
    std::cout << "[";
    for (size_t i = 0; i < history->size(); ++i) {
      std::cout << (i == 0 ? "\n" : ",\n") << HistoryEntryToJson((*history)[i]);
    }
    std::cout << "\n]\n";
  } else if (args.format == "csv") {
    std::cout << HistoryCsvHeader() << "\n";
    for (const HistoryEntry& entry : *history) std::cout << HistoryEntryToCsv(entry) << "\n";
  } else {
    std::cout << TextHeader();
    for (const HistoryEntry& entry : *history) std::cout << TextRow(entry);
  }
  return 0;
}

int RunHistoryExport(const Config& config, const HistoryExportArgs& args) {
  if (absl::Status s = CheckFormat(args.format, {"jsonl", "csv"}); !s.ok()) return Fail(s);
  const Slot to_slot = args.to_slot.value_or(kLastSlot);
  auto reader = StateReader::Open(config);
  if (!reader.ok()) return Fail(reader.status());
  std::FILE* out = stdout;
  if (!args.out.empty()) {
    out = std::fopen(args.out.c_str(), "w");
    if (out == nullptr) {
      return Fail(absl::NotFoundError(absl::StrCat("cannot write ", args.out)));
    }
  }
  static char buffer[1 << 20];
  std::setvbuf(out, buffer, _IOFBF, sizeof(buffer));
  const bool csv = args.format == "csv";
  if (csv)
    std::fprintf(out, "%.*s\n", static_cast<int>(HistoryCsvHeader().size()),
                 HistoryCsvHeader().data());
  const absl::Time start = absl::Now();
  absl::Time next_progress = start + absl::Milliseconds(args.progress_interval_ms);
  uint64_t rows = 0;
  std::string line;
  absl::Status status = (*reader)->store().ForEachHistoryRow(
      args.from_slot, to_slot, [&](const HistoryEntry& entry) -> absl::Status {
        line = csv ? HistoryEntryToCsv(entry) : HistoryEntryToJson(entry);
        line.push_back('\n');
        if (std::fwrite(line.data(), 1, line.size(), out) != line.size()) {
          return absl::DataLossError(
              absl::StrCat("writing ", args.out.empty() ? "stdout" : args.out, " failed"));
        }
        ++rows;
        if (args.progress_interval_ms > 0 && (rows & 1023) == 0 && absl::Now() >= next_progress) {
          const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
          std::cerr << fmt::format("history export: {} rows, at slot {}, {:.0f} rows/s\n", rows,
                                   entry.slot, rows / seconds);
          next_progress = absl::Now() + absl::Milliseconds(args.progress_interval_ms);
        }
        return absl::OkStatus();
      });
  if (std::fflush(out) != 0 && status.ok()) status = absl::DataLossError("flushing the output");
  if (out != stdout) std::fclose(out);
  if (!status.ok()) return Fail(status);
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
  std::cerr << fmt::format("exported rows={} seconds={:.3f} rows_per_sec={:.0f}\n", rows, seconds,
                           seconds > 0 ? rows / seconds : 0.0);
  return 0;
}

int RunHistoryDiff(const Config& config, const HistoryDiffArgs& args) {
  if (args.at.size() != 2) {
    return Fail(absl::InvalidArgumentError("history diff takes --at twice: --at A --at B"));
  }
  if (absl::Status s = CheckFormat(args.format, {"text", "json"}); !s.ok()) return Fail(s);
  const Slot from = args.at[0];
  const Slot to = args.at[1];
  auto reader = StateReader::Open(config);
  if (!reader.ok()) return Fail(reader.status());
  RocksDbStateStore& store = (*reader)->store();
  // The accounts with a row between the two slots are the only ones that can differ.
  std::set<Pubkey> touched;
  if (std::min(from, to) < kLastSlot) {
    absl::Status s = store.ForEachHistoryRow(std::min(from, to) + 1, std::max(from, to),
                                             [&](const HistoryEntry& entry) {
                                               touched.insert(*AccountOf(entry.event));
                                               return absl::OkStatus();
                                             });
    if (!s.ok()) return Fail(s);
  }
  const bool json = args.format == "json";
  if (json) {
    std::cout << "[";
  } else {
    std::cout << fmt::format("{:<44} {:<12} {:<44} {}\n", "account", "change",
                             fmt::format("validator@{}", from), fmt::format("validator@{}", to));
  }
  size_t listed = 0;
  for (const Pubkey& account : touched) {
    auto history =
        store.HistoryBetween(account, 0, std::max(from, to), std::numeric_limits<size_t>::max());
    if (!history.ok()) return Fail(history.status());
    std::optional<AccountDiff> diff = DiffAccount(account, *history, from, to);
    if (!diff) continue;
    if (json) {
      std::string events;
      for (const HistoryEntry& e : diff->events) {
        if (!events.empty()) events.push_back(',');
        events += HistoryEntryToJson(e);
      }
      std::cout << (listed == 0 ? "\n" : ",\n")
                << fmt::format(
                       R"({{"account":"{}","change":"{}","before":{},"after":{},"events":[{}]}})",
                       account.ToBase58(), ChangeName(diff->change), StateJson(diff->before),
                       StateJson(diff->after), events);
    } else {
      std::cout << fmt::format("{:<44} {:<12} {:<44} {}\n", account.ToBase58(),
                               ChangeName(diff->change), StateText(diff->before),
                               StateText(diff->after));
      for (const HistoryEntry& e : diff->events) std::cout << "    " << TextRow(e);
    }
    ++listed;
  }
  if (json) std::cout << "\n]\n";
  return 0;
}

int RunAuditDigest(const Config& config, const AuditDigestArgs& args) {
  if (absl::Status s = CheckFormat(args.format, {"text", "json"}); !s.ok()) return Fail(s);
  auto reader = StateReader::Open(config);
  if (!reader.ok()) return Fail(reader.status());
  RocksDbStateStore& store = (*reader)->store();
  auto position = store.Position();
  if (!position.ok()) return Fail(position.status());
  if (args.slot > position->applied_slot) {
    return Fail(absl::OutOfRangeError(
        fmt::format("slot {} is above the applied slot {}: its state may still change", args.slot,
                    position->applied_slot)));
  }
  AuditDigestBuilder builder(args.slot);
  absl::Status read = store.ForEachHistoryRow(0, args.slot, [&](const HistoryEntry& row) {
    builder.AddHistoryRow(row);
    return absl::OkStatus();
  });
  if (!read.ok()) return Fail(read);
  absl::StatusOr<AuditDigest> digest = builder.Finish();
  if (!digest.ok()) return Fail(digest.status());
  if (args.format == "json") {
    std::cout << fmt::format(R"({{"slot":{},"accounts":{},"sha256":"{}","applied_slot":{}}})",
                             digest->slot, digest->accounts, digest->ToHex(),
                             position->applied_slot)
              << "\n";
  } else {
    std::cout << digest->ToHex() << "\n";
  }
  return 0;
}

int RunVerifyPeer(const Config& config, const VerifyPeerArgs& args) {
  constexpr int kCannotCheck = 2;
  auto cannot_check = [](const absl::Status& status) {
    std::cerr << "error: " << status.message() << "\n";
    return kCannotCheck;
  };
  absl::StatusOr<std::unique_ptr<AdminPeerDigests>> peer =
      AdminPeerDigests::Create(args.peer, absl::Milliseconds(args.timeout_ms));
  if (!peer.ok()) return cannot_check(peer.status());
  auto reader = StateReader::Open(config);
  if (!reader.ok()) return cannot_check(reader.status());
  PeerCheckOptions options;
  options.max_slots = args.max_slots;
  absl::StatusOr<PeerCheckResult> result = CheckPeer((*reader)->store(), **peer, options);
  if (!result.ok()) return cannot_check(result.status());
  auto slot_text = [](const std::optional<Slot>& slot) {
    return slot ? std::to_string(*slot) : std::string("none");
  };
  std::cout << fmt::format(
      "peer={} peer_latest_slot={} sampled={} compared={} first_slot={} "
      "last_slot={} ",
      (*peer)->name(), slot_text(result->peer_latest), result->sampled, result->compared,
      slot_text(result->first_compared), slot_text(result->last_compared));
  if (const std::optional<PeerDivergence>& d = result->divergence) {
    std::cout << fmt::format("result=DIVERGED slot={} local_digest={} peer_digest={}\n", d->slot,
                             d->local.ToHex(), d->peer.ToHex());
    return 1;
  }
  std::cout << (result->compared == 0 ? "result=nothing_to_compare\n" : "result=ok\n");
  return 0;
}

}  // namespace switchyard
