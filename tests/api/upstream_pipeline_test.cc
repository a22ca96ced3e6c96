// HTTP/1.1 pipelining of upstream connections (docs/architecture.md §11) against a real
// localnet base layer: concurrent reads queued behind each other on a few connections each get
// their own answer; an endpoint that does not pipeline is found by the probe and served one
// exchange per connection; configured on against such an endpoint, no read is lost; a write
// written behind a request whose connection ended is never sent again; reads behind a slow
// answer are hedged on another connection; a request whose answer may be large is queued
// behind none and takes no followers.
#include <gtest/gtest.h>
#include <simdjson.h>

#include <array>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "api/metrics/api_metrics.h"
#include "api/upstream/upstream.h"
#include "common/clock.h"
#include "common/metrics.h"
#include "localnet/localnet.h"
#include "tests/api/fake_upstream.h"
#include "tests/api/test_support.h"

namespace switchyard::api_test {
namespace {

using localnet::Account;
using localnet::Localnet;
using localnet::LocalnetOptions;
using namespace std::chrono_literals;

constexpr int kAccounts = 200;

Pubkey AccountKey(int i) {
  std::array<uint8_t, 32> bytes;
  bytes.fill(0x5a);
  bytes[0] = static_cast<uint8_t>(i);
  bytes[1] = static_cast<uint8_t>(i >> 8);
  return Pubkey(bytes);
}
uint64_t LamportsOf(int i) { return 1000 + static_cast<uint64_t>(i); }

std::string GetBalance(int i) {
  return R"({"jsonrpc":"2.0","id":)" + std::to_string(i) + R"(,"method":"getBalance","params":[")" +
         AccountKey(i).ToBase58() + R"("]})";
}

// The id and balance of a getBalance answer; {-1, 0} when it is not one.
std::pair<int64_t, uint64_t> ParseBalance(const std::string& body) {
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  int64_t id = -1;
  uint64_t lamports = 0;
  if (parser.parse(body).get(root) != simdjson::SUCCESS) return {-1, 0};
  if (root["id"].get_int64().get(id) != simdjson::SUCCESS) return {-1, 0};
  if (root["result"]["value"].get_uint64().get(lamports) != simdjson::SUCCESS) return {-1, 0};
  return {id, lamports};
}

class UpstreamPipelineTest : public ::testing::Test {
 protected:
  void StartBase(localnet::FaultOptions faults = {}) {
    LocalnetOptions options;
    options.port = 0;
    options.io_threads = 1;
    options.slot_interval = absl::Milliseconds(50);
    options.faults = faults;
    base_ = std::make_unique<Localnet>(options, &clock_);
    ASSERT_TRUE(base_->Start().ok());
    for (int i = 0; i < kAccounts; ++i) {
      base_->bank().SetAccount(AccountKey(i),
                               Account{LamportsOf(i), localnet::SystemProgramId(), "", false});
    }
  }

  void MakeSet(UpstreamOptions::Pipeline mode, size_t connections = 2) {
    options_.pipeline = mode;
    options_.pipeline_connections = connections;
    options_.pipeline_depth = 16;
    options_.request_timeout = absl::Seconds(5);
    auto set = UpstreamSet::Create(
        io_context_,
        {UpstreamTarget{"base", {{"http://127.0.0.1:" + std::to_string(base_->http_port()), 1}}}},
        options_, nullptr, &metrics_);
    ASSERT_TRUE(set.ok()) << set.status();
    set_ = *std::move(set);
  }

