#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/metrics.h"

namespace switchyard {

// The per-target counters of one upstream group.
struct UpstreamTargetMetrics {
  Counter* requests = nullptr;  // attempts sent
  Counter* errors = nullptr;    // attempts that failed or answered a non-2xx HTTP status
};

// The reads owner verification (docs/architecture.md §10) may send to another target.
enum class VerifiedRead : uint8_t {
  kGetAccountInfo,
  kGetBalance,
  kGetTokenAccountBalance,
  kGetMultipleAccounts,
};
inline constexpr size_t kVerifiedReadCount = 4;

// Every metric of api/, declared here with its help text. Built once from the registry,
// which must outlive it; any thread may update them.
struct ApiMetrics {
  explicit ApiMetrics(MetricsRegistry& registry);

  // The counters of upstream group `target`, registered on first use. Called when an
  // UpstreamPool is built, never per request; thread-safe.
  UpstreamTargetMetrics ForUpstream(std::string_view target);
  // Owner verification re-asked `read` of an ER (to_er) or of base.
  Counter& OwnerReroutes(VerifiedRead read, bool to_er) {
    return *owner_reroutes_by_read[static_cast<size_t>(read)][to_er ? 0 : 1];
  }

  MetricsRegistry& registry;
  Counter& connections_accepted;
  Counter& connections_rejected;  // over max_connections
  Gauge& connections_open;
  Counter& http_requests;
  Counter& http_reads;                   // reads from client connections that returned bytes
  Counter& http_body_too_large;          // answered 413
  Counter& http_bad_requests;            // malformed HTTP
  Counter& http_timeouts;                // connections closed by a timeout
  Counter& http_gzip_answers;            // answers the HTTP layer compressed
  Counter& http_gzip_input_bytes;        // ... their bytes before compression
  Counter& http_gzip_output_bytes;       // ... and after
  Counter& http_gzip_passthrough;        // answers sent with an upstream's gzip bytes as they came
  Counter& http_gzip_passthrough_bytes;  // ... their bytes
  Counter& http_gzip_bodies;             // request bodies inflated (Content-Encoding: gzip)
  Counter& http_bad_gzip_bodies;         // ... that did not inflate: answered 400
  Counter& http_unsupported_encodings;   // request bodies in another encoding: answered 415
  Counter& cors_preflights;              // CORS preflights answered (204, or 403 for the origin)
  Counter& cors_origins_refused;         // requests and handshakes from an origin not allowed
  Counter& tls_handshakes;               // TLS handshakes completed on the server's own listeners
  Counter& tls_handshake_failures;       // ... failed or timed out (the connection is closed)
  Counter& tls_plain_refused;            // plain HTTP on a TLS listener, answered 400
  Counter& tls_reloads;                  // certificate and key read again (SIGHUP)
  Counter& tls_reload_failures;          // ... refused: the old ones are kept
  Counter& rpc_calls;                    // JSON-RPC calls, batch elements counted one by one
  Counter& rpc_errors;                   // calls answered with an error made by the router
  Counter& rpc_split_accounts;           // getMultipleAccounts split over several targets
  Counter& rpc_signature_fanouts;        // unknown signatures asked of everyone
  Counter& upstream_requests;
  Counter& upstream_failures;  // connection errors and timeouts
  Counter& upstream_retries;
  Counter& upstream_stale_retries;       // reads sent again at once: a kept connection was closed
  Counter& upstream_connections_opened;  // connections the upstream pools opened
  Counter& upstream_reads;               // reads from upstream connections that returned bytes
  Counter& upstream_pipelined;           // requests queued behind another on a connection
  Counter& upstream_pipeline_probes;     // endpoints asked whether they pipeline
  Counter& upstream_pipeline_fallbacks;  // ... found not to: one exchange per connection
  Counter& upstream_pipeline_breaks;     // requests cut: the upstream closed after one ahead
  Counter& upstream_pipeline_moves;      // requests sent again because of one ahead of them
  Counter& upstream_pipeline_hedges;     // reads behind a slow answer, also sent elsewhere
  Counter& upstream_gzip_answers;        // upstream answers that came gzip-compressed
  Counter& upstream_gzip_inflated;       // ... that the router inflated
  Counter& upstream_gzip_bad;            // ... that did not inflate (a failed attempt)
  Counter& upstream_batches;             // JSON-RPC batches the router sent to an upstream
  Counter& upstream_batch_calls;         // ... the calls in them
  Counter& upstream_batch_fallbacks;     // ... calls sent again alone: the answer lacked them
  Counter& upstream_coalesced_batches;   // batches of single calls of different requests
  Counter& upstream_coalesced_calls;     // ... the calls in them
  Counter& gate_waits;                   // calls that waited for the applied slot
  Counter& gate_rejections;              // answered 412
  Counter& owner_reroutes;               // owner verification re-asked another target (all reads)
  Counter& limbo_transaction_checks;     // transactions routed by records read from base
  Counter& limbo_transaction_reroutes;   // ... that went elsewhere than the state said
  Counter& lookup_table_fetches;
  Histogram& rpc_latency_seconds;
  // switchyard_api_owner_reroutes_by_method_total{method, to}: [read][0 = er, 1 = base].
  Counter* owner_reroutes_by_read[kVerifiedReadCount][2];

