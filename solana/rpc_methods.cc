#include "solana/rpc_methods.h"

#include <array>

#include "absl/container/flat_hash_map.h"

namespace switchyard {
namespace {

using enum RoutingClass;

constexpr auto kMethods = std::to_array<RpcMethod>({
    {"getAccountInfo", kOneAccount},
    {"getBalance", kOneAccount},
    {"getBlock", kBaseOnly},
    {"getBlockCommitment", kBaseOnly},
    {"getBlockHeight", kBaseOnly},
    {"getBlockProduction", kBaseOnly},
    {"getBlockTime", kBaseOnly},
    {"getBlockhashForAccounts", kRouter},
    {"getBlocks", kBaseOnly},
    {"getBlocksWithLimit", kBaseOnly},
    {"getClosestValidator", kRouter},
    {"getClusterNodes", kBaseOnly},
    {"getConfirmedBlock", kBaseOnly},
    {"getConfirmedBlocks", kBaseOnly},
    {"getConfirmedBlocksWithLimit", kBaseOnly},
    {"getConfirmedSignaturesForAddress2", kBaseOnly},
    {"getConfirmedTransaction", kBaseOnly},
    {"getDelegationHistory", kRouter},
    {"getDelegationStatus", kRouter},
    {"getEpochInfo", kBaseOnly},
    {"getEpochSchedule", kBaseOnly},
    {"getFeeCalculatorForBlockhash", kBaseOnly},
    {"getFeeForMessage", kBaseOnly},
    {"getFeeRateGovernor", kBaseOnly},
    {"getFees", kBaseOnly},
    {"getFirstAvailableBlock", kBaseOnly},
    {"getGenesisHash", kBaseOnly},
    {"getHealth", kBaseOnly},
    {"getHighestSnapshotSlot", kBaseOnly},
    {"getIdentity", kRouter},
    {"getInflationGovernor", kBaseOnly},
    {"getInflationRate", kBaseOnly},
    {"getInflationReward", kBaseOnly},
    {"getLargestAccounts", kBaseOnly},
    {"getLatestBlockhash", kBaseOnly},
    {"getLeaderSchedule", kBaseOnly},
    {"getMaxRetransmitSlot", kBaseOnly},
    {"getMaxShredInsertSlot", kBaseOnly},
    {"getMinimumBalanceForRentExemption", kBaseOnly},
    {"getMultipleAccounts", kAccountList},
    {"getProgramAccounts", kBaseOnly},
    {"getRecentBlockhash", kBaseOnly},
    {"getRecentPerformanceSamples", kBaseOnly},
    {"getRecentPrioritizationFees", kBaseOnly},
    {"getRoutes", kRouter},
    {"getSignatureStatuses", kSignature},
    {"getSignaturesForAddress", kBaseOnly},
    {"getSlot", kBaseOnly},
    {"getSlotLeader", kBaseOnly},
    {"getSlotLeaders", kBaseOnly},
    {"getSnapshotSlot", kBaseOnly},
    {"getStakeActivation", kBaseOnly},
    {"getStakeMinimumDelegation", kBaseOnly},
    {"getSupply", kBaseOnly},
    {"getTokenAccountBalance", kOneAccount},
    {"getTokenAccountsByDelegate", kBaseOnly},
    {"getTokenAccountsByOwner", kBaseOnly},
    {"getTokenLargestAccounts", kBaseOnly},
    {"getTokenSupply", kBaseOnly},
    {"getTransaction", kSignature},
    {"getTransactionCount", kBaseOnly},
    {"getVersion", kBaseOnly},
    {"getVoteAccounts", kBaseOnly},
    {"isBlockhashValid", kBaseOnly},
    {"minimumLedgerSlot", kBaseOnly},
    {"requestAirdrop", kBaseOnly},
    {"sendTransaction", kTransaction},
    {"simulateTransaction", kTransaction},
});

const absl::flat_hash_map<std::string_view, RoutingClass>& MethodIndex() {
  static const auto* const kIndex = [] {
    auto* index = new absl::flat_hash_map<std::string_view, RoutingClass>();
    index->reserve(kMethods.size());
    for (const RpcMethod& method : kMethods) index->emplace(method.name, method.routing);
    return index;
  }();
  return *kIndex;
}

}  // namespace

std::string_view RoutingClassName(RoutingClass routing) {
  switch (routing) {
    case kOneAccount:
      return "one_account";
    case kAccountList:
      return "account_list";
    case kTransaction:
      return "transaction";
    case kSignature:
      return "signature";
    case kBaseOnly:
      return "base_only";
    case kRouter:
      return "router";
    case kUnknown:
      return "unknown";
  }
  return "unknown";
}

RoutingClass ClassifyMethod(std::string_view method) {
  const auto& index = MethodIndex();
  const auto it = index.find(method);
  return it == index.end() ? kUnknown : it->second;
}

std::span<const RpcMethod> KnownMethods() { return kMethods; }

}  // namespace switchyard
