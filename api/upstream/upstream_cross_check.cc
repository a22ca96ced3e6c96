// UpstreamPool's integrity reads (docs/architecture.md §22): sampled cross-checks of answered
// reads against other endpoints of the target, and consensus reads.
#include <algorithm>

#include "api/jsonrpc/rpc_errors.h"
#include "api/upstream/internal/upstream_pool.h"
#include "api/upstream/upstream.h"
#include "api/upstream/upstream_integrity.h"
#include "fmt/format.h"
#include "spdlog/spdlog.h"

namespace switchyard {

using SteadyClock = upstream_internal::Clock;

namespace {
// At most one disagreement log line per pool and this interval; the others are counted.
constexpr auto kDisagreementLogInterval = std::chrono::seconds(1);

SendOptions Pinned(size_t endpoint) {
  SendOptions options(RetryPolicy::kSafe);
  options.endpoint = endpoint;
  options.hedge = false;
  return options;
}

// Whether two comparable answers can be compared: both results, at the same context slot (or
// without one).
bool SameSlot(const ComparableAnswer& a, const ComparableAnswer& b) {
  return !a.context_slot || !b.context_slot || *a.context_slot == *b.context_slot;
}
}  // namespace

uint64_t UpstreamPool::NextRandom() {
  random_ ^= random_ << 13;
  random_ ^= random_ >> 7;
  random_ ^= random_ << 17;
  return random_;
}

std::vector<size_t> UpstreamPool::InRotation(size_t exclude) const {
  const auto now = SteadyClock::now();
  std::vector<size_t> out;
  for (size_t i = 0; i < endpoints_.size(); ++i) {
    if (i != exclude && health_->endpoint(i).InRotation(now)) out.push_back(i);
  }
  auto score = [&](size_t i) {
    const EndpointHealth& e = health_->endpoint(i);
    return (e.latency_us() + 50.0) * (e.in_flight() + 1) / e.weight();
  };
  std::stable_sort(out.begin(), out.end(), [&](size_t a, size_t b) { return score(a) < score(b); });
  return out;
}

std::optional<UpstreamPool::Sample> UpstreamPool::SampleOf(const Request& request,
                                                           const UpstreamResponse& result) {
  if (request.options.endpoint != SIZE_MAX || request.options.policy != RetryPolicy::kSafe ||
      request.answered_by == SIZE_MAX || result.status != 200 || result.gzip ||
      request.body.empty() || request.body.front() != '{') {
    return std::nullopt;
  }
  const IntegrityOptions& integrity = health_->integrity();
  const double draw = static_cast<double>(NextRandom() >> 11) * 0x1.0p-53;
  // One draw against the largest rate; the method's own rate thins it (uniform below it).
  if (draw >= integrity.max_sample_rate()) return std::nullopt;
  std::string method = MethodOfRequest(request.body);
  if (draw >= integrity.SampleRateFor(method)) return std::nullopt;
  return Sample{request.body, std::move(method), request.answered_by, result.body};
}

void UpstreamPool::StartCrossCheck(Sample sample) {
  if (shut_down_) return;
  auto check = std::make_shared<CrossCheck>();
  check->request = std::move(sample.request);
  check->method = std::move(sample.method);
  check->answers.push_back({sample.answered_by, ComparableOf(sample.answer)});
  if (check->answers[0].comparable.kind != ComparableAnswer::Kind::kResult) return;
  const std::vector<size_t> peers = InRotation(sample.answered_by);
  if (peers.empty()) return;
  AskForCheck(check, {peers[NextRandom() % peers.size()]}, /*tiebreak=*/false);
}

void UpstreamPool::AskForCheck(const std::shared_ptr<CrossCheck>& check,
                               const std::vector<size_t>& endpoints, bool tiebreak) {
  check->pending = endpoints.size();
  for (size_t endpoint : endpoints) {
    Send(check->request, Pinned(endpoint),
         [this, check, endpoint, tiebreak](absl::StatusOr<UpstreamResponse> result) {
           ComparableAnswer answer;
           if (result.ok() && result->status == 200) answer = ComparableOf(result->body);
           check->answers.push_back({endpoint, std::move(answer)});
           if (--check->pending > 0 || shut_down_) return;
           if (tiebreak) {
             JudgeMajority(*check);
           } else {
             ComparePair(check);
           }
         });
  }
}

void UpstreamPool::ComparePair(const std::shared_ptr<CrossCheck>& check) {
  const CrossCheck::Answer& a = check->answers[0];
  const CrossCheck::Answer& b = check->answers[1];
  EndpointHealth& first = health_->endpoint(a.endpoint);
  EndpointHealth& peer = health_->endpoint(b.endpoint);
  const bool agree = b.comparable.kind == ComparableAnswer::Kind::kResult &&
                     a.comparable.value == b.comparable.value;
  // Equal answers agree at any slot; different ones are compared only at the same slot.
  const bool compared = agree || (b.comparable.kind == ComparableAnswer::Kind::kResult &&
                                  SameSlot(a.comparable, b.comparable));
  first.CountCheck(compared);
  peer.CountCheck(compared);
  if (agree || !compared) return;
  health_->CountDisagreement(a.endpoint, b.endpoint);
  const auto now = SteadyClock::now();
  if (now - disagreement_logged_at_ >= kDisagreementLogInterval) {
    const size_t limit = health_->integrity().log_answer_bytes;
    spdlog::warn(
        "upstream {}: endpoints {} and {} answered {} differently at slot {} ({} more "
        "disagreements since the last line): {} answered {}; {} answered {}",
        name_, first.url(), peer.url(), check->method,
        a.comparable.context_slot ? fmt::format("{}", *a.comparable.context_slot) : "-",
        disagreements_unlogged_, first.url(), Bounded(a.comparable.value, limit), peer.url(),
        Bounded(b.comparable.value, limit));
    disagreement_logged_at_ = now;
    disagreements_unlogged_ = 0;
  } else {
    ++disagreements_unlogged_;
  }
  // Who is wrong? The other endpoints in rotation decide.
  std::vector<size_t> others;
  for (size_t i : InRotation(SIZE_MAX)) {
    if (i == a.endpoint || i == b.endpoint) continue;
    if (others.size() >= health_->integrity().tiebreak_endpoints) break;
    others.push_back(i);
  }
  if (others.empty()) return;  // two alone have no majority
  AskForCheck(check, others, /*tiebreak=*/true);
}

void UpstreamPool::JudgeMajority(const CrossCheck& check) {
  const ComparableAnswer& sampled = check.answers[0].comparable;
  // The answers that can be compared with the sampled one, grouped by value.
  std::vector<const CrossCheck::Answer*> comparable;
  for (const CrossCheck::Answer& answer : check.answers) {
    if (answer.comparable.kind == ComparableAnswer::Kind::kResult &&
        SameSlot(sampled, answer.comparable)) {
      comparable.push_back(&answer);
    }
  }
  const std::string* majority = nullptr;
  size_t majority_count = 0;
  for (const CrossCheck::Answer* answer : comparable) {
    const size_t count = std::count_if(
        comparable.begin(), comparable.end(),
        [&](const auto* other) { return other->comparable.value == answer->comparable.value; });
    if (count > majority_count) {
      majority_count = count;
      majority = &answer->comparable.value;
    }
  }
  if (majority == nullptr || 2 * majority_count <= comparable.size()) {
    spdlog::warn("upstream {}: {} endpoints answered {} with no majority", name_, comparable.size(),
                 check.method);
    return;
  }
  const auto now = SteadyClock::now();
  const size_t limit = std::min<size_t>(health_->integrity().log_answer_bytes, 128);
  for (const CrossCheck::Answer* answer : comparable) {
    if (answer->comparable.value == *majority) continue;
    health_->endpoint(answer->endpoint)
        .OnMinority(now, fmt::format("{} answered {} where {} of {} endpoints answered {}",
                                     check.method, Bounded(answer->comparable.value, limit),
                                     majority_count, comparable.size(), Bounded(*majority, limit)));
  }
}

void UpstreamPool::SendConsensus(std::string body, SendOptions options, UpstreamCallback done) {
  auto consensus = std::make_shared<Consensus>();
  consensus->body = std::move(body);
  consensus->done = std::move(done);
  consensus->needs = std::max<uint32_t>(1, options.consensus_needs);
  std::vector<size_t> candidates = InRotation(SIZE_MAX);
  if (options.min_slot != 0) {
    // As the choice does: skip endpoints known to be behind the slot the read needs.
    std::vector<size_t> at_slot;
    for (size_t i : candidates) {
      const Slot slot = health_->endpoint(i).slot();
      if (slot == 0 || slot >= options.min_slot) at_slot.push_back(i);
    }
    if (at_slot.size() >= consensus->needs) candidates = std::move(at_slot);
  }
  if (candidates.size() > options.consensus_of) candidates.resize(options.consensus_of);
  // Every leg beyond the first is a retry's worth of load: it takes the target's budget.
  for (size_t i = 0; i < candidates.size(); ++i) {
    if (i > 0) {
      if (!health_->TryBeginRetry(candidates[0])) break;
      ++consensus->budgeted;
    }
    consensus->endpoints.push_back(candidates[i]);
  }
  if (consensus->endpoints.size() < consensus->needs) {
    for (; consensus->budgeted > 0; --consensus->budgeted) health_->EndRetry();
    health_->CountConsensus(false);
    auto callback = std::move(consensus->done);
    callback(MakeRpcStatus(
        RpcErrorKind::kConsensusFailed,
        fmt::format("consensus not reached on {}: {} endpoints must agree and {} could be asked "
                    "({} in rotation, within the retry budget)",
                    name_, consensus->needs, consensus->endpoints.size(), candidates.size()),
        fmt::format(R"({{"target":"{}","needs":{},"asked":{},"agreeing":0,"groups":[]}})", name_,
                    consensus->needs, consensus->endpoints.size())));
    return;
  }
  const size_t legs = consensus->endpoints.size();
  consensus->answers.resize(legs);
  consensus->raw.resize(legs);
  for (size_t leg = 0; leg < legs; ++leg) {
    Send(consensus->body, Pinned(consensus->endpoints[leg]),
         [this, consensus, leg](absl::StatusOr<UpstreamResponse> result) {
           OnConsensusLeg(consensus, leg, std::move(result));
         });
  }
}

void UpstreamPool::OnConsensusLeg(const std::shared_ptr<Consensus>& consensus, size_t leg,
                                  absl::StatusOr<UpstreamResponse> result) {
  ++consensus->answered;
  if (leg > 0 && consensus->budgeted > 0) {
    --consensus->budgeted;
    health_->EndRetry();
  }
  ComparableAnswer answer;
  if (result.ok() && result->status == 200) {
    answer = ComparableOf(result->body);
    consensus->raw[leg] = std::move(result->body);
  }
  const bool usable = answer.kind == ComparableAnswer::Kind::kResult;
  consensus->answers[leg] = std::move(answer);
  EndpointHealth& endpoint = health_->endpoint(consensus->endpoints[leg]);
  if (consensus->finished) {
    // Answered already: a late leg that disagrees with the agreed value dissents.
    if (!usable || consensus->answers[leg]->value != consensus->winner) {
      endpoint.CountConsensusDissent();
    }
    return;
  }
  const size_t legs = consensus->endpoints.size();
  if (usable) {
    const std::string& value = consensus->answers[leg]->value;
    uint32_t agreeing = 0;
    for (const auto& other : consensus->answers) {
      if (other && other->kind == ComparableAnswer::Kind::kResult && other->value == value) {
        ++agreeing;
      }
    }
    if (agreeing >= consensus->needs) {
      consensus->finished = true;
      consensus->winner = value;
      health_->CountConsensus(true);
      for (size_t i = 0; i < legs; ++i) {
        const auto& other = consensus->answers[i];
        if (other && (other->kind != ComparableAnswer::Kind::kResult || other->value != value)) {
          health_->endpoint(consensus->endpoints[i]).CountConsensusDissent();
        }
      }
      auto done = std::move(consensus->done);
      UpstreamResponse response;
      response.status = 200;
      response.body = consensus->raw[leg];
      done(std::move(response));
      return;
    }
  }
  if (consensus->answered < legs) return;
  FailConsensus(consensus);
}

void UpstreamPool::FailConsensus(const std::shared_ptr<Consensus>& consensus) {
  // Every leg answered and no value has enough endpoints behind it.
  const size_t legs = consensus->endpoints.size();
  consensus->finished = true;
  health_->CountConsensus(false);
  std::vector<uint32_t> groups;
  std::vector<const std::string*> seen;
  uint32_t unusable = 0;
  for (size_t i = 0; i < legs; ++i) {
    health_->endpoint(consensus->endpoints[i]).CountConsensusDissent();
    const auto& a = consensus->answers[i];
    if (!a || a->kind != ComparableAnswer::Kind::kResult) {
      ++unusable;
      continue;
    }
    auto it = std::find_if(seen.begin(), seen.end(),
                           [&](const std::string* v) { return *v == a->value; });
    if (it == seen.end()) {
      seen.push_back(&a->value);
      groups.push_back(1);
    } else {
      ++groups[static_cast<size_t>(it - seen.begin())];
    }
  }
  std::sort(groups.rbegin(), groups.rend());
  const uint32_t agreeing = groups.empty() ? 0 : groups.front();
  auto done = std::move(consensus->done);
  done(MakeRpcStatus(
      RpcErrorKind::kConsensusFailed,
      fmt::format("consensus not reached on {}: {} of {} endpoints had to agree, at most {} did "
                  "({} different answers, {} without a result)",
                  name_, consensus->needs, legs, agreeing, groups.size(), unusable),
      fmt::format(
          R"({{"target":"{}","needs":{},"asked":{},"agreeing":{},"groups":[{}],"without_result":{}}})",
          name_, consensus->needs, legs, agreeing, fmt::join(groups, ","), unusable)));
}

}  // namespace switchyard
