#pragma once

#include <boost/asio/io_context.hpp>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "api/metrics/api_metrics.h"
#include "api/upstream/upstream_client.h"
#include "common/url.h"

namespace boost::asio::ssl {
class context;
}

namespace switchyard {

namespace upstream_internal {
class UpstreamConnection;
}

struct UpstreamEndpoint {
  std::string url;  // http://host:port/path or https://...
  uint32_t weight = 1;
};

// A named group of endpoints: "base", an ER, or any other group (an indexer).
struct UpstreamTarget {
  std::string name;
  std::vector<UpstreamEndpoint> endpoints;
};

struct UpstreamOptions {
  absl::Duration request_timeout = absl::Seconds(10);  // connect + write + read, per attempt
  size_t max_connections_per_endpoint = 64;            // per worker
  size_t max_idle_per_endpoint = 64;                   // kept-alive connections, per worker
  // Requests that find every connection busy wait for one, in order, up to this many per
  // endpoint and worker (beyond, they fail at once); a wait counts against the timeout.
  size_t max_waiting_per_endpoint = 4096;
  absl::Duration max_idle_time = absl::Seconds(20);
  size_t max_response_bytes = 64 << 20;
  bool verify_tls = true;
};

// An HTTP endpoint's URL (common/url.h): http:// or https:// only.
using ParsedUrl = Url;
absl::StatusOr<ParsedUrl> ParseUpstreamUrl(std::string_view url);

// The endpoints of one target as one worker sees them: smooth weighted round-robin, a bounded
// keep-alive pool per endpoint, a timeout per attempt and at most one retry. Owned by one
// worker; every call is made on that worker's thread, and callbacks run there.
class UpstreamPool {
 public:
  UpstreamPool(boost::asio::io_context& io_context, std::string name,
               std::vector<UpstreamEndpoint> endpoints, std::vector<ParsedUrl> urls,
               const UpstreamOptions& options, boost::asio::ssl::context* tls, ApiMetrics* metrics);
  ~UpstreamPool();

  // POSTs `body` (a JSON-RPC request) and calls `done` once, with the HTTP answer or with
  // Unavailable/DeadlineExceeded after the allowed attempts failed.
  void Send(std::string body, RetryPolicy policy, UpstreamCallback done);
  // Closes every connection; later Sends fail.
  void Shutdown();

  const std::string& name() const { return name_; }

  struct Endpoint;
  using Connection = upstream_internal::UpstreamConnection;

 private:
  struct Attempt;
  struct SweepTimer;
  size_t PickEndpoint(size_t exclude);
  void Run(std::shared_ptr<Attempt> attempt);
  // Sends the attempt on endpoint `index`: an idle connection, a new one, or a place in the
  // endpoint's wait queue.
  void StartOn(size_t index, std::shared_ptr<Attempt> attempt);
  void ExchangeOn(size_t index, std::shared_ptr<Connection> connection,
                  std::shared_ptr<Attempt> attempt);
  // A connection of endpoint `index` is free (`connection`) or was closed (null): the first
  // waiter still within its timeout gets it, or a new connection in its place.
  void ServeWaiter(size_t index, std::shared_ptr<Connection> connection);
  // The attempt failed: once more where its policy allows, else its callback gets `status`.
  void Fail(std::shared_ptr<Attempt> attempt, absl::Status status);
  // Deadlines: one timer per pool, not one per exchange. While any exchange is in flight it
  // fires every tick and times out the connections past their deadline.
  void ArmSweep();
  void Sweep();

  boost::asio::io_context& io_context_;
  std::string name_;
  std::vector<std::unique_ptr<Endpoint>> endpoints_;
  const UpstreamOptions& options_;
  boost::asio::ssl::context* tls_;
  ApiMetrics* metrics_;
  UpstreamTargetMetrics target_metrics_;
  std::shared_ptr<SweepTimer> sweep_timer_;
  bool sweep_armed_ = false;
  bool shut_down_ = false;
};

// Every target's pool of one worker.
class UpstreamSet : public UpstreamClient {
 public:
  // Fails with InvalidArgument naming a target or URL that cannot be used.
  static absl::StatusOr<std::unique_ptr<UpstreamSet>> Create(
      boost::asio::io_context& io_context, const std::vector<UpstreamTarget>& targets,
      const UpstreamOptions& options, boost::asio::ssl::context* tls, ApiMetrics* metrics);

  UpstreamPool* Find(std::string_view name);
  bool Has(std::string_view target) const override;
  void Send(std::string_view target, std::string body, RetryPolicy policy,
            UpstreamCallback done) override;
  void Shutdown() override;

 private:
  absl::flat_hash_map<std::string, std::unique_ptr<UpstreamPool>> pools_;
};

// A TLS client context with the system's trust store; shared by every worker.
std::unique_ptr<boost::asio::ssl::context> MakeClientTlsContext(bool verify);

}  // namespace switchyard
