#pragma once
// A fake UpstreamClient for the pipelines' unit tests (request and subscription): it records
// every Send, and the test answers them. No sockets.

#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "absl/status/status.h"
#include "api/upstream/upstream_client.h"

namespace switchyard::api_test {

// Records every Send; the test answers them.
class FakeClient : public UpstreamClient {
 public:
  struct Sent {
    std::string target;
    std::string body;
    RetryPolicy policy;
    uint64_t min_slot = 0;
    UpstreamCallback done;
    bool large_answer = false;
  };
  bool Has(std::string_view target) const override { return target == "base" || target == "er1"; }
  void Send(std::string_view target, std::string body, SendOptions options,
            UpstreamCallback done) override {
    const RetryPolicy policy = options.policy;
    if (*shut_down) {  // as UpstreamSet: later sends fail, before Send returns
      done(absl::UnavailableError("shut down"));
      return;
    }
    sent->push_back({std::string(target), std::move(body), policy, options.min_slot,
                     std::move(done), options.large_answer});
  }
  // As UpstreamSet: every send still out fails.
  void Shutdown() override {
    *shut_down = true;
    while (!sent->empty()) {
      Sent pending = std::move(sent->front());
      sent->pop_front();
      pending.done(absl::UnavailableError("shut down"));
    }
  }

  std::shared_ptr<std::deque<Sent>> sent = std::make_shared<std::deque<Sent>>();
  std::shared_ptr<bool> shut_down = std::make_shared<bool>(false);
};

}  // namespace switchyard::api_test
