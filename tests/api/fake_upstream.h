#pragma once

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace switchyard::api_test {

// What a fake upstream does with one request.
struct FakeReply {
  enum class Action { kAnswer, kReset, kHang };
  Action action = Action::kAnswer;
  unsigned status = 200;
  std::string body{};
  std::vector<std::pair<std::string, std::string>> headers{};  // besides Content-Type
};

// A small Solana-shaped JSON-RPC server on 127.0.0.1:0 for tests: answers each request with
// `responder` (by default: canned answers that name this upstream; a JSON-RPC batch gets an
// array of them), keeps connections alive, and records every body it received. Runs its own
// thread.
class FakeUpstream {
 public:
  using Responder = std::function<FakeReply(const std::string& method, const std::string& body)>;

  explicit FakeUpstream(std::string name);
  ~FakeUpstream();

  void SetResponder(Responder responder);
  // Signatures whose status/transaction this upstream knows.
  void AddKnownSignature(const std::string& signature);
  // While held, answers wait until Release().
  void Hold();
  void Release();
  // Closes a kept-alive connection once it has been idle this long after an answer, as HTTP
  // servers and balancers do (zero: never).
  void SetIdleClose(absl::Duration idle);
  // Reads a request that comes on a connection which already answered one, records it, and
  // closes the connection without an answer: a server closing an idle connection just as the
  // request arrives.
  void SetDropReusedRequests(bool drop);
  // Whether received() keeps the bodies (the default); a long-running user such as a fuzz
  // target turns it off so that memory stays flat, and received_count() still counts them.
  void SetKeepBodies(bool keep);

  std::string url() const;
  const std::string& name() const { return name_; }
  std::vector<std::string> received() const;
  size_t received_count() const;
  size_t max_outstanding() const;
  size_t connections_accepted() const;
  // GET requests answered (the router's pipelining probe asks GET /health); not recorded.
  size_t health_checks() const;
  void CountHealthCheck();
  // Waits until at least `n` requests arrived; false at the deadline.
  bool WaitForRequests(size_t n, absl::Duration timeout = absl::Seconds(10)) const;

  // The canned answer of this upstream to `body`: for a batch, the array of CannedAnswers.
  FakeReply Canned(const std::string& method, const std::string& body) const;
  // The canned answer to each call of `body` that has an id, in request order (one for a body
  // that is not a batch).
  std::vector<std::string> CannedAnswers(const std::string& body) const;
  // Whether `body` is a JSON-RPC batch.
  static bool IsBatch(const std::string& body);

  class Connection;
  absl::Duration idle_close() const;
  bool drop_reused() const;
  void Record(std::string body);

 private:
  void Accept();
  void Answer(std::shared_ptr<Connection> connection, std::string body);

  std::string name_;
  boost::asio::io_context io_context_;
  boost::asio::ip::tcp::acceptor acceptor_;
  std::thread thread_;
  mutable absl::Mutex mu_;
  Responder responder_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> received_ ABSL_GUARDED_BY(mu_);
  size_t received_count_ ABSL_GUARDED_BY(mu_) = 0;
  bool keep_bodies_ ABSL_GUARDED_BY(mu_) = true;
  std::vector<std::string> known_signatures_ ABSL_GUARDED_BY(mu_);
  bool held_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::function<void()>> held_answers_ ABSL_GUARDED_BY(mu_);
  size_t outstanding_ ABSL_GUARDED_BY(mu_) = 0;
  size_t max_outstanding_ ABSL_GUARDED_BY(mu_) = 0;
  size_t connections_ ABSL_GUARDED_BY(mu_) = 0;
  size_t health_checks_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Duration idle_close_ ABSL_GUARDED_BY(mu_) = absl::ZeroDuration();
  bool drop_reused_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::weak_ptr<Connection>> all_;     // io thread only
  std::vector<std::shared_ptr<Connection>> hung_;  // io thread only
};

}  // namespace switchyard::api_test
