#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace switchyard {

// host, port and path of an http:// or ws:// URL.
struct BaseEndpoint {
  std::string host;
  std::string port;
  std::string path = "/";
};
// Parses http://HOST[:PORT][/PATH] or ws://HOST[:PORT][/PATH]. https and wss are refused for
// now with a clear error.
absl::StatusOr<BaseEndpoint> ParseBaseUrl(const std::string& url);

// A keep-alive JSON-RPC client of the base layer over HTTP. Every call has a deadline; a
// failed connection is reopened on the next call. Used by the ingest thread only: calls block
// that thread (never an I/O thread of the router).
class BaseRpcClient {
 public:
  explicit BaseRpcClient(BaseEndpoint endpoint);
  ~BaseRpcClient();

  // Sends {"jsonrpc":"2.0","id":N,"method":method,"params":params} and returns the response
  // body. Transport errors and timeouts are Unavailable / DeadlineExceeded.
  absl::StatusOr<std::string> Call(const std::string& method, const std::string& params,
                                   absl::Duration timeout);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// One WebSocket pubsub connection to the base layer. Used by one thread.
class BasePubsubConnection {
 public:
  static absl::StatusOr<std::unique_ptr<BasePubsubConnection>> Connect(const BaseEndpoint& endpoint,
                                                                       absl::Duration timeout);
  ~BasePubsubConnection();

  absl::Status Send(const std::string& text, absl::Duration timeout);
  // The next message; nullopt when `timeout` passed first. A closed or broken connection is
  // an Unavailable error.
  absl::StatusOr<std::optional<std::string>> Read(absl::Duration timeout);

 private:
  struct Impl;
  explicit BasePubsubConnection(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace switchyard
