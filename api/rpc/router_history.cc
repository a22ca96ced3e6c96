// The router's history methods: an account's delegation as of a past slot and its history,
// read from the folded state's history (docs/architecture.md §17) on the context's history
// thread and answered back on the worker.
#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>
#include <limits>

#include "absl/strings/numbers.h"
#include "api/jsonrpc/rpc_params.h"
#include "api/rpc/internal/router.h"
#include "common/status.h"
#include "engine/event_text.h"
#include "fmt/format.h"

namespace switchyard {
namespace {

namespace asio = boost::asio;

constexpr size_t kDefaultHistoryLimit = 1000;
constexpr size_t kMaxHistoryLimit = 10'000;

// What a history call asks, read from its config object.
struct HistoryQuery {
  Pubkey account;
  Slot at_slot = 0;  // getDelegationStatus
  Slot from_slot = 0;
  Slot to_slot = std::numeric_limits<Slot>::max();
  size_t limit = kDefaultHistoryLimit;
};

absl::Status BadParams(std::string_view what) {
  return MakeRpcStatus(RpcErrorKind::kInvalidParams, fmt::format("Invalid params: {}", what));
}

// Member `key` of the config object as an unsigned integer; nullopt when absent.
absl::StatusOr<std::optional<uint64_t>> ConfigU64(const RpcParams& params, std::string_view key) {
  if (params.elements.size() < 2) return std::optional<uint64_t>();
  absl::StatusOr<std::string> raw = JsonMember(params.elements[1], key);
  if (!raw.ok()) return std::optional<uint64_t>();
  uint64_t value = 0;
  if (!absl::SimpleAtoi(*raw, &value) || raw->empty() || (*raw)[0] == '-') {
    return BadParams(fmt::format("{} must be an unsigned integer", key));
  }
  return std::optional<uint64_t>(value);
}

absl::StatusOr<HistoryQuery> ParseHistoryQuery(const RpcCall& call, const Pubkey& account,
                                               LocalMethod method) {
  ASSIGN_OR_RETURN(RpcParams params, ParseRpcParams(call.params));
  HistoryQuery query;
  query.account = account;
  if (method == LocalMethod::kDelegationStatusAt) {
    ASSIGN_OR_RETURN(std::optional<uint64_t> slot, ConfigU64(params, "slot"));
    if (!slot) return BadParams("slot must be an unsigned integer");
    query.at_slot = *slot;
    return query;
  }
  ASSIGN_OR_RETURN(std::optional<uint64_t> from, ConfigU64(params, "fromSlot"));
  ASSIGN_OR_RETURN(std::optional<uint64_t> to, ConfigU64(params, "toSlot"));
  ASSIGN_OR_RETURN(std::optional<uint64_t> limit, ConfigU64(params, "limit"));
  query.from_slot = from.value_or(0);
  query.to_slot = to.value_or(query.to_slot);
  query.limit = limit.value_or(kDefaultHistoryLimit);
  if (query.limit == 0 || query.limit > kMaxHistoryLimit) {
    return BadParams(fmt::format("limit must be within 1..{}", kMaxHistoryLimit));
  }
  return query;
}

// getDelegationStatus at a slot, in the shape of MagicBlock's answer, with the slot asked and
// the transaction that made the delegation.
std::string StatusAtResult(const AccountStateAtSlot& at, Slot slot, const std::string& fqdn) {
  if (!at.state || !at.state->delegated) {
    return fmt::format(R"({{"isDelegated":false,"slot":{}}})", slot);
  }
  const AccountState& state = *at.state;
  std::string signature = "unknown";
  std::string_view source = SourceName(EventSource::kUnrecorded);
  if (at.cause) {
    if (const auto* d = std::get_if<DelegatedEvent>(&at.cause->event)) {
      signature = SignatureText(d->signature);
      source = SourceName(d->source);
    }
  }
  return fmt::format(R"({{"isDelegated":true,{}"delegationRecord":{{"authority":"{}","owner":"{}",)"
                     R"("delegationSlot":{},"lamports":{}}},"slot":{},"delegationSignature":"{}",)"
                     R"("source":"{}"}})",
                     fqdn.empty() ? "" : fmt::format("\"fqdn\":{},", JsonQuote(fqdn)),
                     state.validator.ToBase58(), state.owner_program.ToBase58(),
                     state.delegation_slot, state.lamports, slot, signature, source);
}

std::string HistoryResult(const std::vector<HistoryEntry>& rows, Slot applied_slot) {
  std::string out = fmt::format(R"({{"context":{{"slot":{}}},"value":[)", applied_slot);
  for (size_t i = 0; i < rows.size(); ++i) {
    if (i > 0) out.push_back(',');
    out += HistoryEntryToJson(rows[i]);
  }
  out += "]}";
  return out;
}

}  // namespace

void Router::AnswerFromHistory(std::shared_ptr<Exchange> exchange, size_t index, Answer done) {
  const RpcCall& call = exchange->body.calls[index];
  const RouteDecision& decision = exchange->decisions[index];
  const LocalMethod method = decision.local;
  auto fail = [&](const absl::Status& status) {
    done(RpcErrorResponse(call.id_or_null(), status), AtRouter(RpcOutcome::kRouterError));
  };
  absl::StatusOr<HistoryQuery> query = ParseHistoryQuery(call, *decision.account, method);
  if (!query.ok()) return fail(query.status());
  HistoryReader* history = context_->history();
  if (history == nullptr) {
    return fail(MakeRpcStatus(RpcErrorKind::kInternal, "this router keeps no history"));
  }
  const Slot applied = exchange->snapshot->applied_slot();
  // The history is complete only up to the applied slot: a later slot may still change.
  if (method == LocalMethod::kDelegationStatusAt && query->at_slot > applied) {
    done(RpcErrorResponse(call.id_or_null(), MinContextSlotStatus(applied)),
         AtRouter(RpcOutcome::kRejected));
    return;
  }
  // The fqdn names the ER of the validator the history shows, when the router knows it.
  auto fqdn_of_validator = [ers = exchange->ers](const std::optional<AccountState>& state) {
    if (!state || !state->delegated || ers == nullptr) return std::string();
    const ErEntry* er = ers->Find(state->validator);
    return er == nullptr ? std::string() : er->route.fqdn;
  };
  asio::post(*context_->history_pool(), [history, query = *query, method, applied,
                                         id = std::string(call.id_or_null()),
                                         fqdn_of_validator = std::move(fqdn_of_validator),
                                         back = history_return_, exchange = std::move(exchange),
                                         done = std::move(done)]() mutable {
    std::string answer;
    CallOutcome outcome = AtRouter(RpcOutcome::kOk);
    if (method == LocalMethod::kDelegationStatusAt) {
      absl::StatusOr<std::vector<HistoryEntry>> rows = history->HistoryBetween(
          query.account, 0, query.at_slot, std::numeric_limits<size_t>::max());
      if (rows.ok()) {
        const AccountStateAtSlot at = AccountStateWithCauseAt(*rows, query.at_slot);
        answer =
            RpcResultResponse(id, StatusAtResult(at, query.at_slot, fqdn_of_validator(at.state)));
      } else {
        answer = RpcErrorResponse(
            id, MakeRpcStatus(RpcErrorKind::kInternal, std::string(rows.status().message())));
        outcome = AtRouter(RpcOutcome::kRouterError);
      }
    } else {
      absl::StatusOr<std::vector<HistoryEntry>> rows =
          history->HistoryBetween(query.account, query.from_slot, query.to_slot, query.limit);
      if (rows.ok()) {
        answer = RpcResultResponse(id, HistoryResult(*rows, applied));
      } else {
        answer = RpcErrorResponse(
            id, MakeRpcStatus(RpcErrorKind::kInternal, std::string(rows.status().message())));
        outcome = AtRouter(RpcOutcome::kRouterError);
      }
    }
    absl::MutexLock lock(&back->mu);
    if (back->io_context == nullptr) return;  // the worker is gone
    asio::post(*back->io_context,
               [done = std::move(done), answer = std::move(answer), outcome,
                exchange = std::move(exchange)]() mutable { done(std::move(answer), outcome); });
  });
}

}  // namespace switchyard
