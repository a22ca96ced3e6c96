#pragma once

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/thread_pool.hpp>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "api/admin/snapshot_export.h"
#include "api/cache/response_cache.h"
#include "api/net/http_server.h"
#include "api/upstream/probe_loop.h"
#include "api/upstream/upstream.h"
#include "common/clock.h"
#include "common/metrics.h"
#include "common/slot.h"
#include "engine/snapshot.h"
#include "engine/state_store.h"

namespace switchyard {

// The metrics of the admin side, declared in one place. Built from the process registry,
// which must outlive it.
struct AdminMetrics {
  explicit AdminMetrics(MetricsRegistry& registry);
  Gauge& base_slot;       // the base layer's slot, as last probed (0: unknown)
  Gauge& fold_lag_slots;  // base slot - applied slot (0 while the base slot is unknown)
  Gauge& ready;           // 1 when /ready answers 200
  // GET /status/digest, by answer.
  Counter& digest_answered;     // 200
  Counter& digest_not_sealed;   // 404: the slot is not sealed here
  Counter& digest_bad_request;  // 400: the slot is not a slot number
  Counter& digest_refused;      // 503: too many lookups in flight, or no sealed digests here
  Counter& digest_errors;       // 500: the state store failed
  // POST /admin/snapshot/export, by outcome, and the reads of exports.
  Counter& exports_made;
  Counter& exports_failed;
  Counter& exports_refused;       // 409 (one at a time) or 503 (no exports here)
  Counter& export_reads;          // a listing or a chunk answered
  Counter& export_reads_refused;  // 400, 404 (replaced, expired), 503 (too many), 500
  Counter& export_bytes;          // file bytes answered
};

struct UpstreamMonitorOptions {
  std::vector<UpstreamTarget> targets;  // every endpoint of every target is probed
  UpstreamOptions upstream;             // request_timeout bounds each probe
  absl::Duration interval = absl::Seconds(1);
  bool needs_tls = false;
  // Where the probes go and where /status reads each endpoint from (RouterContext::health());
  // null: the probes only feed the target states below.
  UpstreamHealth* health = nullptr;
};

// What the monitor last saw of one target. A value type.
struct UpstreamProbeState {
  std::string name;
  std::optional<Slot> slot;  // the most advanced slot an endpoint answered, if any answered
  bool healthy = false;      // the last probe of at least one endpoint succeeded
  std::string last_error;    // the last failed probe's error, while no endpoint is healthy
  uint64_t probes = 0;       // over every endpoint
  uint64_t failures = 0;
  std::optional<TargetStatus> health;  // every endpoint, when the monitor has a health
};

// Asks every endpoint of every upstream target for getSlot and getHealth periodically, on its
// own thread and io_context (off the request path), feeds the answers to the UpstreamHealth
// the request path chooses endpoints by, and ticks it once per round (lag, p95s, ramps).
// Owned by the app; Start() and Stop() are called from one control thread; the readers may be
// called from any thread.
class UpstreamMonitor {
 public:
  UpstreamMonitor(UpstreamMonitorOptions options, MetricsRegistry* registry);
  ~UpstreamMonitor();
  UpstreamMonitor(const UpstreamMonitor&) = delete;
  UpstreamMonitor& operator=(const UpstreamMonitor&) = delete;

  // InvalidArgument when a target cannot be used (a bad URL).
  absl::Status Start();
  void Stop();

  // The last slot `target` answered, or nullopt.
  std::optional<Slot> LastSlot(const std::string& target) const;
  std::vector<UpstreamProbeState> States() const;

 private:
  struct Target;
  // One endpoint's probe: getSlot and getHealth, sent together (io thread only).
  struct Probe {
    Target* target = nullptr;
    size_t index = 0;
    std::string pool;  // its pool in the loop's upstreams: one per endpoint
    std::string url;
    bool in_flight = false;
    bool probed = false;  // a round has ended
    int pending = 0;
    absl::StatusOr<Slot> slot = absl::UnknownError("not probed");
    bool node_healthy = false;
    HealthClock::duration round_trip{};  // of the getSlot
    std::optional<Slot> last_slot;
    bool last_ok = false;
    bool admitting = false;  // its admission checks are running
  };
  struct Target {
    std::string name;
    std::vector<std::unique_ptr<Probe>> probes;
    Gauge* slot = nullptr;
    Counter* failures = nullptr;
  };
  void ProbeAll();
  void OnProbed(Probe* probe);
  // Admission (upstream_admission.cc, docs/architecture.md §22): after a probe of an endpoint
  // that waits for admission, its checks run on this thread and their outcome goes to its
  // health.
  void MaybeAdmit(Probe* probe);
  struct Admission;  // its checks (upstream_admission.cc)

