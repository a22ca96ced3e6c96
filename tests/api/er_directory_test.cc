#include "api/routing/er_directory.h"

#include <gtest/gtest.h>

#include "api/jsonrpc/rpc_errors.h"
#include "common/metrics.h"
#include "fmt/format.h"

namespace switchyard {
namespace {

Pubkey Key(uint8_t fill) {
  std::array<uint8_t, 32> bytes;
  bytes.fill(fill);
  return Pubkey::FromBytes(bytes.data());
}

ErRecord Record(const Pubkey& identity, ErStatus status, std::string addr) {
  ErRecord record;
  record.identity = identity;
  record.status = status;
  record.addr = std::move(addr);
  record.block_time_ms = 30;
  record.base_fee = 7;
  record.country_code = "276";
  return record;
}

const Pubkey kConfigured = Key(0x11);
const Pubkey kActive = Key(0x22);
const Pubkey kDraining = Key(0x33);
const Pubkey kOffline = Key(0x44);
const Pubkey kAccount = Key(0x99);

class ErDirectoryTest : public ::testing::Test {
 protected:
  ErDirectory Make(std::string pinned_default = "", bool pin_configured = false) {
    RoutingTable routing;
    routing.default_er = std::move(pinned_default);
    ErRoute er{kConfigured, "er1", "https://er1.example", 0, 50, "DE"};
    er.pinned = pin_configured;
    return ErDirectory(routing, {er}, ErDirectoryOptions{}, &registry_);
  }
  MetricsRegistry registry_;
};

TEST_F(ErDirectoryTest, ARegisteredErBecomesATargetWithItsAddress) {
  ErDirectory directory = Make();
  const uint64_t before = directory.generation();
  directory.UpsertRecord(Record(kActive, ErStatus::kActive, "http://127.0.0.1:7000"));
  std::shared_ptr<const ErTable> table = directory.Current();
  EXPECT_GT(table->generation, before);
  const std::string target = ErDirectory::DiscoveredTarget(kActive);
  ASSERT_TRUE(table->routing.er_by_identity.contains(kActive));
  EXPECT_EQ(table->routing.er_by_identity.at(kActive), target);
  EXPECT_EQ(directory.DiscoveredUrl(target), "http://127.0.0.1:7000");
  EXPECT_EQ(directory.DiscoveredUrl("er1"), "");  // configured: its upstream group serves it
  const ErEntry* er = table->Find(kActive);
  ASSERT_NE(er, nullptr);
  EXPECT_EQ(er->route.block_time_ms, 30u);
  EXPECT_EQ(er->route.base_fee, 7u);
  EXPECT_EQ(er->route.country_code, "276");
  EXPECT_EQ(table->routing.er_targets, (std::vector<std::string>{"er1", target}));
  EXPECT_EQ(*TargetForValidator(kAccount, kActive, table->routing), target);
}

TEST_F(ErDirectoryTest, AnAddrWithoutSchemeIsHttps) {
  EXPECT_EQ(ErDirectory::UrlOfAddr("devnet-as.magicblock.app"), "https://devnet-as.magicblock.app");
  EXPECT_EQ(ErDirectory::UrlOfAddr("http://127.0.0.1:1"), "http://127.0.0.1:1");
}

TEST_F(ErDirectoryTest, DrainingServesItsAccountsButTakesNoNewWork) {
  ErDirectory directory = Make();
  directory.ReplaceRegistry({Record(kDraining, ErStatus::kDraining, "http://127.0.0.1:7001")});
  directory.ReportProbe(kDraining, absl::Milliseconds(1));
  directory.ReportProbe(kConfigured, absl::Milliseconds(50));
  std::shared_ptr<const ErTable> table = directory.Current();
  EXPECT_EQ(*TargetForValidator(kAccount, kDraining, table->routing),
            ErDirectory::DiscoveredTarget(kDraining));
  // The draining ER is far closer, yet "any ER" and getIdentity get the configured one.
  ASSERT_GE(table->chosen, 0);
  EXPECT_EQ(table->ers[table->chosen].route.identity, kConfigured);
  EXPECT_EQ(*TargetForValidator(kAccount, Pubkey(), table->routing), "er1");
}

TEST_F(ErDirectoryTest, AnOfflineErsAccountsGetARouterErrorNamingTheEr) {
  ErDirectory directory = Make();
  directory.ReplaceRegistry({Record(kOffline, ErStatus::kOffline, "http://127.0.0.1:7002")});
  std::shared_ptr<const ErTable> table = directory.Current();
  absl::StatusOr<std::string> target = TargetForValidator(kAccount, kOffline, table->routing);
  ASSERT_FALSE(target.ok());
  const RpcError error = RpcErrorFromStatus(target.status());
  EXPECT_EQ(error.code, -32604);
  EXPECT_NE(error.message.find(kOffline.ToBase58()), std::string::npos) << error.message;
  EXPECT_NE(error.message.find("offline"), std::string::npos) << error.message;
  // An identity nobody knows is the unknown ER node error.
  const RpcError unknown =
      RpcErrorFromStatus(TargetForValidator(kAccount, Key(0x55), table->routing).status());
  EXPECT_EQ(unknown.code, -32604);
  EXPECT_NE(unknown.message.find("unknown ER node"), std::string::npos) << unknown.message;
}

TEST_F(ErDirectoryTest, AClosedRecordRemovesTheEr) {
  ErDirectory directory = Make();
  directory.UpsertRecord(Record(kActive, ErStatus::kActive, "http://127.0.0.1:7000"));
  directory.RemoveRecord(kActive);
  EXPECT_FALSE(directory.Current()->routing.er_by_identity.contains(kActive));
  directory.UpsertRecord(Record(kActive, ErStatus::kActive, "http://127.0.0.1:7000"));
  directory.ReplaceRegistry({});  // a full read without it
  EXPECT_FALSE(directory.Current()->routing.er_by_identity.contains(kActive));
  EXPECT_EQ(directory.DiscoveredUrl(ErDirectory::DiscoveredTarget(kActive)), "");
}

TEST_F(ErDirectoryTest, AConfiguredErKeepsItsTargetAndTakesTheRecordsStatusUnlessPinned) {
  {
    ErDirectory directory = Make();
    directory.UpsertRecord(Record(kConfigured, ErStatus::kOffline, "http://elsewhere:1"));
    std::shared_ptr<const ErTable> table = directory.Current();
    EXPECT_TRUE(table->routing.offline_ers.contains(kConfigured));
    EXPECT_EQ(table->Find(kConfigured)->route.target, "er1");
    EXPECT_EQ(table->Find(kConfigured)->route.fqdn, "https://er1.example");
    directory.RemoveRecord(kConfigured);  // back to its configuration
    EXPECT_EQ(directory.Current()->routing.er_by_identity.at(kConfigured), "er1");
  }
  {
    ErDirectory directory = Make("", /*pin_configured=*/true);
    directory.UpsertRecord(Record(kConfigured, ErStatus::kOffline, "http://elsewhere:1"));
    std::shared_ptr<const ErTable> table = directory.Current();
    EXPECT_FALSE(table->routing.offline_ers.contains(kConfigured));
    EXPECT_EQ(table->routing.er_by_identity.at(kConfigured), "er1");
  }
}

TEST_F(ErDirectoryTest, TheEwmaKeeps85PercentOfTheOldValue) {
  ErDirectory directory = Make();
  directory.ReportProbe(kConfigured, absl::Milliseconds(100));
  EXPECT_DOUBLE_EQ(directory.Current()->Find(kConfigured)->latency.ewma_ms, 100.0);
  directory.ReportProbe(kConfigured, absl::Milliseconds(200));
  EXPECT_DOUBLE_EQ(directory.Current()->Find(kConfigured)->latency.ewma_ms, 115.0);
  directory.ReportProbe(kConfigured, absl::Milliseconds(15));
  EXPECT_DOUBLE_EQ(directory.Current()->Find(kConfigured)->latency.ewma_ms,
                   0.85 * 115.0 + 0.15 * 15.0);
  EXPECT_NE(registry_.RenderPrometheus().find(fmt::format(
                "switchyard_er_latency_ewma_us{{er=\"{}\"}} 100000", kConfigured.ToBase58())),
            std::string::npos)
      << registry_.RenderPrometheus();
}

TEST_F(ErDirectoryTest, ThreeFailuresInARowMakeAnErUnreachableAndTheClosestSwitches) {
  ErDirectory directory = Make();
  directory.UpsertRecord(Record(kActive, ErStatus::kActive, "http://127.0.0.1:7000"));
  directory.ReportProbe(kActive, absl::Milliseconds(5));
  directory.ReportProbe(kConfigured, absl::Milliseconds(80));
  auto chosen = [&] {
    std::shared_ptr<const ErTable> table = directory.Current();
    return table->chosen < 0 ? Pubkey() : table->ers[table->chosen].route.identity;
  };
  EXPECT_EQ(chosen(), kActive);
  EXPECT_EQ(directory.Current()->routing.default_er, ErDirectory::DiscoveredTarget(kActive));
  directory.ReportProbe(kActive, std::nullopt);
  directory.ReportProbe(kActive, std::nullopt);
  EXPECT_EQ(chosen(), kActive);  // two failures: still reachable
  directory.ReportProbe(kActive, std::nullopt);
  EXPECT_FALSE(directory.Current()->Find(kActive)->latency.reachable);
  EXPECT_EQ(chosen(), kConfigured);
  EXPECT_EQ(directory.Current()->routing.default_er, "er1");
  // Its accounts are still routed to it: only new work avoids it.
  EXPECT_TRUE(directory.Current()->routing.er_by_identity.contains(kActive));
  directory.ReportProbe(kActive, absl::Milliseconds(5));
  EXPECT_TRUE(directory.Current()->Find(kActive)->latency.reachable);
  EXPECT_EQ(chosen(), kActive);
}

TEST_F(ErDirectoryTest,
       AProbeAnsweredByAnotherValidatorRefusesTheErsAccountsUntilItAnswersAsItself) {
  ErDirectory directory = Make();
  directory.UpsertRecord(Record(kActive, ErStatus::kActive, "http://127.0.0.1:7000"));
  directory.ReportProbe(kActive, absl::Milliseconds(1));
  directory.ReportProbe(kConfigured, absl::Milliseconds(80));
  ASSERT_EQ(directory.Current()->ers[directory.Current()->chosen].route.identity, kActive);

  directory.ReportWrongIdentity(kActive, kDraining);
  std::shared_ptr<const ErTable> table = directory.Current();
  EXPECT_FALSE(table->Find(kActive)->latency.reachable);
  EXPECT_FALSE(table->routing.er_by_identity.contains(kActive));
  ASSERT_TRUE(table->routing.misaddressed_ers.contains(kActive));
  EXPECT_EQ(table->routing.misaddressed_ers.at(kActive), kDraining);
  EXPECT_EQ(table->ers[table->chosen].route.identity, kConfigured);
  absl::StatusOr<std::string> target = TargetForValidator(kAccount, kActive, table->routing);
  ASSERT_FALSE(target.ok());
  EXPECT_NE(target.status().message().find("answers as validator " + kDraining.ToBase58()),
            std::string::npos)
      << target.status();
  EXPECT_NE(ErStatusJson(*table).find("\"answered_as\":\"" + kDraining.ToBase58() + "\""),
            std::string::npos);
  EXPECT_NE(registry_.RenderPrometheus().find(
                fmt::format(R"(switchyard_er_probes_total{{er="{}",outcome="wrong_identity"}} 1)",
                            kActive.ToBase58())),
            std::string::npos)
      << registry_.RenderPrometheus();

  directory.ReportProbe(kActive, absl::Milliseconds(1));
  table = directory.Current();
  EXPECT_TRUE(table->routing.misaddressed_ers.empty());
  EXPECT_EQ(*TargetForValidator(kAccount, kActive, table->routing),
            ErDirectory::DiscoveredTarget(kActive));
}

TEST_F(ErDirectoryTest, ADefaultErInTheConfigPinsAnyErWhateverTheLatency) {
  ErDirectory directory = Make("er1");
  directory.UpsertRecord(Record(kActive, ErStatus::kActive, "http://127.0.0.1:7000"));
  directory.ReportProbe(kActive, absl::Milliseconds(1));
  directory.ReportProbe(kConfigured, absl::Milliseconds(500));
  std::shared_ptr<const ErTable> table = directory.Current();
  EXPECT_EQ(table->ers[table->chosen].route.identity, kConfigured);
  EXPECT_EQ(table->ers[table->closest].route.identity, kActive);
  EXPECT_EQ(*TargetForValidator(kAccount, Pubkey(), table->routing), "er1");
}

TEST_F(ErDirectoryTest, NoReachableActiveErLeavesAnyErWithoutATarget) {
  RoutingTable routing;
  ErDirectory directory(routing, {}, ErDirectoryOptions{}, nullptr);
  directory.UpsertRecord(Record(kDraining, ErStatus::kDraining, "http://127.0.0.1:7001"));
  std::shared_ptr<const ErTable> table = directory.Current();
  EXPECT_EQ(table->chosen, -1);
  const RpcError error =
      RpcErrorFromStatus(TargetForValidator(kAccount, Pubkey(), table->routing).status());
  EXPECT_EQ(error.code, -32604);
}

}  // namespace
}  // namespace switchyard
