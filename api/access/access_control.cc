#include "api/access/access_control.h"

#include <algorithm>
#include <utility>

#include "api/jsonrpc/rpc_errors.h"
#include "common/url.h"
#include "fmt/format.h"

namespace switchyard {
namespace {

constexpr std::string_view kAnonymous = "anonymous";

bool IsKeyChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '-';
}

bool SameLimit(RateLimit a, RateLimit b) {
  return a.per_second == b.per_second && a.burst == b.burst;
}

}  // namespace

std::optional<std::string_view> FindApiKey(std::string_view target,
                                           std::optional<std::string_view> header) {
  if (header && !header->empty()) return header;
  if (std::optional<std::string_view> key = QueryParameter(target, "api-key")) return key;
  std::string_view path = target.substr(0, target.find('?'));
  if (path.starts_with('/')) path.remove_prefix(1);
  if (path.ends_with('/')) path.remove_suffix(1);
  if (path.empty() || path.find('/') != std::string_view::npos) return std::nullopt;
  return path;
}

absl::Status ValidateApiKeys(const std::vector<ApiKeyOptions>& keys) {
  absl::flat_hash_set<std::string> names;
  absl::flat_hash_set<std::string> secrets;
  for (size_t i = 0; i < keys.size(); ++i) {
    const ApiKeyOptions& key = keys[i];
    const std::string which =
        key.name.empty() ? fmt::format("keys[{}]", i) : fmt::format("key \"{}\"", key.name);
    if (key.name.empty())
      return absl::InvalidArgumentError(fmt::format("{}: 'name' is required", which));
    for (const char c : key.name) {
      if (!IsKeyChar(c) && c != '.') {
        return absl::InvalidArgumentError(fmt::format(
            "{}: 'name' must be letters, digits, '_', '-' or '.' (it is a metric label)", which));
      }
    }
    if (key.name == kAnonymous) {
      return absl::InvalidArgumentError(
          fmt::format("{}: 'name' \"anonymous\" is kept for clients without a key", which));
    }
    if (!names.insert(key.name).second) {
      return absl::InvalidArgumentError(fmt::format("{}: 'name' is used by another key", which));
    }
    if (key.key.size() < 8 || !std::all_of(key.key.begin(), key.key.end(), IsKeyChar)) {
      return absl::InvalidArgumentError(fmt::format(
          "{}: 'key' must be at least 8 characters of A-Z, a-z, 0-9, '_' and '-'", which));
    }
    if (!secrets.insert(key.key).second) {
      return absl::InvalidArgumentError(
          fmt::format("{}: 'key' is the same as another key's", which));
    }
    for (const std::string& method : key.allowed_methods) {
      if (std::find(key.denied_methods.begin(), key.denied_methods.end(), method) !=
          key.denied_methods.end()) {
        return absl::InvalidArgumentError(fmt::format(
            "{}: '{}' is both in 'allowed_methods' and in 'denied_methods'", which, method));
      }
    }
  }
  return absl::OkStatus();
}

bool AccessControl::Key::Allows(std::string_view method) const {
  const absl::string_view name(method.data(), method.size());
  if (!denied.empty() && denied.contains(name)) return false;
  return allowed.empty() || allowed.contains(name);
}

AccessControl::AccessControl(AccessOptions options, const Clock* clock, MetricsRegistry* registry)
    : options_(std::move(options)), clock_(clock), registry_(registry) {
  MetricsRegistry& r = *registry;
  unauthorized_ = &r.AddCounter("switchyard_api_unauthorized_total",
                                "HTTP requests answered 401: no valid API key where one is needed");
  address_limited_ = &r.AddCounter(
      "switchyard_api_address_limited_calls_total",
      "JSON-RPC calls answered 429 by the limit per client address (a batch element is one)");
  ws_unauthorized_ =
      &r.AddCounter("switchyard_pubsub_unauthorized_total",
                    "WebSocket handshakes answered 401: no valid API key where one is needed");
  ws_limited_messages_ =
      &r.AddCounter("switchyard_pubsub_limited_messages_total",
                    "Pubsub messages answered -32429: over the limit of the connection or the key");
  ws_subscription_limit_ =
      &r.AddCounter("switchyard_pubsub_key_subscription_limit_total",
                    "Subscribe calls refused: the API key holds its max_subscriptions already");
  reloads_ = &r.AddCounter("switchyard_api_key_reloads_total", "Key files read again (SIGHUP)");
  reload_failures_ = &r.AddCounter("switchyard_api_key_reload_failures_total",
                                   "Key file reloads that failed (the keys in use were kept)");
  keys_gauge_ = &r.AddGauge("switchyard_api_keys", "API keys in the table in use");
}

