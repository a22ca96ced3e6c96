#pragma once

// What the tests of whole processes (`switchyard serve` with localnets) share: waiting, ready
// files, a GET with a deadline, and a fixture that starts processes and kills them at the end.
// A test target that includes this defines SWITCHYARD_LOCALNET_BINARY.

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>

#include <algorithm>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket.hpp>
#include <chrono>
#include <fstream>
#include <functional>
#include <optional>
#include <regex>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "fmt/format.h"
#include "tests/support/subprocess.h"
#include "tests/support/temp_dir.h"

namespace switchyard::testing {

inline bool WaitFor(const std::function<bool()>& condition, std::chrono::milliseconds deadline) {
  const auto end = std::chrono::steady_clock::now() + deadline;
  while (std::chrono::steady_clock::now() < end) {
    if (condition()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return condition();
}

inline std::optional<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The number after "key": in a small JSON object, or -1.
// The value of Prometheus series `series` (labels included, as in `name{a="b"}`) in `text`, or
// -1 when it is not there.
inline int64_t MetricValue(const std::string& text, const std::string& series) {
  const size_t at = text.find("\n" + series + " ");
  if (at == std::string::npos) return -1;
  return std::stoll(text.substr(at + series.size() + 2));
}

inline int64_t JsonInt(const std::string& json, const std::string& key) {
  std::smatch m;
  if (!std::regex_search(json, m, std::regex("\"" + key + "\":([0-9]+)"))) return -1;
  return std::stoll(m[1]);
}

// A JSON-RPC request with id 1.
inline std::string Request(std::string_view method, std::string_view params) {
  return fmt::format(R"({{"jsonrpc":"2.0","id":1,"method":"{}","params":{}}})", method, params);
}

struct HttpAnswer {
  unsigned status = 0;
  std::string body;
};

// One GET with a deadline; nullopt when the connection fails or times out.
inline std::optional<HttpAnswer> HttpGet(
    uint16_t port, const std::string& target,
    std::chrono::milliseconds timeout = std::chrono::seconds(5)) {
  namespace beast = boost::beast;
  namespace http = beast::http;
  boost::asio::io_context ioc;
  beast::tcp_stream stream(ioc);
  stream.expires_after(timeout);
  http::request<http::string_body> req(http::verb::get, target, 11);
  req.set(http::field::host, "127.0.0.1");
  http::response<http::string_body> res;
  beast::flat_buffer buffer;
  boost::system::error_code result = boost::asio::error::timed_out;
  stream.async_connect(
      boost::asio::ip::tcp::endpoint(boost::asio::ip::make_address("127.0.0.1"), port),
      [&](boost::system::error_code ec) {
        if (ec) {
          result = ec;
          return;
        }
        http::async_write(stream, req, [&](boost::system::error_code ec, size_t) {
          if (ec) {
            result = ec;
            return;
          }
          http::async_read(stream, buffer, res,
                           [&](boost::system::error_code ec, size_t) { result = ec; });
        });
      });
  ioc.run_for(timeout + std::chrono::milliseconds(200));
  if (result) return std::nullopt;
  return HttpAnswer{res.result_int(), res.body()};
}

// One keep-alive HTTP connection with blocking calls under a deadline.
class HttpClient {
 public:
  explicit HttpClient(uint16_t port, std::chrono::seconds timeout = std::chrono::seconds(5))
      : socket_(io_) {
    boost::system::error_code ec;
    socket_.connect(
        boost::asio::ip::tcp::endpoint(boost::asio::ip::make_address("127.0.0.1"), port), ec);
    timeval tv{static_cast<time_t>(timeout.count()), 0};
    setsockopt(socket_.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    connected_ = !ec;
  }
  bool connected() const { return connected_; }

  // POSTs `body` to `target` with `headers`; status 0 when the exchange failed.
  boost::beast::http::response<boost::beast::http::string_body> Post(
      const std::string& target, const std::string& body,
      const std::vector<std::pair<std::string, std::string>>& headers = {}) {
    namespace http = boost::beast::http;
    http::request<http::string_body> request(http::verb::post, target, 11);
    request.set(http::field::host, "127.0.0.1");
    request.set(http::field::content_type, "application/json");
    for (const auto& [name, value] : headers) request.set(name, value);
    request.body() = body;
    request.prepare_payload();
    http::response<http::string_body> response;
    boost::system::error_code ec;
    http::write(socket_, request, ec);
    if (!ec) http::read(socket_, buffer_, response, ec);
    if (ec) response.result(0);
    return response;
  }

 private:
  boost::asio::io_context io_;
  boost::asio::ip::tcp::socket socket_;
  boost::beast::flat_buffer buffer_;
  bool connected_ = false;
};

// A plain WebSocket client with blocking calls; reads give up after `timeout`.
class WsClient {
 public:
  explicit WsClient(uint16_t port, int rcvbuf = 0,
                    std::chrono::seconds timeout = std::chrono::seconds(10))
      : ws_(io_), timeout_(timeout) {
    boost::system::error_code ec;
    boost::asio::ip::tcp::socket& socket = ws_.next_layer();
    socket.open(boost::asio::ip::tcp::v4(), ec);
    if (rcvbuf > 0) socket.set_option(boost::asio::socket_base::receive_buffer_size(rcvbuf), ec);
    socket.connect(boost::asio::ip::tcp::endpoint(boost::asio::ip::make_address("127.0.0.1"), port),
                   ec);
    if (ec) return;
    ws_.handshake("127.0.0.1", "/", ec);
    connected_ = !ec;
  }
  bool connected() const { return connected_; }
  boost::beast::websocket::stream<boost::asio::ip::tcp::socket>& ws() { return ws_; }

  bool Send(std::string_view text, bool binary = false) {
    boost::system::error_code ec;
    ws_.binary(binary);
    ws_.write(boost::asio::buffer(text.data(), text.size()), ec);
    return !ec;
  }
  // The next message, or nullopt with the error in `error()` (timed_out after the timeout,
  // which closes the connection).
  std::optional<std::string> Read() {
    boost::beast::flat_buffer buffer;
    bool done = false;
    ws_.async_read(buffer, [&](boost::system::error_code ec, size_t) {
      error_ = ec;
      done = true;
    });
    io_.restart();
    io_.run_for(timeout_);
    if (!done) {
      boost::system::error_code ignored;
      ws_.next_layer().close(ignored);
      io_.restart();
      io_.run();
      error_ = boost::asio::error::timed_out;
    }
    if (error_) return std::nullopt;
    return boost::beast::buffers_to_string(buffer.data());
  }
  // The next message that is not a notification.
  std::optional<std::string> ReadAnswer() {
    for (;;) {
      std::optional<std::string> message = Read();
      if (!message || message->find("\"method\"") == std::string::npos) return message;
    }
  }
  boost::system::error_code error() const { return error_; }
  // Unblocks a read in another thread.
  void Shutdown() {
    boost::system::error_code ignored;
    ws_.next_layer().shutdown(boost::asio::ip::tcp::socket::shutdown_both, ignored);
  }

 private:
  boost::asio::io_context io_;
  boost::beast::websocket::stream<boost::asio::ip::tcp::socket> ws_;
  std::chrono::seconds timeout_;
  bool connected_ = false;
  boost::system::error_code error_;
};

// Starts processes for a test and SIGKILLs every one still running at its end.
class ProcessTest : public ::testing::Test {
 protected:
  void TearDown() override {
    for (pid_t pid : processes_) {
      kill(pid, SIGKILL);
      int status = 0;
      waitpid(pid, &status, 0);
    }
  }

  pid_t Start(const std::vector<std::string>& argv) {
    const pid_t pid = StartProcess(argv);
    if (pid > 0) processes_.push_back(pid);
    return pid;
  }

  // Sends SIGTERM and waits up to `deadline` for the exit code; -1 on timeout.
  int Terminate(pid_t pid, std::chrono::milliseconds deadline) {
    kill(pid, SIGTERM);
    int status = 0;
    const bool exited = WaitFor([&] { return waitpid(pid, &status, WNOHANG) == pid; }, deadline);
    if (!exited) return -1;
    std::erase(processes_, pid);
    if (WIFEXITED(status)) return WEXITSTATUS(status);
    return 128 + WTERMSIG(status);
  }

  // Waits for a ready file and returns its text.
  std::string WaitForReadyFile(const std::string& path) {
    std::string text;
    EXPECT_TRUE(WaitFor(
        [&] {
          auto content = ReadFile(path);
          if (!content || content->find('}') == std::string::npos) return false;
          text = *content;
          return true;
        },
        std::chrono::seconds(15)))
        << path;
    return text;
  }

  // Starts a localnet and returns its HTTP port.
  uint16_t StartLocalnet(const std::string& name, std::vector<std::string> args) {
    const std::string ready = dir_.Sub(name + ".ready");
    args.insert(args.begin(), {SWITCHYARD_LOCALNET_BINARY, "--port", "0", "--threads", "1",
                               "--ready-file", ready});
    EXPECT_GT(Start(args), 0);
    return static_cast<uint16_t>(JsonInt(WaitForReadyFile(ready), "http"));
  }

  std::string WriteFile(const std::string& name, const std::string& content) {
    const std::string path = dir_.Sub(name);
    std::ofstream(path) << content;
    return path;
  }

  TempDir dir_;
  std::vector<pid_t> processes_;
};

}  // namespace switchyard::testing
