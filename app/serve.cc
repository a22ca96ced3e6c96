#include "app/serve.h"

#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>

#include "api/admin/admin_handler.h"
#include "api/metrics/api_metrics.h"
#include "api/net/http_server.h"
#include "api/pubsub/pubsub_metrics.h"
#include "api/pubsub/pubsub_server.h"
#include "api/rpc/er_prober.h"
#include "api/rpc/router.h"
#include "app/ingest_command.h"
#include "app/log_url.h"
#include "app/peer_digests.h"
#include "app/snapshot_download.h"
#include "common/clock.h"
#include "common/metrics.h"
#include "common/status.h"
#include "engine/fold_runner.h"
#include "engine/peer_check.h"
#include "engine/snapshot.h"
#include "fmt/format.h"
#include "ingest/er_registry_watcher.h"
#include "spdlog/spdlog.h"
#include "storage/kafka_event_log.h"
#include "storage/periodic_snapshots.h"
#include "storage/rocksdb_state_store.h"
#include "storage/state_snapshot.h"

namespace switchyard {
namespace {

// The registry watcher's changes, into the router's ER directory.
class ErDirectorySink : public ErRegistrySink {
 public:
  explicit ErDirectorySink(ErDirectory* directory) : directory_(directory) {}
  void ReplaceAll(const std::vector<ErRecord>& records) override {
    directory_->ReplaceRegistry(records);
  }
  void Upsert(const ErRecord& record) override { directory_->UpsertRecord(record); }
  void Remove(const Pubkey& identity) override { directory_->RemoveRecord(identity); }

 private:
  ErDirectory* directory_;
};

// Every long-lived part of one serve process. Members are declared in dependency order, so
// that each outlives what uses it; Stop() shuts them down in the order SIGTERM needs.
class ServeProcess {
 public:
  // `stop_signals` are blocked by the caller; Start() gives up when one arrives.
  ServeProcess(const Config& config, const ServeArgs& args, const sigset_t& stop_signals)
      : config_(config), args_(args), stop_signals_(stop_signals) {}
  ~ServeProcess() { Stop(); }

  // On SIGHUP: reloads what can change while connections stay up. Each reloadable part logs
  // what it loaded, or why it kept what it had.
  void Reload() {
    if (router_ && router_->access() != nullptr) {
      if (absl::Status s = router_->access()->Reload(); !s.ok()) {
        spdlog::warn("keys: {}; the keys in use are kept", std::string(s.message()));
      } else if (!config_.serve.keys_file.empty()) {
        spdlog::info("keys: {} read again", config_.serve.keys_file);
      }
    }
    ReloadTls();
  }

  // New connections to the api and pubsub listeners get the certificate and key as the files
  // now hold them; open connections keep theirs.
  void ReloadTls() {
    const TlsOptions& tls = config_.serve.api.tls;
    if (!api_server_ || !tls.enabled()) return;
    if (absl::Status s = api_server_->ReloadTls(); !s.ok()) {
      spdlog::warn("SIGHUP: kept the TLS certificate of the api listeners: {}",
                   std::string(s.message()));
      return;
    }
    spdlog::info("SIGHUP: the api listeners serve the TLS certificate of {} from now on",
                 tls.certificate_file);
  }

