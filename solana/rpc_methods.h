#pragma once

#include <span>
#include <string_view>

namespace switchyard {

// How the router decides where a JSON-RPC method goes (docs/architecture.md §9).
enum class RoutingClass {
  kOneAccount,   // by the one pubkey in params[0]: its ER when delegated, else base
  kAccountList,  // split a pubkey list by target, merge in order
  kTransaction,  // decode the transaction, route by its writable accounts
  kSignature,    // by the router's memory of each signature, else ask everyone
  kBaseOnly,     // always the base layer
  kRouter,       // answered by the router itself, as MagicBlock's router does
  kUnknown,      // not a method this catalogue knows
};

std::string_view RoutingClassName(RoutingClass routing);

struct RpcMethod {
  std::string_view name;
  RoutingClass routing;
  // The answer may be large: many accounts, a block, long lists of signatures, nodes or
  // blocks. The router does not pipeline such a request with others upstream
  // (docs/architecture.md §11).
  bool large_answer = false;
};

// Every HTTP JSON-RPC method of Solana (Agave 2.x, plus the deprecated ones that older
// clients still send) and of MagicBlock's router, with its class. Method names are
// case-sensitive, as in Solana. A constant-time hash lookup; thread-safe.
RoutingClass ClassifyMethod(std::string_view method);
// Whether the catalogue marks `method`'s answer as possibly large (false for unknown ones).
bool MayAnswerLarge(std::string_view method);

// The catalogue, in alphabetical order.
std::span<const RpcMethod> KnownMethods();

}  // namespace switchyard
