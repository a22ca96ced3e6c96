#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "api/metrics/api_metrics.h"
#include "api/rpc/router.h"
#include "api/upstream/probe_loop.h"
#include "api/upstream/upstream.h"
#include "common/metrics.h"

namespace switchyard {

struct ErProbeOptions {
  bool enabled = true;
  // MagicBlock's router pings each ER every 30 s.
  absl::Duration interval = absl::Seconds(30);
  absl::Duration timeout = absl::Seconds(5);
};

// The latency probe of the ERs (docs/architecture.md §20): every `interval`, one getIdentity
// to each ER of the directory that is not Offline, on a thread and io_context of its own with
// pools of its own (never the request path's); each round trip, or a failure (no answer
// within `timeout`, an HTTP error, a JSON-RPC error), goes to ErDirectory::ReportProbe, which
// keeps the EWMA and the reachability. An answer naming another validator's identity goes to
// ReportWrongIdentity: that endpoint serves someone else, so the ER is unreachable and its
// accounts are refused until it answers as itself. A probe still out when the next round comes
// is not sent again. Owned by the app; Start() and Stop() from one control thread.
class ErProber {
 public:
  ErProber(ErProbeOptions options, RouterContext* router, MetricsRegistry* registry);
  ~ErProber();
  ErProber(const ErProber&) = delete;
  ErProber& operator=(const ErProber&) = delete;

  absl::Status Start();
  void Stop();

 private:
  void Round();

  const ErProbeOptions options_;
  RouterContext* const router_;
  UpstreamOptions upstream_options_;
  // The probes' own upstream counters, kept apart from the API's request counters.
  MetricsRegistry probe_registry_;
  ApiMetrics probe_metrics_;
  Counter& request_bytes_;
  Counter& answer_bytes_;
  absl::flat_hash_set<Pubkey> in_flight_;  // loop thread only
  ProbeLoop loop_;  // last: stopped first, while what its pools and callbacks use is there
};

}  // namespace switchyard
