#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "api/jsonrpc/rpc_merge.h"
#include "api/routing/consistency_gate.h"
#include "api/rpc/router.h"
#include "solana/delegation.h"

namespace switchyard {

struct RpcParams;

// The request pipeline of one worker: parse, gate, route, forward, merge. Lives on the
// worker's thread; see RouterContext for what it shares.
class Router : public RequestHandler {
 public:
  Router(boost::asio::io_context& io_context, RouterContext* context,
         std::unique_ptr<UpstreamClient> upstreams);
  ~Router() override;

  void Handle(HttpRequest request, Done done) override;
  void Shutdown() override;
  // A JSON-RPC invalid-request error naming `reason`, with X-Delegation-Slot.
  HttpResponse LocalAnswer(unsigned status, std::string_view reason) override;

 private:
  struct Exchange;
  struct AccountList;
  struct ListVerification;
  // The elements of an account list to re-ask, by index into the call's keys.
  struct ListReasks {
    std::vector<size_t> to_er;    // base showed the delegation program as owner
    std::vector<size_t> to_base;  // an ER did not have an account the state calls delegated
  };
  // A call's answer, with where it came from and how it ended (for the metrics).
  using Answer = std::function<void(std::string answer, CallOutcome outcome)>;
  using Gathered = std::function<void(std::vector<absl::StatusOr<UpstreamAnswer>>)>;
  using GatheredLists = std::function<void(std::vector<absl::StatusOr<ListAnswer>>)>;
  using GatheredResponses = std::function<void(std::vector<absl::StatusOr<UpstreamResponse>>)>;
  // The ER target each account's delegation record names (nullopt: no record, or no ER).
  using RecordTargets = std::function<void(std::vector<std::optional<std::string>>)>;
  // Each account's delegation record on base (nullopt: none), or why base could not say.
  using Records = std::function<void(absl::StatusOr<std::vector<std::optional<DelegationRecord>>>)>;

