#include "solana/rpc_methods.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

namespace switchyard {
namespace {

TEST(RpcMethodsTest, ClassifiesTheRoutedMethods) {
  EXPECT_EQ(ClassifyMethod("getAccountInfo"), RoutingClass::kOneAccount);
  EXPECT_EQ(ClassifyMethod("getBalance"), RoutingClass::kOneAccount);
  EXPECT_EQ(ClassifyMethod("getTokenAccountBalance"), RoutingClass::kOneAccount);
  EXPECT_EQ(ClassifyMethod("getMultipleAccounts"), RoutingClass::kAccountList);
  EXPECT_EQ(ClassifyMethod("sendTransaction"), RoutingClass::kTransaction);
  EXPECT_EQ(ClassifyMethod("simulateTransaction"), RoutingClass::kTransaction);
  EXPECT_EQ(ClassifyMethod("getSignatureStatuses"), RoutingClass::kSignature);
  EXPECT_EQ(ClassifyMethod("getTransaction"), RoutingClass::kSignature);
}

TEST(RpcMethodsTest, MagicBlockRouterMethodsAreAnsweredByTheRouter) {
  EXPECT_EQ(ClassifyMethod("getDelegationStatus"), RoutingClass::kRouter);
  EXPECT_EQ(ClassifyMethod("getDelegationHistory"), RoutingClass::kRouter);
  EXPECT_EQ(ClassifyMethod("getRoutes"), RoutingClass::kRouter);
  EXPECT_EQ(ClassifyMethod("getBlockhashForAccounts"), RoutingClass::kRouter);
  // Also a Solana method, but MagicBlock's router answers it with its own identity.
  EXPECT_EQ(ClassifyMethod("getIdentity"), RoutingClass::kRouter);
  EXPECT_EQ(ClassifyMethod("getClosestValidator"), RoutingClass::kRouter);
}

TEST(RpcMethodsTest, EveryOtherSolanaMethodGoesToBase) {
  for (const char* method : {"getSlot",
                             "getBlockHeight",
                             "getLatestBlockhash",
                             "getProgramAccounts",
                             "getLargestAccounts",
                             "getTokenAccountsByOwner",
                             "getTokenAccountsByDelegate",
                             "getSupply",
                             "getLeaderSchedule",
                             "getSignaturesForAddress",
                             "getBlock",
                             "getBlocks",
                             "getEpochInfo",
                             "getFeeForMessage",
                             "getHealth",
                             "getVersion",
                             "isBlockhashValid",
                             "minimumLedgerSlot",
                             "requestAirdrop",
                             "getRecentPrioritizationFees",
                             "getMinimumBalanceForRentExemption",
                             "getRecentBlockhash",
                             "getConfirmedTransaction"}) {
    EXPECT_EQ(ClassifyMethod(method), RoutingClass::kBaseOnly) << method;
  }
}

TEST(RpcMethodsTest, UnknownAndWrongCaseMethodsAreUnknown) {
  EXPECT_EQ(ClassifyMethod(""), RoutingClass::kUnknown);
  EXPECT_EQ(ClassifyMethod("getaccountinfo"), RoutingClass::kUnknown);
  EXPECT_EQ(ClassifyMethod("GetAccountInfo"), RoutingClass::kUnknown);
  EXPECT_EQ(ClassifyMethod("getAccountInfo "), RoutingClass::kUnknown);
  EXPECT_EQ(ClassifyMethod("accountSubscribe"), RoutingClass::kUnknown);
  EXPECT_EQ(ClassifyMethod(std::string_view("getSlot\0x", 9)), RoutingClass::kUnknown);
}

TEST(RpcMethodsTest, CatalogueIsSortedUniqueAndAgreesWithClassify) {
  const auto methods = KnownMethods();
  EXPECT_EQ(methods.size(), 68u);
  std::set<std::string_view> names;
  for (size_t i = 0; i < methods.size(); ++i) {
    EXPECT_TRUE(names.insert(methods[i].name).second) << methods[i].name;
    if (i > 0) {
      EXPECT_LT(methods[i - 1].name, methods[i].name);
    }
    EXPECT_EQ(ClassifyMethod(methods[i].name), methods[i].routing) << methods[i].name;
    EXPECT_NE(methods[i].routing, RoutingClass::kUnknown);
  }
}

TEST(RpcMethodsTest, MethodsWhoseAnswersMayBeLargeAreMarked) {
  for (const char* method :
       {"getMultipleAccounts", "getProgramAccounts", "getBlock", "getTokenAccountsByOwner",
        "getSignaturesForAddress", "getConfirmedBlock", "getVoteAccounts", "getClusterNodes"}) {
    EXPECT_TRUE(MayAnswerLarge(method)) << method;
  }
  for (const char* method : {"getAccountInfo", "getBalance", "getSlot", "sendTransaction",
                             "getLatestBlockhash", "getTransaction", "getSignatureStatuses"}) {
    EXPECT_FALSE(MayAnswerLarge(method)) << method;
  }
  EXPECT_FALSE(MayAnswerLarge("getmultipleaccounts"));  // unknown: not marked
  size_t marked = 0;
  for (const RpcMethod& method : KnownMethods()) {
    EXPECT_EQ(MayAnswerLarge(method.name), method.large_answer) << method.name;
    if (method.large_answer) ++marked;
  }
  EXPECT_EQ(marked, 16u);
}

TEST(RpcMethodsTest, RoutingClassNames) {
  EXPECT_EQ(RoutingClassName(RoutingClass::kOneAccount), "one_account");
  EXPECT_EQ(RoutingClassName(RoutingClass::kRouter), "router");
  EXPECT_EQ(RoutingClassName(RoutingClass::kUnknown), "unknown");
}

}  // namespace
}  // namespace switchyard