AccessControl::~AccessControl() = default;

absl::StatusOr<std::unique_ptr<AccessControl>> AccessControl::Create(AccessOptions options,
                                                                     const Clock* clock,
                                                                     MetricsRegistry* registry) {
  if (options.replicas == 0) return absl::InvalidArgumentError("'replicas' must be at least 1");
  std::unique_ptr<AccessControl> access(new AccessControl(std::move(options), clock, registry));
  const AccessOptions& o = access->options_;
  if (!o.redis_url.empty()) {
    SharedLimitOptions shared;
    shared.url = o.redis_url;
    shared.replicas = o.replicas;
    shared.timeout = o.redis_timeout;
    absl::StatusOr<std::unique_ptr<SharedLimitStore>> store =
        SharedLimitStore::Start(std::move(shared), clock, registry);
    if (!store.ok()) return store.status();
    access->shared_ = *std::move(store);
  }
  if (o.address_requests.enabled()) {
    access->addresses_ = std::make_unique<AddressBuckets>(o.address_requests, o.max_addresses);
  }
  std::vector<ApiKeyOptions> keys = o.keys;
  if (o.load_key_file) {
    absl::StatusOr<std::vector<ApiKeyOptions>> file = o.load_key_file();
    if (!file.ok()) return file.status();
    keys.insert(keys.end(), file->begin(), file->end());
  }
  absl::StatusOr<std::shared_ptr<const Table>> table = access->BuildTable(keys);
  if (!table.ok()) return table.status();
  absl::MutexLock lock(&access->mu_);
  access->table_ = *std::move(table);
  return access;
}

absl::Status AccessControl::Reload() {
  if (!options_.load_key_file) return absl::OkStatus();
  reloads_->Increment();
  absl::StatusOr<std::vector<ApiKeyOptions>> file = options_.load_key_file();
  if (!file.ok()) {
    reload_failures_->Increment();
    return file.status();
  }
  std::vector<ApiKeyOptions> keys = options_.keys;
  keys.insert(keys.end(), file->begin(), file->end());
  absl::StatusOr<std::shared_ptr<const Table>> table = BuildTable(keys);
  if (!table.ok()) {
    reload_failures_->Increment();
    return table.status();
  }
  {
    absl::MutexLock lock(&mu_);
    table_ = *std::move(table);
  }
  generation_.fetch_add(1, std::memory_order_acq_rel);
  return absl::OkStatus();
}

std::shared_ptr<const AccessControl::Table> AccessControl::CurrentTable() const {
  absl::MutexLock lock(&mu_);
  return table_;
}

AccessControl::KeyCounters AccessControl::CountersFor(const std::string& name) {
  auto it = counters_.find(name);
  if (it != counters_.end()) return it->second;
  auto add = [&](const char* outcome) {
    return &registry_->AddCounter(
        "switchyard_api_key_calls_total",
        "JSON-RPC calls by API key name (\"anonymous\": no key) and outcome: allowed, limited "
        "(429), denied (a method the key may not call)",
        {{"key", name}, {"outcome", outcome}});
  };
  KeyCounters counters{add("allowed"), add("limited"), add("denied")};
  counters_.emplace(name, counters);
  return counters;
}

absl::StatusOr<std::shared_ptr<const AccessControl::Table>> AccessControl::BuildTable(
    const std::vector<ApiKeyOptions>& keys) {
  if (absl::Status valid = ValidateApiKeys(keys); !valid.ok()) return valid;
  auto table = std::make_shared<Table>();
  absl::MutexLock lock(&mu_);
  absl::flat_hash_map<std::string, KeyBuckets> buckets;
  for (const ApiKeyOptions& options : keys) {
    auto key = std::make_unique<Key>();
    key->name = options.name;
    key->allowed.insert(options.allowed_methods.begin(), options.allowed_methods.end());
    key->denied.insert(options.denied_methods.begin(), options.denied_methods.end());
    key->max_subscriptions = options.max_subscriptions;
    KeyBuckets kept;
    if (auto it = buckets_.find(options.name); it != buckets_.end()) kept = it->second;
    if (!SameLimit(kept.requests, options.requests) || (!kept.shared && !kept.local)) {
      kept.requests = options.requests;
      kept.shared.reset();
      kept.local.reset();
      if (options.requests.enabled()) {
        if (shared_) {
          kept.shared = shared_->Bucket(options.name, options.requests);
        } else {
          kept.local = std::make_shared<TokenBucket>(options.requests);
        }
      }
    }
    if (!SameLimit(kept.ws_messages, options.ws_messages) || !kept.ws) {
      kept.ws_messages = options.ws_messages;
      kept.ws = options.ws_messages.enabled() ? std::make_shared<TokenBucket>(options.ws_messages)
                                              : nullptr;
    }
    if (!kept.subscriptions) kept.subscriptions = std::make_shared<std::atomic<int64_t>>(0);
    key->requests = kept.local;
    key->shared = kept.shared;
    key->ws_messages = kept.ws;
    key->subscriptions = kept.subscriptions;
    const KeyCounters counters = CountersFor(options.name);
    key->allowed_calls = counters.allowed;
    key->limited_calls = counters.limited;
    key->denied_calls = counters.denied;
    buckets.emplace(options.name, std::move(kept));
    table->by_secret.emplace(options.key, std::move(key));
  }
  buckets_ = std::move(buckets);
  Key& anonymous = table->anonymous;
  anonymous.name = std::string(kAnonymous);
  anonymous.subscriptions = std::make_shared<std::atomic<int64_t>>(0);
  const KeyCounters counters = CountersFor(anonymous.name);
  anonymous.allowed_calls = counters.allowed;
  anonymous.limited_calls = counters.limited;
  anonymous.denied_calls = counters.denied;
  keys_gauge_->Set(static_cast<int64_t>(table->by_secret.size()));
  return std::shared_ptr<const Table>(std::move(table));
}