  absl::Status Start() {
    const ServeConfig& serve = config_.serve;
    Gauge* log_memtable_bytes = nullptr;
    if (config_.log_url.rfind("kafka://", 0) == 0) {
      kafka_metrics_ = std::make_unique<KafkaLogMetrics>(registry_);
    } else {
      log_memtable_bytes = &registry_.AddGauge(
          "switchyard_log_memtable_bytes",
          "Bytes the embedded event log's memtables hold (until RocksDB flushes them)");
    }
    RETURN_IF_ERROR(Bootstrap());
    const absl::Time started = absl::Now();
    // No listener is up while the log cannot be opened: nothing claims readiness meanwhile.
    ASSIGN_OR_RETURN(log_,
                     OpenEventLogRetrying(config_, /*create_if_missing=*/true, kafka_metrics_.get(),
                                          stop_signals_, log_memtable_bytes));
    ASSIGN_OR_RETURN(reader_, log_->OpenReader());
    RocksDbStateStoreOptions store_options;
    store_options.sync_commits = config_.sync;
    store_options.block_cache_bytes = config_.block_cache_mb << 20;
    store_options.ingest_min_rows = config_.ingest_min_rows;
    const absl::Time log_opened = absl::Now();
    ASSIGN_OR_RETURN(store_, RocksDbStateStore::Open(config_.StateDir(), store_options));
    const absl::Time store_opened = absl::Now();
    fold_runner_ = std::make_unique<FoldRunner>(config_.fold, reader_.get(), store_.get(),
                                                &snapshots_, &clock_, &fold_metrics_);
    RETURN_IF_ERROR(fold_runner_->Init());
    spdlog::info(
        "start-up: log opened in {:.0f} ms, state store in {:.0f} ms, {} accounts loaded in "
        "{:.0f} ms",
        absl::ToDoubleMilliseconds(log_opened - started),
        absl::ToDoubleMilliseconds(store_opened - log_opened),
        fold_runner_->fold().accounts().size(),
        absl::ToDoubleMilliseconds(absl::Now() - store_opened));
    if (!config_.ingest.endpoints.empty()) {
      // The watcher writes the same log the fold reads, from where the log leaves off.
      ASSIGN_OR_RETURN(IngestResume resume, ResumeIngest(*fold_runner_, *store_, *log_));
      watcher_ = std::make_unique<BaseLayerWatcher>(
          WatcherOptionsFrom(config_.ingest, resume.last_sealed), log_.get(),
          std::move(resume.view), &clock_, &watcher_metrics_);
    }
    fold_runner_->Start();
    if (watcher_) RETURN_IF_ERROR(watcher_->Start());

    absl::StatusOr<std::unique_ptr<RouterContext>> router =
        RouterContext::Create(serve.router, &snapshots_, &clock_, &api_metrics_);
    if (!router.ok()) {
      return absl::InvalidArgumentError(
          fmt::format("{}: {}", config_.source, std::string(router.status().message())));
    }
    router_ = *std::move(router);
    router_->AttachHistory(store_.get());
    if (serve.registry_enabled) {
      ErRegistryWatcherOptions registry = serve.registry;
      registry.tls.verify = serve.router.upstream.verify_tls;
      registry_sink_ = std::make_unique<ErDirectorySink>(router_->ers());
      registry_metrics_ = std::make_unique<ErRegistryMetrics>(registry_);
      registry_watcher_ = std::make_unique<ErRegistryWatcher>(
          std::move(registry), registry_sink_.get(), registry_metrics_.get());
      if (absl::Status s = registry_watcher_->Start(); !s.ok()) {
        return absl::InvalidArgumentError(
            fmt::format("{}: registry.url: {}", config_.source, std::string(s.message())));
      }
    }
    er_prober_ = std::make_unique<ErProber>(serve.er_probe, router_.get(), &registry_);
    RETURN_IF_ERROR(er_prober_->Start());

    UpstreamMonitorOptions monitor_options;
    monitor_options.targets = serve.router.upstreams;
    monitor_options.upstream = serve.router.upstream;
    monitor_options.upstream.request_timeout =
        std::min(serve.router.upstream.request_timeout, serve.probe_interval);
    monitor_options.interval = serve.probe_interval;
    monitor_options.health = router_->health();
    for (const UpstreamTarget& target : serve.router.upstreams) {
      for (const UpstreamEndpoint& endpoint : target.endpoints) {
        monitor_options.needs_tls |= endpoint.url.rfind("https://", 0) == 0;
      }
    }
    monitor_ = std::make_unique<UpstreamMonitor>(std::move(monitor_options), &registry_);
    RETURN_IF_ERROR(monitor_->Start());

    AdminOptions admin_options = serve.admin_options;
    admin_options.base_target = serve.router.routing.base;
    admin_options.snapshot_export_dir = config_.data_dir + "/snapshot-export";
    admin_ = std::make_unique<AdminContext>(
        admin_options, &snapshots_, &registry_, monitor_.get(),
        [store = store_.get()]() -> absl::StatusOr<std::vector<PartitionStatus>> {
          ASSIGN_OR_RETURN(FoldPosition position, store->Position());
          std::vector<PartitionStatus> out;
          for (size_t p = 0; p < position.partitions.size(); ++p) {
            const PartitionCursor& cursor = position.partitions[p];
            out.push_back(PartitionStatus{static_cast<int32_t>(p), cursor.next_offset,
                                          cursor.sealed_slot, cursor.limbo_since});
          }
          return out;
        },
        &admin_metrics_);
    admin_->SetSealedDigests(store_.get());
    admin_->SetSnapshotMaker(
        [store = store_.get()](const std::string& dir) -> absl::StatusOr<std::string> {
          ASSIGN_OR_RETURN(SnapshotManifest manifest, CreateStateSnapshot(*store, dir));
          return SnapshotManifestJson(manifest);
        });
    admin_->SetCache(router_->cache());
    admin_->SetErStatus([ers = router_->ers()] { return ErStatusJson(*ers->Current()); });
    admin_->SetWriteHealth([fold = fold_runner_.get(), watcher = watcher_.get()] {
      return WriteHealth{fold->error(), watcher != nullptr ? watcher->append_error() : ""};
    });
    admin_->Start();
    admin_server_ = std::make_unique<HttpServer>(AdminServerOptions(), admin_->HandlerFactory(),
                                                 &admin_http_metrics_);
    if (absl::Status s = admin_server_->Start(); !s.ok()) {
      return absl::UnavailableError(fmt::format("admin.listen {}:{}: {}", serve.admin.address,
                                                serve.admin.port, std::string(s.message())));
    }
    if (!serve.snapshot_dir.empty()) {
      snapshot_metrics_ = std::make_unique<PeriodicSnapshotMetrics>(registry_);
      periodic_snapshots_ = std::make_unique<PeriodicSnapshots>(
          PeriodicSnapshotOptions{serve.snapshot_dir, serve.snapshot_interval, serve.snapshot_keep},
          store_.get(), snapshot_metrics_.get());
      periodic_snapshots_->Start();
    }
    if (!serve.verify_peers.empty()) {
      std::vector<std::unique_ptr<PeerDigestSource>> peers;
      for (const std::string& url : serve.verify_peers) {
        absl::StatusOr<std::unique_ptr<AdminPeerDigests>> peer =
            AdminPeerDigests::Create(url, serve.verify_timeout);
        if (!peer.ok()) {
          return absl::InvalidArgumentError(fmt::format("{}: verify.peers: {}", config_.source,
                                                        std::string(peer.status().message())));
        }
        peers.push_back(*std::move(peer));
      }
      peer_verifier_ =
          std::make_unique<PeerVerifier>(serve.verify, store_.get(), std::move(peers), &registry_);
      peer_verifier_->Start();
    }
    HttpServerOptions api_options = serve.api;
    api_options.thread_name = "sy-api";
    api_server_ =
        std::make_unique<HttpServer>(api_options, router_->HandlerFactory(), &api_metrics_);
    if (serve.pubsub_enabled) RETURN_IF_ERROR(AttachPubsub());
    if (absl::Status s = api_server_->Start(); !s.ok()) {
      if (api_server_->port() != 0) {  // the API port is bound: the pubsub listener failed
        return absl::UnavailableError(fmt::format("pubsub.port: {}", std::string(s.message())));
      }
      return absl::UnavailableError(fmt::format("api.listen {}:{}: {}", serve.api.address,
                                                serve.api.port, std::string(s.message())));
    }
    return absl::OkStatus();
  }

