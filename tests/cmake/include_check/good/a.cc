// Includes only what module api/routing (declared: api/jsonrpc, common; absl) may include.
#include <sys/socket.h>
#include <unistd.h>

#include <vector>

#include "absl/status/status.h"
#include "api/jsonrpc/jsonrpc.h"
#include "api/routing/internal/helper.h"
#include "common/slot.h"
