#include "api/cache/response_cache.h"

#include <algorithm>
#include <iterator>

#include "absl/container/flat_hash_set.h"
#include "absl/hash/hash.h"
#include "fmt/format.h"
#include "simdjson.h"

namespace switchyard {

namespace {

struct DefaultRule {
  std::string_view method;
  CacheClass cache_class;
};

// The shipped table (docs/architecture.md §19). A method not in it is kNever.
constexpr DefaultRule kDefaults[] = {
    // Answers that can no longer change once final.
    {"getTransaction", CacheClass::kFinal},
    {"getBlock", CacheClass::kFinal},
    {"getBlockTime", CacheClass::kFinal},
    {"getGenesisHash", CacheClass::kFinal},
    {"getSignatureStatuses", CacheClass::kFinal},  // only when every status is finalized
    {"getMinimumBalanceForRentExemption", CacheClass::kFinal},
    // Account state: kept one slot of the target at most.
    {"getAccountInfo", CacheClass::kSlotBounded},
    {"getBalance", CacheClass::kSlotBounded},
    {"getMultipleAccounts", CacheClass::kSlotBounded},
    {"getTokenAccountBalance", CacheClass::kSlotBounded},
    {"getTokenSupply", CacheClass::kSlotBounded},
    {"getTokenAccountsByOwner", CacheClass::kSlotBounded},
    {"getTokenAccountsByDelegate", CacheClass::kSlotBounded},
    {"getTokenLargestAccounts", CacheClass::kSlotBounded},
    {"getProgramAccounts", CacheClass::kSlotBounded},
    {"getSupply", CacheClass::kSlotBounded},
    {"getLargestAccounts", CacheClass::kSlotBounded},
    // Reads whose answer moves with every slot or that carry no context: shared while in
    // flight, never kept.
    {"getSlot", CacheClass::kCoalesce},
    {"getBlockHeight", CacheClass::kCoalesce},
    {"getEpochInfo", CacheClass::kCoalesce},
    {"getSignaturesForAddress", CacheClass::kCoalesce},
    {"getRecentPrioritizationFees", CacheClass::kCoalesce},
    {"getVersion", CacheClass::kCoalesce},
    {"getEpochSchedule", CacheClass::kCoalesce},
    {"getInflationGovernor", CacheClass::kCoalesce},
    // Never: writes (sendTransaction, simulateTransaction, requestAirdrop), blockhashes
    // (getLatestBlockhash, isBlockhashValid, getFeeForMessage), getHealth, the router's own
    // methods and anything unknown.
};

// Methods with counters of their own; the rest count as "other".
constexpr std::string_view kCountedMethods[] = {"getAccountInfo",
                                                "getBalance",
                                                "getMultipleAccounts",
                                                "getTokenAccountBalance",
                                                "getProgramAccounts",
                                                "getTransaction",
                                                "getBlock",
                                                "getSignatureStatuses",
                                                "getSlot",
                                                "getBlockHeight",
                                                "getEpochInfo"};

bool Matches(std::string_view pattern, std::string_view method) {
  if (!pattern.empty() && pattern.back() == '*') {
    return method.substr(0, pattern.size() - 1) == pattern.substr(0, pattern.size() - 1);
  }
  return pattern == method;
}

// An entry's footprint: its key and answer, the entry itself, and the map and list nodes.
constexpr size_t kEntryOverhead = 128;

}  // namespace

std::string_view CacheClassName(CacheClass cache_class) {
  switch (cache_class) {
    case CacheClass::kNever:
      return "never";
    case CacheClass::kCoalesce:
      return "coalesce";
    case CacheClass::kFinal:
      return "final";
    case CacheClass::kSlotBounded:
      return "slot";
  }
  return "never";
}

CacheClass DefaultCacheClass(std::string_view method) {
  for (const DefaultRule& rule : kDefaults) {
    if (rule.method == method) return rule.cache_class;
  }
  return CacheClass::kNever;
}

Slot ContextSlotOf(std::string_view result) {
  // Solana's answers open with the context: `{"context":{"apiVersion":"…","slot":N},…`. Read
  // it there without a parse; anything else takes the full parse below.
  const std::string_view head = result.substr(0, 160);
  if (const size_t context = head.find("\"context\""); context != std::string_view::npos) {
    const size_t key = head.find("\"slot\":", context);
    const size_t close = head.find('}', context);
    if (key != std::string_view::npos && (close == std::string_view::npos || key < close)) {
      Slot slot = 0;
      size_t i = key + 7;
      const size_t first = i;
      while (i < head.size() && head[i] >= '0' && head[i] <= '9' && i - first < 20) {
        slot = slot * 10 + static_cast<Slot>(head[i] - '0');
        ++i;
      }
      if (i > first && i < head.size() && (head[i] == ',' || head[i] == '}')) return slot;
    }
  }
  simdjson::ondemand::parser parser;
  simdjson::padded_string padded(result);
  simdjson::ondemand::document doc;
  if (parser.iterate(padded).get(doc) != simdjson::SUCCESS) return 0;
  simdjson::ondemand::object object;
  if (doc.get_object().get(object) != simdjson::SUCCESS) return 0;
  uint64_t slot = 0;
  if (object["context"]["slot"].get_uint64().get(slot) != simdjson::SUCCESS) return 0;
  return slot;
}

std::string EncodeCachedAnswer(const CachedAnswer& answer) {
  // "c1 SLOT BOUNDED MARKS TARGET\n", a line per mark, then the result.
  std::string out = fmt::format("c1 {} {} {} {}\n", answer.context_slot,
                                answer.slot_bounded ? 1 : 0, answer.marks.size(), answer.target);
  for (const DelegationMark& mark : answer.marks) {
    fmt::format_to(std::back_inserter(out), "{} {} {} {}\n", mark.account.ToBase58(),
                   mark.delegated ? 1 : 0, mark.validator.ToBase58(), mark.delegation_slot);
  }
  out += answer.result;
  return out;
}

std::optional<CachedAnswer> DecodeCachedAnswer(std::string_view bytes) {
  auto line = [&bytes]() -> std::optional<std::string_view> {
    const size_t end = bytes.find('\n');
    if (end == std::string_view::npos) return std::nullopt;
    std::string_view out = bytes.substr(0, end);
    bytes.remove_prefix(end + 1);
    return out;
  };
  auto words = [](std::string_view text) {
    std::vector<std::string_view> out;
    while (!text.empty()) {
      const size_t space = text.find(' ');
      out.push_back(text.substr(0, space));
      if (space == std::string_view::npos) break;
      text.remove_prefix(space + 1);
    }
    return out;
  };
  auto number = [](std::string_view text, uint64_t* out) {
    if (text.empty() || text.size() > 20) return false;
    uint64_t value = 0;
    for (char c : text) {
      if (c < '0' || c > '9') return false;
      value = value * 10 + static_cast<uint64_t>(c - '0');
    }
    *out = value;
    return true;
  };
  std::optional<std::string_view> head = line();
  if (!head) return std::nullopt;
  const std::vector<std::string_view> fields = words(*head);
  CachedAnswer answer;
  uint64_t marks = 0;
  if (fields.size() != 5 || fields[0] != "c1" || !number(fields[1], &answer.context_slot) ||
      (fields[2] != "0" && fields[2] != "1") || !number(fields[3], &marks) || marks > 10000) {
    return std::nullopt;
  }
  answer.slot_bounded = fields[2] == "1";
  answer.target = std::string(fields[4]);
  for (uint64_t i = 0; i < marks; ++i) {
    std::optional<std::string_view> text = line();
    if (!text) return std::nullopt;
    const std::vector<std::string_view> mark = words(*text);
    if (mark.size() != 4 || (mark[1] != "0" && mark[1] != "1")) return std::nullopt;
    absl::StatusOr<Pubkey> account = Pubkey::FromBase58(std::string(mark[0]));
    absl::StatusOr<Pubkey> validator = Pubkey::FromBase58(std::string(mark[2]));
    DelegationMark m;
    if (!account.ok() || !validator.ok() || !number(mark[3], &m.delegation_slot)) {
      return std::nullopt;
    }
    m.account = *account;
    m.delegated = mark[1] == "1";
    m.validator = *validator;
    answer.marks.push_back(m);
  }
  answer.result = std::string(bytes);
  return answer;
}

bool AllStatusesFinal(std::string_view result) {
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  if (parser.parse(result).get(root) != simdjson::SUCCESS) return false;
  simdjson::dom::array value;
  if (root["value"].get_array().get(value) != simdjson::SUCCESS) return false;
  if (value.size() == 0) return false;
  for (simdjson::dom::element status : value) {
    std::string_view confirmation;
    if (status["confirmationStatus"].get_string().get(confirmation) != simdjson::SUCCESS ||
        confirmation != "finalized") {
      return false;
    }
  }
  return true;
}

ResponseCache::ResponseCache(CacheOptions options, const std::vector<std::string>& targets,
                             MetricsRegistry* registry)
    : options_(std::move(options)),
      shard_budget_(std::max<size_t>(1, options_.max_bytes / kShards)) {
  for (const std::string& target : targets) targets_[target] = std::make_unique<TargetState>();
  auto counters = [&](const std::string& method) {
    MethodCounters c;
    c.hits = &registry->AddCounter("switchyard_cache_hits_total",
                                   "Reads answered from the response cache", {{"method", method}});
    c.misses =
        &registry->AddCounter("switchyard_cache_misses_total",
                              "Cacheable reads the cache could not answer", {{"method", method}});
    c.coalesced = &registry->AddCounter(
        "switchyard_cache_coalesced_total",
        "Reads that shared the upstream call of an identical read in flight", {{"method", method}});
    return c;
  };
  for (std::string_view method : kCountedMethods) {
    by_method_[std::string(method)] = counters(std::string(method));
  }
  other_ = counters("other");
  evictions_ = &registry->AddCounter("switchyard_cache_evictions_total",
                                     "Entries dropped to keep the cache within its byte budget");
  invalidations_ = &registry->AddCounter(
      "switchyard_cache_invalidations_total",
      "Entries dropped at a snapshot publish because an account they name changed delegation");
  bad_shared_ = &registry->AddCounter(
      "switchyard_cache_shared_bad_entries_total",
      "Values in the shared tier that could not be read as a kept answer (ignored: a miss)");
  bytes_ = &registry->AddGauge("switchyard_cache_bytes", "Bytes the response cache holds");
  entries_ = &registry->AddGauge("switchyard_cache_entries", "Entries the response cache holds");
}

const ResponseCache::TargetState* ResponseCache::StateOf(std::string_view target) const {
  auto it = targets_.find(absl::string_view(target.data(), target.size()));
  return it == targets_.end() ? nullptr : it->second.get();
}

Slot ResponseCache::LatestSlot(std::string_view target) const {
  const TargetState* state = StateOf(target);
  return state == nullptr ? 0 : state->latest_slot.load(std::memory_order_relaxed);
}

void ResponseCache::NoteSlot(std::string_view target, Slot slot) {
  TargetState* state = const_cast<TargetState*>(StateOf(target));
  if (state == nullptr) return;
  Slot seen = state->latest_slot.load(std::memory_order_relaxed);
  while (slot > seen && !state->latest_slot.compare_exchange_weak(seen, slot)) {
  }
}

uint64_t ResponseCache::WriteEpoch(std::string_view target) const {
  const TargetState* state = StateOf(target);
  return state == nullptr ? 0 : state->write_epoch.load(std::memory_order_acquire);
}

void ResponseCache::NoteWrite(std::string_view target) {
  if (TargetState* state = const_cast<TargetState*>(StateOf(target))) {
    state->write_epoch.fetch_add(1, std::memory_order_acq_rel);
  }
}

CacheClass ResponseCache::ClassOf(std::string_view method) const {
  const CacheMethodRule* best = nullptr;
  for (const CacheMethodRule& rule : options_.rules) {
    if (!Matches(rule.pattern, method)) continue;
    // An exact name beats a prefix; a longer prefix beats a shorter one.
    const bool exact = rule.pattern.back() != '*';
    if (best == nullptr || exact ||
        (best->pattern.back() == '*' && rule.pattern.size() > best->pattern.size())) {
      best = &rule;
      if (exact) break;
    }
  }
  return best != nullptr ? best->cache_class : DefaultCacheClass(method);
}

std::string ResponseCache::KeyOf(std::string_view target, std::string_view method,
                                 std::string_view params) {
  std::string key;
  key.reserve(target.size() + method.size() + params.size() + 2);
  key.append(target);
  key.push_back('\0');
  key.append(method);
  key.push_back('\0');
  // Compact params (what SDKs send) are the key as they are. (One pass over the bytes:
  // find_first_of with a set calls memchr for every byte.)
  const auto is_space = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; };
  if (std::none_of(params.begin(), params.end(), is_space)) {
    key.append(params);
    return key;
  }
  bool in_string = false;
  bool escaped = false;
  for (char c : params) {
    if (in_string) {
      key.push_back(c);
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (is_space(c)) continue;
    if (c == '"') in_string = true;
    key.push_back(c);
  }
  return key;
}

absl::Duration ResponseCache::TtlOf(CacheClass cache_class, std::string_view target,
                                    bool not_found) const {
  switch (cache_class) {
    case CacheClass::kNever:
    case CacheClass::kCoalesce:
      return absl::ZeroDuration();
    case CacheClass::kFinal:
      return not_found ? options_.negative_ttl : options_.final_ttl;
    case CacheClass::kSlotBounded:
      for (const auto& [name, ttl] : options_.slot_ttl_by_target) {
        if (name == target) return ttl;
      }
      return options_.slot_ttl;
  }
  return absl::ZeroDuration();
}

ResponseCache::Shard& ResponseCache::ShardOf(const std::string& key) {
  return shards_[absl::HashOf(key) % kShards];
}

std::shared_ptr<const CachedAnswer> ResponseCache::Find(
    const std::string& key, TimePoint now, Slot min_context_slot, Slot target_slot,
    const std::function<bool(const CachedAnswer&)>& valid) {
  Shard& shard = ShardOf(key);
  absl::MutexLock lock(&shard.mu);
  auto it = shard.entries.find(key);
  if (it == shard.entries.end()) {
    misses_.fetch_add(1, std::memory_order_relaxed);
    return nullptr;
  }
  Entry* entry = it->second.get();
  const CachedAnswer& answer = *entry->answer;
  // Slot-bounded answers (they have a context slot) live until the target moved past them.
  const bool moved_on = answer.slot_bounded && (target_slot > answer.context_slot ||
                                                answer.write_epoch != WriteEpoch(answer.target));
  if (now >= entry->expires || moved_on || (valid && !valid(answer))) {
    EraseLocked(shard, entry);
    misses_.fetch_add(1, std::memory_order_relaxed);
    return nullptr;
  }
  if (min_context_slot != 0 && answer.context_slot < min_context_slot) {
    // Not evicted: it is still good for requests that need less.
    misses_.fetch_add(1, std::memory_order_relaxed);
    return nullptr;
  }
  if (entry->is_protected) {
    shard.protected_.splice(shard.protected_.begin(), shard.protected_, entry->position);
  } else {
    // A second hit: promoted. The protected segment keeps at most 80 % of the shard; its
    // least recent entries go back on probation.
    shard.probation.erase(entry->position);
    shard.protected_.push_front(entry);
    entry->position = shard.protected_.begin();
    entry->is_protected = true;
    shard.protected_bytes += entry->bytes;
    while (shard.protected_bytes > shard_budget_ * 4 / 5 && shard.protected_.size() > 1) {
      Entry* demoted = shard.protected_.back();
      shard.protected_.pop_back();
      shard.protected_bytes -= demoted->bytes;
      demoted->is_protected = false;
      shard.probation.push_front(demoted);
      demoted->position = shard.probation.begin();
    }
  }
  hits_.fetch_add(1, std::memory_order_relaxed);
  return entry->answer;
}

void ResponseCache::Put(const std::string& key, CachedAnswer answer, TimePoint now,
                        absl::Duration ttl) {
  if (ttl <= absl::ZeroDuration() || !options_.enabled) return;
  const size_t bytes = key.size() + answer.result.size() + answer.target.size() +
                       answer.marks.size() * sizeof(DelegationMark) + sizeof(Entry) +
                       kEntryOverhead;
  if (answer.result.size() > options_.max_entry_bytes || bytes > shard_budget_) return;
  Shard& shard = ShardOf(key);
  absl::MutexLock lock(&shard.mu);
  if (auto it = shard.entries.find(key); it != shard.entries.end()) {
    EraseLocked(shard, it->second.get());
  }
  auto entry = std::make_unique<Entry>();
  entry->key = key;
  entry->answer = std::make_shared<const CachedAnswer>(std::move(answer));
  entry->expires =
      now + std::chrono::duration_cast<TimePoint::duration>(absl::ToChronoNanoseconds(ttl));
  entry->bytes = bytes;
  shard.probation.push_front(entry.get());
  entry->position = shard.probation.begin();
  shard.bytes += bytes;
  total_bytes_.fetch_add(static_cast<int64_t>(bytes), std::memory_order_relaxed);
  total_entries_.fetch_add(1, std::memory_order_relaxed);
  // An answer may name an account twice (a list with a repeated key): indexed once.
  std::vector<Pubkey> named;
  named.reserve(entry->answer->marks.size());
  for (const DelegationMark& mark : entry->answer->marks) named.push_back(mark.account);
  std::sort(named.begin(), named.end());
  named.erase(std::unique(named.begin(), named.end()), named.end());
  for (const Pubkey& account : named) shard.by_account[account].push_back(entry.get());
  shard.entries[key] = std::move(entry);
  EvictLocked(shard);
  bytes_->Set(total_bytes_.load(std::memory_order_relaxed));
  entries_->Set(total_entries_.load(std::memory_order_relaxed));
}

void ResponseCache::EraseLocked(Shard& shard, Entry* entry) {
  if (entry->is_protected) {
    shard.protected_.erase(entry->position);
    shard.protected_bytes -= entry->bytes;
  } else {
    shard.probation.erase(entry->position);
  }
  shard.bytes -= entry->bytes;
  total_bytes_.fetch_sub(static_cast<int64_t>(entry->bytes), std::memory_order_relaxed);
  total_entries_.fetch_sub(1, std::memory_order_relaxed);
  for (const DelegationMark& mark : entry->answer->marks) {
    auto it = shard.by_account.find(mark.account);
    if (it == shard.by_account.end()) continue;
    std::erase(it->second, entry);
    if (it->second.empty()) shard.by_account.erase(it);
  }
  shard.entries.erase(entry->key);  // destroys `entry`
}

bool ResponseCache::DropIfChangedLocked(Shard& shard, Entry* entry, const Pubkey* account,
                                        const std::function<bool(const DelegationMark&)>& holds) {
  for (const DelegationMark& mark : entry->answer->marks) {
    if ((account == nullptr || mark.account == *account) && !holds(mark)) {
      EraseLocked(shard, entry);
      return true;
    }
  }
  return false;
}

size_t ResponseCache::DropChanged(const std::vector<Pubkey>* accounts,
                                  const std::function<bool(const DelegationMark&)>& holds) {
  size_t dropped = 0;
  // For shards that name fewer accounts than the list: the list as a set, built once.
  std::optional<absl::flat_hash_set<Pubkey>> listed;
  for (Shard& shard : shards_) {
    absl::MutexLock lock(&shard.mu);
    if (shard.by_account.empty()) continue;
    if (accounts == nullptr) {
      std::vector<Entry*> named;
      for (const auto& [key, entry] : shard.entries) {
        if (!entry->answer->marks.empty()) named.push_back(entry.get());
      }
      for (Entry* entry : named) dropped += DropIfChangedLocked(shard, entry, nullptr, holds);
      continue;
    }
    std::vector<Pubkey> changed;  // the listed accounts this shard names
    if (accounts->size() <= shard.by_account.size()) {
      for (const Pubkey& account : *accounts) {
        if (shard.by_account.contains(account)) changed.push_back(account);
      }
    } else {
      if (!listed) listed.emplace(accounts->begin(), accounts->end());
      for (const auto& [account, entries] : shard.by_account) {
        if (listed->contains(account)) changed.push_back(account);
      }
    }
    for (const Pubkey& account : changed) {
      auto it = shard.by_account.find(account);
      if (it == shard.by_account.end()) continue;  // a repeat in the list, already dropped
      // EraseLocked edits the index: walk a copy.
      const std::vector<Entry*> named = it->second;
      for (Entry* entry : named) dropped += DropIfChangedLocked(shard, entry, &account, holds);
    }
  }
  if (dropped > 0) {
    invalidations_->Increment(dropped);
    invalidated_.fetch_add(dropped, std::memory_order_relaxed);
    bytes_->Set(total_bytes_.load(std::memory_order_relaxed));
    entries_->Set(total_entries_.load(std::memory_order_relaxed));
  }
  return dropped;
}

void ResponseCache::EvictLocked(Shard& shard) {
  while (shard.bytes > shard_budget_) {
    // Probation first (new and once-seen entries), then the protected segment.
    std::list<Entry*>& from = shard.probation.empty() ? shard.protected_ : shard.probation;
    if (from.empty()) break;
    EraseLocked(shard, from.back());
    evictions_->Increment();
    evicted_.fetch_add(1, std::memory_order_relaxed);
  }
}

bool ResponseCache::Lead(const std::string& key, Waiter waiter_if_following) {
  Shard& shard = ShardOf(key);
  absl::MutexLock lock(&shard.mu);
  auto [it, inserted] = shard.in_flight.try_emplace(key);
  if (inserted) return true;
  it->second.push_back(std::move(waiter_if_following));
  coalesced_.fetch_add(1, std::memory_order_relaxed);
  return false;
}

void ResponseCache::Complete(const std::string& key, const std::string& answer) {
  std::vector<Waiter> waiters;
  {
    Shard& shard = ShardOf(key);
    absl::MutexLock lock(&shard.mu);
    auto it = shard.in_flight.find(key);
    if (it == shard.in_flight.end()) return;
    waiters = std::move(it->second);
    shard.in_flight.erase(it);
  }
  for (Waiter& waiter : waiters) waiter(answer);
}

ResponseCache::Stats ResponseCache::stats() const {
  Stats s;
  s.entries = static_cast<uint64_t>(std::max<int64_t>(0, total_entries_.load()));
  s.bytes = static_cast<uint64_t>(std::max<int64_t>(0, total_bytes_.load()));
  s.hits = hits_.load();
  s.misses = misses_.load();
  s.coalesced = coalesced_.load();
  s.evictions = evicted_.load();
  s.invalidations = invalidated_.load();
  return s;
}

const ResponseCache::MethodCounters& ResponseCache::CountersOf(std::string_view method) const {
  auto it = by_method_.find(absl::string_view(method.data(), method.size()));
  return it == by_method_.end() ? other_ : it->second;
}

void ResponseCache::CountHit(std::string_view method) { CountersOf(method).hits->Increment(); }
void ResponseCache::CountMiss(std::string_view method) { CountersOf(method).misses->Increment(); }
void ResponseCache::CountCoalesced(std::string_view method) {
  CountersOf(method).coalesced->Increment();
}

}  // namespace switchyard