  // Sends a getBalance of every account at once, `rounds` times, and checks that each answer is
  // its own request's. Returns how many answered.
  int ReadAll(int rounds = 1) {
    int answered = 0;
    int wrong = 0;
    std::string first_error;
    for (int round = 0; round < rounds; ++round) {
      for (int i = 0; i < kAccounts; ++i) {
        set_->Send("base", GetBalance(i), RetryPolicy::kSafe,
                   [&, i](absl::StatusOr<UpstreamResponse> response) {
                     if (!response.ok()) {
                       if (first_error.empty()) first_error = response.status().ToString();
                       return;
                     }
                     const auto [id, lamports] = ParseBalance(response->body);
                     if (id == i && lamports == LamportsOf(i)) {
                       ++answered;
                     } else {
                       ++wrong;
                     }
                   });
      }
      const auto until = std::chrono::steady_clock::now() + 10s;
      while (answered + wrong < (round + 1) * kAccounts &&
             std::chrono::steady_clock::now() < until && first_error.empty()) {
        io_context_.run_for(5ms);
      }
    }
    EXPECT_EQ(wrong, 0);
    EXPECT_EQ(first_error, "");
    return answered;
  }

  void TearDown() override {
    if (set_) set_->Shutdown();
    io_context_.run_for(20ms);
  }

  SystemClock clock_;
  std::unique_ptr<Localnet> base_;
  MetricsRegistry registry_;
  ApiMetrics metrics_{registry_};
  boost::asio::io_context io_context_;
  // run_for stops an io_context that has run out of work, and every later run_for returns at
  // once until restart(): a pool whose connections are idle between two sends has none left,
  // and a test waiting on its next answer would spin until its deadline. The guard is work.
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work_ =
      boost::asio::make_work_guard(io_context_);
  UpstreamOptions options_;
  std::unique_ptr<UpstreamSet> set_;
};

TEST_F(UpstreamPipelineTest, ConcurrentReadsArePipelinedAndEachGetsItsOwnAnswer) {
  StartBase();
  MakeSet(UpstreamOptions::Pipeline::kAuto);
  EXPECT_EQ(ReadAll(3), 3 * kAccounts);
  EXPECT_EQ(metrics_.upstream_pipeline_probes.value(), 1u);
  EXPECT_EQ(metrics_.upstream_pipeline_fallbacks.value(), 0u);
  // Once the probe said yes, requests queue behind others instead of opening connections.
  EXPECT_GT(metrics_.upstream_pipelined.value(), 0u);
  EXPECT_EQ(metrics_.upstream_pipeline_breaks.value(), 0u);
  EXPECT_EQ(metrics_.upstream_failures.value(), 0u);
}

TEST_F(UpstreamPipelineTest, AnEndpointWithoutPipeliningFallsBackToOneExchangePerConnection) {
  localnet::FaultOptions faults;
  faults.no_pipelining = true;
  StartBase(faults);
  MakeSet(UpstreamOptions::Pipeline::kAuto);
  EXPECT_EQ(ReadAll(3), 3 * kAccounts);
  EXPECT_EQ(metrics_.upstream_pipeline_probes.value(), 1u);
  EXPECT_EQ(metrics_.upstream_pipeline_fallbacks.value(), 1u);
  EXPECT_EQ(metrics_.upstream_pipelined.value(), 0u);
  EXPECT_EQ(metrics_.upstream_failures.value(), 0u);
}

TEST_F(UpstreamPipelineTest, ConfiguredOnAgainstAnEndpointWithoutPipeliningLosesNoRead) {
  localnet::FaultOptions faults;
  faults.no_pipelining = true;
  StartBase(faults);
  MakeSet(UpstreamOptions::Pipeline::kOn);
  EXPECT_EQ(ReadAll(), kAccounts);
  // The endpoint closed connections with reads queued behind an answer: they went again, and
  // the endpoint was asked, and found not to pipeline.
  EXPECT_GT(metrics_.upstream_pipeline_breaks.value(), 0u);
  EXPECT_GT(metrics_.upstream_pipeline_moves.value(), 0u);
  EXPECT_EQ(metrics_.upstream_pipeline_probes.value(), 1u);
  EXPECT_EQ(metrics_.upstream_pipeline_fallbacks.value(), 1u);
  // Later reads take one exchange per connection and none is cut.
  const uint64_t breaks = metrics_.upstream_pipeline_breaks.value();
  EXPECT_EQ(ReadAll(), kAccounts);
  EXPECT_EQ(metrics_.upstream_pipeline_breaks.value(), breaks);
}

