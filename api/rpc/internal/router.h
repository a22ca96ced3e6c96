#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/container/node_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "api/jsonrpc/rpc_merge.h"
#include "api/routing/consistency_gate.h"
#include "api/rpc/router.h"
#include "api/upstream/upstream_await.h"
#include "solana/delegation.h"

namespace switchyard {

struct RpcParams;

// The params of the zero-length getAccountInfo probe that judges `call` (getBalance,
// getTokenAccountBalance) by the owner of `account`.
std::string OwnerProbeParams(const RpcCall& call, const Pubkey& account);

// Why an upstream gave no answer, as the client sees it: an Internal error naming `target`,
// or a consensus error as it is.
absl::Status UpstreamFailure(const std::string& target, const absl::Status& status);

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
  // The elements of an account list to re-ask, by index into the call's keys.
  struct ListReasks {
    std::vector<size_t> to_er;    // base showed the delegation program as owner
    std::vector<size_t> to_base;  // an ER did not have an account the state calls delegated
  };
  // Re-asked parts of an account list and their answers, in the same order.
  struct Reasked {
    std::vector<RoutePart> parts;
    std::vector<absl::StatusOr<ListAnswer>> answers;
  };
  // A call's answer, with where it came from and how it ended (for the metrics).
  struct CallAnswer {
    std::string answer;
    CallOutcome outcome;
  };
  using Answer = std::function<void(std::string answer, CallOutcome outcome)>;
  // A request the router makes itself, for a part of a call or to judge one: a method and its
  // raw params, for a target.
  struct SubCall {
    std::string target;
    std::string method;
    std::string params;
  };
  using Requests = std::vector<SubCall>;
  // Each account's delegation record on base (nullopt: none), or why base could not say.
  using Records = absl::StatusOr<std::vector<std::optional<DelegationRecord>>>;

