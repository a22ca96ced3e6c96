#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "common/metrics.h"
#include "common/pubkey.h"
#include "ingest/base_clients.h"
#include "ingest/chain_view.h"
#include "solana/er_record.h"

namespace switchyard {

// Where the registry's changes go (the router's ER directory, wired by the app). Called on the
// registry watcher's thread; must not block.
class ErRegistrySink {
 public:
  virtual ~ErRegistrySink() = default;
  // Every ER the registry holds now (a full read): any other is gone.
  virtual void ReplaceAll(const std::vector<ErRecord>& records) = 0;
  virtual void Upsert(const ErRecord& record) = 0;
  virtual void Remove(const Pubkey& identity) = 0;
};

struct ErRegistryWatcherOptions {
  std::string url;         // the base layer's JSON-RPC, http(s)://
  std::string pubsub_url;  // empty: derived from url as Solana clients do
  BaseTlsOptions tls;
  Pubkey program = MagicDomainProgramId();
  absl::Duration request_timeout = absl::Seconds(5);
  // A full getProgramAccounts this often: a closed record is seen here (a program
  // subscription does not notify when an account leaves the program).
  absl::Duration resync_interval = absl::Seconds(30);
  absl::Duration reconnect_min = absl::Milliseconds(100);
  absl::Duration reconnect_max = absl::Seconds(10);
};

// The registry watcher's metrics, declared in one place.
struct ErRegistryMetrics {
  explicit ErRegistryMetrics(MetricsRegistry& registry);
  Gauge& records;             // ERs the registry lists, as last read
  Counter& unknown_versions;  // records of a version this build does not know
  Counter& malformed;         // records that do not decode, or not at their identity's PDA
  Counter& notifications;     // program notifications read
  Counter& resyncs;           // full reads
  Counter& session_failures;  // lost subscriptions and failed reads
};

// Follows the Magic Domain Program's ER records on the base layer (docs/architecture.md §20):
// programSubscribe of the program, then getProgramAccounts (the whole set), then each
// notification as it comes and a full read every resync_interval. A record with 0 lamports, no
// data or another owner removes its ER; a record that does not decode keeps the last one read
// at its address (unknown versions and malformed records are counted and logged once per
// address). A lost connection or a failed read is retried with a capped exponential backoff.
// Owns one thread between Start() and Stop(); it blocks on its own sockets only.
class ErRegistryWatcher {
 public:
  ErRegistryWatcher(ErRegistryWatcherOptions options, ErRegistrySink* sink,
                    ErRegistryMetrics* metrics);
  ~ErRegistryWatcher();

  // InvalidArgument for a URL that cannot be used.
  absl::Status Start();
  void Stop();

 private:
  // What one account of the program stands for.
  enum class Reading { kRecord, kGone, kUnreadable };
  void Run();
  absl::Status Session();
  absl::Status Resync();
  // Decodes one account; a record goes to `record`.
  Reading Read(const ChainAccount& account, ErRecord* record);
  void OnAccount(const ChainAccount& account);
  bool Sleep(absl::Duration duration);

  const ErRegistryWatcherOptions options_;
  ErRegistrySink* const sink_;
  ErRegistryMetrics* const metrics_;
  BaseEndpoint rpc_;
  BaseEndpoint pubsub_;
  std::unique_ptr<BaseRpcClient> client_;
  // By record address: the last record read there, and the addresses already logged as
  // unreadable.
  absl::flat_hash_map<Pubkey, ErRecord> last_good_;
  absl::flat_hash_set<Pubkey> logged_;
  std::atomic<bool> stopping_{false};
  absl::Mutex sleep_mu_;
  std::thread thread_;
};

}  // namespace switchyard
