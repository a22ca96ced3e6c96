// libFuzzer target: the HTTP request path from bytes to routing decisions. The bytes are read
// as one HTTP/1.1 request by the server's own reader, a gzip body is inflated within the
// server's limit, the body is parsed as JSON-RPC, and every call is routed against a fixed
// snapshot (two ERs, accounts delegated to each, to the "any ER" identity and to an unknown
// validator). No upstream is involved: the decision is the pure function the request path
// calls before any I/O.
#include <simdjson.h>

#include <boost/beast/core/error.hpp>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "api/jsonrpc/jsonrpc.h"
#include "api/jsonrpc/rpc_merge.h"
#include "api/net/internal/http_wire.h"
#include "api/routing/route_decision.h"
#include "common/gzip.h"
#include "tests/api/test_support.h"
#include "tests/fuzz/fuzz_check.h"

using switchyard::fuzz::Check;

namespace {

using namespace switchyard;

struct World {
  World() {
    const Pubkey er1 = api_test::Key(0xE1);
    const Pubkey er2 = api_test::Key(0xE2);
    table.er_by_identity[er1] = "er1";
    table.er_by_identity[er2] = "er2";
    table.er_targets = {"er1", "er2"};
    table.default_er = "er1";
    table.method_rules = {{"getAsset*", "indexer"}, {"getSlot", "base"}};
    snapshot = api_test::SnapshotBuilder()
                   .Delegate(api_test::Key(1), er1)
                   .Delegate(api_test::Key(2), er2)
                   .Delegate(api_test::Key(3), Pubkey())
                   .Delegate(api_test::Key(4), api_test::Key(0xE9))
                   .Undelegate(api_test::Key(5), 50)
                   .Build();
  }
  RoutingTable table;
  std::shared_ptr<const Snapshot> snapshot;
};

const World& TheWorld() {
  static const World* world = new World();
  return *world;
}

void Route(const RpcCall& call) {
  const World& world = TheWorld();
  const RouteDecision decision = DecideRoute(
      call, *world.snapshot, world.table,
      [](const Pubkey&) -> const std::vector<Pubkey>* { return nullptr; },
      [](const Signature&) -> std::optional<std::string> { return std::nullopt; });
  // Every part names a target and indexes within the call's keys.
  for (const RoutePart& part : decision.parts) {
    Check(!part.target.empty());
    for (size_t i : part.indexes) Check(i < decision.keys.size());
  }
}

// The reference for the codec's minContextSlot, which is read in the walk that checks the
// request: params parsed again on their own, each config object asked for its field.
std::optional<uint64_t> MinContextSlotOfParams(const std::string& params) {
  namespace od = simdjson::ondemand;
  static od::parser* parser = new od::parser();
  const simdjson::padded_string padded(params);
  od::document doc;
  od::json_type type;
  if (parser->iterate(padded).get(doc) || doc.type().get(type)) return std::nullopt;
  auto from_object = [](od::object object) -> std::optional<uint64_t> {
    uint64_t slot = 0;
    if (object.find_field_unordered("minContextSlot").get_uint64().get(slot)) return std::nullopt;
    return slot;
  };
  if (type == od::json_type::object) {
    od::object object;
    if (doc.get_object().get(object)) return std::nullopt;
    return from_object(object);
  }
  od::array array;
  if (doc.get_array().get(array)) return std::nullopt;
  for (auto element : array) {
    od::object object;
    if (element.get_object().get(object)) continue;
    if (std::optional<uint64_t> slot = from_object(object)) return slot;
  }
  return std::nullopt;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace http = boost::beast::http;
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  constexpr size_t kMaxBody = 1 << 20;

  HttpRequest request;
  http_wire::RequestReader reader(&request, /*gzip=*/true);
  reader.eager(true);
  reader.body_limit(kMaxBody);
  reader.header_limit(16 * 1024);
  boost::beast::error_code ec;
  size_t used = 0;
  while (used < bytes.size() && !reader.is_done()) {
    const size_t n = reader.put(boost::asio::buffer(bytes.data() + used, bytes.size() - used), ec);
    if (ec || n == 0) break;
    used += n;
  }
  if (!reader.is_done()) {
    reader.put_eof(ec);
    if (ec || !reader.is_done()) return 0;
  }
  Check(request.body.size() <= kMaxBody);
  (void)http_wire::IsWebSocketUpgrade(request, reader.version());

  std::string body = std::move(request.body);
  if (!reader.content_encoding().empty()) {
    std::string inflated;
    if (!GzipInflate(body, kMaxBody, &inflated, HttpRequest::kBodySlack).ok()) return 0;
    Check(inflated.size() <= kMaxBody);
    body = std::move(inflated);
  }

  const RpcCodecOptions options;
  absl::StatusOr<RpcBody> parsed = ParseRpcBody(body, options, body.capacity());
  if (!parsed.ok()) return 0;
  Check(!parsed->calls.empty());
  Check(parsed->calls.size() <= options.max_batch_size);
  for (RpcCall& call : parsed->calls) {
    if (!call.error.ok()) {
      Check(!call.min_context_slot.has_value());
      continue;
    }
    Check(call.min_context_slot == MinContextSlotOfParams(call.params));
    // What is forwarded parses again as the same call.
    const std::string forwarded = ForwardBody(call);
    absl::StatusOr<RpcBody> again = ParseRpcBody(forwarded, options);
    Check(again.ok() && again->calls.size() == 1 && again->calls[0].error.ok());
    Check(again->calls[0].method == call.method);
    Route(call);
    // What goes to an ER has no minContextSlot left, and is still the same call.
    DropMinContextSlot(call);
    absl::StatusOr<RpcBody> dropped = ParseRpcBody(call.raw, options);
    Check(dropped.ok() && dropped->calls.size() == 1 && dropped->calls[0].error.ok());
    Check(dropped->calls[0].method == call.method);
    Check(!dropped->calls[0].min_context_slot.has_value());
    Route(call);
  }
  return 0;
}