 private:
  absl::Mutex upstream_mu_;
  absl::flat_hash_map<std::string, UpstreamTargetMetrics> upstreams_ ABSL_GUARDED_BY(upstream_mu_);
};

// How one JSON-RPC call ended, as switchyard_rpc_requests_total counts it.
enum class RpcOutcome : uint8_t {
  kOk,               // a result: an upstream's, a merge of several, or the router's own
  kRpcError,         // an upstream answered with a JSON-RPC error
  kRouterError,      // the router answered with an error: bad params, mixed targets, no route
  kUpstreamFailure,  // connection error, timeout, or an upstream answer that is not JSON-RPC
  kRejected,         // 412: the required slot was not reached in time
};
inline constexpr size_t kRpcOutcomeCount = 5;
std::string_view RpcOutcomeName(RpcOutcome outcome);

// Where a call was answered from (an RpcCallMetrics target id) and how it ended.
struct CallOutcome {
  int target = 0;
  RpcOutcome outcome = RpcOutcome::kOk;
};

// The router's per-call series: switchyard_rpc_requests_total{method,target,outcome} and
// switchyard_rpc_latency_seconds{method}. Label values come only from the lists given at
// construction: methods (anything else is "other") and upstream groups, plus "router" (the
// router answered itself), "split" (parts sent to several targets) and "fanout" (asked of base
// and every ER). So a client cannot create series. A series is found by small integer ids;
// Record takes no lock and allocates nothing once the series exists. Series are registered by
// Preregister at start-up, or under a lock the first time they are hit. Owned by the
// RouterContext; the registry must outlive it; any thread may call any method.
class RpcCallMetrics {
 public:
  static constexpr int kRouterTarget = 0;
  static constexpr int kSplitTarget = 1;
  static constexpr int kFanoutTarget = 2;
  static constexpr std::string_view kOtherMethod = "other";

  // `methods` and `upstreams` are label values; repeats are ignored.
  RpcCallMetrics(MetricsRegistry* registry, const std::vector<std::string>& methods,
                 const std::vector<std::string>& upstreams);

  // The id of `method`, or of "other" when it is not one of the listed methods.
  int MethodId(std::string_view method) const;
  // The id of upstream group `target`, or kRouterTarget when it is not listed.
  int TargetId(std::string_view target) const;
  const std::string& MethodName(int method) const { return methods_[method]; }
  const std::string& TargetName(int target) const { return targets_[target]; }
  size_t method_count() const { return methods_.size(); }

  // Registers the series now, so that it is on /metrics (at 0) before its first call.
  void Preregister(int method, int target, RpcOutcome outcome);
  void Record(int method, CallOutcome outcome, absl::Duration latency) {
    const size_t i =
        (static_cast<size_t>(method) * targets_.size() + outcome.target) * kRpcOutcomeCount +
        static_cast<size_t>(outcome.outcome);
    Counter* counter = requests_[i].load(std::memory_order_acquire);
    if (counter == nullptr) counter = RegisterRequests(i);
    counter->Increment();
    Histogram* histogram = latency_[method].load(std::memory_order_acquire);
    if (histogram == nullptr) histogram = RegisterLatency(method);
    histogram->Observe(absl::ToDoubleSeconds(latency));
  }

 private:
  Counter* RegisterRequests(size_t index);
  Histogram* RegisterLatency(int method);

  MetricsRegistry* registry_;
  std::vector<std::string> methods_;  // by id; the last is "other"
  std::vector<std::string> targets_;  // by id: router, split, fanout, then the upstreams
  // Keys view the strings above, which never change after construction.
  absl::flat_hash_map<std::string_view, int> method_ids_;
  absl::flat_hash_map<std::string_view, int> target_ids_;
  std::unique_ptr<std::atomic<Counter*>[]> requests_;   // method × target × outcome
  std::unique_ptr<std::atomic<Histogram*>[]> latency_;  // by method
  absl::Mutex register_mu_;  // serializes registration; never taken once a series exists
};

}  // namespace switchyard
