#pragma once

#include <boost/asio/io_context.hpp>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "api/consistency_gate.h"
#include "api/router.h"
#include "api/rpc_merge.h"

namespace switchyard {

// The request pipeline of one worker: parse, gate, route, forward, merge. Lives on the
// worker's thread; see RouterContext for what it shares.
class Router : public RequestHandler {
 public:
  Router(boost::asio::io_context& io_context, RouterContext* context,
         std::unique_ptr<UpstreamSet> upstreams);
  ~Router() override;

  void Handle(HttpRequest request, Done done) override;
  void Shutdown() override;
  std::vector<std::pair<std::string, std::string>> LocalAnswerHeaders() override;

 private:
  struct Exchange;
  using Answer = std::function<void(std::string)>;
  using Gathered = std::function<void(std::vector<absl::StatusOr<UpstreamAnswer>>)>;

  void Dispatch(std::shared_ptr<Exchange> exchange);
  void Finish(const std::shared_ptr<Exchange>& exchange);
  void Execute(std::shared_ptr<Exchange> exchange, size_t index, int round);
  void Forward(const std::string& target, const RpcCall& call, std::shared_ptr<Exchange> exchange,
               Answer done);
  void SplitAccounts(const RouteDecision& decision, std::shared_ptr<Exchange> exchange,
                     size_t index, Answer done);
  void Signatures(const RouteDecision& decision, std::shared_ptr<Exchange> exchange, size_t index,
                  Answer done);
  void FetchLookupTables(const std::vector<Pubkey>& tables, std::function<void()> then);
  // Forward with owner verification: base showing the delegation program as owner → the
  // account's ER (found through its delegation record); an ER answering "not found" for a
  // delegated account → base.
  void ForwardVerified(const RouteDecision& decision, std::shared_ptr<Exchange> exchange,
                       size_t index, Answer done);
  void RouterMethod(std::shared_ptr<Exchange> exchange, size_t index, Answer done);
  // Sends each (target, body) and hands back the parsed answers in the same order.
  void Gather(std::vector<std::pair<std::string, std::string>> requests, RetryPolicy policy,
              Gathered done);

  boost::asio::io_context& io_context_;
  RouterContext* context_;
  const RouterOptions& options_;
  ApiMetrics* metrics_;
  std::unique_ptr<UpstreamSet> upstreams_;
  std::shared_ptr<ConsistencyGate> gate_;
  uint64_t listener_id_ = 0;
};

// One HTTP request in flight: its calls, the snapshot they are routed against and the
// answers as they arrive.
struct Router::Exchange {
  RpcBody body;
  Done done;
  std::shared_ptr<const Snapshot> snapshot;
  std::vector<std::string> answers;
  size_t remaining = 0;
  absl::Duration start;
};

}  // namespace switchyard
