#include "ingest/watcher.h"

#include <fmt/format.h>
#include <simdjson.h>
#include <spdlog/spdlog.h>

#include "common/status.h"
#include "ingest/transaction_view.h"
#include "solana/base64.h"

namespace switchyard {
namespace {

constexpr int kTransactionFetchAttempts = 40;
constexpr size_t kMaxCachedPdas = 1'000'000;
constexpr size_t kMaxUnflushedRecords = 10'000;

std::string ProgramId() { return std::string(kDelegationProgramId); }

absl::Status Malformed(std::string_view what) {
  return absl::InvalidArgumentError(std::string(what));
}

// The error object of a JSON-RPC answer, when the node answered with one.
std::optional<std::string> NodeErrorOf(std::string_view body) {
  simdjson::ondemand::parser parser;
  simdjson::padded_string padded(body);
  simdjson::ondemand::document doc;
  simdjson::ondemand::object root;
  if (parser.iterate(padded).get(doc) != simdjson::SUCCESS ||
      doc.get_object().get(root) != simdjson::SUCCESS) {
    return std::nullopt;  // the answer's own parser says what is wrong with it
  }
  simdjson::ondemand::value error;
  if (root.find_field_unordered("error").get(error) != simdjson::SUCCESS) return std::nullopt;
  simdjson::ondemand::object object;
  std::string_view raw;
  if (error.get_object().get(object) != simdjson::SUCCESS ||
      object.raw_json().get(raw) != simdjson::SUCCESS) {
    return "an error that is not an object";
  }
  return std::string(raw.substr(0, 300));
}

// The slot in a getSlot answer.
std::optional<Slot> SlotInAnswer(std::string_view body) {
  simdjson::ondemand::parser parser;
  simdjson::padded_string padded(body);
  simdjson::ondemand::document doc;
  uint64_t slot = 0;
  if (parser.iterate(padded).get(doc) != simdjson::SUCCESS ||
      doc.find_field_unordered("result").get_uint64().get(slot) != simdjson::SUCCESS) {
    return std::nullopt;
  }
  return slot;
}

}  // namespace

std::optional<DelegationRecord> BaseLayerWatcher::RecordInAccountInfo(std::string_view body) {
  simdjson::ondemand::parser parser;
  simdjson::padded_string padded(body);
  simdjson::ondemand::document doc;
  std::string_view data_text;
  simdjson::ondemand::array data;
  if (parser.iterate(padded).get(doc) != simdjson::SUCCESS ||
      doc.find_field_unordered("result")
              .find_field_unordered("value")
              .find_field_unordered("data")
              .get_array()
              .get(data) != simdjson::SUCCESS ||
      data.at(0).get_string().get(data_text) != simdjson::SUCCESS) {
    return std::nullopt;  // no such account (a null value)
  }
  absl::StatusOr<std::string> bytes = Base64Decode(data_text);
  if (!bytes.ok()) {
    CountMalformed("delegation record", "account data that is not base64");
    return std::nullopt;
  }
  absl::StatusOr<DelegationRecord> record = DecodeDelegationRecord(
      std::span(reinterpret_cast<const uint8_t*>(bytes->data()), bytes->size()));
  if (!record.ok()) {
    CountMalformed("delegation record", std::string(record.status().message()));
    return std::nullopt;
  }
  return *record;
}

WatcherMetrics::WatcherMetrics(MetricsRegistry& r)
    : events_written(r.AddCounter("switchyard_ingest_events_written_total",
                                  "Delegation events written to the log")),
      seals_written(r.AddCounter("switchyard_ingest_slots_sealed_total", "SlotSealed written")),
      stream_gaps(r.AddCounter("switchyard_ingest_stream_gaps_total",
                               "Lost base-layer streams (StreamGap written)")),
      reconnects(r.AddCounter("switchyard_ingest_reconnects_total", "Pubsub reconnections")),
      corrections(r.AddCounter("switchyard_ingest_reconcile_corrections_total",
                               "Events written by a reconciliation to correct the state")),
      malformed(r.AddCounter("switchyard_ingest_malformed_total",
                             "Base-layer answers or notifications that could not be used")),
      notifications(
          r.AddCounter("switchyard_ingest_notifications_total", "Pubsub notifications received")),
      read_retries(r.AddCounter("switchyard_ingest_read_retries_total",
                                "Base-layer reads tried again inside a session after a failure")),
      stale_connections(r.AddCounter(
          "switchyard_ingest_stale_connections_total",
          "Base-layer reads sent again at once because a kept connection had been closed")),
      log_append_errors(r.AddCounter(
          "switchyard_ingest_log_append_errors_total",
          "Appends to the event log that failed (a full disk, an I/O error) and were kept for "
          "the next")),
      last_sealed_slot(r.AddGauge("switchyard_ingest_last_sealed_slot", "Last slot sealed")),
      active_endpoint(r.AddGauge("switchyard_ingest_active_endpoint",
                                 "Index in [ingest] endpoints of the base-layer endpoint in use")),
      failovers_dead(r.AddCounter("switchyard_ingest_failovers_total",
                                  "Moves to another base-layer endpoint, by reason",
                                  {{"reason", "dead"}})),
      failovers_lag(r.AddCounter("switchyard_ingest_failovers_total",
                                 "Moves to another base-layer endpoint, by reason",
                                 {{"reason", "lag"}})),
      signature_lookups_found(r.AddCounter(
          "switchyard_ingest_signature_lookups_total",
          "getSignaturesForAddress of delegation records, by outcome", {{"outcome", "found"}})),
      signature_lookups_unknown(r.AddCounter(
          "switchyard_ingest_signature_lookups_total",
          "getSignaturesForAddress of delegation records, by outcome", {{"outcome", "unknown"}})),
      signature_lookups_failed(r.AddCounter(
          "switchyard_ingest_signature_lookups_total",
          "getSignaturesForAddress of delegation records, by outcome", {{"outcome", "failed"}})),
      registry_(r) {}

Gauge& WatcherMetrics::ProbedSlot(size_t index) {
  absl::MutexLock lock(&mu_);
  while (probed_slots_.size() <= index) {
    probed_slots_.push_back(
        &registry_.AddGauge("switchyard_ingest_endpoint_probed_slot",
                            "Last slot a probe (getSlot) read from each base-layer endpoint",
                            {{"endpoint", std::to_string(probed_slots_.size())}}));
  }
  return *probed_slots_[index];
}

BaseLayerWatcher::BaseLayerWatcher(WatcherOptions options, EventLogWriter* log,
                                   std::map<Pubkey, AccountState> initial_view, const Clock* clock,
                                   WatcherMetrics* metrics)
    : options_(std::move(options)),
      log_(log),
      clock_(clock),
      metrics_(metrics),
      policy_{options_.max_lag_slots, std::max(options_.stall_probe_rounds, 1)},
      view_(std::move(initial_view)),
      after_gap_(options_.resume_after_slot > 0),
      jitter_(options_.jitter_seed != 0 ? options_.jitter_seed
                                        : static_cast<uint64_t>(absl::ToUnixNanos(clock->Now()))) {}

BaseLayerWatcher::~BaseLayerWatcher() { Stop(); }

absl::Status BaseLayerWatcher::Start() {
  if (options_.endpoints.empty()) return absl::InvalidArgumentError("no base-layer endpoint");
  for (const WatcherEndpoint& endpoint : options_.endpoints) {
    ResolvedEndpoint resolved;
    ASSIGN_OR_RETURN(resolved.rpc, ParseBaseUrl(endpoint.url));
    if (resolved.rpc.scheme == Url::Scheme::kWs || resolved.rpc.scheme == Url::Scheme::kWss) {
      return absl::InvalidArgumentError(
          fmt::format("base-layer endpoint {}: '{}' is not an http:// or https:// URL",
                      endpoints_.size(), endpoint.url));
    }
    if (endpoint.pubsub_url.empty()) {
      ASSIGN_OR_RETURN(resolved.pubsub, PubsubEndpointFor(resolved.rpc));
    } else {
      ASSIGN_OR_RETURN(resolved.pubsub, ParseBaseUrl(endpoint.pubsub_url));
    }
    endpoints_.push_back(std::move(resolved));
  }
  {
    absl::MutexLock lock(&probe_mu_);
    probes_.assign(endpoints_.size(), EndpointProbe{});
  }
  active_ = 0;
  rpc_ =
      std::make_unique<BaseRpcClient>(endpoints_[0].rpc, options_.tls,
                                      metrics_ != nullptr ? &metrics_->stale_connections : nullptr);
  if (metrics_ != nullptr) {
    metrics_->active_endpoint.Set(0);
    if (endpoints_.size() > 1) {
      for (size_t i = 0; i < endpoints_.size(); ++i) metrics_->ProbedSlot(i);
    }
  }
  thread_ = std::thread([this] { Run(); });
  if (endpoints_.size() > 1) prober_ = std::thread([this] { ProbeLoop(); });
  return absl::OkStatus();
}

void BaseLayerWatcher::Stop() {
  if (!thread_.joinable()) return;
  stopping_ = true;
  if (!stop_requested_.HasBeenNotified()) stop_requested_.Notify();
  thread_.join();
  if (prober_.joinable()) prober_.join();
}

void BaseLayerWatcher::SwitchTo(size_t target, FailoverReason reason) {
  const size_t from = active_.load();
  spdlog::warn("base-layer endpoint {} {}; failing over to endpoint {} of {}", from,
               reason == FailoverReason::kDead ? "failed" : "lags", target, endpoints_.size());
  rpc_ =
      std::make_unique<BaseRpcClient>(endpoints_[target].rpc, options_.tls,
                                      metrics_ != nullptr ? &metrics_->stale_connections : nullptr);
  active_ = target;
  failed_sessions_ = 0;
  {
    absl::MutexLock lock(&probe_mu_);
    planned_.reset();
    plan_pending_ = false;
  }
  if (metrics_ != nullptr) {
    metrics_->active_endpoint.Set(static_cast<int64_t>(target));
    (reason == FailoverReason::kDead ? metrics_->failovers_dead : metrics_->failovers_lag)
        .Increment();
  }
}

std::optional<FailoverPlan> BaseLayerWatcher::PlannedMove() {
  if (!plan_pending_.load(std::memory_order_acquire)) return std::nullopt;
  absl::MutexLock lock(&probe_mu_);
  if (planned_ && planned_for_ == active_.load()) return planned_;
  return std::nullopt;
}

void BaseLayerWatcher::ProbeLoop() {
  std::vector<std::unique_ptr<BaseRpcClient>> clients;
  for (const ResolvedEndpoint& endpoint : endpoints_) {
    clients.push_back(std::make_unique<BaseRpcClient>(endpoint.rpc, options_.tls));
  }
  const absl::Duration timeout = std::min(options_.request_timeout, options_.probe_interval);
  while (!stop_requested_.WaitForNotificationWithTimeout(options_.probe_interval)) {
    std::vector<std::optional<Slot>> slots(clients.size());
    for (size_t i = 0; i < clients.size() && !stopping_; ++i) {
      absl::StatusOr<std::string> body =
          clients[i]->Call("getSlot", R"([{"commitment":"confirmed"}])", timeout);
      if (body.ok()) slots[i] = SlotInAnswer(*body);
      if (slots[i] && metrics_ != nullptr) {
        metrics_->ProbedSlot(i).Set(static_cast<int64_t>(*slots[i]));
      }
    }
    if (stopping_) return;
    const size_t active = active_.load();
    absl::MutexLock lock(&probe_mu_);
    for (size_t i = 0; i < slots.size(); ++i) {
      EndpointProbe& probe = probes_[i];
      const bool advanced = slots[i] && (!probe.slot || *slots[i] > *probe.slot);
      probe.last_answered = slots[i].has_value();
      if (slots[i]) probe.slot = slots[i];
      probe.rounds_without_advance = advanced ? 0 : probe.rounds_without_advance + 1;
    }
    planned_ = PlanFromProbes(probes_, active, policy_);
    planned_for_ = active;
    plan_pending_.store(planned_.has_value(), std::memory_order_release);
  }
}

void BaseLayerWatcher::Run() {
  if (options_.resume_after_slot > 0) {
    last_sealed_ = options_.resume_after_slot;
    if (absl::Status s = WriteMarker(StreamGapEvent{options_.resume_after_slot}); !s.ok()) {
      spdlog::warn("could not write StreamGap on restart: {}", std::string(s.message()));
    }
  }
  int failures = 0;
  while (!stopping_) {
    session_healthy_since_.reset();
    const absl::Status ended = Session();
    awaiting_signature_.clear();  // the next backfill reads them again
    after_gap_ = true;
    if (stopping_) break;
    // A session that ran well for a while resets the backoff: an idle base layer that drops
    // a connection now and then must not push every reconnect towards reconnect_max.
    if (session_healthy_since_ &&
        clock_->Monotonic() - *session_healthy_since_ >= options_.healthy_session) {
      failures = 0;
    }
    spdlog::warn("base-layer stream lost ({}); writing StreamGap at slot {} and reconnecting",
                 std::string(ended.message()), last_sealed_.load());
    if (metrics_ != nullptr) metrics_->stream_gaps.Increment();
    // The gap must reach the log; if even that fails, the next session's Resynced and
    // reconciliation still bring the state back, so only count it.
    if (absl::Status s = WriteMarker(StreamGapEvent{last_sealed_.load()}); !s.ok()) {
      spdlog::warn("could not write StreamGap: {}", std::string(s.message()));
    }
    // Another endpoint is one more lost stream: the next session's backfill on it writes
    // Resynced, as after any gap.
    if (endpoints_.size() > 1) {
      const bool healthy = session_healthy_since_.has_value();
      if (healthy) failed_sessions_ = 0;
      std::optional<FailoverPlan> move;
      if (session_end_ == SessionEnd::kProbes) {
        move = probe_plan_;
      } else if (session_end_ == SessionEnd::kRead ||
                 (session_end_ == SessionEnd::kStream && !healthy &&
                  ++failed_sessions_ >= options_.failed_sessions_before_failover)) {
        absl::MutexLock lock(&probe_mu_);
        move = FailoverPlan{NextEndpointAfterFailure(probes_, active_.load(), policy_),
                            FailoverReason::kDead};
      }
      if (move && move->target != active_.load()) SwitchTo(move->target, move->reason);
    }
    // Capped exponential backoff with jitter.
    const double base =
        absl::ToDoubleSeconds(options_.reconnect_min) * (1 << std::min(failures, 16));
    const double capped = std::min(base, absl::ToDoubleSeconds(options_.reconnect_max));
    const double jittered = capped * std::uniform_real_distribution<double>(0.5, 1.0)(jitter_);
    ++failures;
    if (stop_requested_.WaitForNotificationWithTimeout(absl::Seconds(jittered))) break;
    if (metrics_ != nullptr) metrics_->reconnects.Increment();
  }
}

absl::StatusOr<std::string> BaseLayerWatcher::CallBase(const std::string& method,
                                                       const std::string& params) {
  absl::Duration backoff = options_.read_backoff_min;
  absl::Status failed;
  for (int attempt = 1;; ++attempt) {
    absl::StatusOr<std::string> body = rpc_->Call(method, params, options_.request_timeout);
    if (body.ok()) {
      std::optional<std::string> node_error = NodeErrorOf(*body);
      if (!node_error) return body;
      body = absl::UnavailableError(fmt::format("base layer {}: {}", method, *node_error));
    }
    failed = body.status();
    if (attempt >= std::max(options_.read_attempts, 1)) break;
    if (std::optional<FailoverPlan> plan = PlannedMove()) {
      session_end_ = SessionEnd::kProbes;
      probe_plan_ = *plan;
      return absl::UnavailableError(
          fmt::format("base layer {}: {}; the probes call for another endpoint", method,
                      std::string(failed.message())));
    }
    if (metrics_ != nullptr) metrics_->read_retries.Increment();
    absl::Duration wait = backoff * std::uniform_real_distribution<double>(0.5, 1.0)(jitter_);
    if (std::optional<absl::Duration> asked = RetryAfterOf(failed)) {
      wait = std::min(*asked, options_.max_retry_after);
    }
    spdlog::debug("base layer {} failed ({}); trying again in {}", method,
                  std::string(failed.message()), absl::FormatDuration(wait));
    if (stop_requested_.WaitForNotificationWithTimeout(wait)) {
      return absl::CancelledError("stopping");
    }
    backoff = std::min(backoff * 2, options_.read_backoff_max);
  }
  session_end_ = SessionEnd::kRead;
  return absl::Status(failed.code(), fmt::format("{} ({} attempts)", std::string(failed.message()),
                                                 std::max(options_.read_attempts, 1)));
}

absl::Status BaseLayerWatcher::Session() {
  session_end_ = SessionEnd::kOther;
  // A failure of the stream itself (connect, send, read, silence), as opposed to the reads
  // or the log.
  auto stream_lost = [this](absl::Status status) {
    session_end_ = SessionEnd::kStream;
    return status;
  };
  absl::StatusOr<std::unique_ptr<BasePubsubConnection>> connected = BasePubsubConnection::Connect(
      endpoints_[active_.load()].pubsub, options_.request_timeout, options_.tls);
  if (!connected.ok()) return stream_lost(connected.status());
  std::unique_ptr<BasePubsubConnection> pubsub = *std::move(connected);
  const std::string program = ProgramId();
  const std::string subscriptions[] = {
      R"({"jsonrpc":"2.0","id":1,"method":"slotSubscribe"})",
      fmt::format(R"({{"jsonrpc":"2.0","id":2,"method":"programSubscribe","params":["{}",)"
                  R"({{"encoding":"base64","commitment":"confirmed"}}]}})",
                  program),
      fmt::format(R"({{"jsonrpc":"2.0","id":3,"method":"logsSubscribe","params":)"
                  R"([{{"mentions":["{}"]}},{{"commitment":"confirmed"}}]}})",
                  program)};
  for (const std::string& subscription : subscriptions) {
    if (absl::Status s = pubsub->Send(subscription, options_.request_timeout); !s.ok()) {
      return stream_lost(s);
    }
  }
  RETURN_IF_ERROR(Resync(/*periodic=*/false));
  session_healthy_since_ = clock_->Monotonic();
  next_reconcile_ = clock_->Monotonic() + options_.reconcile_interval;
  absl::Duration last_message = clock_->Monotonic();
  while (!stopping_) {
    if (std::optional<FailoverPlan> plan = PlannedMove()) {
      session_end_ = SessionEnd::kProbes;
      probe_plan_ = *plan;
      return absl::UnavailableError("the probes call for another endpoint");
    }
    const absl::Duration now = clock_->Monotonic();
    if (now >= next_reconcile_) {
      RETURN_IF_ERROR(Resync(/*periodic=*/true));
      next_reconcile_ = clock_->Monotonic() + options_.reconcile_interval;
    }
    const absl::Duration silent = now - last_message;
    const absl::Duration wait = std::min(
        {options_.silence_timeout - silent, next_reconcile_ - now, absl::Milliseconds(200)});
    absl::StatusOr<std::optional<std::string>> read =
        pubsub->Read(std::max(wait, absl::Milliseconds(1)));
    if (!read.ok()) return stream_lost(read.status());
    std::optional<std::string> message = *std::move(read);
    if (!message) {
      // Silence counts only while nothing is waiting to be read: time spent on reads of the
      // base layer (retries included) is not silence of the stream.
      if (clock_->Monotonic() - last_message >= options_.silence_timeout) {
        return stream_lost(
            absl::DeadlineExceededError("no message from the base layer within the timeout"));
      }
      continue;
    }
    last_message = clock_->Monotonic();
    if (absl::Status s = HandleMessage(*message); !s.ok()) {
      if (s.code() != absl::StatusCode::kInvalidArgument) return s;  // the log or the base failed
      CountMalformed("notification", std::string(s.message()));
    }
  }
  return absl::CancelledError("stopping");
}

absl::Status BaseLayerWatcher::Resync(bool periodic) {
  ASSIGN_OR_RETURN(std::string body,
                   CallBase("getProgramAccounts",
                            fmt::format(R"(["{}",{{"encoding":"base64","withContext":true,)"
                                        R"("commitment":"confirmed"}}])",
                                        ProgramId())));
  absl::StatusOr<ProgramAccountsSnapshot> snapshot = ParseProgramAccountsResponse(body);
  if (!snapshot.ok()) {
    if (snapshot.status().code() == absl::StatusCode::kInvalidArgument) {
      CountMalformed("getProgramAccounts", std::string(snapshot.status().message()));
    }
    return absl::UnavailableError(std::string(snapshot.status().message()));
  }
  ChainViewCounters counters;
  const std::vector<DelegatedEvent> chain = DelegationsOf(*snapshot, &counters);
  if (counters.records_malformed > 0) {
    CountMalformed("delegation record",
                   fmt::format("{} records of the wrong shape", counters.records_malformed));
  }
  const EventSource source = periodic     ? EventSource::kReconciliation
                             : after_gap_ ? EventSource::kRepair
                                          : EventSource::kBackfill;
  std::vector<Event> corrections =
      switchyard::Reconcile(view_, chain, snapshot->context_slot, source);
  if (periodic && !corrections.empty()) {
    spdlog::warn("reconciliation at slot {} found {} differences with the base layer",
                 snapshot->context_slot, corrections.size());
    if (metrics_ != nullptr) metrics_->corrections.Increment(corrections.size());
  }
  for (Event& correction : corrections) {
    auto* d = std::get_if<DelegatedEvent>(&correction);
    if (d == nullptr || !Changes(correction)) continue;
    awaiting_signature_.erase(d->account);
    d->signature = FindDelegateSignature(*d);
  }
  RETURN_IF_ERROR(Write(corrections));
  RETURN_IF_ERROR(Seal(snapshot->context_slot));
  if (!periodic) RETURN_IF_ERROR(WriteMarker(ResyncedEvent{snapshot->context_slot}));
  last_resync_ = snapshot->context_slot;
  return absl::OkStatus();
}

absl::Status BaseLayerWatcher::HandleMessage(std::string_view message) {
  simdjson::ondemand::parser parser;
  simdjson::padded_string padded(message);
  simdjson::ondemand::document doc;
  simdjson::ondemand::object root;
  if (parser.iterate(padded).get(doc) != simdjson::SUCCESS ||
      doc.get_object().get(root) != simdjson::SUCCESS) {
    return Malformed("not a JSON object");
  }
  std::string_view method;
  if (root.find_field_unordered("method").get_string().get(method) != simdjson::SUCCESS) {
    return absl::OkStatus();  // a subscription's confirmation
  }
  if (metrics_ != nullptr) metrics_->notifications.Increment();
  simdjson::ondemand::object result;
  if (root.find_field_unordered("params").find_field_unordered("result").get_object().get(result) !=
      simdjson::SUCCESS) {
    return Malformed(fmt::format("{} without params.result", method));
  }
  if (method == "slotNotification") {
    uint64_t slot = 0;
    if (result.find_field_unordered("slot").get_uint64().get(slot) != simdjson::SUCCESS) {
      return Malformed("slotNotification without a slot");
    }
    if (slot > options_.seal_lag) return Seal(slot - options_.seal_lag);
    return absl::OkStatus();
  }
  simdjson::ondemand::object value;
  if (result.find_field_unordered("value").get_object().get(value) != simdjson::SUCCESS) {
    return Malformed(fmt::format("{} without a value", method));
  }
  if (method == "programNotification") {
    std::string_view pubkey_text;
    std::string_view data_text;
    simdjson::ondemand::array data;
    if (value.find_field_unordered("pubkey").get_string().get(pubkey_text) != simdjson::SUCCESS ||
        value.find_field_unordered("account").find_field_unordered("data").get_array().get(data) !=
            simdjson::SUCCESS ||
        data.at(0).get_string().get(data_text) != simdjson::SUCCESS) {
      return Malformed("programNotification without pubkey or base64 data");
    }
    absl::StatusOr<Pubkey> pubkey = Pubkey::FromBase58(pubkey_text);
    absl::StatusOr<std::string> bytes = Base64Decode(data_text);
    if (!pubkey.ok() || !bytes.ok()) return Malformed("programNotification with a bad key or data");
    return HandleProgramAccount(*pubkey, *std::move(bytes));
  }
  if (method == "logsNotification") {
    simdjson::ondemand::value err;
    std::string_view signature;
    if (value.find_field_unordered("err").get(err) != simdjson::SUCCESS) {
      return Malformed("logsNotification without err");
    }
    const bool failed = !err.is_null();
    if (value.find_field_unordered("signature").get_string().get(signature) != simdjson::SUCCESS) {
      return Malformed("logsNotification without a signature");
    }
    if (failed) return absl::OkStatus();  // a failed transaction changed nothing
    return HandleLogs(std::string(signature));
  }
  return absl::OkStatus();
}

absl::Status BaseLayerWatcher::HandleProgramAccount(const Pubkey& pubkey, std::string data) {
  if (records_by_pda_.size() > kMaxCachedPdas || account_by_pda_.size() > kMaxCachedPdas) {
    records_by_pda_.clear();  // reconciliation covers what the caches forget
    account_by_pda_.clear();
  }
  absl::StatusOr<DelegationRecord> record =
      DecodeDelegationRecord(std::span(reinterpret_cast<const uint8_t*>(data.data()), data.size()));
  Pubkey account;
  if (record.ok()) {
    records_by_pda_[pubkey] = *record;
    auto it = account_by_pda_.find(pubkey);
    if (it == account_by_pda_.end()) return absl::OkStatus();
    account = it->second;
  } else {
    // Any other account of the program may be a delegated account: remember where its record
    // would be.
    const Pubkey pda = DelegationRecordPda(pubkey);
    account_by_pda_[pda] = pubkey;
    auto it = records_by_pda_.find(pda);
    if (it == records_by_pda_.end()) return absl::OkStatus();
    record = it->second;
    account = pubkey;
  }
  // The Delegate transaction in the logs normally follows at once and carries the signature;
  // until the next seal, the delegation waits for it.
  DelegatedEvent event = DelegatedEventOf(account, *record, std::nullopt, EventSource::kLive);
  if (Changes(event)) {
    awaiting_signature_[account] = event;
  } else {
    awaiting_signature_.erase(account);
  }
  return absl::OkStatus();
}

bool BaseLayerWatcher::Changes(const Event& event) const {
  const Pubkey* account = AccountOf(event);
  if (account == nullptr) return false;
  const AccountState* current = Known(*account);
  const ApplyResult result = ApplyAccountEvent(current, event);
  if (result.outcome == ApplyOutcome::kIgnoredStale) return false;
  return current == nullptr || current->delegated != result.next.delegated ||
         (result.next.delegated &&
          (current->validator != result.next.validator ||
           current->owner_program != result.next.owner_program ||
           current->delegation_slot != result.next.delegation_slot ||
           current->lamports != result.next.lamports ||
           current->commit_frequency_ms != result.next.commit_frequency_ms));
}

std::optional<Signature> BaseLayerWatcher::FindDelegateSignature(const DelegatedEvent& event) {
  constexpr int kMaxPages = 10;
  constexpr size_t kPage = 1000;
  const std::string pda = DelegationRecordPda(event.account).ToBase58();
  std::optional<Signature> before;
  std::vector<Signature> candidates;
  for (int page = 0; page < kMaxPages && candidates.empty(); ++page) {
    const std::string params =
        fmt::format(R"(["{}",{{"limit":{},"commitment":"confirmed"{}}}])", pda, kPage,
                    before ? fmt::format(R"(,"before":"{}")", before->ToBase58()) : "");
    // One attempt: a lookup that fails leaves the signature unknown; it never ends the
    // session, whose stream matters more.
    absl::StatusOr<std::string> body =
        rpc_->Call("getSignaturesForAddress", params, options_.request_timeout);
    absl::StatusOr<std::vector<AddressSignature>> listed =
        body.ok() ? ParseSignaturesResponse(*body) : body.status();
    if (!listed.ok()) {
      if (metrics_ != nullptr) metrics_->signature_lookups_failed.Increment();
      spdlog::debug("getSignaturesForAddress of {} failed: {}", pda,
                    std::string(listed.status().message()));
      return std::nullopt;
    }
    candidates = DelegateCandidates(*listed, event.slot);
    // Newest first: once past the delegation slot, or at the end, nothing older can be it.
    if (listed->size() < kPage || listed->back().slot < event.slot) break;
    before = listed->back().signature;
  }
  if (candidates.empty()) {
    if (metrics_ != nullptr) metrics_->signature_lookups_unknown.Increment();
    return std::nullopt;
  }
  if (candidates.size() > 1) {
    // Several transactions of that slot touched the record: the one with the Delegate of this
    // account created it.
    for (const Signature& candidate : candidates) {
      absl::StatusOr<std::string> body = rpc_->Call(
          "getTransaction",
          fmt::format(R"(["{}",{{"encoding":"base64","maxSupportedTransactionVersion":0,)"
                      R"("commitment":"confirmed"}}])",
                      candidate.ToBase58()),
          options_.request_timeout);
      if (!body.ok()) continue;
      absl::StatusOr<TransactionDelegations> tx = ParseTransactionResponse(*body);
      if (!tx.ok() || tx->failed) continue;
      for (const DelegationInstruction& ix : tx->instructions) {
        if (ix.kind != DelegationInstructionKind::kUndelegate &&
            ix.delegated_account == event.account) {
          if (metrics_ != nullptr) metrics_->signature_lookups_found.Increment();
          return candidate;
        }
      }
    }
    if (metrics_ != nullptr) metrics_->signature_lookups_unknown.Increment();
    return std::nullopt;
  }
  if (metrics_ != nullptr) metrics_->signature_lookups_found.Increment();
  return candidates.front();
}

absl::Status BaseLayerWatcher::ResolveAwaitingSignatures() {
  std::map<Pubkey, DelegatedEvent> awaiting;
  awaiting.swap(awaiting_signature_);
  std::vector<Event> events;
  for (auto& [account, event] : awaiting) {
    if (!Changes(event)) continue;
    event.signature = FindDelegateSignature(event);
    events.emplace_back(std::move(event));
  }
  return Write(events);
}

absl::Status BaseLayerWatcher::HandleLogs(const std::string& signature) {
  const std::string params = fmt::format(
      R"(["{}",{{"encoding":"base64","maxSupportedTransactionVersion":0,"commitment":"confirmed"}}])",
      signature);
  absl::StatusOr<TransactionDelegations> tx = absl::NotFoundError("not fetched");
  for (int attempt = 0; attempt < kTransactionFetchAttempts && absl::IsNotFound(tx.status());
       ++attempt) {
    if (attempt > 0 && stop_requested_.WaitForNotificationWithTimeout(absl::Milliseconds(25))) {
      return absl::CancelledError("stopping");
    }
    ASSIGN_OR_RETURN(std::string body, CallBase("getTransaction", params));
    tx = ParseTransactionResponse(body);
  }
  if (!tx.ok()) {
    // Sealing past a delegation change that could not be read would publish a wrong state:
    // treat it as a lost stream, so that the resync's reconciliation writes it first.
    if (!absl::IsNotFound(tx.status())) {
      CountMalformed("getTransaction", std::string(tx.status().message()));
    }
    return absl::UnavailableError(fmt::format("transaction {} could not be read: {}", signature,
                                              std::string(tx.status().message())));
  }
  if (tx->failed) return absl::OkStatus();
  std::vector<Event> events;
  for (const DelegationInstruction& ix : tx->instructions) {
    if (ix.kind == DelegationInstructionKind::kUndelegate) {
      events.emplace_back(
          UndelegatedEvent{ix.delegated_account, tx->slot, tx->signature, EventSource::kLive});
      continue;
    }
    // A Delegate: the record holds what the event needs, if it is still this delegation's.
    // It is paired by its PDA with the record a program notification brought, else read.
    // A record gone (undelegated since) or newer (delegated again since) is not; the
    // transaction then says what the record held, so that the slots before the later change
    // are right too.
    const Pubkey pda = DelegationRecordPda(ix.delegated_account);
    std::optional<DelegationRecord> record;
    if (auto known = records_by_pda_.find(pda);
        known != records_by_pda_.end() && known->second.delegation_slot == tx->slot) {
      record = known->second;
    } else {
      ASSIGN_OR_RETURN(
          std::string body,
          CallBase("getAccountInfo",
                   fmt::format(R"(["{}",{{"encoding":"base64","commitment":"confirmed"}}])",
                               pda.ToBase58())));
      record = RecordInAccountInfo(body);
    }
    if (auto waiting = awaiting_signature_.find(ix.delegated_account);
        waiting != awaiting_signature_.end() && waiting->second.slot <= tx->slot) {
      awaiting_signature_.erase(waiting);
    }
    if (!record || record->delegation_slot != tx->slot) {
      DelegationRecord from_transaction;
      from_transaction.authority = ix.validator.value_or(Pubkey());
      from_transaction.owner = ix.owner_program;
      from_transaction.delegation_slot = tx->slot;
      from_transaction.lamports = tx->PostBalanceOf(ix.delegated_account).value_or(0);
      from_transaction.commit_frequency_ms = ix.commit_frequency_ms;
      record = from_transaction;
    }
    events.emplace_back(
        DelegatedEventOf(ix.delegated_account, *record, tx->signature, EventSource::kLive));
  }
  return Write(events);
}

absl::Status BaseLayerWatcher::Seal(Slot slot) {
  RETURN_IF_ERROR(ResolveAwaitingSignatures());
  if (slot <= last_sealed_.load()) return Flush({});
  RETURN_IF_ERROR(Flush({SlotSealedEvent{slot}}));
  last_sealed_ = slot;
  if (metrics_ != nullptr) {
    metrics_->seals_written.Increment();
    metrics_->last_sealed_slot.Set(static_cast<int64_t>(slot));
  }
  return absl::OkStatus();
}

const AccountState* BaseLayerWatcher::Known(const Pubkey& account) const {
  if (auto p = unflushed_view_.find(account); p != unflushed_view_.end()) return &p->second;
  if (auto v = view_.find(account); v != view_.end()) return &v->second;
  return nullptr;
}

absl::Status BaseLayerWatcher::Write(const std::vector<Event>& events) {
  for (const Event& event : events) {
    // Only what changes the delegation: the same delegation seen twice is written once, and
    // nothing the fold would ignore is written at all.
    if (!Changes(event)) continue;
    const Pubkey& account = *AccountOf(event);
    unflushed_view_[account] = ApplyAccountEvent(Known(account), event).next;
    for (OutgoingRecord& r : ToLogRecords(event, log_->partition_count())) {
      unflushed_.push_back(std::move(r));
    }
    ++unflushed_events_;
  }
  // Events become visible only with the next seal; a long burst goes out early anyway.
  if (unflushed_.size() >= kMaxUnflushedRecords) return Flush({});
  return absl::OkStatus();
}

absl::Status BaseLayerWatcher::Flush(const std::vector<Event>& markers) {
  for (const Event& marker : markers) {
    for (OutgoingRecord& r : ToLogRecords(marker, log_->partition_count())) {
      unflushed_.push_back(std::move(r));
    }
  }
  if (unflushed_.empty()) return absl::OkStatus();
  // On failure nothing is forgotten: the same records go out with the next flush (the log
  // may hold some of them twice; the fold ignores the repeats that are stale).
  if (absl::Status s = log_->Append(unflushed_); !s.ok()) {
    if (metrics_ != nullptr) metrics_->log_append_errors.Increment();
    bool first = false;
    {
      absl::MutexLock lock(&append_error_mu_);
      first = append_error_.empty();
      append_error_ = std::string(s.message());
    }
    // Once per outage: the session ends and every reconnect fails the same way meanwhile.
    if (first) {
      spdlog::error(
          "ingest stopped appending to the event log, keeping {} records for the next "
          "append: {}",
          unflushed_.size(), std::string(s.message()));
    }
    return s;
  }
  {
    absl::MutexLock lock(&append_error_mu_);
    if (!append_error_.empty()) {
      spdlog::info("ingest appends to the event log again ({} records)", unflushed_.size());
      append_error_.clear();
    }
  }
  unflushed_.clear();
  for (auto& [account, state] : unflushed_view_) view_[account] = state;
  unflushed_view_.clear();
  if (metrics_ != nullptr) metrics_->events_written.Increment(unflushed_events_);
  unflushed_events_ = 0;
  return absl::OkStatus();
}

std::string BaseLayerWatcher::append_error() const {
  absl::MutexLock lock(&append_error_mu_);
  return append_error_;
}

absl::Status BaseLayerWatcher::WriteMarker(const Event& marker) { return Flush({marker}); }

void BaseLayerWatcher::CountMalformed(const std::string& kind, const std::string& detail) {
  if (metrics_ != nullptr) metrics_->malformed.Increment();
  if (malformed_kinds_[kind]++ == 0) {
    spdlog::warn("ignoring a malformed {} from the base layer: {}", kind, detail);
  }
}

}  // namespace switchyard
