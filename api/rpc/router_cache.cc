// The response cache in the router (docs/architecture.md §19): answers served from memory or
// the shared tier, identical reads joined to one in flight, and answers kept by class with the
// delegation marks they were answered under.
#include <algorithm>
#include <boost/asio/post.hpp>
#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "api/rpc/internal/router.h"
#include "api/rpc/router.h"
#include "fmt/format.h"
#include "spdlog/spdlog.h"

namespace switchyard {

namespace asio = boost::asio;
namespace {

// The cache class of call `call` as decided: only forwarded reads of one target, outside limbo
// (where the state may be stale and every read is verified afresh).
CacheClass CacheClassFor(const ResponseCache& cache, const RpcCall& call,
                         const RouteDecision& decision, const Snapshot& snapshot) {
  if (!call.error.ok() || !call.id || snapshot.limbo_since()) return CacheClass::kNever;
  // Signatures nobody remembers are asked of base and every ER; a final answer of that
  // fan-out is as final as one target's.
  if (decision.action == RouteAction::kSignatures) {
    const CacheClass cache_class = cache.ClassOf(call.method);
    return cache_class == CacheClass::kFinal ? cache_class : CacheClass::kNever;
  }
  if (decision.action != RouteAction::kForward || decision.signature ||
      decision.verification == Verification::kByRecords) {
    return CacheClass::kNever;
  }
  return cache.ClassOf(call.method);
}

// The target part of a cache key: the decision's target, or "*" for a fan-out.
std::string_view CacheTargetOf(const RouteDecision& decision) {
  return decision.action == RouteAction::kSignatures ? std::string_view("*")
                                                     : std::string_view(decision.target);
}

DelegationMark MarkOf(const Pubkey& account, const Snapshot& snapshot) {
  DelegationMark mark;
  mark.account = account;
  std::optional<AccountState> state = snapshot.FindAccount(account);
  if (!state) return mark;
  if (state->delegated) {
    mark.delegated = true;
    mark.validator = state->validator;
    mark.delegation_slot = state->delegation_slot;
  } else {
    // Undelegated since: the slot of its last event tells this state from the one before its
    // delegation, whose answers the ER's commits may have outdated.
    mark.delegation_slot = state->last_event_slot;
  }
  return mark;
}

// `{"context":…,"value":[…]}`: the result of a list answer again, as the cache keeps it.
std::string ListResult(const ListAnswer& list) {
  std::string result = R"({"context":)";
  result.append(list.context());
  result.append(R"(,"value":[)");
  for (size_t k = 0; k < list.values().size(); ++k) {
    if (k != 0) result.push_back(',');
    result.append(list.values()[k]);
  }
  result.append("]}");
  return result;
}

}  // namespace

void RouterContext::InvalidateCacheOnPublish() {
  if (snapshots_ == nullptr) return;
  cache_listener_id_ =
      snapshots_->AddListener([cache = cache_.get(), last = uint64_t{0}](
                                  const std::shared_ptr<const Snapshot>& snapshot) mutable {
        // The list names what changed since the snapshot before; one missed (or none at all)
        // means every entry that names an account is checked.
        const SnapshotChanges& changes = snapshot->changes();
        const bool listed =
            changes.accounts != nullptr && last != 0 && changes.generation == last + 1;
        last = changes.generation;
        cache->DropChanged(listed ? changes.accounts.get() : nullptr,
                           [&snapshot](const DelegationMark& mark) {
                             return MarkOf(mark.account, *snapshot) == mark;
                           });
      });
}

bool Router::MarksHold(const std::vector<DelegationMark>& marks, const Snapshot& snapshot) {
  for (const DelegationMark& mark : marks) {
    if (!(MarkOf(mark.account, snapshot) == mark)) return false;
  }
  return true;
}

Slot Router::LatestSlotOf(const std::string& target) const {
  Slot slot = context_->cache()->LatestSlot(target);
  if (const TargetHealth* health = context_->health()->Find(target)) {
    slot = std::max(slot, health->best_slot());
  }
  return slot;
}

void Router::ServeFromCache(const std::shared_ptr<Exchange>& exchange) {
  ResponseCache& cache = *context_->cache();
  const size_t n = exchange->body.calls.size();
  exchange->cache.resize(n);
  const auto now = std::chrono::steady_clock::now();
  std::vector<size_t> misses;
  for (size_t i = 0; i < n; ++i) {
    const RpcCall& call = exchange->body.calls[i];
    const RouteDecision& decision = exchange->decisions[i];
    Exchange::CacheCall& entry = exchange->cache[i];
    if ((call.method == "sendTransaction" || call.method == "requestAirdrop") &&
        !decision.target.empty()) {
      cache.NoteWrite(decision.target);
    }
    entry.cache_class = CacheClassFor(cache, call, decision, *exchange->snapshot);
    if (entry.cache_class == CacheClass::kNever) continue;
    entry.write_epoch = cache.WriteEpoch(decision.target);
    entry.key = ResponseCache::KeyOf(CacheTargetOf(decision), call.method, call.params);
    if (entry.cache_class == CacheClass::kCoalesce || !cache.options().enabled) continue;
    const Slot target_slot = LatestSlotOf(decision.target);
    std::shared_ptr<const CachedAnswer> hit = cache.Find(
        entry.key, now, MinSlotOf(call, decision.target, exchange->header_min_slot), target_slot,
        [&](const CachedAnswer& answer) { return MarksHold(answer.marks, *exchange->snapshot); });
    if (!hit) {
      cache.CountMiss(call.method);
      misses.push_back(i);
      continue;
    }
    cache.CountHit(call.method);
    entry.settled = true;
    AnswerCached(exchange, i, hit->result);
  }
  if (context_->redis() != nullptr && !misses.empty()) {
    std::vector<std::string> keys;
    keys.reserve(misses.size());
    for (size_t i : misses) keys.push_back("a:" + exchange->cache[i].key);
    context_->redis()->Get(std::move(keys), io_context_.get_executor(),
                           [this, exchange, misses](RedisTier::Values values) mutable {
                             OnSharedTier(exchange, std::move(misses), std::move(values));
                           });
    return;
  }
  JoinOrLead(exchange);
}

void Router::OnSharedTier(const std::shared_ptr<Exchange>& exchange, std::vector<size_t> asked,
                          RedisTier::Values values) {
  ResponseCache& cache = *context_->cache();
  const auto now = std::chrono::steady_clock::now();
  for (size_t k = 0; k < asked.size() && k < values.size(); ++k) {
    if (!values[k]) continue;
    const size_t i = asked[k];
    const RpcCall& call = exchange->body.calls[i];
    Exchange::CacheCall& entry = exchange->cache[i];
    std::optional<CachedAnswer> answer = DecodeCachedAnswer(*values[k]);
    if (!answer) {
      cache.CountBadSharedEntry();
      spdlog::warn("cache: the shared tier holds a value for {} that is not a kept answer",
                   call.method);
      continue;
    }
    if (!MarksHold(answer->marks, *exchange->snapshot)) continue;
    const Slot target_slot = cache.LatestSlot(exchange->decisions[i].target);
    if (answer->slot_bounded && target_slot > answer->context_slot) continue;
    // Write epochs are this process's own: the answer counts as read when this lookup began.
    answer->write_epoch = entry.write_epoch;
    if (answer->context_slot <
        MinSlotOf(call, exchange->decisions[i].target, exchange->header_min_slot)) {
      continue;
    }
    cache.CountHit(call.method);
    entry.settled = true;
    // Kept in memory too, for the class's time (the shared tier does not say what is left).
    const std::string result = answer->result;
    const absl::Duration ttl =
        cache.TtlOf(entry.cache_class, answer->target, answer->result == "null");
    cache.Put(entry.key, *std::move(answer), now, ttl);
    AnswerCached(exchange, i, result);
  }
  JoinOrLead(exchange);
}

void Router::JoinOrLead(const std::shared_ptr<Exchange>& exchange) {
  ResponseCache& cache = *context_->cache();
  if (cache.options().coalesce) {
    for (size_t i = 0; i < exchange->cache.size(); ++i) {
      Exchange::CacheCall& entry = exchange->cache[i];
      if (entry.cache_class == CacheClass::kNever || entry.settled) continue;
      const bool lead = cache.Lead(
          entry.key, [this, exchange, i, io_context = &io_context_](const std::string& answer) {
            asio::post(*io_context,
                       [this, exchange, i, answer] { AnswerFollower(exchange, i, answer); });
          });
      if (lead) {
        entry.leader = true;
      } else {
        entry.settled = true;
        cache.CountCoalesced(exchange->body.calls[i].method);
      }
    }
  }
  SendRest(exchange);
}

Task<std::vector<absl::StatusOr<ListAnswer>>> Router::GatherAccountParts(
    std::shared_ptr<Exchange> exchange, size_t index, Requests requests) {
  ResponseCache* cache = context_->cache();
  const RpcCall& call = exchange->body.calls[index];
  const RouteDecision& decision = exchange->decisions[index];
  // Kept as a forwarded read of one target is: in memory, outside limbo, by the method's class,
  // with the delegation marks of the part's own accounts.
  if (cache == nullptr || !cache->options().enabled || !call.id ||
      exchange->snapshot->limbo_since() ||
      cache->ClassOf(call.method) != CacheClass::kSlotBounded ||
      decision.accounts.size() != decision.keys.size()) {
    co_return co_await GatherLists(std::move(requests));
  }
  const size_t n = requests.size();
  std::vector<std::optional<absl::StatusOr<ListAnswer>>> found(n);
  std::vector<std::string> keys(n);
  std::vector<uint64_t> write_epochs(n);
  std::vector<size_t> missed;
  Requests misses;
  const auto now = std::chrono::steady_clock::now();
  for (size_t p = 0; p < n; ++p) {
    SubCall& sub = requests[p];
    write_epochs[p] = cache->WriteEpoch(sub.target);
    keys[p] = ResponseCache::KeyOf(sub.target, sub.method, sub.params);
    const Slot target_slot = LatestSlotOf(sub.target);
    std::shared_ptr<const CachedAnswer> hit = cache->Find(
        keys[p], now, MinSlotOf(call, sub.target, exchange->header_min_slot), target_slot,
        [&](const CachedAnswer& answer) { return MarksHold(answer.marks, *exchange->snapshot); });
    if (hit) {
      absl::StatusOr<ListAnswer> list = ListAnswer::Parse(R"({"result":)" + hit->result + "}");
      if (list.ok() && list->is_list()) {
        cache->CountHit(call.method);
        found[p] = std::move(list);
        continue;
      }
    }
    cache->CountMiss(call.method);
    missed.push_back(p);
    misses.push_back(std::move(sub));
  }
  if (!misses.empty()) {
    std::vector<absl::StatusOr<ListAnswer>> fetched = co_await GatherLists(std::move(misses));
    for (size_t m = 0; m < missed.size(); ++m) {
      const size_t p = missed[m];
      const RoutePart& part = decision.parts[p];
      absl::StatusOr<ListAnswer>& answer = fetched[m];
      if (answer.ok() && !answer->is_error() && answer->is_list() &&
          answer->values().size() == part.indexes.size()) {
        CachedAnswer kept;
        kept.result = ListResult(*answer);
        kept.context_slot = ContextSlotOf(kept.result);
        cache->NoteSlot(part.target, kept.context_slot);
        kept.slot_bounded = true;
        kept.write_epoch = write_epochs[p];
        kept.target = part.target;
        kept.marks.reserve(part.indexes.size());
        for (size_t i : part.indexes) {
          kept.marks.push_back(MarkOf(decision.accounts[i], *exchange->snapshot));
        }
        cache->Put(keys[p], std::move(kept), std::chrono::steady_clock::now(),
                   cache->TtlOf(CacheClass::kSlotBounded, part.target, /*not_found=*/false));
      }
      found[p] = std::move(answer);
    }
  }
  std::vector<absl::StatusOr<ListAnswer>> answers;
  answers.reserve(n);
  for (std::optional<absl::StatusOr<ListAnswer>>& answer : found) {
    answers.push_back(*std::move(answer));
  }
  co_return answers;
}

int Router::CacheOutcomeTarget(const RouteDecision& decision) const {
  return decision.action == RouteAction::kSignatures ? RpcCallMetrics::kFanoutTarget
                                                     : calls_->TargetId(decision.target);
}

void Router::AnswerCached(const std::shared_ptr<Exchange>& exchange, size_t index,
                          std::string_view result) {
  const RpcCall& call = exchange->body.calls[index];
  AnswerTo(exchange, index)(
      RpcResultResponse(call.id_or_null(), result),
      CallOutcome{CacheOutcomeTarget(exchange->decisions[index]), RpcOutcome::kOk});
}

void Router::AnswerFollower(const std::shared_ptr<Exchange>& exchange, size_t index,
                            const std::string& answer) {
  const RpcCall& call = exchange->body.calls[index];
  bool is_error = false;
  absl::StatusOr<std::string> restamped = AnswerFromUpstream(answer, call, &is_error);
  AnswerTo(exchange, index)(restamped.ok() ? *std::move(restamped) : answer,
                            CallOutcome{CacheOutcomeTarget(exchange->decisions[index]),
                                        is_error ? RpcOutcome::kRpcError : RpcOutcome::kOk});
}

void Router::OnLeaderAnswer(const std::shared_ptr<Exchange>& exchange, size_t index,
                            const std::string& answer, const CallOutcome& outcome) {
  ResponseCache& cache = *context_->cache();
  Exchange::CacheCall& entry = exchange->cache[index];
  entry.leader = false;
  const RouteDecision& decision = exchange->decisions[index];
  if (outcome.outcome == RpcOutcome::kOk) {
    absl::StatusOr<UpstreamAnswer> parsed = ParseUpstreamAnswer(answer);
    if (parsed.ok() && !parsed->is_error()) {
      const std::string_view result = parsed->result;
      CachedAnswer kept;
      kept.context_slot = ContextSlotOf(result);
      cache.NoteSlot(decision.target, kept.context_slot);
      absl::Duration ttl = cache.options().enabled
                               ? cache.TtlOf(entry.cache_class, decision.target, result == "null")
                               : absl::ZeroDuration();
      if (entry.cache_class == CacheClass::kFinal &&
          exchange->body.calls[index].method == "getSignatureStatuses" &&
          !AllStatusesFinal(result)) {
        ttl = absl::ZeroDuration();  // a status that is not final yet may still change
      }
      if (ttl > absl::ZeroDuration()) {
        kept.slot_bounded = entry.cache_class == CacheClass::kSlotBounded;
        kept.write_epoch = entry.write_epoch;
        kept.target = decision.target;
        kept.result = std::string(result);
        if (decision.account) kept.marks.push_back(MarkOf(*decision.account, *exchange->snapshot));
        for (const Pubkey& account : decision.accounts) {
          kept.marks.push_back(MarkOf(account, *exchange->snapshot));
        }
        if (context_->redis() != nullptr) {
          context_->redis()->Put("a:" + entry.key, EncodeCachedAnswer(kept), ttl);
        }
        cache.Put(entry.key, std::move(kept), std::chrono::steady_clock::now(), ttl);
      }
    }
  }
  cache.Complete(entry.key, answer);
}

}  // namespace switchyard
