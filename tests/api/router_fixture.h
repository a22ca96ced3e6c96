#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string>

#include "api/metrics/api_metrics.h"
#include "api/net/http_server.h"
#include "api/rpc/router.h"
#include "common/clock.h"
#include "common/metrics.h"
#include "engine/snapshot.h"
#include "tests/api/fake_upstream.h"
#include "tests/api/test_client.h"
#include "tests/api/test_support.h"

namespace switchyard::api_test {

inline const Pubkey kEr1Identity = Key(0xE1);
inline const Pubkey kEr2Identity = Key(0xE2);

// The router in-process on 127.0.0.1:0 in front of fake upstreams: base (two endpoints:
// `base` and `base_b`), er1, er2 and an indexer. Accounts Key(1), Key(5) are delegated to
// er1, Key(2) to er2; the applied slot is 100.
class RouterFixture : public testing::Test {
 protected:
  RouterFixture() : base_("base"), base_b_("base"), er1_("er1"), er2_("er2"), indexer_("indexer") {
    snapshots_.Publish(SnapshotBuilder()
                           .Delegate(Key(1), kEr1Identity)
                           .Delegate(Key(5), kEr1Identity)
                           .Delegate(Key(2), kEr2Identity)
                           .Build(100));
  }
  ~RouterFixture() override {
    if (server_) server_->Stop();
  }

  // Starts the router; `customize` may change the options first.
  void Start(std::function<void(RouterOptions&, HttpServerOptions&)> customize = nullptr,
             bool two_base_endpoints = false) {
    RouterOptions options;
    options.upstreams = {
        {"base", {{base_.url(), 1}}},
        {"er1", {{er1_.url(), 1}}},
        {"er2", {{er2_.url(), 1}}},
        {"indexer", {{indexer_.url(), 1}}},
    };
    if (two_base_endpoints) options.upstreams[0].endpoints.push_back({base_b_.url(), 1});
    options.ers = {{kEr1Identity, "er1", "https://er1.example", 0, 50, "DE"},
                   {kEr2Identity, "er2", "https://er2.example", 0, 30, "US"}};
    options.routing.default_er = "er1";
    options.routing.method_rules = {{"getAsset*", "indexer"}};
    options.identity = Key(0x99);
    options.fqdn = "https://router.example";
    options.upstream.request_timeout = absl::Seconds(5);
    HttpServerOptions server_options;
    server_options.threads = 2;
    if (customize) customize(options, server_options);
    absl::StatusOr<std::unique_ptr<RouterContext>> context =
        RouterContext::Create(std::move(options), &snapshots_, &clock_, &metrics_);
    ASSERT_TRUE(context.ok()) << context.status();
    context_ = *std::move(context);
    server_ = std::make_unique<HttpServer>(server_options, context_->HandlerFactory(), &metrics_);
    ASSERT_TRUE(server_->Start().ok());
  }

  uint16_t port() const { return server_->port(); }
  static std::string Quoted(const Pubkey& key) { return "\"" + key.ToBase58() + "\""; }

  // Waits for `condition` with a deadline.
  static bool WaitFor(const std::function<bool()>& condition,
                      absl::Duration timeout = absl::Seconds(10)) {
    absl::Mutex mu;
    absl::MutexLock lock(&mu);
    const bool never = false;
    const absl::Time deadline = absl::Now() + timeout;
    while (!condition()) {
      if (absl::Now() > deadline) return false;
      mu.AwaitWithTimeout(absl::Condition(&never), absl::Milliseconds(1));  // re-check each ms
    }
    return true;
  }

  FakeUpstream base_;
  FakeUpstream base_b_;
  FakeUpstream er1_;
  FakeUpstream er2_;
  FakeUpstream indexer_;
  SnapshotHolder snapshots_;
  SystemClock clock_;
  MetricsRegistry registry_;
  ApiMetrics metrics_{registry_};
  std::unique_ptr<RouterContext> context_;
  std::unique_ptr<HttpServer> server_;
};

}  // namespace switchyard::api_test
