#include "storage/internal/kafka_topic_settings.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

namespace switchyard::storage_internal {
namespace {

using Entries = std::vector<std::pair<std::string, std::string>>;

KafkaEventLogOptions Asking(std::optional<int16_t> replication_factor,
                            std::optional<int32_t> min_insync_replicas,
                            std::optional<int64_t> retention_ms) {
  KafkaEventLogOptions options;
  options.topic = "delegations";
  options.replication_factor = replication_factor;
  options.min_insync_replicas = min_insync_replicas;
  options.retention_ms = retention_ms;
  return options;
}

TEST(NewTopicConfigTest, AlwaysDeletesAndNeverCompacts) {
  EXPECT_EQ(NewTopicConfig(Asking(std::nullopt, std::nullopt, std::nullopt)),
            (Entries{{"cleanup.policy", "delete"}}));
}

TEST(NewTopicConfigTest, CarriesMinInsyncReplicasAndRetention) {
  EXPECT_EQ(NewTopicConfig(Asking(3, 2, 604800000)), (Entries{{"cleanup.policy", "delete"},
                                                              {"min.insync.replicas", "2"},
                                                              {"retention.ms", "604800000"}}));
  EXPECT_EQ(NewTopicConfig(Asking(std::nullopt, std::nullopt, -1)),
            (Entries{{"cleanup.policy", "delete"}, {"retention.ms", "-1"}}));
}

TEST(WeakerTopicSettingsTest, ATopicAsAskedOrStrongerHasNoWarning) {
  KafkaTopicSettings found{3, 2, 604800000, "delete"};
  EXPECT_TRUE(WeakerTopicSettings(Asking(3, 2, 604800000), found).empty());
  KafkaTopicSettings stronger{5, 3, -1, "delete"};
  EXPECT_TRUE(WeakerTopicSettings(Asking(3, 2, 604800000), stronger).empty());
}

TEST(WeakerTopicSettingsTest, WhatWasNotAskedOrNotReadIsNotCompared) {
  EXPECT_TRUE(WeakerTopicSettings(Asking(std::nullopt, std::nullopt, std::nullopt),
                                  KafkaTopicSettings{1, 1, 1000, "delete"})
                  .empty());
  EXPECT_TRUE(WeakerTopicSettings(Asking(3, 2, -1), KafkaTopicSettings{}).empty());
}

TEST(WeakerTopicSettingsTest, NamesEachWeakerSetting) {
  const std::vector<std::string> weaker =
      WeakerTopicSettings(Asking(3, 2, 604800000), KafkaTopicSettings{1, 1, 86400000, "delete"});
  ASSERT_EQ(weaker.size(), 3u);
  EXPECT_NE(weaker[0].find("topic delegations has 1 replica(s) of a partition, fewer than "
                           "kafka_replication_factor = 3"),
            std::string::npos)
      << weaker[0];
  EXPECT_NE(weaker[1].find("min.insync.replicas = 1, lower than kafka_min_insync_replicas = 2"),
            std::string::npos)
      << weaker[1];
  EXPECT_NE(weaker[2].find("keeps records for 86400000 ms, not for 604800000 ms"),
            std::string::npos)
      << weaker[2];
}

TEST(WeakerTopicSettingsTest, AnyFiniteRetentionIsWeakerThanKeepingEverything) {
  const std::vector<std::string> weaker =
      WeakerTopicSettings(Asking(std::nullopt, std::nullopt, -1),
                          KafkaTopicSettings{std::nullopt, std::nullopt, 604800000, "delete"});
  ASSERT_EQ(weaker.size(), 1u);
  EXPECT_NE(weaker[0].find("keeps records for 604800000 ms, not forever"), std::string::npos)
      << weaker[0];
}

TEST(WeakerTopicSettingsTest, CompactionIsAlwaysReported) {
  for (const char* policy : {"compact", "compact,delete", "delete,compact"}) {
    const std::vector<std::string> weaker = WeakerTopicSettings(
        Asking(std::nullopt, std::nullopt, std::nullopt),
        KafkaTopicSettings{std::nullopt, std::nullopt, std::nullopt, std::string(policy)});
    ASSERT_EQ(weaker.size(), 1u) << policy;
    EXPECT_NE(weaker[0].find("compaction drops delegation events"), std::string::npos) << weaker[0];
  }
}

}  // namespace
}  // namespace switchyard::storage_internal
