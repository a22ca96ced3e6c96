#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace switchyard {

// Where a base-layer endpoint is: http://, https://, ws:// or wss:// HOST[:PORT][/PATH].
struct BaseEndpoint {
  std::string host;
  std::string port;
  std::string path = "/";
  bool tls = false;            // https or wss
  bool explicit_port = false;  // the URL named the port
};
absl::StatusOr<BaseEndpoint> ParseBaseUrl(const std::string& url);

// The pubsub endpoint Solana clients assume for an RPC URL: the same host and path over
// ws/wss, on the RPC port + 1 when the URL names a port, else on the scheme's default port.
absl::StatusOr<BaseEndpoint> PubsubEndpointFor(const BaseEndpoint& rpc);

// How https and wss endpoints are checked: the peer's certificate chain against the
// system's trust store (or `ca_file`, a PEM bundle, when set) and its name against the host.
struct BaseTlsOptions {
  bool verify = true;
  std::string ca_file;
};

// A keep-alive JSON-RPC client of the base layer over HTTP. Every call has a deadline; a
// failed connection is reopened on the next call. Used by the ingest thread only: calls block
// that thread (never an I/O thread of the router).
class BaseRpcClient {
 public:
  // A bad `tls` setting (an unreadable CA file) surfaces on the first Call.
  explicit BaseRpcClient(BaseEndpoint endpoint, BaseTlsOptions tls = {});
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
  static absl::StatusOr<std::unique_ptr<BasePubsubConnection>> Connect(
      const BaseEndpoint& endpoint, absl::Duration timeout, const BaseTlsOptions& tls = {});
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