  // serve --bootstrap-from: a replica without a state starts from the snapshot; one that has
  // a state keeps it (a restart with the same command line).
  absl::Status Bootstrap() {
    if (args_.bootstrap_from.empty()) return absl::OkStatus();
    if (StateStoreExists(config_.StateDir())) {
      spdlog::info("bootstrap: {} already holds a state; {} is not restored", config_.StateDir(),
                   args_.bootstrap_from);
      return absl::OkStatus();
    }
    const absl::Time start = absl::Now();
    ASSIGN_OR_RETURN(SnapshotManifest manifest,
                     RestoreSnapshotFrom(args_.bootstrap_from, config_.StateDir()));
    spdlog::info(
        "bootstrap: restored {} into {} in {:.0f} ms: applied slot {}, digest {}, {} delegated "
        "accounts; the fold goes on from its offsets",
        args_.bootstrap_from, config_.StateDir(), absl::ToDoubleMilliseconds(absl::Now() - start),
        manifest.applied_slot, manifest.digest.ToHex(), manifest.delegated_accounts);
    return absl::OkStatus();
  }

  // Pubsub on the API workers: on api.port + 1 (or [pubsub] port) and through Upgrade on
  // api.port.
  absl::Status AttachPubsub() {
    const ServeConfig& serve = config_.serve;
    PubsubServerOptions options = serve.pubsub;
    if (serve.pubsub_threads != 0) {
      spdlog::warn("{}: pubsub.threads is ignored: pubsub runs on the api.threads workers",
                   config_.source);
    }
    if (serve.pubsub_port < 0) {
      if (serve.api.port == 65535) {
        return absl::InvalidArgumentError(fmt::format(
            "{}: api.listen port 65535 leaves no room for pubsub on port + 1; set pubsub.port",
            config_.source));
      }
      options.port = serve.api.port == 0 ? 0 : static_cast<uint16_t>(serve.api.port + 1);
    } else if (serve.pubsub_port == 0) {
      options.port = std::nullopt;
    } else {
      options.port = static_cast<uint16_t>(serve.pubsub_port);
    }
    options.router.upstream.verify_tls = serve.router.upstream.verify_tls;
    std::vector<std::string> targets;
    for (const UpstreamTarget& target : serve.router.upstreams) targets.push_back(target.name);
    pubsub_metrics_ = std::make_unique<PubsubMetrics>(registry_, targets);
    pubsub_ =
        std::make_unique<PubsubServer>(std::move(options), router_.get(), pubsub_metrics_.get());
    if (absl::Status s = pubsub_->Attach(api_server_.get()); !s.ok()) {
      return absl::InvalidArgumentError(
          fmt::format("{}: {}", config_.source, std::string(s.message())));
    }
    return absl::OkStatus();
  }

