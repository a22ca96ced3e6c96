#include "api/pubsub/pubsub_metrics.h"

#include "api/jsonrpc/pubsub_json.h"
#include "fmt/format.h"

namespace switchyard {

PubsubMetrics::PubsubMetrics(MetricsRegistry& r, const std::vector<std::string>& targets)
    : connections_accepted(r.AddCounter("switchyard_pubsub_connections_accepted_total",
                                        "Pubsub WebSocket connections accepted")),
      connections_upgraded(
          r.AddCounter("switchyard_pubsub_connections_upgraded_total",
                       "Pubsub connections that came through an Upgrade on the HTTP port")),
      connections_rejected(r.AddCounter("switchyard_pubsub_connections_rejected_total",
                                        "Pubsub connections closed at once: over the limit")),
      connections_open(
          r.AddGauge("switchyard_pubsub_connections_open", "Open pubsub WebSocket connections")),
      slow_consumers(
          r.AddCounter("switchyard_pubsub_slow_consumers_total",
                       "Pubsub clients disconnected because their send queue went over its bound")),
      subscription_limit_rejections(
          r.AddCounter("switchyard_pubsub_subscription_limit_rejections_total",
                       "Subscribe calls refused: the connection has its maximum")),
      client_messages(r.AddCounter("switchyard_pubsub_client_messages_total",
                                   "Messages read from pubsub clients")),
      client_bad_messages(r.AddCounter("switchyard_pubsub_client_bad_messages_total",
                                       "Client messages that were not a usable request")),
      client_oversized_messages(
          r.AddCounter("switchyard_pubsub_client_oversized_messages_total",
                       "Client connections closed (1009) for a frame or message over "
                       "max_message_bytes")),
      client_protocol_errors(r.AddCounter(
          "switchyard_pubsub_client_protocol_errors_total",
          "Client connections closed for breaking the WebSocket protocol (a text message that "
          "is not UTF-8: 1007, a bad frame: 1002)")),
      notifications_sent(r.AddCounter("switchyard_pubsub_notifications_sent_total",
                                      "Notifications queued to clients, one per client")),
      upstream_notifications(r.AddCounter("switchyard_pubsub_upstream_notifications_total",
                                          "Notifications received from upstreams")),
      duplicates_dropped(r.AddCounter(
          "switchyard_pubsub_duplicates_dropped_total",
          "Upstream notifications dropped: already covered by a baseline or a switch")),
      baselines_read(r.AddCounter("switchyard_pubsub_baselines_read_total",
                                  "Account baselines (getMultipleAccounts) read after an "
                                  "accountSubscribe became live upstream")),
      baselines_sent(
          r.AddCounter("switchyard_pubsub_baselines_sent_total",
                       "Account notifications made from a baseline after a switch or reconnect")),
      switches(r.AddCounter("switchyard_pubsub_switches_total",
                            "accountSubscribe subscriptions moved to another chain after a "
                            "delegation change")),
      switch_failures(r.AddCounter("switchyard_pubsub_switch_failures_total",
                                   "Switch attempts that failed (retried on the next snapshot)")),
      upstream_disconnects(r.AddCounter("switchyard_pubsub_upstream_disconnects_total",
                                        "Upstream pubsub connections lost")),
      upstream_reconnects(r.AddCounter(
          "switchyard_pubsub_upstream_reconnects_total",
          "Lost upstream pubsub connections opened again, their subscriptions re-created")),
      upstream_failures(
          r.AddCounter("switchyard_pubsub_upstream_failures_total",
                       "Upstream pubsub connections given up after retrying; their client "
                       "subscriptions got an error")),
      subscriptions_failed(r.AddCounter("switchyard_pubsub_subscriptions_failed_total",
                                        "Client subscriptions closed with an error")),
      signature_fanouts(r.AddCounter("switchyard_pubsub_signature_fanouts_total",
                                     "signatureSubscribe calls sent to base and every ER")),
      switch_seconds(r.AddHistogram("switchyard_pubsub_switch_seconds",
                                    "From the snapshot that moved an account to its switch",
                                    LatencyBucketsSeconds())) {
  for (const PubsubMethod& method : PubsubMethods()) {
    const std::string label(method.label);
    client_by_method_[label] =
        &r.AddGauge("switchyard_pubsub_client_subscriptions",
                    "Client subscriptions by method (identical ones of one connection count once)",
                    {{"method", label}});
    for (const std::string& target : targets) {
      upstream_by_method_target_[fmt::format("{}|{}", label, target)] =
          &r.AddGauge("switchyard_pubsub_upstream_subscriptions",
                      "Live upstream subscriptions by method and target",
                      {{"method", label}, {"target", target}});
    }
  }
  other_ = &r.AddGauge("switchyard_pubsub_upstream_subscriptions",
                       "Live upstream subscriptions by method and target",
                       {{"method", "other"}, {"target", "other"}});
}

Gauge& PubsubMetrics::ClientSubscriptions(std::string_view method) {
  auto it = client_by_method_.find(std::string(method));
  return it == client_by_method_.end() ? *other_ : *it->second;
}

Gauge& PubsubMetrics::UpstreamSubscriptions(std::string_view method, std::string_view target) {
  auto it = upstream_by_method_target_.find(fmt::format("{}|{}", method, target));
  return it == upstream_by_method_target_.end() ? *other_ : *it->second;
}

}  // namespace switchyard
