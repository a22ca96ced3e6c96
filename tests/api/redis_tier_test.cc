#include "api/cache/redis_tier.h"

#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <future>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "boost/asio/executor_work_guard.hpp"
#include "boost/asio/io_context.hpp"
#include "common/metrics.h"
#include "fmt/format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "hiredis/hiredis.h"
#include "tests/support/redis_server.h"
#include "tests/support/subprocess.h"

namespace switchyard {
namespace {

using testing::FreePort;
using testing::RedisServer;

using ::testing::ElementsAre;
using ::testing::Eq;
using ::testing::Optional;
using Values = RedisTier::Values;
using Clock = std::chrono::steady_clock;

// The value of one series in `registry`'s Prometheus text, -1 when it is absent.
double Metric(const MetricsRegistry& registry, const std::string& series) {
  std::istringstream text(registry.RenderPrometheus());
  for (std::string line; std::getline(text, line);) {
    if (line.rfind(series + " ", 0) != 0) continue;
    double value = 0;
    if (absl::SimpleAtod(line.substr(series.size() + 1), &value)) return value;
  }
  return -1;
}

struct Answer {
  Values values;
  std::chrono::microseconds elapsed{};
};

class RedisTierTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(redis_.Start()) << "redis-server on port " << redis_.port();
    callbacks_thread_ = std::thread([this] { callbacks_.run(); });
  }
  void TearDown() override {
    work_.reset();
    callbacks_thread_.join();
  }

  RedisTierOptions Options() const {
    RedisTierOptions options;
    options.url = redis_.url();
    options.timeout = absl::Milliseconds(200);  // generous: the basic tests are about values
    options.key_prefix = "test:";
    return options;
  }

  std::unique_ptr<RedisTier> StartTier(RedisTierOptions options) {
    absl::StatusOr<std::unique_ptr<RedisTier>> tier = RedisTier::Start(options, &registry_);
    EXPECT_TRUE(tier.ok()) << tier.status();
    return tier.ok() ? *std::move(tier) : nullptr;
  }

