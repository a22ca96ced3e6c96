#include "api/admin/admin_handler.h"

#include <boost/asio/post.hpp>
#include <boost/asio/ssl.hpp>
#include <limits>
#include <string_view>
#include <utility>

#include "api/admin/digest_answer.h"
#include "api/jsonrpc/jsonrpc.h"
#include "common/url.h"
#include "fmt/format.h"
#include "simdjson.h"
#include "spdlog/spdlog.h"

namespace switchyard {

namespace asio = boost::asio;

namespace {

constexpr std::string_view kGetSlot = R"({"jsonrpc":"2.0","id":1,"method":"getSlot"})";
constexpr std::string_view kGetHealth = R"({"jsonrpc":"2.0","id":1,"method":"getHealth"})";
// GET /status/digest lookups queued or running at once; more are answered 503.
constexpr size_t kMaxDigestLookups = 32;

std::string OptionalSlot(const std::optional<Slot>& slot) {
  return slot ? fmt::format("{}", *slot) : "null";
}

// The slot in a getSlot answer, or an error that says what was wrong with it.
absl::StatusOr<Slot> ParseGetSlot(const UpstreamResponse& response) {
  if (response.status != 200) {
    return absl::UnavailableError(fmt::format("getSlot answered HTTP {}", response.status));
  }
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  if (parser.parse(response.body).get(root) != simdjson::SUCCESS) {
    return absl::DataLossError("getSlot answered malformed JSON");
  }
  uint64_t slot = 0;
  if (root["result"].get_uint64().get(slot) != simdjson::SUCCESS) {
    return absl::DataLossError("getSlot answered without a numeric result");
  }
  return slot;
}

// Whether a getHealth answer says the node can serve: "ok", or a node that does not know the
// method (it can still serve; its getSlot decides). -32005 and any other error say it cannot.
bool GetHealthSaysOk(const UpstreamResponse& response) {
  if (response.status != 200) return false;
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  if (parser.parse(response.body).get(root) != simdjson::SUCCESS) return false;
  std::string_view result;
  if (root["result"].get_string().get(result) == simdjson::SUCCESS) return result == "ok";
  int64_t code = 0;
  return root["error"]["code"].get_int64().get(code) == simdjson::SUCCESS && code == -32601;
}

}  // namespace

AdminMetrics::AdminMetrics(MetricsRegistry& r)
    : base_slot(r.AddGauge("switchyard_base_slot", "The base layer's slot, as last probed")),
      fold_lag_slots(r.AddGauge("switchyard_fold_lag_slots",
                                "Base layer slot minus the applied slot (0 while unknown)")),
      ready(r.AddGauge("switchyard_ready", "1 when /ready answers 200")),
      digest_answered(r.AddCounter("switchyard_admin_digest_requests_total",
                                   "GET /status/digest requests, by answer", {{"result", "ok"}})),
      digest_not_sealed(r.AddCounter("switchyard_admin_digest_requests_total",
                                     "GET /status/digest requests, by answer",
                                     {{"result", "not_sealed"}})),
      digest_bad_request(r.AddCounter("switchyard_admin_digest_requests_total",
                                      "GET /status/digest requests, by answer",
                                      {{"result", "bad_request"}})),
      digest_refused(r.AddCounter("switchyard_admin_digest_requests_total",
                                  "GET /status/digest requests, by answer",
                                  {{"result", "refused"}})),
      digest_errors(r.AddCounter("switchyard_admin_digest_requests_total",
                                 "GET /status/digest requests, by answer", {{"result", "error"}})),
      exports_made(r.AddCounter("switchyard_admin_snapshot_exports_total",
                                "POST /admin/snapshot/export requests, by outcome",
                                {{"result", "ok"}})),
      exports_failed(r.AddCounter("switchyard_admin_snapshot_exports_total",
                                  "POST /admin/snapshot/export requests, by outcome",
                                  {{"result", "error"}})),
      exports_refused(r.AddCounter("switchyard_admin_snapshot_exports_total",
                                   "POST /admin/snapshot/export requests, by outcome",
                                   {{"result", "refused"}})),
      export_reads(r.AddCounter("switchyard_admin_snapshot_export_reads_total",
                                "GET /admin/snapshot/export/... requests, by answer",
                                {{"result", "ok"}})),
      export_reads_refused(r.AddCounter("switchyard_admin_snapshot_export_reads_total",
                                        "GET /admin/snapshot/export/... requests, by answer",
                                        {{"result", "refused"}})),
      export_bytes(r.AddCounter("switchyard_admin_snapshot_export_bytes_total",
                                "Bytes of exported snapshot files answered")) {}

UpstreamMonitor::UpstreamMonitor(UpstreamMonitorOptions options, MetricsRegistry* registry)
    : options_(std::move(options)), probe_metrics_(probe_registry_) {
  for (const UpstreamTarget& t : options_.targets) {
    auto target = std::make_unique<Target>();
    target->name = t.name;
    target->slot = &registry->AddGauge(
        "switchyard_upstream_slot",
        "The most advanced slot an endpoint of each upstream target answered getSlot with",
        {{"target", t.name}});
    target->failures = &registry->AddCounter(
        "switchyard_upstream_probe_failures_total",
        "Endpoint probes (getSlot, getHealth) that failed, per upstream target",
        {{"target", t.name}});
    for (size_t i = 0; i < t.endpoints.size(); ++i) {
      auto probe = std::make_unique<Probe>();
      probe->target = target.get();
      probe->index = i;
      probe->pool = fmt::format("{}#{}", t.name, i);
      probe->url = t.endpoints[i].url;
      target->probes.push_back(std::move(probe));
    }
    UpstreamProbeState state;
    state.name = t.name;
    {
      absl::MutexLock lock(&mu_);
      states_[t.name] = state;
    }
    targets_.push_back(std::move(target));
  }
}

UpstreamMonitor::~UpstreamMonitor() { Stop(); }

absl::Status UpstreamMonitor::Start() {
  if (options_.needs_tls) tls_ = MakeClientTlsContext(options_.upstream.verify_tls);
  // One pool per endpoint: each is probed on its own.
  std::vector<UpstreamTarget> pools;
  for (const UpstreamTarget& t : options_.targets) {
    for (size_t i = 0; i < t.endpoints.size(); ++i) {
      pools.push_back(UpstreamTarget{fmt::format("{}#{}", t.name, i), {t.endpoints[i]}});
    }
  }
  absl::StatusOr<std::unique_ptr<UpstreamSet>> upstreams = UpstreamSet::Create(
      loop_.io_context(), pools, options_.upstream, tls_.get(), &probe_metrics_);
  if (!upstreams.ok()) return upstreams.status();
  loop_.Start(*std::move(upstreams), options_.interval, [this] { ProbeAll(); });
  return absl::OkStatus();
}

void UpstreamMonitor::Stop() { loop_.Stop(); }

void UpstreamMonitor::ProbeAll() {
  // The previous round's answers are in: lag, p95s and ramps move on.
  if (options_.health != nullptr) options_.health->Tick(HealthClock::now());
  for (auto& target : targets_) {
    for (auto& probe : target->probes) {
      if (probe->in_flight) continue;
      UpstreamPool* pool = loop_.upstreams().Find(probe->pool);
      if (pool == nullptr) continue;
      probe->in_flight = true;
      probe->pending = 2;
      Probe* p = probe.get();
      const HealthClock::time_point sent = HealthClock::now();
      pool->Send(std::string(kGetSlot), RetryPolicy::kNever,
                 [this, p, sent](absl::StatusOr<UpstreamResponse> response) {
                   p->round_trip = HealthClock::now() - sent;
                   p->slot = response.ok() ? ParseGetSlot(*response)
                                           : absl::StatusOr<Slot>(response.status());
                   if (--p->pending == 0) OnProbed(p);
                 });
      pool->Send(std::string(kGetHealth), RetryPolicy::kNever,
                 [this, p](absl::StatusOr<UpstreamResponse> response) {
                   p->node_healthy = response.ok() && GetHealthSaysOk(*response);
                   if (--p->pending == 0) OnProbed(p);
                 });
    }
  }
}

void UpstreamMonitor::OnProbed(Probe* probe) {
  probe->in_flight = false;
  if (loop_.stopping()) return;
  Target* target = probe->target;
  const bool ok = probe->slot.ok() && probe->node_healthy;
  if (options_.health != nullptr) {
    if (TargetHealth* health = options_.health->Find(target->name);
        health != nullptr && probe->index < health->size()) {
      health->endpoint(probe->index)
          .OnProbe(probe->slot, probe->node_healthy, HealthClock::now(), probe->round_trip);
    }
  }
  const bool was_ok = probe->last_ok;
  probe->last_ok = ok;
  const bool first = !probe->probed;
  probe->probed = true;
  if (probe->slot.ok()) probe->last_slot = *probe->slot;
  std::optional<Slot> best;
  bool any_ok = false;
  for (const auto& p : target->probes) {
    if (p->last_slot) best = std::max(best.value_or(0), *p->last_slot);
    any_ok |= p->last_ok;
  }
  if (best) target->slot->Set(static_cast<int64_t>(*best));
  if (ok) MaybeAdmit(probe);
  std::string error;
  if (!ok) {
    target->failures->Increment();
    error = probe->slot.ok() ? "getHealth: the node says it is not healthy"
                             : std::string(probe->slot.status().message());
    if (was_ok || first) {
      spdlog::warn("upstream {} endpoint {}: probe failed: {}", target->name, probe->url, error);
    }
  }
  absl::MutexLock lock(&mu_);
  UpstreamProbeState& state = states_[target->name];
  ++state.probes;
  if (!ok) ++state.failures;
  state.slot = best;
  state.healthy = any_ok;
  if (any_ok) {
    state.last_error.clear();
  } else if (!ok) {
    state.last_error = error;
  }
}

std::optional<Slot> UpstreamMonitor::LastSlot(const std::string& target) const {
  absl::MutexLock lock(&mu_);
  auto it = states_.find(target);
  return it == states_.end() ? std::nullopt : it->second.slot;
}

std::vector<UpstreamProbeState> UpstreamMonitor::States() const {
  std::vector<UpstreamProbeState> out;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& target : targets_) out.push_back(states_.at(target->name));
  }
  if (options_.health != nullptr) {
    for (UpstreamProbeState& state : out) {
      if (const TargetHealth* health = options_.health->Find(state.name)) {
        state.health = health->Status();
      }
    }
  }
  return out;
}