const std::shared_ptr<const AccessControl::Table>& AccessControl::View::table() {
  const uint64_t generation = owner_->generation_.load(std::memory_order_acquire);
  if (generation != generation_ || !table_) {
    table_ = owner_->CurrentTable();
    generation_ = generation;
  }
  return table_;
}

AccessControl::Admission AccessControl::View::AdmitHttp(std::string_view target,
                                                        std::optional<std::string_view> key_header,
                                                        const boost::asio::ip::address& peer,
                                                        std::vector<RpcCall>* calls) {
  const Table& t = *table();
  const Key* key = &t.anonymous;
  if (!t.by_secret.empty() || owner_->options_.keys_required) {
    const std::optional<std::string_view> secret = FindApiKey(target, key_header);
    if (secret) {
      auto it = t.by_secret.find(absl::string_view(secret->data(), secret->size()));
      if (it == t.by_secret.end()) {
        owner_->unauthorized_->Increment();
        return {Verdict::kUnauthorized, 0};
      }
      key = it->second.get();
    } else if (owner_->options_.keys_required) {
      owner_->unauthorized_->Increment();
      return {Verdict::kUnauthorized, 0};
    }
  }
  const auto cost = static_cast<uint32_t>(std::max<size_t>(1, calls->size()));
  const int64_t now = owner_->NowNanos();
  if (owner_->addresses_) {
    if (const int64_t wait = owner_->addresses_->Take(peer, now, cost); wait > 0) {
      owner_->address_limited_->Increment(cost);
      key->limited_calls->Increment(cost);
      return {Verdict::kLimited, RetryAfterSeconds(wait)};
    }
  }
  int64_t wait = 0;
  if (key->shared) {
    wait = key->shared->Take(now, cost);
  } else if (key->requests) {
    wait = key->requests->Take(now, cost);
  }
  if (wait > 0) {
    key->limited_calls->Increment(cost);
    return {Verdict::kLimited, RetryAfterSeconds(wait)};
  }
  uint64_t denied = 0;
  if (!key->allowed.empty() || !key->denied.empty()) {
    for (RpcCall& call : *calls) {
      if (!call.error.ok() || key->Allows(call.method)) continue;
      call.error = MakeRpcStatus(RpcErrorKind::kMethodDenied,
                                 fmt::format("{} is not allowed for this API key", call.method));
      ++denied;
    }
  }
  if (denied > 0) key->denied_calls->Increment(denied);
  key->allowed_calls->Increment(cost - denied);
  return {Verdict::kAllowed, 0};
}

const AccessControl::Key* AccessControl::AdmitWebSocket(const std::shared_ptr<const Table>& table,
                                                        std::string_view target,
                                                        std::optional<std::string_view> key_header,
                                                        bool* unauthorized) {
  *unauthorized = false;
  if (table->by_secret.empty() && !options_.keys_required) return &table->anonymous;
  const std::optional<std::string_view> secret = FindApiKey(target, key_header);
  if (secret) {
    auto it = table->by_secret.find(absl::string_view(secret->data(), secret->size()));
    if (it != table->by_secret.end()) return it->second.get();
  } else if (!options_.keys_required) {
    return &table->anonymous;
  }
  ws_unauthorized_->Increment();
  *unauthorized = true;
  return nullptr;
}

}  // namespace switchyard
