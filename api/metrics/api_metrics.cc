#include "api/metrics/api_metrics.h"

#include <algorithm>

namespace switchyard {
namespace {

constexpr std::string_view kVerifiedReadNames[kVerifiedReadCount] = {
    "getAccountInfo", "getBalance", "getTokenAccountBalance", "getMultipleAccounts"};

}  // namespace

ApiMetrics::ApiMetrics(MetricsRegistry& r)
    : registry(r),
      connections_accepted(
          r.AddCounter("switchyard_api_connections_accepted_total", "HTTP connections accepted")),
      connections_rejected(r.AddCounter("switchyard_api_connections_rejected_total",
                                        "HTTP connections closed at once: over the limit")),
      connections_open(r.AddGauge("switchyard_api_connections_open", "Open HTTP connections")),
      http_requests(r.AddCounter("switchyard_api_http_requests_total", "HTTP requests read")),
      http_reads(r.AddCounter("switchyard_api_http_reads_total",
                              "Reads from client connections that returned bytes (with "
                              "switchyard_api_http_requests_total: reads per request)")),
      http_body_too_large(
          r.AddCounter("switchyard_api_http_body_too_large_total", "HTTP requests answered 413")),
      http_bad_requests(
          r.AddCounter("switchyard_api_http_bad_requests_total", "Malformed HTTP requests")),
      http_timeouts(r.AddCounter("switchyard_api_http_timeouts_total",
                                 "HTTP connections closed by an idle/header/body/write timeout")),
      http_gzip_answers(r.AddCounter(
          "switchyard_api_http_gzip_answers_total",
          "Answers gzip-compressed by the HTTP layer (client accepts gzip, answer at least [api] "
          "gzip_min_bytes)")),
      http_gzip_input_bytes(r.AddCounter("switchyard_api_http_gzip_input_bytes_total",
                                         "Bytes of the answers the HTTP layer compressed, before")),
      http_gzip_output_bytes(r.AddCounter("switchyard_api_http_gzip_output_bytes_total",
                                          "Bytes of the answers the HTTP layer compressed, after")),
      http_gzip_passthrough(r.AddCounter(
          "switchyard_api_http_gzip_passthrough_total",
          "Answers sent with an upstream's gzip bytes as they came, never inflated (a plain "
          "forward of one call whose bytes the router does not read)")),
      http_gzip_passthrough_bytes(
          r.AddCounter("switchyard_api_http_gzip_passthrough_bytes_total",
                       "Bytes of the upstream gzip answers passed through without inflating")),
      http_gzip_bodies(r.AddCounter("switchyard_api_http_gzip_bodies_total",
                                    "Request bodies sent with Content-Encoding: gzip, inflated")),
      http_bad_gzip_bodies(r.AddCounter(
          "switchyard_api_http_bad_gzip_bodies_total",
          "Request bodies with Content-Encoding: gzip that did not inflate (answered 400)")),
      http_unsupported_encodings(r.AddCounter(
          "switchyard_api_http_unsupported_encodings_total",
          "Request bodies with a Content-Encoding other than gzip, or gzip with [api] gzip off "
          "(answered 415)")),
      cors_preflights(r.AddCounter("switchyard_api_cors_preflights_total",
                                   "CORS preflights (OPTIONS) answered by the HTTP layer")),
      cors_origins_refused(r.AddCounter(
          "switchyard_api_cors_origins_refused_total",
          "Requests, preflights and WebSocket handshakes from an origin that [api] cors_origins "
          "does not allow (answered without CORS headers, or 403)")),
      tls_handshakes(r.AddCounter("switchyard_api_tls_handshakes_total",
                                  "TLS handshakes completed on the api and pubsub listeners")),
      tls_handshake_failures(r.AddCounter(
          "switchyard_api_tls_handshake_failures_total",
          "TLS handshakes on the api and pubsub listeners that failed or timed out (the "
          "connection is closed)")),
      tls_plain_refused(
          r.AddCounter("switchyard_api_tls_plain_requests_refused_total",
                       "Plain-HTTP connections to a TLS listener, answered 400 and closed")),
      tls_reloads(r.AddCounter("switchyard_api_tls_reloads_total",
                               "TLS certificate and key files read again (SIGHUP)")),
      tls_reload_failures(r.AddCounter(
          "switchyard_api_tls_reload_failures_total",
          "TLS reloads refused (unreadable files, not a matching pair): the listeners keep the "
          "certificate they had")),
      rpc_calls(r.AddCounter("switchyard_api_rpc_calls_total", "JSON-RPC calls")),
      rpc_errors(r.AddCounter(
          "switchyard_api_rpc_errors_total",
          "JSON-RPC calls answered with an error made by the router (its own or an upstream "
          "failure)")),
      rpc_split_accounts(r.AddCounter("switchyard_api_split_accounts_total",
                                      "getMultipleAccounts calls split over several targets")),
      rpc_signature_fanouts(r.AddCounter("switchyard_api_signature_fanouts_total",
                                         "Signature lookups sent to base and every ER")),
      upstream_requests(r.AddCounter("switchyard_api_upstream_requests_total",
                                     "Requests sent to upstream endpoints")),
      upstream_failures(r.AddCounter("switchyard_api_upstream_failures_total",
                                     "Upstream connection errors and timeouts")),
      upstream_retries(r.AddCounter("switchyard_api_upstream_retries_total",
                                    "Upstream requests retried on another endpoint")),
      upstream_stale_retries(r.AddCounter(
          "switchyard_api_upstream_stale_retries_total",
          "Reads sent again at once on a new connection: a kept-alive one had been closed by the "
          "upstream while idle (not counted as failures)")),
      upstream_connections_opened(
          r.AddCounter("switchyard_api_upstream_connections_opened_total",
                       "Connections the upstream pools opened (a new one, or one replacing a "
                       "closed one)")),
      upstream_reads(r.AddCounter("switchyard_api_upstream_reads_total",
                                  "Reads from upstream connections that returned bytes (with "
                                  "switchyard_api_upstream_requests_total: reads per answer)")),
      upstream_pipelined(r.AddCounter(
          "switchyard_api_upstream_pipelined_total",
          "Upstream requests queued behind another on the same connection (HTTP pipelining)")),
      upstream_pipeline_probes(
          r.AddCounter("switchyard_api_upstream_pipeline_probes_total",
                       "Endpoints asked whether they pipeline: two requests sent together")),
      upstream_pipeline_fallbacks(r.AddCounter(
          "switchyard_api_upstream_pipeline_fallbacks_total",
          "Probes that found an endpoint not pipelining: it takes one exchange per connection")),
      upstream_pipeline_breaks(r.AddCounter(
          "switchyard_api_upstream_pipeline_breaks_total",
          "Requests cut because the upstream closed a connection after answering one ahead of "
          "them (the endpoint is asked again)")),
      upstream_pipeline_moves(r.AddCounter(
          "switchyard_api_upstream_pipeline_moves_total",
          "Requests sent again at once on another connection because of another request on "
          "theirs: it failed, timed out or was slow ahead of them (not counted as failures)")),
      upstream_pipeline_hedges(
          r.AddCounter("switchyard_api_upstream_pipeline_hedges_total",
                       "Reads written behind a slow answer and also sent on another connection")),
      upstream_gzip_answers(r.AddCounter("switchyard_api_upstream_gzip_answers_total",
                                         "Upstream answers that came gzip-compressed")),
      upstream_gzip_inflated(
          r.AddCounter("switchyard_api_upstream_gzip_inflated_total",
                       "Upstream gzip answers the router inflated because it reads them")),
      upstream_gzip_bad(r.AddCounter(
          "switchyard_api_upstream_gzip_bad_total",
          "Upstream gzip answers that did not inflate (the attempt failed as an I/O error)")),
      upstream_batches(r.AddCounter(
          "switchyard_api_upstream_batches_total",
          "JSON-RPC batches sent to upstreams: the plain forwards of one client batch to one "
          "target, sent together")),
      upstream_batch_calls(r.AddCounter("switchyard_api_upstream_batch_calls_total",
                                        "Calls sent to upstreams inside JSON-RPC batches")),
      upstream_batch_fallbacks(r.AddCounter(
          "switchyard_api_upstream_batch_fallbacks_total",
          "Calls of upstream batches sent again one by one: the upstream rejected the batch "
          "(HTTP error, an answer that is not an array) or its answer lacked their ids")),
      upstream_coalesced_batches(r.AddCounter(
          "switchyard_api_upstream_coalesced_batches_total",
          "JSON-RPC batches of reads from different requests to one target, sent together "
          "because the target already had calls in flight (router.upstream_batch_max)")),
      upstream_coalesced_calls(
          r.AddCounter("switchyard_api_upstream_coalesced_calls_total",
                       "Calls that went to an upstream inside a coalesced batch")),
      gate_waits(r.AddCounter("switchyard_api_gate_waits_total",
                              "Calls that waited for the applied slot to reach their minimum")),
      gate_rejections(r.AddCounter("switchyard_api_gate_rejections_total",
                                   "Calls answered 412: minimum slot not reached in time")),
      owner_reroutes(r.AddCounter("switchyard_api_owner_reroutes_total",
                                  "Reads re-asked of another target after owner verification")),
      limbo_transaction_checks(r.AddCounter(
          "switchyard_api_limbo_transaction_checks_total",
          "Transactions routed in limbo by the delegation records of their writable accounts, "
          "read from base")),
      limbo_transaction_reroutes(r.AddCounter(
          "switchyard_api_limbo_transaction_reroutes_total",
          "Transactions routed in limbo to another target than the delegation state named")),
      lookup_table_fetches(r.AddCounter("switchyard_api_lookup_table_fetches_total",
                                        "Address lookup tables fetched from base")),
      rpc_latency_seconds(r.AddHistogram("switchyard_api_rpc_latency_seconds",
                                         "Time from a whole HTTP request to its answer",
                                         LatencyBucketsSeconds())) {
  for (size_t read = 0; read < kVerifiedReadCount; ++read) {
    for (int to = 0; to < 2; ++to) {
      owner_reroutes_by_read[read][to] = &r.AddCounter(
          "switchyard_api_owner_reroutes_by_method_total",
          "Accounts re-asked of another target after owner verification, by method and by "
          "where they went",
          {{"method", std::string(kVerifiedReadNames[read])}, {"to", to == 0 ? "er" : "base"}});
    }
  }
}

UpstreamTargetMetrics ApiMetrics::ForUpstream(std::string_view target) {
  absl::MutexLock lock(&upstream_mu_);
  auto [it, inserted] = upstreams_.try_emplace(std::string(target));
  if (inserted) {
    const MetricLabels labels = {{"target", std::string(target)}};
    it->second.requests = &registry.AddCounter(
        "switchyard_upstream_requests_total",
        "Requests sent to upstream endpoints (retries included), per upstream group", labels);
    it->second.errors = &registry.AddCounter(
        "switchyard_upstream_errors_total",
        "Upstream requests that failed (connection error, timeout) or answered an HTTP status "
        "other than 2xx, per upstream group",
        labels);
  }
  return it->second;
}

std::string_view RpcOutcomeName(RpcOutcome outcome) {
  switch (outcome) {
    case RpcOutcome::kOk:
      return "ok";
    case RpcOutcome::kRpcError:
      return "rpc_error";
    case RpcOutcome::kRouterError:
      return "router_error";
    case RpcOutcome::kUpstreamFailure:
      return "upstream_failure";
    case RpcOutcome::kRejected:
      return "rejected";
  }
  return "ok";
}

RpcCallMetrics::RpcCallMetrics(MetricsRegistry* registry, const std::vector<std::string>& methods,
                               const std::vector<std::string>& upstreams)
    : registry_(registry) {
  // The names are collected first and indexed after, so the maps' keys view strings that
  // no longer move.
  for (const std::string& method : methods) {
    if (method == kOtherMethod) continue;
    if (std::find(methods_.begin(), methods_.end(), method) == methods_.end()) {
      methods_.push_back(method);
    }
  }
  methods_.emplace_back(kOtherMethod);
  targets_ = {"router", "split", "fanout"};
  for (const std::string& target : upstreams) {
    if (std::find(targets_.begin(), targets_.end(), target) == targets_.end()) {
      targets_.push_back(target);
    }
  }
  for (size_t i = 0; i < methods_.size(); ++i) method_ids_[methods_[i]] = static_cast<int>(i);
  for (size_t i = kFanoutTarget + 1; i < targets_.size(); ++i) {
    target_ids_[targets_[i]] = static_cast<int>(i);
  }
  const size_t series = methods_.size() * targets_.size() * kRpcOutcomeCount;
  requests_ = std::make_unique<std::atomic<Counter*>[]>(series);
  for (size_t i = 0; i < series; ++i) requests_[i].store(nullptr);
  latency_ = std::make_unique<std::atomic<Histogram*>[]>(methods_.size());
  for (size_t i = 0; i < methods_.size(); ++i) latency_[i].store(nullptr);
}

int RpcCallMetrics::MethodId(std::string_view method) const {
  auto it = method_ids_.find(method);
  return it == method_ids_.end() ? static_cast<int>(methods_.size() - 1) : it->second;
}

int RpcCallMetrics::TargetId(std::string_view target) const {
  auto it = target_ids_.find(target);
  return it == target_ids_.end() ? kRouterTarget : it->second;
}

void RpcCallMetrics::Preregister(int method, int target, RpcOutcome outcome) {
  RegisterRequests((static_cast<size_t>(method) * targets_.size() + target) * kRpcOutcomeCount +
                   static_cast<size_t>(outcome));
}

Counter* RpcCallMetrics::RegisterRequests(size_t index) {
  absl::MutexLock lock(&register_mu_);
  if (Counter* existing = requests_[index].load(std::memory_order_acquire)) return existing;
  const size_t outcome = index % kRpcOutcomeCount;
  const size_t target = index / kRpcOutcomeCount % targets_.size();
  const size_t method = index / kRpcOutcomeCount / targets_.size();
  Counter* counter = &registry_->AddCounter(
      "switchyard_rpc_requests_total",
      "JSON-RPC calls (batch elements one by one) by method (\"other\" for methods outside the "
      "catalogue), the upstream group that answered (router: the router itself; split: parts "
      "on several groups; fanout: asked of base and every ER) and outcome",
      {{"method", methods_[method]},
       {"target", targets_[target]},
       {"outcome", std::string(RpcOutcomeName(static_cast<RpcOutcome>(outcome)))}});
  requests_[index].store(counter, std::memory_order_release);
  return counter;
}

Histogram* RpcCallMetrics::RegisterLatency(int method) {
  absl::MutexLock lock(&register_mu_);
  if (Histogram* existing = latency_[method].load(std::memory_order_acquire)) return existing;
  Histogram* histogram = &registry_->AddHistogram(
      "switchyard_rpc_latency_seconds",
      "Time from the HTTP request to the answer of each JSON-RPC call, by method",
      LatencyBucketsSeconds(), {{"method", methods_[method]}});
  latency_[method].store(histogram, std::memory_order_release);
  return histogram;
}

}  // namespace switchyard