AdminContext::AdminContext(AdminOptions options, SnapshotHolder* snapshots,
                           const MetricsRegistry* registry, UpstreamMonitor* upstreams,
                           PartitionStatusSource partitions, AdminMetrics* metrics)
    : options_(std::move(options)),
      snapshots_(snapshots),
      registry_(registry),
      upstreams_(upstreams),
      partitions_source_(std::move(partitions)),
      metrics_(metrics) {}

AdminContext::~AdminContext() {
  Stop();
  if (digest_pool_) digest_pool_->join();
  if (snapshot_pool_) snapshot_pool_->join();
}

void AdminContext::SetSnapshotMaker(SnapshotMaker maker) {
  snapshot_maker_ = std::move(maker);
  if (snapshot_maker_ && !snapshot_pool_) snapshot_pool_ = std::make_unique<asio::thread_pool>(1);
  if (snapshot_maker_ && !exports_ && !options_.snapshot_export_dir.empty()) {
    exports_ = std::make_unique<SnapshotExports>(options_.snapshot_export_dir,
                                                 options_.snapshot_export_ttl, &clock_);
  }
}

void AdminContext::MakeSnapshot(const HttpRequest& request,
                                std::function<void(HttpResponse)> answer) {
  auto error = [](unsigned status, std::string_view message) {
    HttpResponse response;
    response.status = status;
    response.body = fmt::format(R"({{"error":{}}})", JsonQuote(message));
    return response;
  };
  std::string dir;
  if (std::optional<std::string_view> query = QueryParameter(request.target, "dir")) {
    dir = std::string(*query);
  } else if (!request.body.empty()) {
    simdjson::dom::parser parser;
    simdjson::dom::element root;
    std::string_view value;
    if (parser.parse(request.body.data(), request.body.size()).get(root) != simdjson::SUCCESS ||
        root["dir"].get_string().get(value) != simdjson::SUCCESS) {
      return answer(error(400, "the body must be a JSON object with a string \"dir\""));
    }
    dir = std::string(value);
  }
  if (dir.empty() || dir.front() != '/') {
    return answer(error(400,
                        "give the snapshot's directory as an absolute path: ?dir=/PATH or "
                        "{\"dir\":\"/PATH\"}"));
  }
  if (!snapshot_maker_) return answer(error(503, "this process makes no snapshots"));
  if (snapshot_running_.exchange(true)) {
    return answer(error(409, "a snapshot is being made; try again when it is done"));
  }
  asio::post(*snapshot_pool_, [this, dir = std::move(dir), error, answer = std::move(answer)] {
    const absl::Time start = absl::Now();
    absl::StatusOr<std::string> manifest = snapshot_maker_(dir);
    HttpResponse response;
    if (manifest.ok()) {
      spdlog::info("admin: snapshot made in {} in {:.0f} ms", dir,
                   absl::ToDoubleMilliseconds(absl::Now() - start));
      response.body = *std::move(manifest);
    } else {
      const std::string message(manifest.status().message());
      spdlog::warn("admin: snapshot in {} failed: {}", dir, message);
      switch (manifest.status().code()) {
        case absl::StatusCode::kAlreadyExists:
          response = error(409, message);
          break;
        case absl::StatusCode::kInvalidArgument:
          response = error(400, message);
          break;
        default:
          response = error(500, message);
      }
    }
    snapshot_running_ = false;
    answer(std::move(response));
  });
}

