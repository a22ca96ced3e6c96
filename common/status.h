#pragma once

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

// Returns early with the status of `expr` when it is not OK.
#define RETURN_IF_ERROR(expr)                                \
  do {                                                       \
    ::absl::Status switchyard_status_ = (expr);              \
    if (!switchyard_status_.ok()) return switchyard_status_; \
  } while (false)

#define SWITCHYARD_CONCAT_INNER(a, b) a##b
#define SWITCHYARD_CONCAT(a, b) SWITCHYARD_CONCAT_INNER(a, b)

// `ASSIGN_OR_RETURN(auto x, MakeX());` declares or assigns `lhs` from the value of a
// StatusOr expression, or returns its status when it is not OK.
#define ASSIGN_OR_RETURN(lhs, expr) \
  SWITCHYARD_ASSIGN_OR_RETURN_IMPL(SWITCHYARD_CONCAT(switchyard_statusor_, __LINE__), lhs, expr)

#define SWITCHYARD_ASSIGN_OR_RETURN_IMPL(statusor, lhs, expr) \
  auto statusor = (expr);                                     \
  if (!statusor.ok()) return std::move(statusor).status();    \
  lhs = std::move(statusor).value()