  // Decides every call, answers what the cache holds, sends the upstream batches of the plan,
  // then executes the other calls.
  void Dispatch(std::shared_ptr<Exchange> exchange);
  // The cache's part (docs/architecture.md §19): each cacheable call is answered from memory,
  // then from the shared tier (one lookup for the batch), or joins an identical read in
  // flight, or leads it; then SendRest.
  void ServeFromCache(const std::shared_ptr<Exchange>& exchange);
  void OnSharedTier(const std::shared_ptr<Exchange>& exchange, std::vector<size_t> asked,
                    RedisTier::Values values);
  void JoinOrLead(const std::shared_ptr<Exchange>& exchange);
  void SendRest(const std::shared_ptr<Exchange>& exchange);
  // A call the cache answered (`result` as kept) or that shared a leader's `answer`.
  void AnswerCached(const std::shared_ptr<Exchange>& exchange, size_t index,
                    std::string_view result);
  void AnswerFollower(const std::shared_ptr<Exchange>& exchange, size_t index,
                      const std::string& answer);
  // A leading call's answer: kept when its class allows, and given to its followers.
  void OnLeaderAnswer(const std::shared_ptr<Exchange>& exchange, size_t index,
                      const std::string& answer, const CallOutcome& outcome);
  // The metrics' target of a call answered by the cache or by its leader's answer.
  int CacheOutcomeTarget(const RouteDecision& decision) const;
  // Whether an answer kept with `marks` still stands in the exchange's snapshot.
  static bool MarksHold(const std::vector<DelegationMark>& marks, const Snapshot& snapshot);
  // The least context slot an answer to `call` from `target` may show: its minContextSlot,
  // and X-Min-Slot on base, as for the choice of endpoint.
  Slot MinSlotOf(const RpcCall& call, const std::string& target, Slot header_min_slot) const;
  void Finish(const std::shared_ptr<Exchange>& exchange, absl::Duration now);
  // The completion of call `index`: stores its answer, counts it, and finishes the exchange
  // after its last call.
  Answer AnswerTo(const std::shared_ptr<Exchange>& exchange, size_t index);
  // The routing decision for call `index`, into exchange.decisions[index].
  void Decide(Exchange& exchange, size_t index);
  // Carries out exchange->decisions[index] (`round` 1: after its lookup tables were fetched).
  void Execute(std::shared_ptr<Exchange> exchange, size_t index, int round);
  // Runs a multi-step plan as a coroutine on this worker; its result is call `index`'s answer.
  void Run(const std::shared_ptr<Exchange>& exchange, size_t index, Task<CallAnswer> plan);
  // A kForward decision: remembers a transaction's signature, then forwards with the
  // decision's verification.
  void ExecuteForward(std::shared_ptr<Exchange> exchange, size_t index, Answer done);
  // Sends call `index` as the client wrote it to `target`; its answer is the upstream's. The
  // plain forward, the hottest path, stays a callback; ForwardAsync is its coroutine form.
  // `may_batch`: the call may wait to leave in a coalesced upstream batch (router_batch.cc).
  void Forward(const std::string& target, size_t index, std::shared_ptr<Exchange> exchange,
               Answer done, bool may_batch = true);
  Task<CallAnswer> ForwardAsync(std::string target, std::shared_ptr<Exchange> exchange,
                                size_t index);
  // The answer to call `index` from `target`'s HTTP answer (or its failure).
  CallAnswer AnswerFromResponse(const std::string& target, const RpcCall& call,
                                const absl::StatusOr<UpstreamResponse>& response) const;
  // Sends the calls of `batch` to its target as one JSON-RPC batch and answers each from its
  // element of the answer. Calls the answer does not carry (an HTTP error, an answer that is
  // not an array, ids missing) are forwarded one by one; a connection failure or timeout is
  // every call's answer.
  void ForwardBatch(std::shared_ptr<Exchange> exchange, UpstreamBatch batch);
  // While `batch`'s target is busy, its calls (a probed call with its probe) join the upstream
  // batch waiting for that target (adaptive batching), so the client batches that arrive
  // together leave as one upstream batch instead of one each. False, and nothing sent, when a
  // call may not wait: one not safe to repeat, one without an id, a method the target refused
  // in a batch, a consensus read.
  bool JoinCoalescedBatch(const std::shared_ptr<Exchange>& exchange, const UpstreamBatch& batch);
  // The answer to an upstream batch: each call's element, its probe's where it took one, and
  // the calls missing from it sent again alone.
  void OnBatchAnswer(const std::shared_ptr<Exchange>& exchange, const UpstreamBatch& batch,
                     const std::vector<size_t>& probed, absl::StatusOr<UpstreamResponse> response);
  // A call's answer from its element of an upstream batch answer, under the call's own id.
  static CallAnswer AnswerFromElement(int target_id, std::string_view id,
                                      const UpstreamAnswer& element);
  // Whether `target` takes batches now: it has not answered one with an HTTP error lately.
  bool TakesBatches(const std::string& target);
  // `target` answered a whole batch with an HTTP error: its calls go alone for a while.
  void RefuseBatches(const std::string& target);
  // Adaptive upstream batching (router_batch.cc). A read that may wait for a coalesced batch
  // (a safe-to-repeat call with an id, to a target with calls in flight, of a method the
  // target has not refused inside a batch) joins the batch of its target and minimum slot;
  // false when it goes alone now.
  struct TargetLoad;
  bool JoinCoalesced(const std::string& target, const TargetLoad& load, const SendOptions& send,
                     const std::shared_ptr<Exchange>& exchange, size_t index, Answer& done);
  // Whether a safe-to-repeat read of `method` to `target` may wait for a coalesced batch now.
  bool MayCoalesce(const std::string& target, const TargetLoad& load, const std::string& method);
  struct Coalesced;
  // Adds `call` to the batch waiting for `target` at `min_slot` (sending it when full).
  void Coalesce(const std::string& target, Slot min_slot, Coalesced call);
  // SendOne's send: a safe sub-call joins a coalesced batch when it may, else it goes alone;
  // `done` gets its HTTP answer (from a batch: its element as a whole answer).
  void SendSubCall(SubCall sub, RetryPolicy policy, UpstreamCallback done);
  // The same for a list read (a safe read): `done` gets its answer taken apart, or why there
  // is none (UpstreamFailure).
  using ListCallback = std::function<void(absl::StatusOr<ListAnswer>)>;
  void SendListSubCall(SubCall sub, ListCallback done);
  // An UpstreamCallback that takes the answer of a list read apart for `done`.
  static UpstreamCallback ParsedAsList(std::string target, ListCallback done);
  // A sub-call sent by itself; `may_learn`: an unknown-method answer keeps its method out of
  // the target's batches (it was sent alone again after a failed batch).
  void SendSubCallAlone(const std::string& target, std::string_view method, std::string_view params,
                        RetryPolicy policy, UpstreamCallback done, bool may_learn = false);
  // Sends every waiting batch; posted once per turn of the worker's loop.
  void FlushCoalesced();
  void SendCoalesced(const std::string& target, Slot min_slot, std::vector<Coalesced> calls);
  void OnCoalescedAnswer(const std::string& target, std::vector<Coalesced>& calls,
                         absl::StatusOr<UpstreamResponse> response);
  // Sends a coalesced call again alone; an unknown-method answer keeps its method out of the
  // target's batches from then on.
  void CoalescedAlone(const std::string& target, Coalesced call);
  Task<CallAnswer> SplitAccounts(std::shared_ptr<Exchange> exchange, size_t index);
  // The answers of `requests`, the parts of split getMultipleAccounts `index` in the order of
  // its decision's parts: each from the response cache when it keeps that part
  // (docs/architecture.md §19), the rest from their targets, then kept in turn.
  // The most advanced slot `target` is known at: the cache's view of its answers, or the
  // prober's; a slot-bounded answer below it is no longer served.
  Slot LatestSlotOf(const std::string& target) const;
  Task<std::vector<absl::StatusOr<ListAnswer>>> GatherAccountParts(
      std::shared_ptr<Exchange> exchange, size_t index, Requests requests);
  // The parts' answers merged in key order (an error answer: a part that failed).
  std::variant<AccountList, CallAnswer> MergeParts(const Exchange& exchange, size_t index,
                                                   std::vector<absl::StatusOr<ListAnswer>> answers);
  Task<CallAnswer> Signatures(std::shared_ptr<Exchange> exchange, size_t index);
  // Signatures' answers: for getTransaction, the first non-null transaction (base, then the
  // ERs), else the first answer there is; for a signature list, each element from the first
  // answer that has it (`known_parts`: how many of `answers` are the split of known ones).
  static CallAnswer FirstTransaction(const RpcCall& call,
                                     const std::vector<absl::StatusOr<UpstreamAnswer>>& answers,
                                     int label);
  CallAnswer MergedStatuses(const Exchange& exchange, size_t index, size_t known_parts,
                            const std::vector<std::string>& targets, int label,
                            const std::vector<absl::StatusOr<ListAnswer>>& answers) const;
  // Keeps gate_timer_ set for the gate's earliest deadline.
  void ArmGateTimer();
  // The gate's verdict on an exchange that waited for a slot: dispatched when the slot was
  // reached or only minContextSlot is unmet, else answered 412.
  void OnGate(const std::shared_ptr<Exchange>& exchange, bool reached);
  // X-Min-Slot into `min_slot` and, when the consensus header is on, X-Switchyard-Consensus into
  // `consensus`; an Invalid Request status naming the header that is malformed.
  absl::Status ReadHeaders(const HttpRequest& request, Slot* min_slot,
                           std::optional<ConsensusRule>* consensus) const;
  // Reads the lookup tables from base into the cache, then decides call `index` again.
  Task<void> FetchLookupTablesThenExecute(std::shared_ptr<Exchange> exchange, size_t index);
  // getAccountInfo with owner verification: base showing the delegation program as owner → the
  // account's ER (found through its delegation record); an ER answering "not found" for a
  // delegated account → base. The first leg is a callback (the hottest verified path); a
  // re-route runs as a coroutine.
  void ForwardVerified(std::shared_ptr<Exchange> exchange, size_t index, Answer done);
  // `done` behind the owner check of a getAccountInfo answer (Verification::kOwnerOfAnswer):
  // an answer that may call for a re-route goes on in RerouteByOwner. For a read sent alone
  // and for one sent inside an upstream batch.
  Answer CheckOwnerOfAnswer(std::shared_ptr<Exchange> exchange, size_t index, Answer done);
  // The answer callback of batched call `index`: AnswerTo, behind its owner check if any.
  Answer BatchedAnswerTo(const std::shared_ptr<Exchange>& exchange, size_t index);
  // Batched call `index` judged by a probe (getBalance) that rode in the same upstream batch:
  // `probe` is the probe's element of the answer (nullopt: missing), judged as in
  // ForwardProbed.
  void AnswerProbedInBatch(std::shared_ptr<Exchange> exchange, size_t index, CallAnswer answer,
                           const std::optional<UpstreamAnswer>& probe);
  // Sends call `index` of a planned batch on its own, with its verification.
  void SendAlone(const std::shared_ptr<Exchange>& exchange, const std::string& target,
                 size_t index);
  // getBalance and getTokenAccountBalance, whose answers show no owner: the call and a
  // zero-length getAccountInfo probe of the account go to the target together; the probe's
  // owner decides as in ForwardVerified.
  Task<CallAnswer> ForwardProbed(std::shared_ptr<Exchange> exchange, size_t index);
  // ForwardProbed for a call of a client batch whose target is busy: the call and its probe
  // join the upstream batch waiting for that target, in this turn of the loop.
  void JoinProbed(const std::shared_ptr<Exchange>& exchange, size_t index);
  // The owner probe of call `index`: a zero-length getAccountInfo of its account, to its target.
  static SubCall ProbeOf(const Exchange& exchange, size_t index);
  // The account's `value` as the probe showed it (nullopt: unknown).
  Task<std::optional<std::string>> Probe(std::shared_ptr<Exchange> exchange, size_t index);
  // The decision of ForwardVerified and ForwardProbed, from the account's `value` as the
  // target showed it (nullopt: unknown): `answer` stands, or the call is sent elsewhere.
  Task<CallAnswer> RerouteByOwner(std::shared_ptr<Exchange> exchange, size_t index,
                                  std::optional<std::string> value, CallAnswer answer);
  // Reads the delegation record of each account from base: one getMultipleAccounts of the
  // record PDAs.
  Task<Records> ReadRecords(std::vector<Pubkey> accounts);
  // The ER of each account as its delegation record on base names it (nullopt: no record, no
  // ER for it, or base could not say).
  Task<std::vector<std::optional<std::string>>> FindRecordTargets(std::vector<Pubkey> accounts);
  // A transaction decided in limbo: routed by the delegation records of the accounts it
  // writes as base has them now, not by the state, which may be stale.
  Task<CallAnswer> ForwardTransactionByRecords(std::shared_ptr<Exchange> exchange, size_t index);
  // getMultipleAccounts forwarded whole, with owner verification of each element.
  Task<CallAnswer> ForwardAccountListVerified(std::shared_ptr<Exchange> exchange, size_t index);
  // Owner verification of a merged getMultipleAccounts answer (`key_targets[i]`: where key i
  // of the call's decision went): base elements owned by the delegation program are re-asked
  // of the ERs their records name, null ER elements of base, both at once, and the answers
  // spliced in. `original` (when not empty) stands if nothing was re-asked; a re-ask that
  // fails is the answer.
  Task<CallAnswer> VerifyAccountList(std::shared_ptr<Exchange> exchange, size_t index,
                                     std::vector<std::string> key_targets, AccountList list,
                                     CallAnswer original);
  // VerifyAccountList's steps: which elements need re-asking; re-asking `parts`; re-asking the
  // ERs the records of `to_er` name; and splicing the answers in (an error answer: a re-ask
  // that failed).
  ListReasks FindListReasks(const std::vector<std::string>& key_targets,
                            const AccountList& list) const;
  Task<Reasked> ReaskParts(std::shared_ptr<Exchange> exchange, size_t index,
                           std::vector<RoutePart> parts);
  Task<Reasked> ReaskRecordErs(std::shared_ptr<Exchange> exchange, size_t index,
                               std::vector<size_t> to_er);
  std::optional<CallAnswer> SpliceReasked(const RpcCall& call, Reasked& reasked, AccountList& list,
                                          size_t& rerouted);
  // The methods the router answers itself (kLocal): getIdentity, getRoutes,
  // getDelegationStatus.
  CallAnswer AnswerLocal(const Exchange& exchange, size_t index) const;
  // getDelegationStatus [pubkey]: the account's delegation as the snapshot has it.
  CallAnswer AnswerDelegationStatus(const Exchange& exchange, size_t index) const;
  // getDelegationStatus [pubkey, {"slot": S}] and getDelegationHistory [pubkey, {fromSlot,
  // toSlot, limit}]: read from the history on the context's history thread, answered back on
  // this worker through `done` (router_history.cc).
  void AnswerFromHistory(std::shared_ptr<Exchange> exchange, size_t index, Answer done);
  // getBlockhashForAccounts (kLatestBlockhash): getLatestBlockhash of the decision's target,
  // answered as the result's value.
  Task<CallAnswer> ForwardLatestBlockhash(std::shared_ptr<Exchange> exchange, size_t index);
  // Sends each (target, body) at once; each HTTP answer, or why there is none (as an Internal
  // status naming the target), in the same order.
  Task<std::vector<absl::StatusOr<UpstreamResponse>>> SendAll(Requests requests,
                                                              RetryPolicy policy);
  Task<absl::StatusOr<UpstreamResponse>> SendOne(SubCall sub, RetryPolicy policy);
  // SendAll with the answers parsed as UpstreamAnswer, and as ListAnswer.
  Task<std::vector<absl::StatusOr<UpstreamAnswer>>> Gather(Requests requests, RetryPolicy policy);
  // The list reads `requests` (getMultipleAccounts, getSignatureStatuses), each sent as a safe
  // read and taken apart as a ListAnswer: from its coalesced batch's answer in the same pass
  // that splits it, when it rides in one.
  Task<std::vector<absl::StatusOr<ListAnswer>>> GatherLists(Requests requests);
  Task<absl::StatusOr<ListAnswer>> SendList(SubCall sub);
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
  // This worker's view of the API keys, when keys or limits are on.
  std::optional<AccessControl::View> access_;
  std::optional<absl::Duration> gate_timer_at_;  // the deadline gate_timer_ is set for
  uint64_t listener_id_ = 0;
  // Targets whose batch fallback was logged by this worker (once each).
  absl::flat_hash_set<std::string> batch_fallbacks_logged_;
  // Targets that answered a whole upstream batch with an HTTP error, until when their calls go
  // one by one without trying a batch first.
  absl::flat_hash_map<std::string, absl::Duration> batches_refused_until_;
  // Adaptive batching's view of each target: this worker's calls in flight to it, and the
  // methods it answered "method not found" after refusing a batch that held them (such an
  // upstream fails a whole batch for one unknown method), which go alone from then on.
  struct TargetLoad {
    size_t in_flight = 0;
    absl::flat_hash_set<std::string> alone_methods;
  };
  // Never erased, and node-based: a forward holds its target's entry across its exchange.
  absl::node_hash_map<std::string, TargetLoad> loads_;
  // Reads waiting for the end of the turn, by target and minimum slot (the calls of a batch
  // share its choice of endpoint). A handful at a time, so a vector.
  struct WaitingBatch;
  std::vector<WaitingBatch> waiting_;
  bool flush_posted_ = false;
  // Tells a posted flush whether this router still lives.
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
  // Where a history read's answer is posted back: this worker's io_context while this router
  // lives (cleared by the destructor, so a late read finds no worker to post to).
  struct HistoryReturn {
    absl::Mutex mu;
    boost::asio::io_context* io_context ABSL_GUARDED_BY(mu) = nullptr;
  };
  std::shared_ptr<HistoryReturn> history_return_;
};