void AdminContext::SetSealedDigests(SealedDigestReader* sealed) {
  sealed_ = sealed;
  if (sealed_ != nullptr && !digest_pool_) digest_pool_ = std::make_unique<asio::thread_pool>(1);
}

void AdminContext::LookUpDigest(std::string_view target, std::function<void(HttpResponse)> answer) {
  auto error = [](unsigned status, std::string_view message, std::optional<Slot> slot,
                  std::optional<Slot> applied) {
    HttpResponse response;
    response.status = status;
    response.body = fmt::format(R"({{"error":{})", JsonQuote(message));
    if (slot) response.body += fmt::format(R"(,"slot":{})", *slot);
    if (status == 404) response.body += fmt::format(R"(,"applied_slot":{})", OptionalSlot(applied));
    response.body += "}";
    return response;
  };
  absl::StatusOr<std::optional<Slot>> slot = ParseDigestSlot(target);
  if (!slot.ok()) {
    metrics_->digest_bad_request.Increment();
    return answer(error(400, std::string(slot.status().message()), std::nullopt, std::nullopt));
  }
  if (sealed_ == nullptr) {
    metrics_->digest_refused.Increment();
    return answer(error(503, "this process keeps no sealed digests", *slot, std::nullopt));
  }
  if (digest_lookups_.fetch_add(1) >= kMaxDigestLookups) {
    digest_lookups_.fetch_sub(1);
    metrics_->digest_refused.Increment();
    return answer(error(503, "too many digest lookups in flight", *slot, std::nullopt));
  }
  asio::post(*digest_pool_, [this, slot = *slot, error, answer = std::move(answer)] {
    std::shared_ptr<const Snapshot> snapshot = snapshots_->Current();
    const std::optional<Slot> applied =
        snapshot ? std::optional<Slot>(snapshot->applied_slot()) : std::nullopt;
    absl::StatusOr<std::optional<SealedDigestAt>> found;
    if (slot) {
      absl::StatusOr<std::optional<StateDigest>> digest = sealed_->SealedDigest(*slot);
      if (!digest.ok()) {
        found = digest.status();
      } else if (*digest) {
        found = std::optional<SealedDigestAt>(SealedDigestAt{*slot, **digest});
      } else {
        found = std::optional<SealedDigestAt>();
      }
    } else {
      absl::StatusOr<std::vector<SealedDigestAt>> last =
          sealed_->LastSealedDigests(std::numeric_limits<Slot>::max(), 1);
      if (!last.ok()) {
        found = last.status();
      } else {
        found = last->empty() ? std::optional<SealedDigestAt>() : std::optional(last->back());
      }
    }
    HttpResponse response;
    if (!found.ok()) {
      metrics_->digest_errors.Increment();
      response = error(500, std::string(found.status().message()), slot, applied);
    } else if (!*found) {
      metrics_->digest_not_sealed.Increment();
      response = error(404,
                       slot ? fmt::format("slot {} is not sealed here (the applied slot never "
                                          "stopped at it, or it is above the applied slot)",
                                          *slot)
                            : std::string("no slot is sealed here yet"),
                       slot, applied);
    } else {
      metrics_->digest_answered.Increment();
      response.body = DigestAnswerJson(DigestAnswer{**found, applied});
    }
    digest_lookups_.fetch_sub(1);
    answer(std::move(response));
  });
}

