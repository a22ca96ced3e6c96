#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "common/metrics.h"
#include "engine/account_state.h"
#include "engine/event_log.h"
#include "ingest/base_clients.h"
#include "ingest/chain_view.h"
#include "ingest/failover.h"
#include "solana/delegation.h"

namespace switchyard {

// One base-layer node (or balancer) the watcher can follow: its JSON-RPC and its pubsub.
struct WatcherEndpoint {
  std::string url;  // http(s)://HOST[:PORT][/PATH] of the base layer's JSON-RPC
  // ws(s)://HOST[:PORT][/PATH]; empty: derived from url as Solana clients do it (the same
  // host over ws/wss, on the port + 1 when url names a port).
  std::string pubsub_url;
};

struct WatcherOptions {
  // In order of preference; at least one. The watcher follows one at a time (the active one,
  // the first at start) for both its reads and its stream, and fails over to another when the
  // active one dies or lags (docs/architecture.md §6).
  std::vector<WatcherEndpoint> endpoints;
  BaseTlsOptions tls;  // for https and wss
  absl::Duration request_timeout = absl::Seconds(5);
  // No message (not even a slot notification) for this long means the stream is lost.
  absl::Duration silence_timeout = absl::Seconds(10);
  absl::Duration reconnect_min = absl::Milliseconds(100);
  absl::Duration reconnect_max = absl::Seconds(10);
  // A session that stayed up this long after its backfill was healthy: the reconnect
  // backoff starts again from reconnect_min.
  absl::Duration healthy_session = absl::Seconds(10);
  // A failed read of the base layer (transport, timeout, HTTP 5xx or 429, a node error) is
  // tried again inside the session, up to read_attempts in all, with a backoff from
  // read_backoff_min doubling to read_backoff_max (or the 429's Retry-After, up to
  // max_retry_after). Only then does the session end with StreamGap.
  int read_attempts = 6;
  absl::Duration read_backoff_min = absl::Milliseconds(50);
  absl::Duration read_backoff_max = absl::Seconds(2);
  absl::Duration max_retry_after = absl::Seconds(5);
  absl::Duration reconcile_interval = absl::Seconds(60);
  // On slotNotification(S), seal S - seal_lag: the notifications of one slot may arrive
  // after the next slot's on some validators.
  uint64_t seal_lag = 1;
  uint64_t jitter_seed = 0;  // 0: from the clock
  // The last slot sealed in the log before this watcher started (a restart): seals never go
  // below it, and the watcher first writes StreamGap at it, since the stream was lost while
  // no watcher ran.
  Slot resume_after_slot = 0;
  // With several endpoints: getSlot of every endpoint each probe_interval, on a thread of its
  // own. The active one is left when it is more than max_lag_slots behind the best other, or
  // has not advanced (or answered) for stall_probe_rounds rounds while another advanced.
  absl::Duration probe_interval = absl::Seconds(1);
  uint64_t max_lag_slots = 50;
  int stall_probe_rounds = 3;
  // With several endpoints: this many sessions in a row on one endpoint that end before their
  // backfill completes (the WebSocket cannot connect, or drops again at once) make the
  // watcher move on, as does a read that fails after its read_attempts.
  int failed_sessions_before_failover = 1;
};

// The watcher's metrics, declared in one place.
struct WatcherMetrics {
  explicit WatcherMetrics(MetricsRegistry& registry);
  Counter& events_written;
  Counter& seals_written;
  Counter& stream_gaps;
  Counter& reconnects;
  Counter& corrections;
  Counter& malformed;
  Counter& notifications;
  Counter& read_retries;
  Counter& stale_connections;
  Counter& log_append_errors;
  Gauge& last_sealed_slot;
  Gauge& active_endpoint;  // index in WatcherOptions::endpoints
  Counter& failovers_dead;
  Counter& failovers_lag;
  // getSignaturesForAddress of a delegation record, by what it told: the Delegate found, no
  // such transaction in the node's history (pruned), or the read failed.
  Counter& signature_lookups_found;
  Counter& signature_lookups_unknown;
  Counter& signature_lookups_failed;

  // The last slot the probes read from endpoint `index` (registered on first use).
  Gauge& ProbedSlot(size_t index);

 private:
  MetricsRegistry& registry_;
  absl::Mutex mu_;
  std::vector<Gauge*> probed_slots_ ABSL_GUARDED_BY(mu_);
};

// Watches the base layer and writes delegation events (docs/architecture.md §5) through an
// EventLogWriter: a backfill at start, then programSubscribe (records), logsSubscribe +
// getTransaction (Delegate and Undelegate instructions; undelegations are only seen there),
// slotSubscribe (SlotSealed once every event up to the slot is acknowledged), periodic
// reconciliation, and StreamGap / reconnect with backoff / Resynced when the stream is lost.
//
// It keeps its own view of the delegations it has written (seeded with the folded state at
// start), and writes only events that change that view, so the same delegation seen twice is
// written once and a restart rewrites nothing the fold would not ignore.
// With several endpoints it follows one at a time and fails over as WatcherOptions says; a
// switch is a lost stream (StreamGap) followed by the new endpoint's backfill (Resynced),
// never a splice of two streams.
// Owns one thread between Start() and Stop() (two with several endpoints: the prober's);
// the threads block on their own sockets only.
class BaseLayerWatcher {
 public:
  BaseLayerWatcher(WatcherOptions options, EventLogWriter* log,
                   std::map<Pubkey, AccountState> initial_view, const Clock* clock,
                   WatcherMetrics* metrics);
  ~BaseLayerWatcher();

  absl::Status Start();
  void Stop();

