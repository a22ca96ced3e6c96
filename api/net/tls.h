#pragma once

#include <atomic>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace switchyard {

// TLS on a server's own listeners: the certificate chain and private key files (PEM). Both or
// neither; neither: plain TCP.
struct TlsOptions {
  std::string certificate_file;
  std::string private_key_file;

  bool enabled() const { return !certificate_file.empty() || !private_key_file.empty(); }
};

// Which of the two files a TLS configuration error is about.
enum class TlsFile { kCertificate, kPrivateKey };

// A TLS server context that serves the chain and key of `options`: TLS 1.2 and 1.3 only, the
// key checked against the certificate. On an error, `failed` (when not null) says which file
// the message is about.
absl::StatusOr<std::shared_ptr<boost::asio::ssl::context>> LoadServerTlsContext(
    const TlsOptions& options, TlsFile* failed = nullptr);

// The server context of a TLS listener, swapped whole when the files are read again. A
// connection takes the current context once, at accept, and keeps it for its life, so a reload
// changes only what new connections are served. Owned by the HttpServer; any thread may call
// it.
class ListenerTls {
 public:
  static absl::StatusOr<std::unique_ptr<ListenerTls>> Create(TlsOptions options);

  std::shared_ptr<boost::asio::ssl::context> Current() const { return current_.load(); }
  // Reads the files again; on an error keeps the context it has.
  absl::Status Reload();

 private:
  ListenerTls(TlsOptions options, std::shared_ptr<boost::asio::ssl::context> context)
      : options_(std::move(options)), current_(std::move(context)) {}

  const TlsOptions options_;
  std::atomic<std::shared_ptr<boost::asio::ssl::context>> current_;
};

// The stream of a TLS connection: Beast's SSL stream (which coalesces a gathered write into
// one TLS record) over a TCP stream with its own deadline.
using TlsStream = boost::beast::ssl_stream<boost::beast::tcp_stream>;

// A TLS connection whose handshake is done, with the context it was made with (which must
// outlive the stream).
struct TlsConnection {
  TlsConnection(std::shared_ptr<boost::asio::ssl::context> context_in, TlsStream stream_in)
      : context(std::move(context_in)), stream(std::move(stream_in)) {}
  std::shared_ptr<boost::asio::ssl::context> context;
  TlsStream stream;
};

}  // namespace switchyard