  // Stops accepting API requests and pubsub connections and drains both (up to
  // api.drain_timeout_ms), then stops the admin side, the probes and the fold (which commits
  // what it has folded), and closes the state and the log.
  void Stop() {
    if (api_server_) api_server_->Stop();
    if (admin_server_) admin_server_->Stop();
    if (admin_) admin_->Stop();
    if (peer_verifier_) peer_verifier_->Stop();
    if (periodic_snapshots_) periodic_snapshots_->Stop();
    if (monitor_) monitor_->Stop();
    if (er_prober_) er_prober_->Stop();
    if (registry_watcher_) registry_watcher_->Stop();
    if (watcher_) watcher_->Stop();
    if (fold_runner_) fold_runner_->Stop();
    api_server_.reset();
    pubsub_.reset();
    admin_server_.reset();
    admin_.reset();
    peer_verifier_.reset();
    periodic_snapshots_.reset();
    er_prober_.reset();
    registry_watcher_.reset();
    router_.reset();
    monitor_.reset();
    watcher_.reset();
    fold_runner_.reset();
    reader_.reset();
    store_.reset();
    log_.reset();
  }

  HttpServerOptions AdminServerOptions() const {
    HttpServerOptions options = config_.serve.admin;
    options.thread_name = "sy-admin";
    return options;
  }

  uint16_t api_port() const { return api_server_->port(); }
  uint16_t admin_port() const { return admin_server_->port(); }
  uint16_t pubsub_port() const { return pubsub_ ? pubsub_->port() : 0; }
  Slot applied_slot() const {
    auto snapshot = snapshots_.Current();
    return snapshot ? snapshot->applied_slot() : 0;
  }

