#pragma once

#include "absl/status/status.h"
#include "boost/asio/io_context.hpp"
#include "hiredis/async.h"

namespace switchyard {

// Drives `ac` (a redisAsyncContext just created, its fd connecting) from `io`: hiredis's
// addRead/delRead/addWrite/delWrite/cleanup hooks become async_wait calls on a
// stream_descriptor over the context's fd, which stays hiredis's to close. Every hiredis
// callback then runs on the thread that runs `io`. Also arms the write interest that detects
// the end of the non-blocking connect.
absl::Status AttachToAsio(redisAsyncContext* ac, boost::asio::io_context& io);

}  // namespace switchyard