  UpstreamMonitorOptions options_;
  // The probes' own upstream counters, kept apart from the API's request counters.
  MetricsRegistry probe_registry_;
  ApiMetrics probe_metrics_;
  std::vector<std::unique_ptr<Target>> targets_;  // fixed after construction
  std::unique_ptr<boost::asio::ssl::context> tls_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, UpstreamProbeState> states_ ABSL_GUARDED_BY(mu_);
  ProbeLoop loop_;  // last: stopped first, while what its pools and callbacks use is there
};

// Where the fold stands in one partition of the log, for /status.
struct PartitionStatus {
  int32_t partition = 0;
  int64_t next_offset = 0;  // the first record not yet folded and committed
  Slot sealed_slot = 0;
  std::optional<Slot> limbo_since;
};

struct AdminOptions {
  std::string base_target = "base";
  // /ready: the applied slot is at most this many slots behind the base layer's slot.
  uint64_t ready_max_lag_slots = 32;
  // How often the partition positions and the fold-lag gauge are refreshed.
  absl::Duration refresh_interval = absl::Seconds(1);
  // Where POST /admin/snapshot/export makes its snapshots (on the state's file system, so
  // table files are hard links); empty: no exports. The directory belongs to the admin
  // context, which empties it at start and removes it at the end.
  std::string snapshot_export_dir;
  // An export no one has read for this long is removed.
  absl::Duration snapshot_export_ttl = absl::Minutes(10);
};

// Reads the fold's committed partition positions; may block (it reads the state store), so
// it is called on the AdminContext's own thread only.
using PartitionStatusSource = std::function<absl::StatusOr<std::vector<PartitionStatus>>()>;

// Readiness as /ready reports it. A value type.
struct Readiness {
  bool ready = false;
  std::optional<Slot> applied_slot;  // nullopt: no state loaded yet
  std::optional<Slot> base_slot;     // nullopt: the base slot is not known yet
  std::string reason;                // why not ready
  // Set while the delegation state is in limbo (a lost base-layer stream, not yet resynced):
  // still ready, since routing verifies against base meanwhile, but degraded.
  std::optional<Slot> limbo_since;
};

// Why the parts that write cannot (a full disk, an I/O error), as the app reports them; an
// empty string when that part writes. A value type.
struct WriteHealth {
  std::string fold_error;  // the fold cannot commit to the state store
  std::string log_error;   // ingest cannot append to the event log
};

// What the admin endpoints share: /health, /ready, /status, /status/digest, /metrics,
// /admin/snapshot and /admin/snapshot/export.
// Owned by the app;
// it must outlive the HttpServer that serves HandlerFactory(). The snapshot holder, the
// registry, the monitor and the metrics must outlive it. Start() and Stop() from one control
// thread; everything else from any thread.
class AdminContext {
 public:
  AdminContext(AdminOptions options, SnapshotHolder* snapshots, const MetricsRegistry* registry,
               UpstreamMonitor* upstreams, PartitionStatusSource partitions, AdminMetrics* metrics);
  ~AdminContext();

  // Reads the partition positions once, then refreshes them on a thread until Stop().
  void Start();
  void Stop();

  Readiness CheckReady() const;
  std::string StatusJson() const;
  std::string Metrics() const { return registry_->RenderPrometheus(); }
  // Runs one refresh now (the thread does it every refresh_interval).
  void Refresh();
  // Posts the removal of an idle export to the snapshot thread (Refresh does it).
  void ExpireExport();
  // The response cache /status reports on (its size and hit ratio); it must outlive this.
  void SetCache(const ResponseCache* cache) { cache_ = cache; }
  // The `ers` member of /status (raw JSON: the ERs with their status and probe latency), from
  // the app; called on the admin worker, must not block.
  void SetErStatus(std::function<std::string()> ers) { ers_ = std::move(ers); }
  // Where /ready and /status read whether the fold and ingest can write: either one failing
  // makes /ready answer 503 with the error. Called on the admin worker, must not block.
  void SetWriteHealth(std::function<WriteHealth()> health) { write_health_ = std::move(health); }