TEST_F(UpstreamPipelineTest, AWriteQueuedBehindARequestWhoseConnectionEndedIsNotSentAgain) {
  localnet::FaultOptions faults;
  faults.no_pipelining = true;
  StartBase(faults);
  MakeSet(UpstreamOptions::Pipeline::kOn, /*connections=*/1);
  // One read, then writes queued behind it on the same connection: the endpoint answers the
  // read and closes; the writes written behind it were not answered and must not go again.
  constexpr int kWrites = 8;
  int write_errors = 0;
  int write_answers = 0;
  std::string error_text;
  bool read_done = false;
  set_->Send("base", GetBalance(1), RetryPolicy::kSafe,
             [&](absl::StatusOr<UpstreamResponse> response) {
               EXPECT_TRUE(response.ok()) << response.status();
               read_done = true;
             });
  for (int i = 0; i < kWrites; ++i) {
    const std::string airdrop = R"({"jsonrpc":"2.0","id":)" + std::to_string(100 + i) +
                                R"(,"method":"requestAirdrop","params":[")" +
                                AccountKey(i).ToBase58() + R"(",1]})";
    set_->Send("base", airdrop, RetryPolicy::kOtherEndpointOnly,
               [&](absl::StatusOr<UpstreamResponse> response) {
                 if (response.ok()) {
                   ++write_answers;
                 } else {
                   ++write_errors;
                   error_text = response.status().ToString();
                 }
               });
  }
  const auto until = std::chrono::steady_clock::now() + 10s;
  while ((!read_done || write_errors + write_answers < kWrites) &&
         std::chrono::steady_clock::now() < until) {
    io_context_.run_for(5ms);
  }
  EXPECT_TRUE(read_done);
  EXPECT_EQ(write_errors + write_answers, kWrites);
  // Each airdrop the router answered was received and applied once; the ones cut were not
  // sent again (a write is never sent twice).
  io_context_.run_for(300ms);  // the airdrops land at the next slots
  uint64_t credited = 0;
  for (int i = 0; i < kWrites; ++i) {
    const auto account = base_->bank().GetAccount(AccountKey(i));
    ASSERT_TRUE(account);
    credited += account->lamports - LamportsOf(i);
  }
  EXPECT_EQ(credited, static_cast<uint64_t>(write_answers));
  EXPECT_GT(write_errors, 0) << "no write was queued behind the read";
  EXPECT_NE(error_text.find("queued behind another"), std::string::npos) << error_text;
}

// Sends `bodies` at once with `send` and runs until each is answered; returns how many were
// answered with status 200.
int SendAll(UpstreamSet& set, boost::asio::io_context& io_context,
            const std::vector<std::string>& bodies, const SendOptions& send) {
  int ok = 0;
  int ended = 0;
  for (const std::string& body : bodies) {
    set.Send("base", body, send, [&](absl::StatusOr<UpstreamResponse> response) {
      ++ended;
      if (response.ok() && response->status == 200) ++ok;
    });
  }
  const auto until = std::chrono::steady_clock::now() + 10s;
  while (ended < static_cast<int>(bodies.size()) && std::chrono::steady_clock::now() < until) {
    io_context.run_for(5ms);
  }
  return ok;
}

std::string GetMultipleAccounts(int id) {
  std::string keys;
  for (int i = 0; i < 100; ++i) {
    if (i > 0) keys += ',';
    keys += '"' + AccountKey(i).ToBase58() + '"';
  }
  return R"({"jsonrpc":"2.0","id":)" + std::to_string(id) +
         R"(,"method":"getMultipleAccounts","params":[[)" + keys + "]]}";
}