  // Decides every call, sends the upstream batches of the plan, then executes the other calls.
  void Dispatch(std::shared_ptr<Exchange> exchange);
  void Finish(const std::shared_ptr<Exchange>& exchange, absl::Duration now);
  // The completion of call `index`: stores its answer, counts it, and finishes the exchange
  // after its last call.
  Answer AnswerTo(const std::shared_ptr<Exchange>& exchange, size_t index);
  // The routing decision for call `index`, into exchange.decisions[index].
  void Decide(Exchange& exchange, size_t index);
  // Carries out exchange->decisions[index] (`round` 1: after its lookup tables were fetched).
  void Execute(std::shared_ptr<Exchange> exchange, size_t index, int round);
  // A kForward decision: remembers a transaction's signature, then forwards with the
  // decision's verification.
  void ExecuteForward(std::shared_ptr<Exchange> exchange, size_t index, Answer done);
  // Sends call `index` as the client wrote it to `target`; its answer is the upstream's.
  void Forward(const std::string& target, size_t index, std::shared_ptr<Exchange> exchange,
               Answer done);
  // Sends the calls of `batch` to its target as one JSON-RPC batch and answers each from its
  // element of the answer. Calls the answer does not carry (an HTTP error, an answer that is
  // not an array, ids missing) are forwarded one by one; a connection failure or timeout is
  // every call's answer.
  void ForwardBatch(std::shared_ptr<Exchange> exchange, UpstreamBatch batch);
  void SplitAccounts(std::shared_ptr<Exchange> exchange, size_t index, Answer done);
  void Signatures(std::shared_ptr<Exchange> exchange, size_t index, Answer done);
  // Signatures' answers: for getTransaction, the first non-null transaction (base, then the
  // ERs), else the first answer there is; for a signature list, each element from the first
  // answer that has it (`known_parts`: how many of `answers` are the split of known ones).
  static void AnswerFirstTransaction(const RpcCall& call,
                                     const std::vector<absl::StatusOr<UpstreamAnswer>>& answers,
                                     int label, const Answer& done);
  void AnswerMergedStatuses(const Exchange& exchange, size_t index, size_t known_parts,
                            const std::vector<std::string>& targets, int label,
                            const std::vector<absl::StatusOr<ListAnswer>>& answers,
                            const Answer& done) const;
  // Keeps gate_timer_ set for the gate's earliest deadline.
  void ArmGateTimer();
  void FetchLookupTables(const std::vector<Pubkey>& tables, std::function<void()> then);
  // getAccountInfo with owner verification: base showing the delegation program as owner → the
  // account's ER (found through its delegation record); an ER answering "not found" for a
  // delegated account → base.
  void ForwardVerified(std::shared_ptr<Exchange> exchange, size_t index, Answer done);
  // getBalance and getTokenAccountBalance, whose answers show no owner: the call and a
  // zero-length getAccountInfo probe of the account go to the target together; the probe's
  // owner decides as in ForwardVerified.
  void ForwardProbed(std::shared_ptr<Exchange> exchange, size_t index, Answer done);
  // The decision of ForwardVerified and ForwardProbed, from the account's `value` as the
  // target showed it (nullopt: unknown): answers `answer`, or re-sends the call elsewhere.
  void RerouteByOwner(std::shared_ptr<Exchange> exchange, size_t index, const Pubkey& account,
                      bool delegated, const std::optional<std::string>& value, std::string answer,
                      CallOutcome outcome, Answer done);
  // Reads the delegation record of each account from base: one getMultipleAccounts of the
  // record PDAs.
  void ReadRecords(const std::vector<Pubkey>& accounts, Records done);
  // The ER of each account as its delegation record on base names it.
  void FindRecordTargets(const std::vector<Pubkey>& accounts, RecordTargets done);
  // A transaction decided in limbo: routed by the delegation records of the accounts it
  // writes as base has them now, not by the state, which may be stale.
  void ForwardTransactionByRecords(std::shared_ptr<Exchange> exchange, size_t index, Answer done);
  // getMultipleAccounts forwarded whole, with owner verification of each element.
  void ForwardAccountListVerified(std::shared_ptr<Exchange> exchange, size_t index, Answer done);
  // Owner verification of a merged getMultipleAccounts answer (`key_targets[i]`: where key i
  // of the call's decision went): base elements owned by the delegation program are re-asked
  // of the ERs their records name, null ER elements of base, and the answers spliced in.
  // Answers `original` (when not empty) if nothing was re-asked; a re-ask that fails is the
  // answer.
  void VerifyAccountList(std::shared_ptr<Exchange> exchange, size_t index,
                         std::vector<std::string> key_targets, AccountList list,
                         std::string original, CallOutcome outcome, Answer done);
  // VerifyAccountList's steps: which elements need re-asking; re-asking the ERs the records
  // of `to_er` name; re-asking `parts` and splicing the answers in (false: a failed re-ask was
  // the answer); and the join of the branches, which answers after the last.
  ListReasks FindListReasks(const std::vector<std::string>& key_targets,
                            const AccountList& list) const;
  void ReaskListOfRecordErs(std::shared_ptr<ListVerification> verification,
                            std::vector<size_t> to_er);
  void ReaskListParts(std::shared_ptr<ListVerification> verification, std::vector<RoutePart> parts);
  bool SpliceReasked(ListVerification& verification, const std::vector<RoutePart>& parts,
                     std::vector<absl::StatusOr<ListAnswer>>& answers);
  void FinishListBranch(const std::shared_ptr<ListVerification>& verification);
  // The methods the router answers itself (kLocal): getIdentity, getRoutes,
  // getDelegationStatus.
  void AnswerLocal(const Exchange& exchange, size_t index, Answer done);
  // getDelegationStatus [pubkey]: the account's delegation as the snapshot has it.
  void AnswerDelegationStatus(const Exchange& exchange, size_t index, Answer done);
  // getBlockhashForAccounts (kLatestBlockhash): getLatestBlockhash of the decision's target,
  // answered as the result's value.
  void ForwardLatestBlockhash(std::shared_ptr<Exchange> exchange, size_t index, Answer done);
  // Sends each (target, body) and hands back the parsed answers in the same order.
  void Gather(std::vector<std::pair<std::string, std::string>> requests, RetryPolicy policy,
              Gathered done);
  // Gather for list reads: the answers parsed as ListAnswer.
  void GatherLists(std::vector<std::pair<std::string, std::string>> requests, RetryPolicy policy,
                   GatheredLists done);
  // Gather's sending: each HTTP answer, or why there is none (as an Internal status naming the
  // target).
  void GatherResponses(std::vector<std::pair<std::string, std::string>> requests,
                       RetryPolicy policy, GatheredResponses done);
  // An outcome of an answer the router made itself.
  static CallOutcome AtRouter(RpcOutcome outcome) {
    return CallOutcome{RpcCallMetrics::kRouterTarget, outcome};
  }

  boost::asio::io_context& io_context_;
  RouterContext* context_;
  const RouterOptions& options_;
  ApiMetrics* metrics_;
  RpcCallMetrics* calls_;
  std::unique_ptr<UpstreamClient> upstreams_;  // reached only through this interface
  std::shared_ptr<ConsistencyGate> gate_;
  boost::asio::steady_timer gate_timer_;
  std::optional<absl::Duration> gate_timer_at_;  // the deadline gate_timer_ is set for
  uint64_t listener_id_ = 0;
  // Targets whose batch fallback was logged by this worker (once each).
  absl::flat_hash_set<std::string> batch_fallbacks_logged_;
};

// One HTTP request in flight: its calls, the snapshot they are routed against, the decision
// for each call and the answers as they arrive.
struct Router::Exchange {
  RpcBody body;
  Done done;
  std::shared_ptr<const Snapshot> snapshot;
  std::vector<RouteDecision> decisions;  // by call; sized once, so references stay valid
  std::vector<std::string> answers;
  size_t remaining = 0;
  absl::Duration start;
};

// The elements of a getMultipleAccounts answer, merged in the order of the keys, before they
// are written out: views of the raw JSON in the upstream answers it holds.
struct Router::AccountList {
  std::string_view context;  // raw JSON
  bool context_from_base = false;
  std::vector<std::string_view> values;  // raw JSON per key
  std::vector<ListAnswer> sources;       // the answers the views point into
  // `{"jsonrpc":"2.0","result":{"context":...,"value":[...]},"id":...}` for `call`.
  std::string Render(const RpcCall& call) const {
    return ContextListResponse(call.id_or_null(), context, values);
  }
};

}  // namespace switchyard
