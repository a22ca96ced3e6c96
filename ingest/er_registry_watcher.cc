#include "ingest/er_registry_watcher.h"

#include <algorithm>
#include <utility>

#include "common/status.h"
#include "fmt/format.h"
#include "spdlog/spdlog.h"

namespace switchyard {

ErRegistryMetrics::ErRegistryMetrics(MetricsRegistry& registry)
    : records(registry.AddGauge("switchyard_er_registry_records",
                                "ER records the Magic Domain Program holds, as last read")),
      unknown_versions(registry.AddCounter(
          "switchyard_er_registry_unknown_versions_total",
          "ER records of a version this build does not decode (the last readable one is kept)")),
      malformed(
          registry.AddCounter("switchyard_er_registry_malformed_total",
                              "ER records that do not decode or are not at their identity's PDA")),
      notifications(registry.AddCounter("switchyard_er_registry_notifications_total",
                                        "Program notifications of the ER registry read")),
      resyncs(registry.AddCounter("switchyard_er_registry_resyncs_total",
                                  "Full reads (getProgramAccounts) of the ER registry")),
      session_failures(registry.AddCounter(
          "switchyard_er_registry_session_failures_total",
          "Lost subscriptions and failed reads of the ER registry (each retried with backoff)")) {}

ErRegistryWatcher::ErRegistryWatcher(ErRegistryWatcherOptions options, ErRegistrySink* sink,
                                     ErRegistryMetrics* metrics)
    : options_(std::move(options)), sink_(sink), metrics_(metrics) {}

ErRegistryWatcher::~ErRegistryWatcher() { Stop(); }

absl::Status ErRegistryWatcher::Start() {
  ASSIGN_OR_RETURN(rpc_, ParseBaseUrl(options_.url));
  if (options_.pubsub_url.empty()) {
    ASSIGN_OR_RETURN(pubsub_, PubsubEndpointFor(rpc_));
  } else {
    ASSIGN_OR_RETURN(pubsub_, ParseBaseUrl(options_.pubsub_url));
  }
  client_ = std::make_unique<BaseRpcClient>(rpc_, options_.tls);
  thread_ = std::thread([this] { Run(); });
  return absl::OkStatus();
}

void ErRegistryWatcher::Stop() {
  if (!thread_.joinable()) return;
  {
    absl::MutexLock lock(&sleep_mu_);
    stopping_ = true;
  }
  thread_.join();
}

bool ErRegistryWatcher::Sleep(absl::Duration duration) {
  absl::MutexLock lock(&sleep_mu_);
  auto stopping = [this] { return stopping_.load(); };
  sleep_mu_.AwaitWithTimeout(absl::Condition(&stopping), duration);
  return !stopping_;
}

void ErRegistryWatcher::Run() {
  absl::Duration backoff = options_.reconnect_min;
  while (!stopping_) {
    const absl::Time started = absl::Now();
    absl::Status status = Session();
    if (stopping_) break;
    if (metrics_ != nullptr) metrics_->session_failures.Increment();
    spdlog::warn("ER registry: {}; again in {} ms", std::string(status.message()),
                 absl::ToInt64Milliseconds(backoff));
    if (!Sleep(backoff)) break;
    backoff = absl::Now() - started > absl::Seconds(10)
                  ? options_.reconnect_min
                  : std::min(backoff * 2, options_.reconnect_max);
  }
}

absl::Status ErRegistryWatcher::Session() {
  ASSIGN_OR_RETURN(std::unique_ptr<BasePubsubConnection> pubsub,
                   BasePubsubConnection::Connect(pubsub_, options_.request_timeout, options_.tls));
  RETURN_IF_ERROR(pubsub->Send(
      fmt::format(R"({{"jsonrpc":"2.0","id":1,"method":"programSubscribe","params":["{}",)"
                  R"({{"encoding":"base64","commitment":"confirmed"}}]}})",
                  options_.program.ToBase58()),
      options_.request_timeout));
  RETURN_IF_ERROR(Resync());
  absl::Time next_resync = absl::Now() + options_.resync_interval;
  while (!stopping_) {
    const absl::Time now = absl::Now();
    if (now >= next_resync) {
      RETURN_IF_ERROR(Resync());
      next_resync = absl::Now() + options_.resync_interval;
      continue;
    }
    const absl::Duration wait =
        std::clamp(next_resync - now, absl::Milliseconds(1), absl::Milliseconds(200));
    ASSIGN_OR_RETURN(std::optional<std::string> message, pubsub->Read(wait));
    if (!message) continue;
    absl::StatusOr<std::optional<ChainAccount>> account = ParseProgramNotification(*message);
    if (!account.ok()) {
      if (metrics_ != nullptr) metrics_->malformed.Increment();
      continue;
    }
    if (!*account) continue;
    if (metrics_ != nullptr) metrics_->notifications.Increment();
    OnAccount(**account);
  }
  return absl::CancelledError("stopping");
}

absl::Status ErRegistryWatcher::Resync() {
  ASSIGN_OR_RETURN(std::string body,
                   client_->Call("getProgramAccounts",
                                 fmt::format(R"(["{}",{{"encoding":"base64","withContext":true,)"
                                             R"("commitment":"confirmed"}}])",
                                             options_.program.ToBase58()),
                                 options_.request_timeout));
  ASSIGN_OR_RETURN(ProgramAccountsSnapshot snapshot, ParseProgramAccountsResponse(body));
  std::vector<ErRecord> records;
  absl::flat_hash_map<Pubkey, ErRecord> good;
  for (const ChainAccount& account : snapshot.accounts) {
    ErRecord record;
    switch (Read(account, &record)) {
      case Reading::kRecord:
        good[account.pubkey] = record;
        records.push_back(std::move(record));
        break;
      case Reading::kUnreadable:
        if (auto it = last_good_.find(account.pubkey); it != last_good_.end()) {
          good[account.pubkey] = it->second;
          records.push_back(it->second);
        }
        break;
      case Reading::kGone:
        break;
    }
  }
  last_good_ = std::move(good);
  if (metrics_ != nullptr) {
    metrics_->resyncs.Increment();
    metrics_->records.Set(static_cast<int64_t>(records.size()));
  }
  sink_->ReplaceAll(records);
  return absl::OkStatus();
}

ErRegistryWatcher::Reading ErRegistryWatcher::Read(const ChainAccount& account, ErRecord* record) {
  if (account.lamports == 0 || account.data.empty() || account.owner != options_.program) {
    return Reading::kGone;
  }
  absl::StatusOr<ErRecord> decoded = DecodeErRecord(account.data);
  if (decoded.ok() && ErRecordPda(decoded->identity) != account.pubkey) {
    decoded = absl::InvalidArgumentError(
        fmt::format("the record names identity {}, whose record PDA is another address",
                    decoded->identity.ToBase58()));
  }
  if (!decoded.ok()) {
    const bool unknown_version = decoded.status().code() == absl::StatusCode::kUnimplemented;
    if (metrics_ != nullptr) {
      (unknown_version ? metrics_->unknown_versions : metrics_->malformed).Increment();
    }
    if (logged_.insert(account.pubkey).second) {
      spdlog::warn(
          "ER registry: record {} is not readable ({}); {}", account.pubkey.ToBase58(),
          std::string(decoded.status().message()),
          last_good_.contains(account.pubkey) ? "the last readable one is kept" : "it is ignored");
    }
    return Reading::kUnreadable;
  }
  logged_.erase(account.pubkey);
  *record = *std::move(decoded);
  return Reading::kRecord;
}

void ErRegistryWatcher::OnAccount(const ChainAccount& account) {
  ErRecord record;
  switch (Read(account, &record)) {
    case Reading::kRecord: {
      auto previous = last_good_.find(account.pubkey);
      if (previous != last_good_.end() && previous->second.identity != record.identity) {
        sink_->Remove(previous->second.identity);
      }
      last_good_[account.pubkey] = record;
      sink_->Upsert(record);
      break;
    }
    case Reading::kGone:
      if (auto it = last_good_.find(account.pubkey); it != last_good_.end()) {
        sink_->Remove(it->second.identity);
        last_good_.erase(it);
      }
      break;
    case Reading::kUnreadable:
      break;
  }
  if (metrics_ != nullptr) metrics_->records.Set(static_cast<int64_t>(last_good_.size()));
}

}  // namespace switchyard
