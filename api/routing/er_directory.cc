#include "api/routing/er_directory.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "api/jsonrpc/jsonrpc.h"
#include "fmt/format.h"

namespace switchyard {

const ErEntry* ErTable::Find(const Pubkey& identity) const {
  for (const ErEntry& er : ers) {
    if (er.route.identity == identity) return &er;
  }
  return nullptr;
}

const ErEntry* ErTable::FindTarget(std::string_view target) const {
  for (const ErEntry& er : ers) {
    if (er.route.target == target) return &er;
  }
  return nullptr;
}

std::string ErStatusJson(const ErTable& table) {
  std::string out = "[";
  for (size_t i = 0; i < table.ers.size(); ++i) {
    const ErEntry& er = table.ers[i];
    out += fmt::format(
        R"({}{{"identity":"{}","target":{},"fqdn":{},"status":"{}","configured":{},)"
        R"("registered":{},"pinned":{},"chosen":{},"closest":{},"reachable":{},)"
        R"("latency_ewma_ms":{:.3f},"last_ms":{:.3f},"measured":{},"failures":{},"probes":{},)"
        R"("probe_failures":{},"answered_as":{},"load_average":{}}})",
        i == 0 ? "" : ",", er.route.identity.ToBase58(), JsonQuote(er.route.target),
        JsonQuote(er.route.fqdn), ErStatusName(er.status), er.configured, er.registered,
        er.route.pinned, static_cast<int>(i) == table.chosen, static_cast<int>(i) == table.closest,
        er.latency.reachable, er.latency.ewma_ms, er.latency.last_ms, er.latency.measured,
        er.latency.failures, er.latency.probes, er.latency.probe_failures,
        er.latency.answered_as ? JsonQuote(er.latency.answered_as->ToBase58()) : "null",
        er.load_average);
  }
  out += "]";
  return out;
}

ErDirectory::ErDirectory(RoutingTable routing, std::vector<ErRoute> ers, ErDirectoryOptions options,
                         MetricsRegistry* registry)
    : configured_routing_(std::move(routing)),
      configured_(std::move(ers)),
      options_(options),
      registry_(registry) {
  if (registry_ != nullptr) {
    auto count = [&](std::string_view status) {
      return &registry_->AddGauge("switchyard_ers", "ERs in the directory, by status",
                                  {{"status", std::string(status)}});
    };
    ers_active_ = count("active");
    ers_draining_ = count("draining");
    ers_offline_ = count("offline");
    publications_ =
        &registry_->AddCounter("switchyard_er_directory_publications_total",
                               "New ER tables published (a registry change or a probe result)");
  }
  absl::MutexLock lock(&mu_);
  Publish();
}

std::string ErDirectory::DiscoveredTarget(const Pubkey& identity) {
  return fmt::format("er-{}", identity.ToBase58());
}

std::string ErDirectory::UrlOfAddr(std::string_view addr) {
  if (addr.find("://") != std::string_view::npos) return std::string(addr);
  return fmt::format("https://{}", addr);
}

void ErDirectory::ReplaceRegistry(const std::vector<ErRecord>& records) {
  absl::MutexLock lock(&mu_);
  records_.clear();
  for (const ErRecord& record : records) records_[record.identity] = record;
  Publish();
}

void ErDirectory::UpsertRecord(const ErRecord& record) {
  absl::MutexLock lock(&mu_);
  auto it = records_.find(record.identity);
  if (it != records_.end() && it->second == record) return;
  records_[record.identity] = record;
  Publish();
}

void ErDirectory::RemoveRecord(const Pubkey& identity) {
  absl::MutexLock lock(&mu_);
  if (records_.erase(identity) == 0) return;
  Publish();
}

void ErDirectory::ReportProbe(const Pubkey& identity, std::optional<absl::Duration> round_trip) {
  absl::MutexLock lock(&mu_);
  ErLatency& latency = latency_[identity];
  ++latency.probes;
  PerErMetrics& metrics = MetricsOf(identity);
  if (round_trip) {
    const double ms = absl::ToDoubleMilliseconds(*round_trip);
    latency.last_ms = ms;
    latency.ewma_ms = latency.measured
                          ? options_.ewma_keep * latency.ewma_ms + (1 - options_.ewma_keep) * ms
                          : ms;
    latency.measured = true;
    latency.failures = 0;
    latency.reachable = true;
    latency.answered_as.reset();
    if (metrics.probes_ok != nullptr) metrics.probes_ok->Increment();
  } else {
    ++latency.probe_failures;
    ++latency.failures;
    if (latency.failures >= options_.failures_unreachable) latency.reachable = false;
    if (metrics.probes_failed != nullptr) metrics.probes_failed->Increment();
  }
  if (metrics.ewma_us != nullptr) {
    metrics.ewma_us->Set(static_cast<int64_t>(latency.ewma_ms * 1000));
    metrics.reachable->Set(latency.reachable ? 1 : 0);
  }
  Publish();
}

void ErDirectory::ReportWrongIdentity(const Pubkey& identity, const Pubkey& answered) {
  absl::MutexLock lock(&mu_);
  ErLatency& latency = latency_[identity];
  ++latency.probes;
  ++latency.probe_failures;
  ++latency.failures;
  latency.reachable = false;
  latency.answered_as = answered;
  PerErMetrics& metrics = MetricsOf(identity);
  if (metrics.probes_wrong_identity != nullptr) {
    metrics.probes_wrong_identity->Increment();
    metrics.reachable->Set(0);
  }
  Publish();
}

std::string ErDirectory::DiscoveredUrl(std::string_view target) const {
  std::shared_ptr<const ErTable> table = Current();
  const ErEntry* er = table->FindTarget(target);
  return er == nullptr ? std::string() : er->url;
}

ErDirectory::PerErMetrics& ErDirectory::MetricsOf(const Pubkey& identity) {
  PerErMetrics& metrics = metrics_[identity];
  if (metrics.ewma_us == nullptr && registry_ != nullptr) {
    const MetricLabels labels = {{"er", identity.ToBase58()}};
    metrics.ewma_us = &registry_->AddGauge(
        "switchyard_er_latency_ewma_us",
        "The EWMA of the ER's getIdentity probe round trip, in microseconds", labels);
    metrics.reachable =
        &registry_->AddGauge("switchyard_er_reachable",
                             "1 while the ER answers its probes (3 failures in a row: 0)", labels);
    MetricLabels ok = labels;
    ok.emplace_back("outcome", "ok");
    MetricLabels failed = labels;
    failed.emplace_back("outcome", "failed");
    MetricLabels wrong = labels;
    wrong.emplace_back("outcome", "wrong_identity");
    metrics.probes_ok =
        &registry_->AddCounter("switchyard_er_probes_total", "getIdentity probes of the ER", ok);
    metrics.probes_failed = &registry_->AddCounter("switchyard_er_probes_total",
                                                   "getIdentity probes of the ER", failed);
    metrics.probes_wrong_identity =
        &registry_->AddCounter("switchyard_er_probes_total", "getIdentity probes of the ER", wrong);
    metrics.reachable->Set(1);
  }
  return metrics;
}

std::vector<ErEntry> ErDirectory::Entries() const {
  std::vector<ErEntry> ers;
  auto add = [&](ErEntry entry) {
    auto latency = latency_.find(entry.route.identity);
    if (latency != latency_.end()) entry.latency = latency->second;
    ers.push_back(std::move(entry));
  };
  for (const ErRoute& route : configured_) {
    ErEntry entry;
    entry.route = route;
    entry.configured = true;
    auto record = records_.find(route.identity);
    if (record != records_.end()) {
      entry.registered = true;
      entry.load_average = record->second.load_average;
      entry.features = record->second.features;
      if (!route.pinned) entry.status = record->second.status;
    }
    add(std::move(entry));
  }
  std::vector<const ErRecord*> discovered;
  for (const auto& [identity, record] : records_) {
    const Pubkey& id = identity;  // a lambda cannot capture a structured binding under clang 14
    const bool configured = std::any_of(configured_.begin(), configured_.end(),
                                        [&](const ErRoute& r) { return r.identity == id; });
    if (!configured) discovered.push_back(&record);
  }
  std::sort(discovered.begin(), discovered.end(),
            [](const ErRecord* a, const ErRecord* b) { return a->identity < b->identity; });
  for (const ErRecord* record : discovered) {
    ErEntry entry;
    entry.route.identity = record->identity;
    entry.route.target = DiscoveredTarget(record->identity);
    entry.route.fqdn = UrlOfAddr(record->addr);
    entry.route.base_fee = record->base_fee;
    entry.route.block_time_ms = record->block_time_ms;
    entry.route.country_code = record->country_code;
    entry.url = entry.route.fqdn;
    entry.status = record->status;
    entry.registered = true;
    entry.load_average = record->load_average;
    entry.features = record->features;
    add(std::move(entry));
  }
  return ers;
}

ErDirectory::StatusCounts ErDirectory::FillRouting(ErTable& table) {
  RoutingTable& routing = table.routing;
  routing.er_by_identity.clear();
  routing.er_targets.clear();
  routing.offline_ers.clear();
  routing.misaddressed_ers.clear();
  StatusCounts counts;
  double best = std::numeric_limits<double>::infinity();
  for (size_t i = 0; i < table.ers.size(); ++i) {
    const ErEntry& er = table.ers[i];
    if (er.status == ErStatus::kOffline) {
      ++counts.offline;
      routing.offline_ers[er.route.identity] = er.route.target;
      continue;
    }
    er.status == ErStatus::kActive ? ++counts.active : ++counts.draining;
    if (er.latency.answered_as) {
      routing.misaddressed_ers[er.route.identity] = *er.latency.answered_as;
      continue;
    }
    routing.er_by_identity[er.route.identity] = er.route.target;
    if (std::find(routing.er_targets.begin(), routing.er_targets.end(), er.route.target) ==
        routing.er_targets.end()) {
      routing.er_targets.push_back(er.route.target);
    }
    if (er.status != ErStatus::kActive || !er.latency.reachable) continue;
    const double distance =
        er.latency.measured ? er.latency.ewma_ms : std::numeric_limits<double>::max();
    if (table.closest < 0 || distance < best) {
      table.closest = static_cast<int>(i);
      best = distance;
    }
  }
  return counts;
}

void ErDirectory::Publish() {
  auto table = std::make_shared<ErTable>();
  table->generation = ++generation_;
  table->routing = configured_routing_;
  table->ers = Entries();
  const StatusCounts counts = FillRouting(*table);
  if (!configured_routing_.default_er.empty()) {
    for (size_t i = 0; i < table->ers.size(); ++i) {
      if (table->ers[i].route.target == configured_routing_.default_er) {
        table->chosen = static_cast<int>(i);
        break;
      }
    }
  } else {
    table->chosen = table->closest;
    table->routing.default_er =
        table->closest < 0 ? std::string() : table->ers[table->closest].route.target;
  }
  if (ers_active_ != nullptr) {
    ers_active_->Set(counts.active);
    ers_draining_->Set(counts.draining);
    ers_offline_->Set(counts.offline);
    publications_->Increment();
  }
  current_.store(std::move(table), std::memory_order_release);
}

}  // namespace switchyard