  // Get, waiting for `done` (on the callbacks' thread) and timing it from the call.
  Answer GetNow(RedisTier& tier, std::vector<std::string> keys) {
    std::promise<Answer> promise;
    std::future<Answer> future = promise.get_future();
    const auto start = Clock::now();
    tier.Get(std::move(keys), callbacks_.get_executor(), [&promise, start](Values values) {
      promise.set_value(
          Answer{std::move(values),
                 std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - start)});
    });
    if (future.wait_for(std::chrono::seconds(5)) != std::future_status::ready) {
      ADD_FAILURE() << "Get was never answered";
      std::abort();  // `promise` is still referenced by the tier
    }
    return future.get();
  }

  // Gets `key` until it is a hit or `within` passes; how long that took, or nullopt.
  std::optional<std::chrono::milliseconds> WaitForHit(RedisTier& tier, const std::string& key,
                                                      std::chrono::milliseconds within) {
    const auto start = Clock::now();
    while (Clock::now() - start < within) {
      if (GetNow(tier, {key}).values[0].has_value()) {
        return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return std::nullopt;
  }

  RedisServer redis_{FreePort()};
  MetricsRegistry registry_;
  boost::asio::io_context callbacks_;
  std::optional<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> work_{
      boost::asio::make_work_guard(callbacks_)};
  std::thread callbacks_thread_;
};

TEST(ParseRedisUrl, ReadsHostPortAndDatabase) {
  absl::StatusOr<RedisEndpoint> endpoint = ParseRedisUrl("redis://cache.internal:6380/3");
  ASSERT_TRUE(endpoint.ok()) << endpoint.status();
  EXPECT_EQ(endpoint->host, "cache.internal");
  EXPECT_EQ(endpoint->port, 6380);
  EXPECT_EQ(endpoint->db, 3);
  endpoint = ParseRedisUrl("redis://10.0.0.7");
  ASSERT_TRUE(endpoint.ok()) << endpoint.status();
  EXPECT_EQ(endpoint->port, 6379);
  EXPECT_EQ(endpoint->db, 0);
}

TEST(ParseRedisUrl, ErrorsNameTheUrl) {
  for (const char* url : {"http://cache:6379", "redis://", "redis://cache:0", "redis://cache:x",
                          "redis://cache:6379/one", "redis://cache:6379/-1"}) {
    absl::StatusOr<RedisEndpoint> endpoint = ParseRedisUrl(url);
    ASSERT_FALSE(endpoint.ok()) << url;
    EXPECT_EQ(endpoint.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(endpoint.status().message()),
                ::testing::HasSubstr(fmt::format("'{}'", url)));
  }
}

TEST(RedisTierStart, RejectsBadOptionsByName) {
  MetricsRegistry registry;
  RedisTierOptions options;
  options.url = "redis://127.0.0.1:1";
  options.timeout = absl::ZeroDuration();
  absl::StatusOr<std::unique_ptr<RedisTier>> tier = RedisTier::Start(options, &registry);
  ASSERT_FALSE(tier.ok());
  EXPECT_THAT(std::string(tier.status().message()), ::testing::HasSubstr("timeout"));
}

TEST_F(RedisTierTest, PutThenGetReturnsTheBinaryValue) {
  std::unique_ptr<RedisTier> tier = StartTier(Options());
  const std::string value("{\"slot\":1}\0\xff tail", 16);
  ASSERT_EQ(value.size(), 16u);
  tier->Put("account", value, absl::Seconds(10));
  EXPECT_THAT(GetNow(*tier, {"account"}).values, ElementsAre(Optional(Eq(value))));
  EXPECT_EQ(redis_.Command("GET test:account"), value);  // stored as is, under the prefix
  EXPECT_EQ(Metric(registry_, R"(switchyard_cache_redis_requests_total{op="set"})"), 1);
  EXPECT_EQ(Metric(registry_, R"(switchyard_cache_redis_requests_total{op="get"})"), 1);
}

TEST_F(RedisTierTest, LargeValuesCrossInManyReadsAndWrites) {
  std::unique_ptr<RedisTier> tier = StartTier(Options());
  std::string value(1 << 20, '\0');
  for (size_t i = 0; i < value.size(); ++i) value[i] = static_cast<char>(i * 7919 % 251);
  tier->Put("big", value, absl::Seconds(10));
  const Values values = GetNow(*tier, {"big", "big"}).values;
  ASSERT_EQ(values.size(), 2u);
  ASSERT_TRUE(values[0].has_value() && values[1].has_value());
  EXPECT_TRUE(*values[0] == value && *values[1] == value);
}

TEST_F(RedisTierTest, SeveralKeysAreOneMgetAndKeepTheirOrder) {
  std::unique_ptr<RedisTier> tier = StartTier(Options());
  tier->Put("a", "value-a", absl::Seconds(10));
  tier->Put("c", "value-c", absl::Seconds(10));
  ASSERT_THAT(GetNow(*tier, {"c"}).values, ElementsAre(Optional(Eq("value-c"))));
  ASSERT_EQ(redis_.Command("CONFIG RESETSTAT"), "OK");

  EXPECT_THAT(
      GetNow(*tier, {"a", "b", "c", "d"}).values,
      ElementsAre(Optional(Eq("value-a")), std::nullopt, Optional(Eq("value-c")), std::nullopt));
  EXPECT_EQ(redis_.Calls("mget"), 1);
  EXPECT_EQ(redis_.Calls("get"), 0);
}

TEST_F(RedisTierTest, ValueExpiresAfterItsTtl) {
  std::unique_ptr<RedisTier> tier = StartTier(Options());
  tier->Put("short", "lived", absl::Milliseconds(100));
  ASSERT_THAT(GetNow(*tier, {"short"}).values, ElementsAre(Optional(Eq("lived"))));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the TTL is what is tested
  EXPECT_THAT(GetNow(*tier, {"short"}).values, ElementsAre(std::nullopt));
}

TEST_F(RedisTierTest, TwoReplicasShareTheirEntries) {
  MetricsRegistry other_registry;
  std::unique_ptr<RedisTier> first = StartTier(Options());
  absl::StatusOr<std::unique_ptr<RedisTier>> second = RedisTier::Start(Options(), &other_registry);
  ASSERT_TRUE(second.ok()) << second.status();
  ASSERT_THAT(GetNow(**second, {"shared"}).values, ElementsAre(std::nullopt));

  first->Put("shared", "from the first replica", absl::Seconds(10));
  ASSERT_TRUE(WaitForHit(**second, "shared", std::chrono::seconds(2)).has_value());
  EXPECT_THAT(GetNow(**second, {"shared"}).values,
              ElementsAre(Optional(Eq("from the first replica"))));
}

TEST_F(RedisTierTest, KilledRedisIsAMissWithinTheTimeoutThenTheCircuitAnswersAtOnce) {
  RedisTierOptions options = Options();
  options.timeout = absl::Milliseconds(10);
  options.failures_to_open = 5;
  options.open_for = absl::Seconds(30);  // stays open for the rest of the test
  std::unique_ptr<RedisTier> tier = StartTier(options);
  tier->Put("k", "v", absl::Seconds(10));
  ASSERT_TRUE(WaitForHit(*tier, "k", std::chrono::seconds(2)).has_value());

  redis_.Kill();
  int gets = 0;
  int late = 0;  // answered 50 ms or more after the get: the scheduling of a shared machine, once
  std::chrono::microseconds slowest{0};
  while (!tier->circuit_open() && gets < 20) {
    const Answer answer = GetNow(*tier, {"k", "other"});
    EXPECT_THAT(answer.values, ElementsAre(std::nullopt, std::nullopt));
    if (answer.elapsed >= std::chrono::milliseconds(50)) ++late;
    slowest = std::max(slowest, answer.elapsed);
    ++gets;
  }
  EXPECT_LE(late, 1);
  EXPECT_LT(slowest, std::chrono::milliseconds(250));
  ASSERT_TRUE(tier->circuit_open()) << "after " << gets << " gets";
  EXPECT_LE(gets, 5);
  EXPECT_EQ(Metric(registry_, "switchyard_cache_redis_circuit_open"), 1);

  const double answered_open =
      Metric(registry_, R"(switchyard_cache_redis_errors_total{kind="circuit_open"})");
  std::vector<std::chrono::microseconds> open_elapsed;
  for (int i = 0; i < 10; ++i) {
    const Answer answer = GetNow(*tier, {"k"});
    EXPECT_THAT(answer.values, ElementsAre(std::nullopt));
    open_elapsed.push_back(answer.elapsed);
  }
  // Each answered by the open circuit, at once, but for one get that the scheduling of a
  // shared machine may delay.
  EXPECT_EQ(Metric(registry_, R"(switchyard_cache_redis_errors_total{kind="circuit_open"})"),
            answered_open + 10);
  std::sort(open_elapsed.begin(), open_elapsed.end());
  EXPECT_LT(open_elapsed[8], std::chrono::milliseconds(5));
  EXPECT_LT(open_elapsed[9], std::chrono::milliseconds(50));
}

TEST_F(RedisTierTest, StalledRedisIsAMissWithinTheTimeoutCountedAsTimeouts) {
  RedisTierOptions options = Options();
  options.timeout = absl::Milliseconds(10);
  options.failures_to_open = 100;  // the timeouts alone are measured here
  std::unique_ptr<RedisTier> tier = StartTier(options);
  tier->Put("k", "v", absl::Seconds(10));
  ASSERT_TRUE(WaitForHit(*tier, "k", std::chrono::seconds(2)).has_value());

  redis_.Pause();
  std::chrono::microseconds fastest = std::chrono::seconds(1);
  std::chrono::microseconds slowest{0};
  int late = 0;  // answered 50 ms or more after the get: the scheduling of a shared machine, once
  for (int i = 0; i < 5; ++i) {
    const Answer answer = GetNow(*tier, {"k"});
    EXPECT_THAT(answer.values, ElementsAre(std::nullopt));
    if (answer.elapsed >= std::chrono::milliseconds(50)) ++late;
    fastest = std::min(fastest, answer.elapsed);
    slowest = std::max(slowest, answer.elapsed);
  }
  EXPECT_LE(late, 1);
  EXPECT_LT(slowest, std::chrono::milliseconds(250));
  EXPECT_GE(fastest, std::chrono::milliseconds(10));  // it did wait for Redis
  EXPECT_EQ(Metric(registry_, R"(switchyard_cache_redis_errors_total{kind="timeout"})"), 5);
  EXPECT_FALSE(tier->circuit_open());
  redis_.Resume();
}

TEST_F(RedisTierTest, StalledRedisOpensTheCircuitAfterConsecutiveTimeouts) {
  RedisTierOptions options = Options();
  options.timeout = absl::Milliseconds(10);
  options.failures_to_open = 3;
  options.open_for = absl::Seconds(30);
  std::unique_ptr<RedisTier> tier = StartTier(options);
  ASSERT_THAT(GetNow(*tier, {"k"}).values, ElementsAre(std::nullopt));

  redis_.Pause();
  for (int i = 0; i < 3; ++i) EXPECT_FALSE(GetNow(*tier, {"k"}).values[0].has_value());
  EXPECT_TRUE(tier->circuit_open());
  EXPECT_EQ(Metric(registry_, R"(switchyard_cache_redis_errors_total{kind="timeout"})"), 3);
  redis_.Resume();
}

TEST_F(RedisTierTest, FullQueueDropsAtOnce) {
  RedisTierOptions options = Options();
  options.timeout = absl::Milliseconds(100);
  options.max_pending = 1;
  options.failures_to_open = 100;
  std::unique_ptr<RedisTier> tier = StartTier(options);
  ASSERT_THAT(GetNow(*tier, {"k"}).values, ElementsAre(std::nullopt));

  redis_.Pause();
  std::promise<void> first_answered;
  tier->Get({"k"}, callbacks_.get_executor(), [&](Values) { first_answered.set_value(); });
  const Answer second = GetNow(*tier, {"k"});
  EXPECT_LT(second.elapsed, std::chrono::milliseconds(50));
  EXPECT_EQ(Metric(registry_, R"(switchyard_cache_redis_errors_total{kind="dropped"})"), 1);
  EXPECT_EQ(first_answered.get_future().wait_for(std::chrono::seconds(2)),
            std::future_status::ready);
  redis_.Resume();
}

TEST_F(RedisTierTest, RestartedRedisIsReconnectedAndHitsAgain) {
  RedisTierOptions options = Options();
  options.timeout = absl::Milliseconds(20);
  options.open_for = absl::Milliseconds(200);
  std::unique_ptr<RedisTier> tier = StartTier(options);
  tier->Put("k", "before", absl::Seconds(10));
  ASSERT_TRUE(WaitForHit(*tier, "k", std::chrono::seconds(2)).has_value());

  redis_.Kill();
  for (int i = 0; i < 10 && !tier->circuit_open(); ++i) GetNow(*tier, {"k"});
  ASSERT_TRUE(tier->circuit_open());
  ASSERT_TRUE(redis_.Start());
  const auto restarted = Clock::now();
  bool hit = false;
  while (!hit && Clock::now() - restarted < std::chrono::seconds(5)) {
    tier->Put("k", "after", absl::Seconds(10));
    hit = GetNow(*tier, {"k"}).values[0] == "after";
    if (!hit) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_TRUE(hit);
  EXPECT_FALSE(tier->circuit_open());
  EXPECT_EQ(Metric(registry_, "switchyard_cache_redis_circuit_open"), 0);
}

}  // namespace
}  // namespace switchyard
