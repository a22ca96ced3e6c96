#pragma once
// The request pipeline (api/rpc) over a fake UpstreamClient: no sockets, no server. The test
// thread is the worker: it calls Handle and runs the worker's io_context.

#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "api/metrics/api_metrics.h"
#include "api/rpc/internal/router.h"
#include "api/rpc/router.h"
#include "api/upstream/upstream_client.h"
#include "common/clock.h"
#include "common/metrics.h"
#include "engine/snapshot.h"
#include "solana/base64.h"
#include "solana/delegation.h"
#include "tests/api/fake_upstream_client.h"
#include "tests/api/test_support.h"

// GCC 12 reports a false -Wrestrict on `"literal" + std::string` (GCC bug 105329).
#pragma GCC diagnostic ignored "-Wrestrict"

namespace switchyard::api_test {

inline const Pubkey kEr1 = Key(0xE1);
inline constexpr std::string_view kSystemProgram = "11111111111111111111111111111111";

inline std::string Quoted(const Pubkey& key) { return "\"" + key.ToBase58() + "\""; }

// A getMultipleAccounts-shaped answer: `{"context":{"slot":7},"value":[values]}`.
inline std::string ListAnswerBody(const std::string& values, int slot = 7) {
  return R"({"jsonrpc":"2.0","result":{"context":{"slot":)" + std::to_string(slot) +
         R"(},"value":[)" + values + R"(]},"id":1})";
}

// An account value owned by `owner` with base64 `data`.
inline std::string AccountValue(std::string_view owner, const std::string& data = "") {
  return R"({"data":[")" + data + R"(","base64"],"executable":false,"lamports":5,"owner":")" +
         std::string(owner) + R"(","rentEpoch":0,"space":0})";
}

// The base64 data of a delegation record naming `validator`.
inline std::string RecordData(const Pubkey& validator) {
  DelegationRecord record;
  record.authority = validator;
  record.owner = Key(0xAA);
  record.delegation_slot = 10;
  record.lamports = 1000;
  return Base64Encode(EncodeDelegationRecord(record));
}

inline std::string AccountAnswer(int id, std::string_view owner) {
  return R"({"jsonrpc":"2.0","result":{"context":{"slot":7},"value":{"data":["","base64"],)"
         R"("executable":false,"lamports":5,"owner":")" +
         std::string(owner) + R"(","rentEpoch":0,"space":0}},"id":)" + std::to_string(id) + "}";
}

class PipelineTest : public testing::Test {
 protected:
  PipelineTest() {
    snapshots_.Publish(SnapshotBuilder().Delegate(Key(1), kEr1).Build(100));
    Build([](RouterOptions&) {});
  }
  // Makes the router again with the options `adjust` changes from the fixture's.
  void Build(const std::function<void(RouterOptions&)>& adjust) {
    if (router_) {
      router_->Shutdown();
      io_.run();
      io_.restart();
      router_.reset();
    }
    RouterOptions options;
    options.upstreams = {{"base", {{"http://base.invalid:1", 1}}},
                         {"er1", {{"http://er1.invalid:1", 1}}}};
    options.ers = {{kEr1, "er1", "https://er1.example", 0, 50, "DE"}};
    options.routing.default_er = "er1";
    options.max_gate_wait = absl::Milliseconds(30);
    adjust(options);
    auto context = RouterContext::Create(std::move(options), &snapshots_, &clock_, &metrics_);
    EXPECT_TRUE(context.ok()) << context.status();
    context_ = *std::move(context);
    auto client = std::make_unique<FakeClient>();
    sent_ = client->sent;
    shut_down_ = client->shut_down;
    router_ = std::make_unique<Router>(io_, context_.get(), std::move(client));
  }
  ~PipelineTest() override {
    router_->Shutdown();
    io_.run();
  }

  // Hands `body` to the pipeline; the answer lands in `answer_`.
  void Post(std::string body, std::vector<std::pair<std::string, std::string>> headers = {}) {
    HttpRequest request;
    request.method = "POST";
    request.target = "/";
    request.body = std::move(body);
    request.headers = std::move(headers);
    answer_.reset();
    router_->Handle(std::move(request), [this](HttpResponse response) { answer_ = response; });
    io_.poll();
    io_.restart();
  }
  // Hands each body to the pipeline in one turn of the worker's loop, as requests that arrived
  // together; answer i lands in answers_[i].
  void PostTogether(const std::vector<std::string>& bodies) {
    answers_.assign(bodies.size(), std::nullopt);
    for (size_t i = 0; i < bodies.size(); ++i) {
      HttpRequest request;
      request.method = "POST";
      request.target = "/";
      request.body = bodies[i];
      router_->Handle(std::move(request),
                      [this, i](HttpResponse response) { answers_[i] = std::move(response); });
    }
    io_.poll();
    io_.restart();
  }
  // Fails the oldest send with `status` (Unavailable, DeadlineExceeded: what the pool reports).
  void Fail(absl::Status status) {
    ASSERT_FALSE(sent_->empty());
    FakeClient::Sent sent = std::move(sent_->front());
    sent_->pop_front();
    sent.done(std::move(status));
    io_.poll();
    io_.restart();
  }
  // The oldest send still unanswered.
  const FakeClient::Sent& Oldest() const { return sent_->front(); }
  // Answers the oldest send with `status` and `body`.
  void Answer(unsigned status, std::string body) {
    ASSERT_FALSE(sent_->empty());
    FakeClient::Sent sent = std::move(sent_->front());
    sent_->pop_front();
    sent.done(UpstreamResponse{status, std::move(body)});
    io_.poll();
    io_.restart();
  }

  boost::asio::io_context io_;
  SnapshotHolder snapshots_;
  SystemClock clock_;
  MetricsRegistry registry_;
  ApiMetrics metrics_{registry_};
  std::unique_ptr<RouterContext> context_;
  std::unique_ptr<Router> router_;
  std::shared_ptr<std::deque<FakeClient::Sent>> sent_;
  std::shared_ptr<bool> shut_down_;
  std::optional<HttpResponse> answer_;
  std::vector<std::optional<HttpResponse>> answers_;
};

}  // namespace switchyard::api_test
