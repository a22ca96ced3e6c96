#include "api/api_metrics.h"

namespace switchyard {

ApiMetrics::ApiMetrics(MetricsRegistry& r)
    : connections_accepted(
          r.AddCounter("switchyard_api_connections_accepted_total", "HTTP connections accepted")),
      connections_rejected(r.AddCounter("switchyard_api_connections_rejected_total",
                                        "HTTP connections closed at once: over the limit")),
      connections_open(r.AddGauge("switchyard_api_connections_open", "Open HTTP connections")),
      http_requests(r.AddCounter("switchyard_api_http_requests_total", "HTTP requests read")),
      http_body_too_large(
          r.AddCounter("switchyard_api_http_body_too_large_total", "HTTP requests answered 413")),
      http_bad_requests(
          r.AddCounter("switchyard_api_http_bad_requests_total", "Malformed HTTP requests")),
      http_timeouts(r.AddCounter("switchyard_api_http_timeouts_total",
                                 "HTTP connections closed by an idle/header/body/write timeout")),
      rpc_calls(r.AddCounter("switchyard_api_rpc_calls_total", "JSON-RPC calls")),
      rpc_errors(r.AddCounter("switchyard_api_rpc_errors_total",
                              "JSON-RPC calls answered with an error by the router")),
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
      gate_waits(r.AddCounter("switchyard_api_gate_waits_total",
                              "Calls that waited for the applied slot to reach their minimum")),
      gate_rejections(r.AddCounter("switchyard_api_gate_rejections_total",
                                   "Calls answered 412: minimum slot not reached in time")),
      owner_reroutes(r.AddCounter("switchyard_api_owner_reroutes_total",
                                  "Reads re-asked of another target after owner verification")),
      lookup_table_fetches(r.AddCounter("switchyard_api_lookup_table_fetches_total",
                                        "Address lookup tables fetched from base")),
      rpc_latency_seconds(r.AddHistogram("switchyard_api_rpc_latency_seconds",
                                         "Time from a whole HTTP request to its answer",
                                         LatencyBucketsSeconds())) {}

}  // namespace switchyard
