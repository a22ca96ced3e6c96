#include "api/internal/router.h"
#include "fmt/format.h"
#include "solana/base64.h"
#include "solana/delegation.h"

namespace switchyard {
namespace {

// The `value` of a getAccountInfo answer, or nullopt when the answer has none.
std::optional<std::string> AccountValue(const std::string& answer) {
  absl::StatusOr<UpstreamAnswer> parsed = ParseUpstreamAnswer(answer);
  if (!parsed.ok() || parsed->is_error()) return std::nullopt;
  absl::StatusOr<std::string> value = JsonMember(parsed->result, "value");
  if (!value.ok()) return std::nullopt;
  return *value;
}

bool OwnedByDelegationProgram(const std::string& value) {
  if (IsJsonNull(value)) return false;
  absl::StatusOr<std::string> owner = JsonMember(value, "owner");
  return owner.ok() && *owner == fmt::format("\"{}\"", kDelegationProgramId);
}

}  // namespace

void Router::ForwardVerified(const RouteDecision& decision, std::shared_ptr<Exchange> exchange,
                             size_t index, Answer done) {
  const RpcCall& call = exchange->body.calls[index];
  const Pubkey account = *decision.account;
  const bool delegated = decision.delegated;
  Forward(
      decision.target, call, exchange,
      [this, exchange, &call, account, delegated,
       done = std::move(done)](std::string answer) mutable {
        std::optional<std::string> value = AccountValue(answer);
        if (!value) return done(std::move(answer));
        if (delegated && IsJsonNull(*value)) {
          // The ER does not have it: the state is behind; base knows the account.
          metrics_->owner_reroutes.Increment();
          Forward(options_.routing.base, call, exchange, std::move(done));
          return;
        }
        if (delegated || !OwnedByDelegationProgram(*value)) return done(std::move(answer));
        // Base says delegated, the state does not know yet: find the ER by the record.
        const std::string params = fmt::format(R"(["{}",{{"encoding":"base64"}}])",
                                               DelegationRecordPda(account).ToBase58());
        Gather(
            {{options_.routing.base, SubRequest("getAccountInfo", params)}}, RetryPolicy::kSafe,
            [this, exchange, &call, answer = std::move(answer),
             done = std::move(done)](std::vector<absl::StatusOr<UpstreamAnswer>> records) mutable {
              std::optional<std::string> target;
              if (records[0].ok() && !records[0]->is_error()) {
                absl::StatusOr<std::string> value = JsonMember(records[0]->result, "value");
                absl::StatusOr<std::string> data = value.ok() && !IsJsonNull(*value)
                                                       ? JsonMember(*value, "data")
                                                       : absl::NotFoundError("no record");
                absl::StatusOr<std::string> text = data.ok() ? FirstString(*data) : data.status();
                absl::StatusOr<std::string> bytes = text.ok() ? Base64Decode(*text) : text.status();
                if (bytes.ok()) {
                  absl::StatusOr<DelegationRecord> record = DecodeDelegationRecord(
                      std::span(reinterpret_cast<const uint8_t*>(bytes->data()), bytes->size()));
                  if (record.ok()) {
                    if (record->authority.IsZero()) {
                      if (!options_.routing.default_er.empty()) {
                        target = options_.routing.default_er;
                      }
                    } else if (auto it = options_.routing.er_by_identity.find(record->authority);
                               it != options_.routing.er_by_identity.end()) {
                      target = it->second;
                    }
                  }
                }
              }
              if (!target) return done(std::move(answer));
              metrics_->owner_reroutes.Increment();
              Forward(*target, call, exchange, std::move(done));
            });
      });
}

}  // namespace switchyard
