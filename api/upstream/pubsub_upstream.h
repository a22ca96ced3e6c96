#pragma once

#include <simdjson.h>

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "api/jsonrpc/pubsub_json.h"
#include "common/url.h"

namespace boost::asio::ssl {
class context;
}

namespace switchyard {

// A pubsub endpoint's URL (common/url.h): ws:// or wss:// only.
using WsEndpoint = Url;
absl::StatusOr<WsEndpoint> ParseWsUrl(std::string_view url);
// The pubsub URL Solana clients assume for an RPC URL (PubsubUrlOf in common/url.h).
absl::StatusOr<std::string> PubsubUrlFor(std::string_view http_url);

struct PubsubUpstreamOptions {
  absl::Duration connect_timeout = absl::Seconds(5);  // resolve, connect, TLS and WS handshake
  absl::Duration call_timeout = absl::Seconds(10);    // the answer to a subscribe/unsubscribe
  // Pings after half of it without traffic; the connection is lost after all of it.
  absl::Duration idle_timeout = absl::Seconds(30);
  size_t max_message_bytes = 64 << 20;
  absl::Duration reconnect_initial_backoff = absl::Milliseconds(100);
  absl::Duration reconnect_max_backoff = absl::Seconds(2);
  // Reconnection is given up after failing for this long (from the loss, or from the first
  // attempt of a connection that never opened).
  absl::Duration reconnect_give_up = absl::Seconds(10);
  bool verify_tls = true;
};

// One WebSocket connection to a pubsub upstream (one target: base or an ER, whose endpoints
// it tries in turn), with JSON-RPC calls matched to their answers, notifications handed to the
// listener, and reconnection with backoff after a loss. Owned (shared) by the PubsubLinks of one
// PubsubShard and used only on that shard's io_context thread; every callback runs there.
class PubsubUpstream : public std::enable_shared_from_this<PubsubUpstream> {
 public:
  class Listener {
   public:
    virtual ~Listener() = default;
    // Open, for the first time or again after a loss (`reconnected`): subscriptions made on the
    // connection before are gone and must be made again.
    virtual void OnUpstreamOpen(PubsubUpstream& upstream, bool reconnected) = 0;
    // Lost; reconnection follows. Calls in flight have failed with Unavailable.
    virtual void OnUpstreamLost(PubsubUpstream& upstream, const absl::Status& why) = 0;
    // Reconnection given up; Start() tries again from scratch.
    virtual void OnUpstreamFailed(PubsubUpstream& upstream, const absl::Status& why) = 0;
    // A notification; `message` is valid only during the call.
    virtual void OnUpstreamNotification(PubsubUpstream& upstream, std::string_view message,
                                        const UpstreamMessage& parsed) = 0;
  };

  // The raw result or error object of an answer.
  struct Answer {
    std::string result;
    std::string error;
  };
  using AnswerCallback = std::function<void(absl::StatusOr<Answer>)>;

  PubsubUpstream(boost::asio::io_context& io_context, std::string target,
                 std::vector<WsEndpoint> endpoints, const PubsubUpstreamOptions& options,
                 boost::asio::ssl::context* tls, Listener* listener);
  ~PubsubUpstream();

  // Connects unless open or connecting.
  void Start();
  // Sends a JSON-RPC call; `done` (may be empty) gets the answer, or Unavailable when the
  // connection is not open or is lost first, or DeadlineExceeded. `done` never runs inside
  // Call.
  void Call(std::string_view method, std::string_view params, AnswerCallback done);
  // Closes the connection; no callback runs afterwards.
  void Close();

  bool open() const { return state_ == State::kOpen; }
  const std::string& target() const { return target_; }

 private:
  enum class State { kIdle, kConnecting, kOpen, kWaiting, kFailed, kClosed };
  struct Streams;
  struct PendingCall {
    AnswerCallback done;
    std::chrono::steady_clock::time_point deadline;
  };

  // A connection attempt to the current endpoint, in steps: the attempt's deadline; resolving
  // and connecting the socket; TLS (for wss://); the websocket handshake. Each step's failure,
  // and the deadline, end in OnConnectFailed; a stale generation's handlers do nothing.
  void Connect();
  void ArmConnectTimer(uint64_t generation);
  void ResolveAndConnect(uint64_t generation, const WsEndpoint& endpoint);
  void OnSocketConnected(uint64_t generation, const WsEndpoint& endpoint);
  void HandshakeWebsocket(uint64_t generation, const WsEndpoint& endpoint);
  void OnConnected(uint64_t generation);
  void OnConnectFailed(uint64_t generation, const absl::Status& why);
  void Lose(const absl::Status& why);
  void Retry();
  void Read();
  void OnMessage(size_t size);
  void WriteNext();
  void FailCalls(const absl::Status& why);
  void SweepCalls();

  boost::asio::io_context& io_context_;
  const std::string target_;
  const std::vector<WsEndpoint> endpoints_;
  const PubsubUpstreamOptions& options_;
  boost::asio::ssl::context* tls_;
  Listener* listener_;
  std::unique_ptr<Streams> streams_;
  State state_ = State::kIdle;
  uint64_t generation_ = 0;  // of the current connection; stale handlers see another
  size_t endpoint_index_ = 0;
  int attempts_ = 0;  // failed attempts since the last open connection
  std::optional<std::chrono::steady_clock::time_point> failing_since_;
  bool ever_opened_ = false;
  bool writing_ = false;
  bool sweeping_ = false;
  std::deque<std::string> write_queue_;
  uint64_t next_call_id_ = 1;
  absl::flat_hash_map<uint64_t, PendingCall> calls_;
  simdjson::ondemand::parser parser_;
};

}  // namespace switchyard
