#include <boost/asio/io_context.hpp>

#include "absl/status/status.h"

int Decide() { return 0; }
