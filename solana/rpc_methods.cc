#include "solana/rpc_methods.h"

#include <array>
#include <cstdint>
#include <cstring>

#include "absl/container/flat_hash_map.h"

namespace switchyard {
namespace {

using enum RoutingClass;

constexpr auto kMethods = std::to_array<RpcMethod>({
    {"getAccountInfo", kOneAccount},
    {"getBalance", kOneAccount},
    {"getBlock", kBaseOnly, true},
    {"getBlockCommitment", kBaseOnly},
    {"getBlockHeight", kBaseOnly},
    {"getBlockProduction", kBaseOnly},
    {"getBlockTime", kBaseOnly},
    {"getBlockhashForAccounts", kRouter},
    {"getBlocks", kBaseOnly, true},
    {"getBlocksWithLimit", kBaseOnly, true},
    {"getClosestValidator", kRouter},
    {"getClusterNodes", kBaseOnly, true},
    {"getConfirmedBlock", kBaseOnly, true},
    {"getConfirmedBlocks", kBaseOnly, true},
    {"getConfirmedBlocksWithLimit", kBaseOnly, true},
    {"getConfirmedSignaturesForAddress2", kBaseOnly, true},
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
    {"getLargestAccounts", kBaseOnly, true},
    {"getLatestBlockhash", kBaseOnly},
    {"getLeaderSchedule", kBaseOnly},
    {"getMaxRetransmitSlot", kBaseOnly},
    {"getMaxShredInsertSlot", kBaseOnly},
    {"getMinimumBalanceForRentExemption", kBaseOnly},
    {"getMultipleAccounts", kAccountList, true},
    {"getProgramAccounts", kBaseOnly, true},
    {"getRecentBlockhash", kBaseOnly},
    {"getRecentPerformanceSamples", kBaseOnly},
    {"getRecentPrioritizationFees", kBaseOnly},
    {"getRoutes", kRouter},
    {"getSignatureStatuses", kSignature},
    {"getSignaturesForAddress", kBaseOnly, true},
    {"getSlot", kBaseOnly},
    {"getSlotLeader", kBaseOnly},
    {"getSlotLeaders", kBaseOnly},
    {"getSnapshotSlot", kBaseOnly},
    {"getStakeActivation", kBaseOnly},
    {"getStakeMinimumDelegation", kBaseOnly},
    {"getSupply", kBaseOnly},
    {"getTokenAccountBalance", kOneAccount},
    {"getTokenAccountsByDelegate", kBaseOnly, true},
    {"getTokenAccountsByOwner", kBaseOnly, true},
    {"getTokenLargestAccounts", kBaseOnly, true},
    {"getTokenSupply", kBaseOnly},
    {"getTransaction", kSignature},
    {"getTransactionCount", kBaseOnly},
    {"getVersion", kBaseOnly},
    {"getVoteAccounts", kBaseOnly, true},
    {"isBlockhashValid", kBaseOnly},
    {"minimumLedgerSlot", kBaseOnly},
    {"requestAirdrop", kBaseOnly},
    {"sendTransaction", kTransaction},
    {"simulateTransaction", kTransaction},
});

// The index's hash: the length and the first and last eight bytes (or the whole name when it is
// shorter), which tell the catalogue's names apart; the map mixes it further and compares the
// whole name. A lookup runs for every call, several times (ClassifyMethod, MayAnswerLarge),
// where a hash of every byte cost about three times as much.
struct MethodNameHash {
  size_t operator()(std::string_view name) const {
    uint64_t head = 0;
    uint64_t tail = 0;
    if (name.size() >= 8) {
      std::memcpy(&head, name.data(), 8);
      std::memcpy(&tail, name.data() + name.size() - 8, 8);
    } else if (!name.empty()) {
      std::memcpy(&head, name.data(), name.size());
    }
    return static_cast<size_t>((head * 0x9e3779b97f4a7c15u) ^ (tail * 0xc2b2ae3d27d4eb4fu) ^
                               name.size());
  }
};
using MethodMap = absl::flat_hash_map<std::string_view, const RpcMethod*, MethodNameHash>;

const MethodMap& MethodIndex() {
  static const auto* const kIndex = [] {
    auto* index = new MethodMap();
    index->reserve(kMethods.size());
    for (const RpcMethod& method : kMethods) index->emplace(method.name, &method);
    return index;
  }();
  return *kIndex;
}

// The catalogue's row of `method`, or null.
const RpcMethod* FindMethod(std::string_view method) {
  const auto& index = MethodIndex();
  const auto it = index.find(method);
  return it == index.end() ? nullptr : it->second;
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
  const RpcMethod* found = FindMethod(method);
  return found == nullptr ? kUnknown : found->routing;
}

bool MayAnswerLarge(std::string_view method) {
  const RpcMethod* found = FindMethod(method);
  return found != nullptr && found->large_answer;
}

std::span<const RpcMethod> KnownMethods() { return kMethods; }

}  // namespace switchyard
