#include "api/pubsub/pubsub_router.h"

#include <boost/asio/post.hpp>
#include <boost/asio/ssl/context.hpp>

#include "absl/hash/hash.h"
#include "api/pubsub/pubsub_shard.h"
#include "fmt/format.h"

namespace switchyard {

namespace asio = boost::asio;

PubsubRouter::PubsubRouter(PubsubRouterOptions options, RouterContext* context,
                           PubsubMetrics* metrics, std::vector<asio::io_context*> threads)
    : options_(std::move(options)),
      context_(context),
      metrics_(metrics),
      threads_(std::move(threads)) {}

PubsubRouter::~PubsubRouter() = default;

absl::StatusOr<std::unique_ptr<PubsubRouter>> PubsubRouter::Create(
    PubsubRouterOptions options, RouterContext* context, PubsubMetrics* metrics,
    std::vector<asio::io_context*> threads) {
  if (threads.empty()) return absl::InvalidArgumentError("pubsub: no threads");
  std::unique_ptr<PubsubRouter> router(
      new PubsubRouter(std::move(options), context, metrics, std::move(threads)));
  bool needs_tls = false;
  for (const auto& [name, urls] : router->options_.endpoints) {
    bool known = false;
    for (const UpstreamTarget& target : context->options().upstreams) known |= target.name == name;
    if (!known) {
      return absl::InvalidArgumentError(
          fmt::format("pubsub.upstreams.{}: no upstream named \"{}\" is configured", name, name));
    }
  }
  for (const UpstreamTarget& target : context->options().upstreams) {
    std::vector<std::string> urls;
    for (const auto& [name, list] : router->options_.endpoints) {
      if (name == target.name) urls = list;
    }
    if (urls.empty()) {
      for (const UpstreamEndpoint& endpoint : target.endpoints) {
        absl::StatusOr<std::string> url = PubsubUrlFor(endpoint.url);
        if (!url.ok()) {
          return absl::InvalidArgumentError(
              fmt::format("upstreams.{}: {}", target.name, std::string(url.status().message())));
        }
        urls.push_back(*url);
      }
    }
    std::vector<WsEndpoint> endpoints;
    for (const std::string& url : urls) {
      absl::StatusOr<WsEndpoint> endpoint = ParseWsUrl(url);
      if (!endpoint.ok()) {
        return absl::InvalidArgumentError(fmt::format("pubsub.upstreams.{}: {}", target.name,
                                                      std::string(endpoint.status().message())));
      }
      needs_tls |= endpoint->tls;
      endpoints.push_back(*std::move(endpoint));
    }
    router->endpoints_.emplace_back(target.name, std::move(endpoints));
  }
  router->tls_ = context->tls();
  if (needs_tls && router->tls_ == nullptr) {
    router->own_tls_ = MakeClientTlsContext(router->options_.upstream.verify_tls);
    router->tls_ = router->own_tls_.get();
  }
  return router;
}

std::vector<WsEndpoint> PubsubRouter::EndpointsOf(std::string_view target) const {
  for (const auto& [name, endpoints] : endpoints_) {
    if (name == target) return endpoints;
  }
  const std::string url = context_->ers()->DiscoveredUrl(target);
  if (url.empty()) return {};
  absl::StatusOr<std::string> ws = PubsubUrlFor(url);
  if (!ws.ok()) return {};
  absl::StatusOr<WsEndpoint> endpoint = ParseWsUrl(*ws);
  if (!endpoint.ok() || (endpoint->tls && tls_ == nullptr)) return {};
  return {*std::move(endpoint)};
}

void PubsubRouter::Start() {
  for (size_t i = 0; i < threads_.size(); ++i) {
    shards_.push_back(std::make_shared<PubsubShard>(i, this));
  }
  for (auto& shard : shards_) shard->Start();
}

void PubsubRouter::ShutdownShard(size_t i) {
  if (i < shards_.size()) shards_[i]->Shutdown();
}

size_t PubsubRouter::ShardFor(std::string_view key) const {
  return absl::Hash<std::string_view>()(key) % threads_.size();
}

void PubsubRouter::Subscribe(std::shared_ptr<PubsubClient> client, SubscribeRequest request) {
  const size_t shard = ShardFor(request.key);
  asio::post(*threads_[shard], [s = shards_[shard], client = std::move(client),
                                request = std::move(request)]() mutable {
    s->Subscribe(std::move(client), std::move(request));
  });
}

void PubsubRouter::Unsubscribe(std::shared_ptr<PubsubClient> client, size_t shard, uint64_t id) {
  asio::post(*threads_[shard], [s = shards_[shard], client = std::move(client), id] {
    s->Unsubscribe(client.get(), id);
  });
}

void PubsubRouter::RemoveClient(std::shared_ptr<PubsubClient> client) {
  for (size_t i = 0; i < shards_.size(); ++i) {
    asio::post(*threads_[i], [s = shards_[i], client] { s->RemoveClient(client.get()); });
  }
}

}  // namespace switchyard
