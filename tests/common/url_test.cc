#include "common/url.h"

#include <gtest/gtest.h>

namespace switchyard {
namespace {

TEST(UrlTest, QueryParameterIsTheFirstPairOfThatName) {
  EXPECT_EQ(QueryParameter("/status/digest?slot=42", "slot"), "42");
  EXPECT_EQ(QueryParameter("/x?a=1&slot=7&slot=8", "slot"), "7");
  EXPECT_EQ(QueryParameter("/x?slot=", "slot"), "");
  EXPECT_EQ(QueryParameter("/x?slots=1&aslot=2", "slot"), std::nullopt);
  EXPECT_EQ(QueryParameter("/x?slot", "slot"), std::nullopt);
  EXPECT_EQ(QueryParameter("/slot=1", "slot"), std::nullopt);
}

TEST(UrlTest, ParsesEverySchemeWithDefaultsAndExplicitPorts) {
  absl::StatusOr<Url> url = ParseUrl("https://rpc.example.com/key?x=1");
  ASSERT_TRUE(url.ok()) << url.status();
  EXPECT_EQ(url->scheme, Url::Scheme::kHttps);
  EXPECT_TRUE(url->tls);
  EXPECT_FALSE(url->websocket());
  EXPECT_EQ(url->host, "rpc.example.com");
  EXPECT_EQ(url->port, "443");
  EXPECT_FALSE(url->explicit_port);
  EXPECT_EQ(url->path, "/key?x=1");
  EXPECT_EQ(url->HostHeader(), "rpc.example.com");

  url = ParseUrl("ws://127.0.0.1:8900");
  ASSERT_TRUE(url.ok());
  EXPECT_TRUE(url->websocket());
  EXPECT_FALSE(url->tls);
  EXPECT_EQ(url->port, "8900");
  EXPECT_TRUE(url->explicit_port);
  EXPECT_EQ(url->path, "/");
  EXPECT_EQ(url->HostHeader(), "127.0.0.1:8900");

  url = ParseUrl("wss://[::1]:9000/ws");
  ASSERT_TRUE(url.ok());
  EXPECT_EQ(url->host, "::1");
  EXPECT_EQ(url->HostHeader(), "[::1]:9000");
  EXPECT_EQ(url->ToString(), "wss://[::1]:9000/ws");

  url = ParseUrl("http://h?q");
  ASSERT_TRUE(url.ok());
  EXPECT_EQ(url->path, "/?q");
  EXPECT_EQ(url->port, "80");
}

TEST(UrlTest, RejectsWhatNoClientCanConnectTo) {
  for (const char* bad :
       {"ftp://h", "h:80", "https://:80", "http://h:80x/", "http://h:0", "http://h:65536",
        "http://h:", "http://[::1", "http://[::1]x", "http://::1:80", "http://user@h/"}) {
    absl::StatusOr<Url> url = ParseUrl(bad);
    EXPECT_FALSE(url.ok()) << bad;
    if (!url.ok()) {
      EXPECT_NE(url.status().message().find(bad), std::string::npos) << url.status();
    }
  }
}

TEST(UrlTest, PubsubUrlIsTheRpcPortPlusOneOverWebSocket) {
  EXPECT_EQ(PubsubUrlOf(*ParseUrl("http://127.0.0.1:8899"))->ToString(), "ws://127.0.0.1:8900");
  EXPECT_EQ(PubsubUrlOf(*ParseUrl("https://rpc.example.com/key"))->ToString(),
            "wss://rpc.example.com/key");
  absl::StatusOr<Url> ws = PubsubUrlOf(*ParseUrl("https://rpc.example.com:8443/x"));
  ASSERT_TRUE(ws.ok());
  EXPECT_EQ(ws->port, "8444");
  EXPECT_TRUE(ws->tls);
  EXPECT_EQ(ws->scheme, Url::Scheme::kWss);
  // A WebSocket URL is its own pubsub endpoint.
  EXPECT_EQ(PubsubUrlOf(*ParseUrl("ws://h:7000/p"))->port, "7000");
  EXPECT_FALSE(PubsubUrlOf(*ParseUrl("http://h:65535")).ok());
}

}  // namespace
}  // namespace switchyard