void AdminContext::Start() {
  Refresh();
  thread_ = std::thread([this] {
    while (true) {
      {
        absl::MutexLock lock(&mu_);
        mu_.AwaitWithTimeout(absl::Condition(&stopping_), options_.refresh_interval);
        if (stopping_) return;
      }
      Refresh();
    }
  });
}

void AdminContext::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

void AdminContext::Refresh() {
  absl::StatusOr<std::vector<PartitionStatus>> partitions = partitions_source_();
  {
    absl::MutexLock lock(&mu_);
    if (partitions.ok()) {
      partitions_ = *std::move(partitions);
      partitions_error_.clear();
    } else {
      partitions_error_ = std::string(partitions.status().message());
    }
  }
  const Readiness readiness = CheckReady();
  if (readiness.base_slot) metrics_->base_slot.Set(static_cast<int64_t>(*readiness.base_slot));
  if (readiness.base_slot && readiness.applied_slot) {
    const Slot base = *readiness.base_slot;
    const Slot applied = *readiness.applied_slot;
    metrics_->fold_lag_slots.Set(base > applied ? static_cast<int64_t>(base - applied) : 0);
  }
  ExpireExport();
}

Readiness AdminContext::CheckReady() const {
  Readiness r;
  if (std::shared_ptr<const Snapshot> snapshot = snapshots_->Current()) {
    r.applied_slot = snapshot->applied_slot();
    r.limbo_since = snapshot->limbo_since();
  }
  r.base_slot = upstreams_->LastSlot(options_.base_target);
  const WriteHealth writes = write_health_ ? write_health_() : WriteHealth();
  if (!r.applied_slot) {
    r.reason = "the state is not loaded yet";
  } else if (!writes.fold_error.empty()) {
    r.reason = fmt::format("the fold is stopped at applied slot {}: {}", *r.applied_slot,
                           writes.fold_error);
  } else if (!writes.log_error.empty()) {
    r.reason = fmt::format("ingest cannot append to the event log: {}", writes.log_error);
  } else if (!r.base_slot) {
    r.reason = "the base layer's slot is not known yet";
  } else if (*r.base_slot > *r.applied_slot &&
             *r.base_slot - *r.applied_slot > options_.ready_max_lag_slots) {
    r.reason = fmt::format(
        "the applied slot {} is {} slots behind the base layer's slot {} (at "
        "most {} allowed)",
        *r.applied_slot, *r.base_slot - *r.applied_slot, *r.base_slot,
        options_.ready_max_lag_slots);
  } else {
    r.ready = true;
  }
  metrics_->ready.Set(r.ready ? 1 : 0);
  return r;
}

