#include "api/admin/admin_handler.h"

#include <boost/asio/post.hpp>
#include <boost/asio/ssl.hpp>
#include <chrono>
#include <string_view>
#include <utility>

#include "api/jsonrpc/jsonrpc.h"
#include "fmt/format.h"
#include "simdjson.h"
#include "spdlog/spdlog.h"

namespace switchyard {

namespace asio = boost::asio;

namespace {

constexpr std::string_view kGetSlot = R"({"jsonrpc":"2.0","id":1,"method":"getSlot"})";

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

}  // namespace

AdminMetrics::AdminMetrics(MetricsRegistry& r)
    : base_slot(r.AddGauge("switchyard_base_slot", "The base layer's slot, as last probed")),
      fold_lag_slots(r.AddGauge("switchyard_fold_lag_slots",
                                "Base layer slot minus the applied slot (0 while unknown)")),
      ready(r.AddGauge("switchyard_ready", "1 when /ready answers 200")) {}

UpstreamMonitor::UpstreamMonitor(UpstreamMonitorOptions options, MetricsRegistry* registry)
    : options_(std::move(options)), probe_metrics_(probe_registry_) {
  for (const UpstreamTarget& t : options_.targets) {
    auto target = std::make_unique<Target>();
    target->name = t.name;
    target->slot = &registry->AddGauge("switchyard_upstream_slot",
                                       "The slot each upstream target answered getSlot with",
                                       {{"target", t.name}});
    target->failures = &registry->AddCounter("switchyard_upstream_probe_failures_total",
                                             "getSlot probes that failed, per upstream target",
                                             {{"target", t.name}});
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
  absl::StatusOr<std::unique_ptr<UpstreamSet>> upstreams = UpstreamSet::Create(
      io_context_, options_.targets, options_.upstream, tls_.get(), &probe_metrics_);
  if (!upstreams.ok()) return upstreams.status();
  upstreams_ = *std::move(upstreams);
  guard_.emplace(io_context_.get_executor());
  asio::post(io_context_, [this] { ProbeAll(); });
  thread_ = std::thread([this] { io_context_.run(); });
  return absl::OkStatus();
}

void UpstreamMonitor::Stop() {
  if (!thread_.joinable()) return;
  asio::post(io_context_, [this] {
    stopping_ = true;
    timer_.cancel();
    upstreams_->Shutdown();
    guard_.reset();
  });
  thread_.join();
  upstreams_.reset();
}

void UpstreamMonitor::ProbeAll() {
  if (stopping_) return;
  for (auto& target : targets_) {
    if (target->in_flight) continue;
    UpstreamPool* pool = upstreams_->Find(target->name);
    if (pool == nullptr) continue;
    target->in_flight = true;
    pool->Send(std::string(kGetSlot), RetryPolicy::kNever,
               [this, t = target.get()](absl::StatusOr<UpstreamResponse> response) {
                 OnAnswer(t, std::move(response));
               });
  }
  ScheduleNext();
}

void UpstreamMonitor::ScheduleNext() {
  timer_.expires_after(std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      absl::ToChronoNanoseconds(options_.interval)));
  timer_.async_wait([this](boost::system::error_code ec) {
    if (!ec) ProbeAll();
  });
}

void UpstreamMonitor::OnAnswer(Target* target, absl::StatusOr<UpstreamResponse> response) {
  target->in_flight = false;
  absl::StatusOr<Slot> slot =
      response.ok() ? ParseGetSlot(*response) : absl::StatusOr<Slot>(response.status());
  absl::MutexLock lock(&mu_);
  UpstreamProbeState& state = states_[target->name];
  ++state.probes;
  if (slot.ok()) {
    state.slot = *slot;
    state.healthy = true;
    state.last_error.clear();
    target->slot->Set(static_cast<int64_t>(*slot));
    return;
  }
  if (stopping_) return;
  ++state.failures;
  target->failures->Increment();
  if (state.healthy || state.probes == 1) {
    spdlog::warn("upstream {}: getSlot probe failed: {}", target->name,
                 std::string(slot.status().message()));
  }
  state.healthy = false;
  state.last_error = std::string(slot.status().message());
}

std::optional<Slot> UpstreamMonitor::LastSlot(const std::string& target) const {
  absl::MutexLock lock(&mu_);
  auto it = states_.find(target);
  return it == states_.end() ? std::nullopt : it->second.slot;
}

std::vector<UpstreamProbeState> UpstreamMonitor::States() const {
  std::vector<UpstreamProbeState> out;
  absl::MutexLock lock(&mu_);
  for (const auto& target : targets_) out.push_back(states_.at(target->name));
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

AdminContext::~AdminContext() { Stop(); }

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
}

Readiness AdminContext::CheckReady() const {
  Readiness r;
  if (std::shared_ptr<const Snapshot> snapshot = snapshots_->Current()) {
    r.applied_slot = snapshot->applied_slot();
    r.limbo_since = snapshot->limbo_since();
  }
  r.base_slot = upstreams_->LastSlot(options_.base_target);
  if (!r.applied_slot) {
    r.reason = "the state is not loaded yet";
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
  out += "\"upstreams\":[";
  const std::vector<UpstreamProbeState> states = upstreams_->States();
  for (size_t i = 0; i < states.size(); ++i) {
    const UpstreamProbeState& s = states[i];
    out += fmt::format(
        "{}{{\"name\":{},\"healthy\":{},\"slot\":{},\"probes\":{},\"failures\":{},"
        "\"last_error\":{}}}",
        i == 0 ? "" : ",", JsonQuote(s.name), s.healthy ? "true" : "false", OptionalSlot(s.slot),
        s.probes, s.failures, s.last_error.empty() ? "null" : JsonQuote(s.last_error));
  }
  out += "]}";
  return out;
}

RequestHandlerFactory AdminContext::HandlerFactory() {
  return [this](asio::io_context&) -> std::unique_ptr<RequestHandler> {
    return std::make_unique<AdminHandler>(this);
  };
}

void AdminHandler::Handle(HttpRequest request, Done done) {
  HttpResponse response;
  std::string_view path = request.target;
  path = path.substr(0, path.find('?'));
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
    response.body = "not found: /health, /ready, /status, /metrics\n";
  }
  done(std::move(response));
}

}  // namespace switchyard