  // Where GET /status/digest reads the sealed digests; it must outlive this. Before Start().
  // The reads run on a thread of this context's own, never on the admin worker.
  void SetSealedDigests(SealedDigestReader* sealed);
  // Answers GET /status/digest[?slot=S] (`target` is the request's): at once for a bad slot,
  // else after a read of the store on the digest thread. `answer` is called once, on the
  // worker or on that thread.
  void LookUpDigest(std::string_view target, std::function<void(HttpResponse)> answer);

  // Makes a snapshot of the state in the directory it is given and returns its manifest as
  // JSON (the app's: storage/state_snapshot.h). Blocks on the disk. Before Start().
  using SnapshotMaker = std::function<absl::StatusOr<std::string>(const std::string& dir)>;
  void SetSnapshotMaker(SnapshotMaker maker);
  // Answers POST /admin/snapshot, the directory in `?dir=` or a JSON body {"dir": "..."}: at
  // once for a bad request or while another snapshot is being made (409), else after the
  // snapshot is made on a thread of this context's own. `answer` is called once, on the
  // worker or on that thread.
  void MakeSnapshot(const HttpRequest& request, std::function<void(HttpResponse)> answer);
  // Answers POST /admin/snapshot/export (snapshot_export.cc): a new export, made on the
  // snapshot thread (409 while a snapshot is being made), its listing as the answer.
  void ExportSnapshot(std::function<void(HttpResponse)> answer);
  // Answers GET /admin/snapshot/export/ID (the listing) and /admin/snapshot/export/ID/FILE
  // ?offset=N (at most 4 MiB of the file from N), read on the snapshot thread.
  void ReadExport(std::string_view target, std::function<void(HttpResponse)> answer);

  // For an HttpServer of its own, on a loopback port.
  RequestHandlerFactory HandlerFactory();

 private:
  AdminOptions options_;
  SnapshotHolder* snapshots_;
  const MetricsRegistry* registry_;
  UpstreamMonitor* upstreams_;
  PartitionStatusSource partitions_source_;
  AdminMetrics* metrics_;
  const ResponseCache* cache_ = nullptr;
  std::function<std::string()> ers_;
  std::function<WriteHealth()> write_health_;
  SealedDigestReader* sealed_ = nullptr;
  std::unique_ptr<boost::asio::thread_pool> digest_pool_;  // with sealed_
  std::atomic<size_t> digest_lookups_{0};                  // queued or running on it
  SnapshotMaker snapshot_maker_;
  std::unique_ptr<boost::asio::thread_pool> snapshot_pool_;  // with snapshot_maker_
  std::atomic<bool> snapshot_running_{false};
  SystemClock clock_;
  std::unique_ptr<SnapshotExports> exports_;  // with snapshot_maker_ and a snapshot_export_dir
  std::atomic<size_t> export_reads_{0};       // queued or running on snapshot_pool_
  mutable absl::Mutex mu_;
  std::vector<PartitionStatus> partitions_ ABSL_GUARDED_BY(mu_);
  std::string partitions_error_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

// Answers GET /health, /ready, /status, /status/digest, /metrics and /admin/snapshot/export/…,
// and POST /admin/snapshot and /admin/snapshot/export, from an AdminContext; anything else 404. One
// per admin worker, called on its thread; an answer read off the worker (/status/digest) is posted
// back to it, and dropped once the handler is gone.
class AdminHandler : public RequestHandler {
 public:
  AdminHandler(AdminContext* context, boost::asio::io_context& io_context);
  ~AdminHandler() override;
  void Handle(HttpRequest request, Done done) override;

 private:
  // Where an answer read on another thread goes back to: this worker's io_context, while
  // the handler lives.
  struct WorkerReturn {
    absl::Mutex mu;
    boost::asio::io_context* io_context ABSL_GUARDED_BY(mu) = nullptr;
  };
  AdminContext* context_;
  std::shared_ptr<WorkerReturn> return_;
};

}  // namespace switchyard
