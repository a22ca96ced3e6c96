#pragma once

#include "common/metrics.h"

namespace switchyard {

// Every metric of api/, declared here with its help text. Built once from the registry,
// which must outlive it; any thread may update them.
struct ApiMetrics {
  explicit ApiMetrics(MetricsRegistry& registry);

  Counter& connections_accepted;
  Counter& connections_rejected;  // over max_connections
  Gauge& connections_open;
  Counter& http_requests;
  Counter& http_body_too_large;    // answered 413
  Counter& http_bad_requests;      // malformed HTTP
  Counter& http_timeouts;          // connections closed by a timeout
  Counter& rpc_calls;              // JSON-RPC calls, batch elements counted one by one
  Counter& rpc_errors;             // calls answered with an error by the router
  Counter& rpc_split_accounts;     // getMultipleAccounts split over several targets
  Counter& rpc_signature_fanouts;  // unknown signatures asked of everyone
  Counter& upstream_requests;
  Counter& upstream_failures;  // connection errors and timeouts
  Counter& upstream_retries;
  Counter& gate_waits;       // calls that waited for the applied slot
  Counter& gate_rejections;  // answered 412
  Counter& owner_reroutes;   // owner verification re-asked another target
  Counter& lookup_table_fetches;
  Histogram& rpc_latency_seconds;
};

}  // namespace switchyard