TEST_F(UpstreamPipelineTest, ARequestWithALargeAnswerIsQueuedBehindNoneAndTakesNoFollowers) {
  StartBase();
  std::vector<std::string> large;
  for (int i = 0; i < 12; ++i) large.push_back(GetMultipleAccounts(i));
  std::vector<std::string> small;
  for (int i = 0; i < 8; ++i) small.push_back(GetBalance(i));
  SendOptions plain(RetryPolicy::kSafe);
  SendOptions marked(RetryPolicy::kSafe);
  marked.large_answer = true;
  // Each case starts with a pool that has no connection yet (an idle one would be taken first).
  auto fresh_pool = [&] {
    if (set_) set_->Shutdown();
    io_context_.run_for(20ms);
    MakeSet(UpstreamOptions::Pipeline::kOn, /*connections=*/1);
    return metrics_.upstream_pipelined.value();
  };

  // Unmarked, twelve reads sent at once queue behind the first on the one connection.
  uint64_t before = fresh_pool();
  ASSERT_EQ(SendAll(*set_, io_context_, large, plain), 12);
  EXPECT_EQ(metrics_.upstream_pipelined.value() - before, 11u);
  // Marked, each has a connection of its own; the next twelve take the same connections again,
  // kept idle apart from the pipelining ones (none closed and opened anew).
  before = fresh_pool();
  const uint64_t opened = metrics_.upstream_connections_opened.value();
  ASSERT_EQ(SendAll(*set_, io_context_, large, marked), 12);
  EXPECT_EQ(metrics_.upstream_pipelined.value() - before, 0u);
  EXPECT_EQ(metrics_.upstream_connections_opened.value() - opened, 12u);
  ASSERT_EQ(SendAll(*set_, io_context_, large, marked), 12);
  EXPECT_EQ(metrics_.upstream_pipelined.value() - before, 0u);
  EXPECT_EQ(metrics_.upstream_connections_opened.value() - opened, 12u);
  // Unmarked reads queue on a pipelining connection, not on the idle ones kept for large
  // answers.
  ASSERT_EQ(SendAll(*set_, io_context_, small, plain), 8);
  EXPECT_EQ(metrics_.upstream_pipelined.value() - before, 7u);
  EXPECT_EQ(metrics_.upstream_connections_opened.value() - opened, 13u);

  // A large read in flight, then eight small reads at once. Marked: the first small read finds
  // only the large read's connection busy and opens another; the other seven queue behind it.
  // Unmarked (the control), all eight queue behind the large read.
  for (const bool mark : {true, false}) {
    before = fresh_pool();
    int large_ok = 0;
    set_->Send("base", GetMultipleAccounts(99), mark ? marked : plain,
               [&](absl::StatusOr<UpstreamResponse> response) {
                 if (response.ok() && response->status == 200) ++large_ok;
               });
    ASSERT_EQ(SendAll(*set_, io_context_, small, plain), 8);
    const auto until = std::chrono::steady_clock::now() + 10s;
    while (large_ok == 0 && std::chrono::steady_clock::now() < until) io_context_.run_for(5ms);
    EXPECT_EQ(large_ok, 1);
    EXPECT_EQ(metrics_.upstream_pipelined.value() - before, mark ? 7u : 8u) << "marked " << mark;
  }
  EXPECT_EQ(metrics_.upstream_failures.value(), 0u);
}