  // The highest slot sealed so far (0 before the first seal).
  Slot last_sealed_slot() const { return last_sealed_.load(); }
  // The context slot of the last completed reconciliation (backfill or periodic).
  Slot last_resync_slot() const { return last_resync_.load(); }
  // The index in WatcherOptions::endpoints of the endpoint in use.
  size_t active_endpoint() const { return active_.load(); }
  // Why the last append to the log failed (a full disk under the embedded log); empty once
  // an append succeeds again. Any thread.
  std::string append_error() const;

 private:
  // Why a session ended, for the failover decision.
  enum class SessionEnd { kOther, kStream, kRead, kProbes };
  struct ResolvedEndpoint {
    BaseEndpoint rpc;
    BaseEndpoint pubsub;
  };

  void Run();
  // Probes every endpoint each probe_interval and publishes the move they call for.
  void ProbeLoop();
  // Makes `target` the active endpoint (a new RPC client) and counts the failover.
  void SwitchTo(size_t target, FailoverReason reason);
  // The prober's plan for the active endpoint, when it calls for a move.
  std::optional<FailoverPlan> PlannedMove();
  // One connection's life: subscribe, backfill (a full reconciliation), then follow the stream
  // until it fails. Returns why it ended.
  absl::Status Session();
  // A read of the base layer, tried again inside the session as WatcherOptions says.
  absl::StatusOr<std::string> CallBase(const std::string& method, const std::string& params);
  // Compares the program's accounts with the view and writes the differences, then seals
  // the context slot; a backfill (not periodic) also writes Resynced.
  absl::Status Resync(bool periodic);
  absl::Status HandleMessage(std::string_view message);
  absl::Status HandleProgramAccount(const Pubkey& pubkey, std::string data);
  absl::Status HandleLogs(const std::string& signature);
  // The transaction that created the delegation record of `event` (a Delegate at its
  // delegation slot), from getSignaturesForAddress of the record; nullopt when the node's
  // history no longer has it or the read failed (counted either way, never an error).
  std::optional<Signature> FindDelegateSignature(const DelegatedEvent& event);
  // Writes the delegations read from program notifications that no transaction of the logs
  // has claimed, each with the signature FindDelegateSignature finds.
  absl::Status ResolveAwaitingSignatures();
  // Whether writing `event` would change the view (Write writes only those).
  bool Changes(const Event& event) const;
  // The delegation record in a getAccountInfo answer; nullopt when there is none (counted
  // as malformed when the account is there but is no record).
  std::optional<DelegationRecord> RecordInAccountInfo(std::string_view body);
  // Writes the buffered events and SlotSealed(slot) in one append, and waits for the acks.
  absl::Status Seal(Slot slot);
  // Buffers the events that change the view; they go out with the next seal or marker.
  absl::Status Write(const std::vector<Event>& events);
  absl::Status Flush(const std::vector<Event>& markers);
  absl::Status WriteMarker(const Event& marker);
  // The account as the view plus the buffered events have it, or null.
  const AccountState* Known(const Pubkey& account) const;
  void CountMalformed(const std::string& kind, const std::string& detail);

  const WatcherOptions options_;
  EventLogWriter* const log_;
  const Clock* const clock_;
  WatcherMetrics* const metrics_;
  const FailoverPolicy policy_;
  std::vector<ResolvedEndpoint> endpoints_;
  std::unique_ptr<BaseRpcClient> rpc_;  // of the active endpoint

  // Touched only by the watcher's thread.
  std::map<Pubkey, AccountState> view_;  // as acknowledged by the log
  std::map<Pubkey, AccountState> unflushed_view_;
  std::vector<OutgoingRecord> unflushed_;
  uint64_t unflushed_events_ = 0;
  absl::flat_hash_map<Pubkey, DelegationRecord> records_by_pda_;
  absl::flat_hash_map<Pubkey, Pubkey> account_by_pda_;
  // Delegations paired from program notifications, waiting for the Delegate of the logs that
  // carries their signature; resolved at the next seal.
  std::map<Pubkey, DelegatedEvent> awaiting_signature_;
  // Whether a stream was lost since this watcher started (or before, on a restart): the next
  // backfill repairs, rather than starts, the log.
  bool after_gap_ = false;
  absl::flat_hash_map<std::string, uint64_t> malformed_kinds_;
  absl::Duration next_reconcile_;
  // When the current session finished its backfill (unset before).
  std::optional<absl::Duration> session_healthy_since_;
  std::mt19937_64 jitter_;
  SessionEnd session_end_ = SessionEnd::kOther;
  FailoverPlan probe_plan_;  // the plan a session ended for (kProbes)
  int failed_sessions_ = 0;  // in a row on the active endpoint

  // Written by the watcher's thread, read by the prober's.
  std::atomic<size_t> active_{0};
  absl::Mutex probe_mu_;
  std::vector<EndpointProbe> probes_ ABSL_GUARDED_BY(probe_mu_);
  // The prober's verdict on the active endpoint it judged; the watcher acts on it between
  // two reads of its stream.
  std::optional<FailoverPlan> planned_ ABSL_GUARDED_BY(probe_mu_);
  size_t planned_for_ ABSL_GUARDED_BY(probe_mu_) = 0;
  std::atomic<bool> plan_pending_{false};  // planned_ is set: the stream's loop looks no further

  mutable absl::Mutex append_error_mu_;
  std::string append_error_ ABSL_GUARDED_BY(append_error_mu_);

  std::atomic<Slot> last_sealed_{0};
  std::atomic<Slot> last_resync_{0};
  std::atomic<bool> stopping_{false};
  absl::Notification stop_requested_;
  std::thread thread_;
  std::thread prober_;
};

}  // namespace switchyard
