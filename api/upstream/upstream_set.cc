// UpstreamSet: every target's pool of one worker, the pools of discovered ERs made on first
// use, and the shared TLS client context.
#include <boost/asio/ssl/context.hpp>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "api/upstream/upstream.h"
#include "fmt/format.h"

namespace switchyard {

namespace asio = boost::asio;
namespace ssl = asio::ssl;
using boost::system::error_code;

absl::StatusOr<std::unique_ptr<UpstreamSet>> UpstreamSet::Create(
    asio::io_context& io_context, const std::vector<UpstreamTarget>& targets,
    const UpstreamOptions& options, ssl::context* tls, ApiMetrics* metrics,
    UpstreamHealth* health) {
  auto set = std::make_unique<UpstreamSet>();
  set->io_context_ = &io_context;
  set->options_ = &options;
  set->tls_ = tls;
  set->metrics_ = metrics;
  for (const UpstreamTarget& target : targets) {
    if (target.endpoints.empty()) {
      return absl::InvalidArgumentError(fmt::format("upstream {} has no endpoints", target.name));
    }
    std::vector<ParsedUrl> urls;
    for (const UpstreamEndpoint& endpoint : target.endpoints) {
      absl::StatusOr<ParsedUrl> url = ParseUpstreamUrl(endpoint.url);
      if (!url.ok()) return url.status();
      if (url->tls && tls == nullptr) {
        return absl::InvalidArgumentError(fmt::format("upstream {} needs TLS", endpoint.url));
      }
      urls.push_back(*std::move(url));
    }
    set->pools_[target.name] = std::make_unique<UpstreamPool>(
        io_context, target.name, target.endpoints, std::move(urls), options, tls, metrics,
        health != nullptr ? health->Find(target.name) : nullptr);
  }
  return set;
}

UpstreamPool* UpstreamSet::Find(std::string_view name) {
  auto it = pools_.find(std::string(name));
  return it == pools_.end() ? nullptr : it->second.get();
}

bool UpstreamSet::Has(std::string_view target) const {
  if (pools_.contains(std::string(target))) return true;
  return dynamic_targets_.resolve && !dynamic_targets_.resolve(target).empty();
}

void UpstreamSet::SetDynamicTargets(DynamicTargets dynamic) {
  dynamic_targets_ = std::move(dynamic);
}

UpstreamPool* UpstreamSet::FindDynamic(std::string_view name, UpstreamPool* held) {
  const uint64_t generation = dynamic_targets_.generation();
  auto known = dynamic_.find(absl::string_view(name.data(), name.size()));
  if (known != dynamic_.end() && known->second.generation == generation) return held;
  std::string url = dynamic_targets_.resolve(name);
  if (known != dynamic_.end() && known->second.url == url) {
    known->second.generation = generation;
    return held;
  }
  const std::string key(name);
  if (held != nullptr) {
    retired_.push_back(std::move(pools_[key]));
    pools_.erase(key);
    dynamic_.erase(key);
  }
  if (url.empty() || io_context_ == nullptr) return nullptr;
  absl::StatusOr<ParsedUrl> parsed = ParseUpstreamUrl(url);
  if (!parsed.ok() || (parsed->tls && tls_ == nullptr)) return nullptr;
  auto pool = std::make_unique<UpstreamPool>(
      *io_context_, key, std::vector<UpstreamEndpoint>{{url, 1}},
      std::vector<ParsedUrl>{*std::move(parsed)}, *options_, tls_, metrics_, nullptr);
  UpstreamPool* raw = pool.get();
  pools_[key] = std::move(pool);
  dynamic_[key] = DynamicPool{std::move(url), generation};
  return raw;
}

void UpstreamSet::Send(std::string_view target, std::string body, SendOptions options,
                       UpstreamCallback done) {
  UpstreamPool* pool = Find(target);
  if (dynamic_targets_.resolve &&
      (pool == nullptr || dynamic_.contains(absl::string_view(target.data(), target.size())))) {
    pool = FindDynamic(target, pool);
  }
  if (pool == nullptr) {
    done(absl::NotFoundError(fmt::format("no upstream named {}", target)));
    return;
  }
  pool->Send(std::move(body), options, std::move(done));
}

void UpstreamSet::Shutdown() {
  for (auto& [name, pool] : pools_) pool->Shutdown();
  for (auto& pool : retired_) pool->Shutdown();
}

std::unique_ptr<ssl::context> MakeClientTlsContext(bool verify) {
  auto context = std::make_unique<ssl::context>(ssl::context::tls_client);
  error_code ec;
  context->set_default_verify_paths(ec);
  context->set_verify_mode(verify ? ssl::verify_peer : ssl::verify_none, ec);
  return context;
}

}  // namespace switchyard
