#include "api/net/http_server.h"
