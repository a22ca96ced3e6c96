#pragma once

// A write to a plain TCP socket that skips a round of the worker's loop when the socket takes
// everything at once (docs/architecture.md §9).

#include <boost/asio/buffer.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/buffers_suffix.hpp>
#include <cstddef>
#include <memory>
#include <utility>

namespace switchyard {

// Writes `buffers` to `socket`, which must be in non-blocking mode. The write is tried in place
// first: when the socket takes all of it, as it nearly always does, `done` runs before this
// returns. Asio's own async_write would send at once too, but it reports even a write it
// finished at once through the executor's queue, which costs the worker a round of its loop
// and a poll of its sockets. What the socket does not take, or an error, goes to async_write
// as usual, and `done` then runs from the executor. The buffers must stay valid until `done`
// runs.
template <typename Socket, typename Buffers, typename Done>
void WriteInPlaceOrAsync(Socket& socket, const Buffers& buffers, Done done) {
  boost::system::error_code ec;
  const size_t sent = socket.write_some(buffers, ec);
  if (!ec && sent == boost::asio::buffer_size(buffers)) {
    done(ec);
    return;
  }
  auto rest = std::make_shared<boost::beast::buffers_suffix<Buffers>>(buffers);
  if (!ec) rest->consume(sent);
  boost::asio::async_write(
      socket, *rest,
      [rest, done = std::move(done)](boost::system::error_code ec, size_t) mutable { done(ec); });
}

}  // namespace switchyard