// A large answer is read in large pieces: a connection's reads start at 16 KiB and double up to
// 64 KiB each time one fills (a buffer left to grow by itself stayed at 512 bytes, and this
// answer took over a hundred reads).
TEST_F(UpstreamPipelineTest, ALargeAnswerIsReadInAFewReads) {
  StartBase();
  for (int i = 0; i < 12; ++i) {
    base_->bank().SetAccount(AccountKey(i),
                             Account{LamportsOf(i), localnet::SystemProgramId(),
                                     std::string(3000, static_cast<char>(i)), false});
  }
  MakeSet(UpstreamOptions::Pipeline::kOff);
  const uint64_t before = metrics_.upstream_reads.value();
  size_t answer_bytes = 0;
  int answered = 0;
  std::string request = GetMultipleAccounts(1);
  request.insert(request.size() - 2, R"(,{"encoding":"base64"})");
  set_->Send("base", request, RetryPolicy::kSafe, [&](absl::StatusOr<UpstreamResponse> response) {
    ASSERT_TRUE(response.ok()) << response.status();
    answer_bytes = response->body.size();
    ++answered;
  });
  const auto until = std::chrono::steady_clock::now() + 10s;
  while (answered == 0 && std::chrono::steady_clock::now() < until) io_context_.run_for(5ms);
  ASSERT_EQ(answered, 1);
  EXPECT_GT(answer_bytes, 50'000u);
  EXPECT_GE(metrics_.upstream_reads.value() - before, 2u);
  EXPECT_LE(metrics_.upstream_reads.value() - before, 5u) << answer_bytes << " bytes";
}

TEST_F(UpstreamPipelineTest, ReadsBehindASlowAnswerAreHedgedOnAnotherConnection) {
  localnet::FaultOptions faults;
  faults.delay_rate = 0.02;
  faults.delay = absl::Milliseconds(400);
  StartBase(faults);
  MakeSet(UpstreamOptions::Pipeline::kOn);
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(ReadAll(), kAccounts);
  const auto took = std::chrono::steady_clock::now() - start;
  // Without the hedges, the reads behind each delayed answer would wait for it in turn.
  EXPECT_GT(metrics_.upstream_pipeline_hedges.value() + metrics_.upstream_pipeline_moves.value(),
            0u);
  EXPECT_LT(took, 3s);
}

// A request larger than the socket takes at once (megabytes of body) is sent in pieces: the
// first try sends what fits, the rest follows as the upstream reads. All of it arrives, once,
// in order, and its answer comes back, on a new connection and on the same one reused.
TEST_F(UpstreamPipelineTest, ARequestLargerThanTheSocketTakesIsSentWholeInPieces) {
  FakeUpstream upstream("base");
  options_.request_timeout = absl::Seconds(20);
  auto set = UpstreamSet::Create(io_context_, {UpstreamTarget{"base", {{upstream.url(), 1}}}},
                                 options_, nullptr, &metrics_);
  ASSERT_TRUE(set.ok()) << set.status();
  set_ = *std::move(set);
  std::string padding(24 << 20, 'x');
  for (size_t i = 0; i < padding.size(); i += 4096) {
    padding[i] = static_cast<char>('a' + (i / 4096) % 26);  // a piece out of place shows
  }
  std::string body = R"({"jsonrpc":"2.0","id":7,"method":"getSlot","params":[")";
  body += padding;
  body += R"("]})";
  for (int round = 0; round < 2; ++round) {
    std::string answer;
    std::string error;
    set_->Send("base", body, RetryPolicy::kSafe, [&](absl::StatusOr<UpstreamResponse> response) {
      if (response.ok()) {
        answer = response->body;
      } else {
        error = response.status().ToString();
      }
    });
    const auto until = std::chrono::steady_clock::now() + 20s;
    while (answer.empty() && error.empty() && std::chrono::steady_clock::now() < until) {
      io_context_.run_for(5ms);
    }
    ASSERT_EQ(error, "");
    EXPECT_NE(answer.find(R"("id":7)"), std::string::npos) << answer;
  }
  const std::vector<std::string> received = upstream.received();
  ASSERT_EQ(received.size(), 2u);
  EXPECT_TRUE(received[0] == body) << received[0].size() << " bytes of " << body.size();
  EXPECT_TRUE(received[1] == body) << received[1].size() << " bytes of " << body.size();
  EXPECT_EQ(upstream.connections_accepted(), 1u);
}

}  // namespace
}  // namespace switchyard::api_test
