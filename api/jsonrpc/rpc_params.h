#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace switchyard {

// The positional params of a request, each element kept as its raw JSON. A value type.
struct RpcParams {
  std::vector<std::string> elements;

  // Element `i` as a string; InvalidArgument (-32602) when missing or not a string.
  absl::StatusOr<std::string> String(size_t i) const;
  // Element `i` as a list of strings; InvalidArgument when missing, not an array of strings,
  // or longer than `max`.
  absl::StatusOr<std::vector<std::string>> StringList(size_t i, size_t max) const;
  // A string member `key` of the object at element `i`; nullopt when absent.
  std::optional<std::string> ConfigString(size_t i, std::string_view key) const;
};

// Parses a params array (raw JSON; empty text = no params). Fails with InvalidArgument
// (-32602) when params is not an array.
absl::StatusOr<RpcParams> ParseRpcParams(std::string_view params_json);

// A params array whose element 0 is a list of strings (getMultipleAccounts, getSignatureStatuses),
// read in one pass: the list, and the params after it as the client wrote them, each with a
// leading comma. The same answers and errors as ParseRpcParams followed by StringList(0, max).
struct ListParams {
  std::vector<std::string> items;
  std::string rest;
};
absl::StatusOr<ListParams> ParseListParams(std::string_view params_json, size_t max);

// Element 0 of a params array as a string, read in one pass without splitting the params:
// the same answers as ParseRpcParams followed by String(0).
absl::StatusOr<std::string> FirstStringParam(std::string_view params_json);

// Element 0 of a params array when it is a string written without escapes, as a view into
// `params_json`: the hot path of a single account's decision, with no parse. nullopt for any
// other text (an escape, another shape, not an array), which FirstStringParam then answers.
std::optional<std::string_view> FirstPlainStringParam(std::string_view params_json);

// `[e0,e1,...]` from raw elements.
std::string JoinParams(const std::vector<std::string>& elements);

// A params array with the minContextSlot member removed from each config object, everything
// else as written: for a call forwarded to an ER, whose slots run on their own clock (the
// minimum is the base layer's). Params without one, or not an array, are returned unchanged.
std::string ParamsWithoutMinContextSlot(std::string_view params_json);

}  // namespace switchyard