 private:
  const Config& config_;
  const ServeArgs& args_;
  SystemClock clock_;
  MetricsRegistry registry_;
  // The admin listener's own HTTP counters, kept out of the API's.
  MetricsRegistry admin_http_registry_;
  ApiMetrics api_metrics_{registry_};
  FoldMetrics fold_metrics_{registry_};
  AdminMetrics admin_metrics_{registry_};
  ApiMetrics admin_http_metrics_{admin_http_registry_};
  SnapshotHolder snapshots_;
  const sigset_t& stop_signals_;
  std::unique_ptr<KafkaLogMetrics> kafka_metrics_;  // with a Kafka log
  std::unique_ptr<EventLog> log_;
  std::unique_ptr<EventLogReader> reader_;
  std::unique_ptr<RocksDbStateStore> store_;
  std::unique_ptr<FoldRunner> fold_runner_;
  WatcherMetrics watcher_metrics_{registry_};
  std::unique_ptr<BaseLayerWatcher> watcher_;  // when [ingest] has an endpoint
  std::unique_ptr<RouterContext> router_;
  // With [registry]: the ER records into router_'s directory. The prober probes its ERs.
  std::unique_ptr<ErDirectorySink> registry_sink_;
  std::unique_ptr<ErRegistryMetrics> registry_metrics_;
  std::unique_ptr<ErRegistryWatcher> registry_watcher_;
  std::unique_ptr<ErProber> er_prober_;
  std::unique_ptr<PubsubMetrics> pubsub_metrics_;
  std::unique_ptr<PubsubServer> pubsub_;  // when [pubsub] is enabled; outlives api_server_
  std::unique_ptr<UpstreamMonitor> monitor_;
  std::unique_ptr<AdminContext> admin_;
  std::unique_ptr<HttpServer> admin_server_;
  std::unique_ptr<PeerVerifier> peer_verifier_;                // with [verify] peers
  std::unique_ptr<PeriodicSnapshotMetrics> snapshot_metrics_;  // with [snapshot] dir
  std::unique_ptr<PeriodicSnapshots> periodic_snapshots_;
  std::unique_ptr<HttpServer> api_server_;
};

absl::Status WriteReadyFile(const std::string& path, uint16_t api_port, uint16_t admin_port,
                            uint16_t pubsub_port) {
  const std::string temp = path + ".tmp";
  {
    std::ofstream out(temp, std::ios::trunc);
    out << fmt::format("{{\"api\":{},\"admin\":{},\"pubsub\":{}}}\n", api_port, admin_port,
                       pubsub_port);
    if (!out) return absl::UnavailableError(fmt::format("cannot write {}", temp));
  }
  std::error_code ec;
  std::filesystem::rename(temp, path, ec);
  if (ec) return absl::UnavailableError(fmt::format("cannot write {}: {}", path, ec.message()));
  return absl::OkStatus();
}

}  // namespace

int RunServe(const Config& config, const ServeArgs& args) {
  bool has_base = false;
  for (const UpstreamTarget& target : config.serve.router.upstreams) {
    has_base |= target.name == config.serve.router.routing.base;
  }
  if (!has_base) {
    std::cerr << "error: "
              << fmt::format("{}: [upstreams.{}] is required by serve",
                             config.source.empty() ? "the configuration (no --config given)"
                                                   : config.source,
                             config.serve.router.routing.base)
              << "\n";
    return 2;
  }
  // SIGTERM and SIGINT are taken by sigwait below; block them before any thread starts, so
  // every thread inherits the mask.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  // SIGHUP asks for a reload of what can change without a restart; it does not stop Start().
  sigset_t waited = signals;
  sigaddset(&waited, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &waited, nullptr);

  ServeProcess process(config, args, signals);
  if (absl::Status s = process.Start(); !s.ok()) {
    if (absl::IsCancelled(s)) {
      spdlog::info("switchyard serve: {}", std::string(s.message()));
      return 0;
    }
    std::cerr << "error: " << s.message() << "\n";
    process.Stop();
    return s.code() == absl::StatusCode::kInvalidArgument ? 2 : 1;
  }
  spdlog::info("switchyard serve: api={} admin={} pubsub={} applied_slot={} log={}",
               process.api_port(), process.admin_port(), process.pubsub_port(),
               process.applied_slot(), config.log_url);
  if (!args.ready_file.empty()) {
    if (absl::Status s = WriteReadyFile(args.ready_file, process.api_port(), process.admin_port(),
                                        process.pubsub_port());
        !s.ok()) {
      std::cerr << "error: " << s.message() << "\n";
      process.Stop();
      return 1;
    }
  }
  int signal_number = 0;
  while (sigwait(&waited, &signal_number) == 0 && signal_number == SIGHUP) {
    spdlog::info("switchyard serve: SIGHUP: reloading");
    process.Reload();
  }
  spdlog::info("switchyard serve: signal {}: draining", signal_number);
  process.Stop();
  spdlog::info("switchyard serve: stopped");
  return 0;
}

}  // namespace switchyard