namespace {

// The upstreams of /status: a JSON array, each with its endpoints' health when it has some.
std::string UpstreamsJson(const std::vector<UpstreamProbeState>& states) {
  std::string out = "[";
  for (size_t i = 0; i < states.size(); ++i) {
    const UpstreamProbeState& s = states[i];
    out += fmt::format(
        "{}{{\"name\":{},\"healthy\":{},\"slot\":{},\"probes\":{},\"failures\":{},"
        "\"last_error\":{}",
        i == 0 ? "" : ",", JsonQuote(s.name), s.healthy ? "true" : "false", OptionalSlot(s.slot),
        s.probes, s.failures, s.last_error.empty() ? "null" : JsonQuote(s.last_error));
    if (s.health) {
      out += fmt::format(",\"degraded\":{},\"endpoints\":[", s.health->degraded);
      for (size_t j = 0; j < s.health->endpoints.size(); ++j) {
        const EndpointStatus& e = s.health->endpoints[j];
        out += fmt::format(
            "{}{{\"url\":{},\"state\":\"{}\",\"circuit\":\"{}\",\"slot\":{},\"lag\":{},"
            "\"latency_ewma_ms\":{:.3f},\"hedge_delay_ms\":{:.3f},\"in_flight\":{},"
            "\"requests\":{},\"failures\":{},\"state_changes\":{},\"retries\":{},"
            "\"hedges\":{},\"hedge_wins\":{},\"budget_exhausted\":{},\"last_error\":{},"
            "\"ejected_reason\":{},\"pipelining\":\"{}\",\"pipeline_fallbacks\":{},"
            "\"integrity\":{{\"checks\":{},\"skipped\":{},\"disagreements\":{},"
            "\"minority\":{},\"consensus_dissents\":{}}},\"admission\":{{\"state\":\"{}\","
            "\"checks\":{},\"failures\":{},\"result\":{}}}}}",
            j == 0 ? "" : ",", JsonQuote(e.url), EndpointStateName(e.state),
            CircuitStateName(e.circuit), OptionalSlot(e.slot), e.lag, e.latency_ewma_ms, e.p95_ms,
            e.in_flight, e.requests, e.failures, e.state_changes, e.retries, e.hedges, e.hedge_wins,
            e.budget_exhausted, e.last_error.empty() ? "null" : JsonQuote(e.last_error),
            e.ejected_reason.empty() ? "null" : JsonQuote(e.ejected_reason),
            PipelineStatusName(e.pipeline), e.pipeline_fallbacks, e.integrity_checks,
            e.integrity_skipped, e.disagreements, e.minority_answers, e.consensus_dissents,
            AdmissionStateName(e.admission), e.admission_checks, e.admission_failures,
            e.admission_result.empty() ? "null" : JsonQuote(e.admission_result));
      }
      out += "]";
    }
    out += "}";
  }
  out += "]";
  return out;
}

}  // namespace

