#pragma once

#include <sys/socket.h>
#include <sys/time.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace switchyard::api_test {

struct ClientResponse {
  unsigned status = 0;
  std::string body;
  std::map<std::string, std::string> headers;
  bool keep_alive = false;
};

// A blocking HTTP/1.1 client for tests, with a receive timeout so that no test can hang.
class TestClient {
 public:
  explicit TestClient(uint16_t port) : socket_(io_context_) {
    socket_.connect({boost::asio::ip::make_address("127.0.0.1"), port});
    timeval timeout{10, 0};
    setsockopt(socket_.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  }

  static std::string Request(const std::string& body,
                             const std::vector<std::pair<std::string, std::string>>& headers = {}) {
    std::string text = "POST / HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\n";
    for (const auto& [name, value] : headers) text += name + ": " + value + "\r\n";
    text += "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
    return text;
  }

  void WriteRaw(const std::string& bytes) {
    boost::beast::error_code ec;
    boost::asio::write(socket_, boost::asio::buffer(bytes), ec);
  }

  // Reads one response; status 0 when the connection closed or timed out.
  ClientResponse Read() {
    ClientResponse out;
    boost::beast::http::response<boost::beast::http::string_body> response;
    boost::beast::error_code ec;
    boost::beast::http::read(socket_, buffer_, response, ec);
    if (ec) return out;
    out.status = response.result_int();
    out.body = response.body();
    out.keep_alive = response.keep_alive();
    for (const auto& field : response) {
      out.headers[std::string(field.name_string())] = std::string(field.value());
    }
    return out;
  }

  ClientResponse Post(const std::string& body,
                      const std::vector<std::pair<std::string, std::string>>& headers = {}) {
    WriteRaw(Request(body, headers));
    return Read();
  }

  // True when the server closed the connection (EOF) before the receive timeout.
  bool ReadUntilClosed() {
    char byte;
    boost::beast::error_code ec;
    for (;;) {
      socket_.read_some(boost::asio::buffer(&byte, 1), ec);
      if (ec) return ec == boost::asio::error::eof || ec == boost::asio::error::connection_reset;
    }
  }

 private:
  boost::asio::io_context io_context_;
  boost::asio::ip::tcp::socket socket_;
  boost::beast::flat_buffer buffer_;
};

}  // namespace switchyard::api_test
