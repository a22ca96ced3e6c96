#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "api/routing/route_decision.h"
#include "common/metrics.h"
#include "common/pubkey.h"
#include "solana/er_record.h"

namespace switchyard {

// An ER as getRoutes describes it, and the target its requests go to.
struct ErRoute {
  Pubkey identity;
  std::string target;  // the UpstreamTarget name
  std::string fqdn;
  uint64_t base_fee = 0;
  uint64_t block_time_ms = 50;
  std::string country_code;
  // A configured ER the registry may not change: its record's status (and its closing) are
  // ignored. Without it, a record of the same identity sets the ER's status; the configured
  // target and fields still win.
  bool pinned = false;
};

// What the latency probe knows of one ER (docs/architecture.md §20).
struct ErLatency {
  bool measured = false;  // at least one probe answered
  double ewma_ms = 0;     // 0.85 old + 0.15 new; the first answer sets it
  double last_ms = 0;     // the last answer's round trip
  int failures = 0;       // failed probes in a row
  bool reachable = true;  // false after `failures_unreachable` failures in a row
  // The last probe was answered by another validator: its endpoint serves someone else, so
  // its accounts are refused instead of sent there. Cleared by an answer with its identity.
  std::optional<Pubkey> answered_as;
  uint64_t probes = 0;
  uint64_t probe_failures = 0;
};

// One ER of the directory: where it is, what its record says, how far away it is.
struct ErEntry {
  ErRoute route;
  ErStatus status = ErStatus::kActive;
  bool configured = false;  // an [[ers]] entry
  bool registered = false;  // the registry holds a record of it
  std::string url;          // a discovered ER's endpoint (empty for configured ones)
  uint32_t load_average = 0;
  std::array<uint8_t, 32> features{};
  ErLatency latency;
};

// The ERs as one immutable table: the routing table the request path decides with (its
// er_by_identity, er_targets, offline_ers and default_er, the ER for "any ER", filled from the
// ERs below) and every ER's entry. Published by ErDirectory; any thread may read it.
struct ErTable {
  uint64_t generation = 0;
  RoutingTable routing;
  std::vector<ErEntry> ers;  // configured ones first in config order, then by identity
  // The closest reachable Active ER (by latency EWMA; never probed counts as farthest), or
  // -1 when there is none.
  int closest = -1;
  // The ER new work goes to (getIdentity, getClosestValidator, "any ER"): routing.default_er
  // pinned in the config, else the closest. -1: none.
  int chosen = -1;

  const ErEntry* Find(const Pubkey& identity) const;
  const ErEntry* FindTarget(std::string_view target) const;
};

// The ERs of `table` as /status shows them: a JSON array of {identity, target, fqdn, status,
// configured, registered, pinned, chosen, closest, reachable, latency_ewma_ms, last_ms,
// failures, probes, probe_failures, load_average}.
std::string ErStatusJson(const ErTable& table);

struct ErDirectoryOptions {
  double ewma_keep = 0.85;  // the weight of the old EWMA on each new sample
  int failures_unreachable = 3;
};

// The runtime table of ERs: the configured [[ers]] merged with the Magic Domain Program's
// records (ReplaceRegistry / UpsertRecord / RemoveRecord, from the registry watcher) and the
// latency probe's results (ReportProbe). Each change publishes a new ErTable with one atomic
// store; the request path reads it with Current(), one atomic load and no lock. Owned by the
// RouterContext; every method is thread-safe.
class ErDirectory {
 public:
  // `routing` is the configured table (base, method rules, limits and routing.default_er, the
  // pinned ER for "any ER" when not empty); `ers` the configured ERs. `registry` may be null.
  ErDirectory(RoutingTable routing, std::vector<ErRoute> ers, ErDirectoryOptions options,
              MetricsRegistry* registry);

  std::shared_ptr<const ErTable> Current() const {
    return current_.load(std::memory_order_acquire);
  }
  // Moves with every publication.
  uint64_t generation() const { return Current()->generation; }

  // The registry's whole set of records (a getProgramAccounts): ERs it no longer lists are
  // gone (configured ones fall back to their configuration).
  void ReplaceRegistry(const std::vector<ErRecord>& records);
  void UpsertRecord(const ErRecord& record);
  void RemoveRecord(const Pubkey& identity);
  // A probe of `identity` answered after `round_trip`, or failed (nullopt).
  void ReportProbe(const Pubkey& identity, std::optional<absl::Duration> round_trip);
  // A probe of `identity` was answered by the validator `answered`: unreachable at once.
  void ReportWrongIdentity(const Pubkey& identity, const Pubkey& answered);

  // The endpoint of a discovered ER's target (empty: not a discovered target).
  std::string DiscoveredUrl(std::string_view target) const;

  // The target name of a discovered ER.
  static std::string DiscoveredTarget(const Pubkey& identity);
  // A record's addr as an HTTP URL: as it is with a scheme, else https://addr.
  static std::string UrlOfAddr(std::string_view addr);

 private:
  struct PerErMetrics {
    Gauge* ewma_us = nullptr;
    Gauge* reachable = nullptr;
    Counter* probes_ok = nullptr;
    Counter* probes_failed = nullptr;
    Counter* probes_wrong_identity = nullptr;
  };
  struct StatusCounts {
    int64_t active = 0;
    int64_t draining = 0;
    int64_t offline = 0;
  };
  void Publish() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Every ER's entry: the configured ones in config order, then the discovered by identity.
  std::vector<ErEntry> Entries() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // table.routing's ERs (by identity, targets, offline, misaddressed) and table.closest from
  // table.ers; the ERs counted by status.
  static StatusCounts FillRouting(ErTable& table);
  PerErMetrics& MetricsOf(const Pubkey& identity) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const RoutingTable configured_routing_;
  const std::vector<ErRoute> configured_;
  const ErDirectoryOptions options_;
  MetricsRegistry* const registry_;
  Gauge* ers_active_ = nullptr;
  Gauge* ers_draining_ = nullptr;
  Gauge* ers_offline_ = nullptr;
  Counter* publications_ = nullptr;

  mutable absl::Mutex mu_;
  absl::flat_hash_map<Pubkey, ErRecord> records_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<Pubkey, ErLatency> latency_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<Pubkey, PerErMetrics> metrics_ ABSL_GUARDED_BY(mu_);
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
  std::atomic<std::shared_ptr<const ErTable>> current_;
};

}  // namespace switchyard