std::string AdminContext::StatusJson() const {
  std::shared_ptr<const Snapshot> snapshot = snapshots_->Current();
  const Readiness readiness = CheckReady();
  std::string out = "{";
  out += fmt::format("\"ready\":{},", readiness.ready ? "true" : "false");
  if (snapshot) {
    out += fmt::format("\"applied_slot\":{},\"digest\":\"{}\",\"limbo_since\":{},",
                       snapshot->applied_slot(), snapshot->digest().ToHex(),
                       OptionalSlot(snapshot->limbo_since()));
    out += fmt::format("\"in_limbo\":{},\"delegated_accounts\":{},",
                       snapshot->limbo_since() ? "true" : "false", snapshot->delegated_count());
  } else {
    out +=
        "\"applied_slot\":null,\"digest\":null,\"limbo_since\":null,\"in_limbo\":null,"
        "\"delegated_accounts\":null,";
  }
  out += fmt::format("\"base_slot\":{},", OptionalSlot(readiness.base_slot));
  const WriteHealth writes = write_health_ ? write_health_() : WriteHealth();
  out += fmt::format("\"fold_error\":{},\"log_error\":{},",
                     writes.fold_error.empty() ? "null" : JsonQuote(writes.fold_error),
                     writes.log_error.empty() ? "null" : JsonQuote(writes.log_error));
  {
    absl::MutexLock lock(&mu_);
    out += "\"log\":{\"partitions\":[";
    for (size_t i = 0; i < partitions_.size(); ++i) {
      const PartitionStatus& p = partitions_[i];
      out += fmt::format(
          "{}{{\"partition\":{},\"next_offset\":{},\"sealed_slot\":{},"
          "\"limbo_since\":{}}}",
          i == 0 ? "" : ",", p.partition, p.next_offset, p.sealed_slot,
          OptionalSlot(p.limbo_since));
    }
    out += "]";
    if (!partitions_error_.empty()) out += ",\"error\":" + JsonQuote(partitions_error_);
    out += "},";
  }
  out += "\"upstreams\":" + UpstreamsJson(upstreams_->States());
  if (cache_ != nullptr) {
    const ResponseCache::Stats c = cache_->stats();
    const uint64_t lookups = c.hits + c.misses;
    out += fmt::format(
        ",\"cache\":{{\"entries\":{},\"bytes\":{},\"max_bytes\":{},\"hits\":{},"
        "\"misses\":{},\"hit_ratio\":{:.4f},\"coalesced\":{},\"evictions\":{},"
        "\"invalidations\":{}}}",
        c.entries, c.bytes, cache_->options().max_bytes, c.hits, c.misses,
        lookups == 0 ? 0.0 : static_cast<double>(c.hits) / static_cast<double>(lookups),
        c.coalesced, c.evictions, c.invalidations);
  }
  if (ers_) out += fmt::format(",\"ers\":{}", ers_());
  out += "}";
  return out;
}

