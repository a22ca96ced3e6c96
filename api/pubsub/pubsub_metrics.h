#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "common/metrics.h"

namespace switchyard {

// Every metric of the pubsub side of api/ (pubsub_server, pubsub_router, pubsub_upstream),
// declared here with its help text, on the same registry as ApiMetrics. Built once, with the
// upstream target names the per-target gauges are made for; the registry must outlive it. Any
// thread may update the metrics.
struct PubsubMetrics {
  PubsubMetrics(MetricsRegistry& registry, const std::vector<std::string>& targets);

  Counter& connections_accepted;
  Counter& connections_upgraded;  // of which came through an HTTP Upgrade
  Counter& connections_rejected;  // over max_connections
  Gauge& connections_open;
  Counter& slow_consumers;  // disconnected: their send queue went over its bound
  Counter& subscription_limit_rejections;
  Counter& client_messages;            // messages read from clients
  Counter& client_bad_messages;        // of which were not a usable JSON-RPC request
  Counter& client_oversized_messages;  // over max_message_bytes: closed with 1009
  Counter& client_protocol_errors;     // broke the WebSocket protocol (bad UTF-8: 1007, ...)
  Counter& notifications_sent;         // notifications queued to clients, one per client
  Counter& upstream_notifications;
  Counter& duplicates_dropped;  // upstream notifications already covered by a baseline
  Counter& baselines_read;      // account baselines read (after any upstream accountSubscribe)
  Counter& baselines_sent;      // notifications made from a baseline after a switch or reconnect
  Counter& switches;            // accountSubscribe moved to another chain
  Counter& switch_failures;
  Counter& upstream_disconnects;
  Counter& upstream_reconnects;   // a lost upstream connection opened again
  Counter& upstream_failures;     // upstream connections given up after retrying
  Counter& subscriptions_failed;  // client subscriptions closed with an error
  Counter& signature_fanouts;     // signatureSubscribe sent to base and every ER
  Histogram& switch_seconds;      // from the new snapshot to the switch

  // Client subscriptions by method ("account", "slot", ...).
  Gauge& ClientSubscriptions(std::string_view method);
  // Live upstream subscriptions by method and target.
  Gauge& UpstreamSubscriptions(std::string_view method, std::string_view target);

 private:
  absl::flat_hash_map<std::string, Gauge*> client_by_method_;
  absl::flat_hash_map<std::string, Gauge*> upstream_by_method_target_;
  Gauge* other_ = nullptr;
};

}  // namespace switchyard