// One HTTP request in flight: its calls, the snapshot they are routed against, the decision
// for each call and the answers as they arrive.
struct Router::Exchange {
  RpcBody body;
  Done done;
  std::shared_ptr<const Snapshot> snapshot;
  // The ERs the calls are routed with, taken once with the snapshot.
  std::shared_ptr<const ErTable> ers;
  std::vector<RouteDecision> decisions;  // by call; sized once, so references stay valid
  std::vector<std::string> answers;
  size_t remaining = 0;
  absl::Duration start;
  Slot header_min_slot = 0;  // X-Min-Slot: a slot of the base layer
  // X-Switchyard-Consensus: every plain read of the request is a consensus read.
  std::optional<ConsensusRule> consensus;
  // Set when the consistency gate gave up on the calls' minContextSlot: the applied slot then.
  // Calls asking for more are answered -32016; the others go on.
  std::optional<Slot> gate_gave_up_at;
  // The client accepts gzip and the request is one call that ForwardsVerbatim: a plain forward
  // of it may take the upstream's gzip answer as it is (answer_gzip: answers[0] is one).
  bool gzip_pass_through = false;
  bool answer_gzip = false;
  // The cache's view of each call (empty without a cache).
  struct CacheCall {
    CacheClass cache_class = CacheClass::kNever;
    std::string key;
    bool settled = false;      // answered from the cache, or following a leader
    bool leader = false;       // its answer goes to the followers of `key`
    uint64_t write_epoch = 0;  // the target's ResponseCache::WriteEpoch when it started
  };
  std::vector<CacheCall> cache;
};

// A read waiting for a coalesced batch, and the batch it waits in. The read is a client's call,
// exchange->body.calls[index], answered through `done`; or, with no exchange, a sub-call the
// router made (a part of a split list, a re-ask, a delegation records' read), answered through
// `sub_done` with its element of the batch answer made a whole HTTP answer, or, for a list
// read, through `list_done` with its element taken apart.
struct Router::Coalesced {
  std::shared_ptr<Exchange> exchange;
  size_t index = 0;
  Answer done;
  std::string method;  // of a sub-call
  std::string params;  // of a sub-call
  UpstreamCallback sub_done;
  ListCallback list_done;

  std::string_view Method() const {
    return exchange ? std::string_view(exchange->body.calls[index].method) : method;
  }
  std::string_view Params() const {
    return exchange ? std::string_view(exchange->body.calls[index].params) : params;
  }
};
struct Router::WaitingBatch {
  std::string target;
  Slot min_slot = 0;
  std::vector<Coalesced> calls;
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