RequestHandlerFactory AdminContext::HandlerFactory() {
  return [this](asio::io_context& io_context) -> std::unique_ptr<RequestHandler> {
    return std::make_unique<AdminHandler>(this, io_context);
  };
}

AdminHandler::AdminHandler(AdminContext* context, asio::io_context& io_context)
    : context_(context), return_(std::make_shared<WorkerReturn>()) {
  absl::MutexLock lock(&return_->mu);
  return_->io_context = &io_context;
}

AdminHandler::~AdminHandler() {
  absl::MutexLock lock(&return_->mu);
  return_->io_context = nullptr;
}

void AdminHandler::Handle(HttpRequest request, Done done) {
  std::string_view path = request.target;
  path = path.substr(0, path.find('?'));
  // An answer made off this worker (a digest lookup, a snapshot) comes back to it.
  auto on_worker = [back = return_](Done done) {
    return [back, done = std::move(done)](HttpResponse response) mutable {
      absl::MutexLock lock(&back->mu);
      if (back->io_context == nullptr) return;  // the worker is gone
      asio::post(*back->io_context,
                 [done = std::move(done), response = std::move(response)]() mutable {
                   done(std::move(response));
                 });
    };
  };
  if (request.method == "GET" && path == "/status/digest") {
    context_->LookUpDigest(request.target, on_worker(std::move(done)));
    return;
  }
  if (request.method == "POST" && path == "/admin/snapshot") {
    context_->MakeSnapshot(request, on_worker(std::move(done)));
    return;
  }
  if (request.method == "POST" && path == "/admin/snapshot/export") {
    context_->ExportSnapshot(on_worker(std::move(done)));
    return;
  }
  if (request.method == "GET" && path.starts_with("/admin/snapshot/export/")) {
    context_->ReadExport(request.target, on_worker(std::move(done)));
    return;
  }
  HttpResponse response;
  if (request.method != "GET") {
    response.status = 405;
    response.content_type = "text/plain";
    response.body = "only GET\n";
  } else if (path == "/health") {
    response.body = "{\"status\":\"ok\"}";
  } else if (path == "/ready") {
    const Readiness r = context_->CheckReady();
    response.status = r.ready ? 200 : 503;
    response.body = fmt::format(
        "{{\"ready\":{},\"applied_slot\":{},\"base_slot\":{},\"in_limbo\":{},"
        "\"limbo_since\":{},\"reason\":{}}}",
        r.ready ? "true" : "false", OptionalSlot(r.applied_slot), OptionalSlot(r.base_slot),
        r.limbo_since ? "true" : "false", OptionalSlot(r.limbo_since),
        r.reason.empty() ? "null" : JsonQuote(r.reason));
  } else if (path == "/status") {
    response.body = context_->StatusJson();
  } else if (path == "/metrics") {
    response.content_type = "text/plain; version=0.0.4";
    response.body = context_->Metrics();
  } else {
    response.status = 404;
    response.content_type = "text/plain";
    response.body =
        "not found: /health, /ready, /status, /status/digest, /metrics, POST /admin/snapshot, "
        "POST /admin/snapshot/export\n";
  }
  done(std::move(response));
}

}  // namespace switchyard
