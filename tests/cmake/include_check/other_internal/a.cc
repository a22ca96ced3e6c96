#include "api/rpc/internal/router.h"
