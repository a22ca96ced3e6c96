#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "common/pubkey.h"
#include "localnet/json_writer.h"
#include "localnet/types.h"
#include "simdjson.h"

namespace switchyard::localnet {

// Small helpers over simdjson's DOM (error-code forms only) shared by the HTTP methods and
// the pubsub methods.

// The parser of the calling thread; one document at a time.
simdjson::dom::parser& ThreadParser();

// Parses `text` with the thread's parser through a reused padded copy (no allocation once
// warm). The document is valid until the thread's next parse.
simdjson::error_code ParsePadded(std::string_view text, simdjson::dom::element* doc);

// An empty JSON array (for requests without params); valid for the thread's lifetime.
simdjson::dom::array EmptyArray();

// Appends a JSON-RPC error response. `data` is raw JSON or empty.
void AppendErrorResponse(std::string* out, std::string_view id, int code, std::string_view message,
                         std::string_view data = {});

// The optional configuration object at `params[index]`.
class ConfigView {
 public:
  ConfigView() = default;
  ConfigView(simdjson::dom::array params, size_t index);
  bool present() const { return present_; }
  std::optional<std::string_view> String(std::string_view key) const;
  std::optional<uint64_t> U64(std::string_view key) const;
  std::optional<bool> Bool(std::string_view key) const;
  std::optional<simdjson::dom::element> Get(std::string_view key) const;

 private:
  bool present_ = false;
  simdjson::dom::object object_;
};

std::optional<simdjson::dom::element> ParamAt(simdjson::dom::array params, size_t index);
std::optional<Pubkey> PubkeyParam(simdjson::dom::array params, size_t index);
std::optional<std::string_view> StringOf(simdjson::dom::element element);

// "encoding" and "dataSlice" of an account config.
struct AccountConfig {
  DataEncoding encoding = DataEncoding::kBinary;
  std::optional<DataSlice> slice;
};
absl::StatusOr<AccountConfig> ReadAccountConfig(const ConfigView& config);

// getProgramAccounts/programSubscribe filters: {"dataSize":N} and
// {"memcmp":{offset, bytes, encoding}}.
struct ProgramFilter {
  std::optional<uint64_t> data_size;
  std::vector<std::pair<size_t, std::string>> memcmp;

  bool Matches(const Account& account) const;
};
absl::StatusOr<ProgramFilter> ReadFilters(const ConfigView& config);

}  // namespace switchyard::localnet
