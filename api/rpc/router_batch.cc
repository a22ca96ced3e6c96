// Adaptive upstream batching (docs/architecture.md §11): while a target has calls of this worker
// in flight, the plain reads to it that arrive in one turn of the worker's loop leave together
// as one upstream JSON-RPC batch, and each gets its own element of the answer back. The reads
// the router makes itself (the parts of a split getMultipleAccounts, re-asks, the delegation
// records' read) join the same batches. A target with nothing in flight gets a read at once:
// batching never adds a wait to an idle upstream.
#include <algorithm>
#include <boost/asio/post.hpp>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "api/rpc/internal/router.h"
#include "fmt/format.h"
#include "solana/rpc_methods.h"
#include "spdlog/spdlog.h"

namespace switchyard {

namespace asio = boost::asio;

bool Router::JoinCoalesced(const std::string& target, const TargetLoad& load,
                           const SendOptions& send, const std::shared_ptr<Exchange>& exchange,
                           size_t index, Answer& done) {
  // Only reads that are safe to repeat: a batch is retried and hedged as a whole. A call
  // without an id has no element to be matched by.
  const RpcCall& call = exchange->body.calls[index];
  if (send.policy != RetryPolicy::kSafe || !call.id.has_value() ||
      !MayCoalesce(target, load, call.method)) {
    return false;
  }
  Coalesce(target, send.min_slot, Coalesced{exchange, index, std::move(done), {}, {}, {}, {}});
  return true;
}

bool Router::MayCoalesce(const std::string& target, const TargetLoad& load,
                         const std::string& method) {
  return options_.upstream_batch_max >= 2 && load.in_flight >= options_.upstream_batch_after &&
         !load.alone_methods.contains(method) && TakesBatches(target);
}

void Router::Coalesce(const std::string& target, Slot min_slot, Coalesced call) {
  auto batch = std::find_if(waiting_.begin(), waiting_.end(), [&](const WaitingBatch& waiting) {
    return waiting.min_slot == min_slot && waiting.target == target;
  });
  if (batch == waiting_.end()) {
    batch = waiting_.insert(waiting_.end(), WaitingBatch{target, min_slot, {}});
    batch->calls.reserve(options_.upstream_batch_max);
  }
  batch->calls.push_back(std::move(call));
  if (batch->calls.size() >= options_.upstream_batch_max) {
    // Full: it leaves now. Taken out first, since sending may answer (and so forward) at once.
    WaitingBatch full = std::move(*batch);
    waiting_.erase(batch);
    SendCoalesced(full.target, full.min_slot, std::move(full.calls));
    return;
  }
  if (!flush_posted_) {
    flush_posted_ = true;
    // Runs after the handlers that were ready with this one: the reads that arrived together.
    asio::post(io_context_, [this, alive = std::weak_ptr<bool>(alive_)] {
      if (alive.expired()) return;
      flush_posted_ = false;
      FlushCoalesced();
    });
  }
}

void Router::SendSubCall(SubCall sub, RetryPolicy policy, UpstreamCallback done) {
  TargetLoad& load = loads_[sub.target];
  if (policy == RetryPolicy::kSafe && MayCoalesce(sub.target, load, sub.method)) {
    Coalesce(sub.target, /*min_slot=*/0,
             Coalesced{nullptr, 0, nullptr, std::move(sub.method), std::move(sub.params),
                       std::move(done), nullptr});
    return;
  }
  SendSubCallAlone(sub.target, sub.method, sub.params, policy, std::move(done));
}

void Router::SendListSubCall(SubCall sub, ListCallback done) {
  TargetLoad& load = loads_[sub.target];
  if (MayCoalesce(sub.target, load, sub.method)) {
    Coalesce(sub.target, /*min_slot=*/0,
             Coalesced{nullptr, 0, nullptr, std::move(sub.method), std::move(sub.params), nullptr,
                       std::move(done)});
    return;
  }
  SendSubCallAlone(sub.target, sub.method, sub.params, RetryPolicy::kSafe,
                   ParsedAsList(sub.target, std::move(done)));
}

UpstreamCallback Router::ParsedAsList(std::string target, ListCallback done) {
  return [target = std::move(target),
          done = std::move(done)](absl::StatusOr<UpstreamResponse> response) {
    if (!response.ok()) {
      done(UpstreamFailure(target, response.status()));
      return;
    }
    done(ListAnswer::Parse(response->body));
  };
}

void Router::SendSubCallAlone(const std::string& target, std::string_view method,
                              std::string_view params, RetryPolicy policy, UpstreamCallback done,
                              bool may_learn) {
  TargetLoad& load = loads_[target];
  ++load.in_flight;
  SendOptions send(policy);
  send.large_answer = MayAnswerLarge(method);
  upstreams_->Send(target, SubRequest(method, params), send,
                   [&load, target, method = may_learn ? std::string(method) : std::string(),
                    done = std::move(done)](absl::StatusOr<UpstreamResponse> response) {
                     --load.in_flight;
                     // An upstream that fails a whole batch for one unknown method (as MagicBlock's
                     // ER does) would fail every batch that method rides in.
                     if (!method.empty() && response.ok() &&
                         response->body.find("-32601") != std::string::npos) {
                       load.alone_methods.insert(method);
                     }
                     done(std::move(response));
                   });
}

void Router::FlushCoalesced() {
  std::vector<WaitingBatch> batches = std::move(waiting_);
  waiting_.clear();
  for (WaitingBatch& batch : batches) {
    SendCoalesced(batch.target, batch.min_slot, std::move(batch.calls));
  }
}

void Router::SendCoalesced(const std::string& target, Slot min_slot, std::vector<Coalesced> calls) {
  if (calls.size() == 1) {
    Coalesced& call = calls[0];
    if (!call.exchange) {
      SendSubCallAlone(target, call.method, call.params, RetryPolicy::kSafe,
                       call.list_done ? ParsedAsList(target, std::move(call.list_done))
                                      : std::move(call.sub_done));
      return;
    }
    Forward(target, call.index, std::move(call.exchange), std::move(call.done),
            /*may_batch=*/false);
    return;
  }
  metrics_->upstream_coalesced_batches.Increment();
  metrics_->upstream_coalesced_calls.Increment(calls.size());
  std::vector<std::pair<std::string_view, std::string_view>> elements;
  elements.reserve(calls.size());
  for (const Coalesced& call : calls) elements.emplace_back(call.Method(), call.Params());
  SendOptions send(RetryPolicy::kSafe);
  send.min_slot = min_slot;
  send.large_answer = std::any_of(calls.begin(), calls.end(), [](const Coalesced& call) {
    return MayAnswerLarge(call.Method());
  });
  TargetLoad& load = loads_[target];
  load.in_flight += calls.size();
  upstreams_->Send(target, UpstreamBatchBody(elements), send,
                   [this, target, &load,
                    calls = std::move(calls)](absl::StatusOr<UpstreamResponse> response) mutable {
                     load.in_flight -= calls.size();
                     OnCoalescedAnswer(target, calls, std::move(response));
                   });
}

void Router::OnCoalescedAnswer(const std::string& target, std::vector<Coalesced>& calls,
                               absl::StatusOr<UpstreamResponse> response) {
  // No answer after the attempts a read is allowed, a node that is overloaded or failing: every
  // call gets what it would have got alone.
  if (!response.ok() || response->status == 429 || response->status >= 500) {
    for (Coalesced& call : calls) {
      if (call.list_done) {
        ParsedAsList(target, std::move(call.list_done))(response);
        continue;
      }
      if (!call.exchange) {
        call.sub_done(response);
        continue;
      }
      CallAnswer answer =
          AnswerFromResponse(target, call.exchange->body.calls[call.index], response);
      call.done(std::move(answer.answer), answer.outcome);
    }
    return;
  }
  // The list reads' elements are taken apart in the same pass that splits the batch.
  std::vector<bool> lists(calls.size());
  bool any_list = false;
  for (size_t k = 0; k < calls.size(); ++k) {
    lists[k] = static_cast<bool>(calls[k].list_done);
    any_list = any_list || lists[k];
  }
  if (!any_list) lists.clear();
  absl::StatusOr<std::vector<std::optional<UpstreamBatchElement>>> answers =
      response->status == 200 ? ParseUpstreamBatchAnswer(response->body, calls.size(), lists)
                              : absl::UnavailableError(fmt::format("HTTP {}", response->status));
  const int target_id = calls_->TargetId(target);
  // An element a node could not answer now (-32005 unhealthy, -32016 behind its minimum slot)
  // goes again alone: sent alone it would have been tried on another endpoint.
  auto again = [&](size_t k) {
    if (!answers.ok() || !(*answers)[k]) return true;
    const UpstreamAnswer& element = (*answers)[k]->answer;
    return element.is_error() && (element.error.find("-32005") != std::string::npos ||
                                  element.error.find("-32016") != std::string::npos);
  };
  size_t alone = 0;
  for (Coalesced& call : calls) {
    const size_t k = &call - calls.data();
    if (again(k)) {
      ++alone;
      continue;
    }
    if (call.list_done) {
      call.list_done(std::move(*(*answers)[k]->list));
      continue;
    }
    if (!call.exchange) {
      // The element made a whole answer again, which the sub-call's reader parses.
      call.sub_done(UpstreamResponse{
          .status = 200, .body = AnswerFromElement(target_id, "1", (*answers)[k]->answer).answer});
      continue;
    }
    CallAnswer answer = AnswerFromElement(
        target_id, call.exchange->body.calls[call.index].id_or_null(), (*answers)[k]->answer);
    call.done(std::move(answer.answer), answer.outcome);
  }
  if (alone == 0) return;
  metrics_->upstream_batch_fallbacks.Increment(alone);
  if (response->status != 200) RefuseBatches(target);  // batches refused as such (400, 413...)
  if (batch_fallbacks_logged_.insert(target).second) {
    spdlog::warn(
        "upstream {} did not answer every call of a JSON-RPC batch ({}); such calls are sent "
        "again one by one (switchyard_api_upstream_batch_fallbacks_total; logged once per "
        "upstream and worker); a method it then does not know is not batched to it again",
        target,
        answers.ok() ? fmt::format("{} of {} calls missing or not answerable by that node now",
                                   alone, calls.size())
                     : std::string(answers.status().message()));
  }
  for (Coalesced& call : calls) {
    const size_t k = &call - calls.data();
    if (again(k)) CoalescedAlone(target, std::move(call));
  }
}

void Router::CoalescedAlone(const std::string& target, Coalesced call) {
  if (!call.exchange) {
    SendSubCallAlone(
        target, call.method, call.params, RetryPolicy::kSafe,
        call.list_done ? ParsedAsList(target, std::move(call.list_done)) : std::move(call.sub_done),
        /*may_learn=*/true);
    return;
  }
  const std::string& method = call.exchange->body.calls[call.index].method;
  Answer learn = [this, target, &method, done = std::move(call.done)](std::string answer,
                                                                      CallOutcome outcome) {
    // An upstream that fails a whole batch for one unknown method (as MagicBlock's ER does)
    // would fail every batch that method rides in.
    if (outcome.outcome == RpcOutcome::kRpcError && answer.find("-32601") != std::string::npos) {
      loads_[target].alone_methods.insert(method);
    }
    done(std::move(answer), outcome);
  };
  Forward(target, call.index, std::move(call.exchange), std::move(learn), /*may_batch=*/false);
}

}  // namespace switchyard
