#include "api/net/regions.h"

#include <gtest/gtest.h>

#include <boost/asio/ip/address.hpp>
#include <string>

#include "common/metrics.h"
#include "fmt/format.h"

namespace switchyard::api_test {
namespace {

namespace ip = boost::asio::ip;

ip::address Address(const char* text) { return ip::make_address(text); }

AddressRange Range(const char* text) {
  absl::StatusOr<AddressRange> range = ParseAddressRange(text);
  EXPECT_TRUE(range.ok()) << text << ": " << range.status();
  return range.ok() ? *range : AddressRange{};
}

TEST(AddressRangeTest, MatchesIpv4RangesByPrefix) {
  const AddressRange range = Range("10.1.0.0/16");
  EXPECT_TRUE(range.Contains(Address("10.1.0.0")));
  EXPECT_TRUE(range.Contains(Address("10.1.255.7")));
  EXPECT_FALSE(range.Contains(Address("10.2.0.1")));
  EXPECT_FALSE(range.Contains(Address("11.1.0.1")));
  // A dual-stack listener's view of an IPv4 client.
  EXPECT_TRUE(range.Contains(Address("::ffff:10.1.2.3")));
  EXPECT_FALSE(range.Contains(Address("::a01:203")));  // not mapped: an IPv6 address
  const AddressRange odd = Range("192.168.4.0/22");
  EXPECT_TRUE(odd.Contains(Address("192.168.7.255")));
  EXPECT_FALSE(odd.Contains(Address("192.168.8.0")));
  EXPECT_TRUE(Range("0.0.0.0/0").Contains(Address("203.0.113.9")));
  EXPECT_FALSE(Range("0.0.0.0/0").Contains(Address("2001:db8::1")));
  EXPECT_TRUE(Range("127.0.0.1").Contains(Address("127.0.0.1")));
  EXPECT_FALSE(Range("127.0.0.1").Contains(Address("127.0.0.2")));
}

TEST(AddressRangeTest, MatchesIpv6RangesByPrefix) {
  const AddressRange range = Range("2001:db8:abcd::/48");
  EXPECT_TRUE(range.Contains(Address("2001:db8:abcd:12::1")));
  EXPECT_FALSE(range.Contains(Address("2001:db8:abce::1")));
  EXPECT_FALSE(range.Contains(Address("10.0.0.1")));
  const AddressRange nibble = Range("2001:db8::/29");  // a prefix inside a byte
  EXPECT_TRUE(nibble.Contains(Address("2001:dbf:ffff::1")));
  EXPECT_FALSE(nibble.Contains(Address("2001:dc0::1")));
  EXPECT_TRUE(Range("::/0").Contains(Address("2001:db8::1")));
  EXPECT_TRUE(Range("::1/128").Contains(Address("::1")));
}

TEST(AddressRangeTest, RejectsMalformedRangesSayingWhy) {
  EXPECT_EQ(ParseAddressRange("10.0.0.0/33").status().message(),
            "'10.0.0.0/33': the prefix length must be 0 to 32");
  EXPECT_EQ(ParseAddressRange("2001:db8::/129").status().message(),
            "'2001:db8::/129': the prefix length must be 0 to 128");
  EXPECT_EQ(ParseAddressRange("10.0.0.1/8").status().message(),
            "'10.0.0.1/8' has address bits set past its /8 prefix");
  EXPECT_EQ(ParseAddressRange("europe").status().message(),
            "'europe' is not an IPv4 or IPv6 address range (ADDRESS/PREFIX)");
  EXPECT_FALSE(ParseAddressRange("10.0.0.0/").ok());
  EXPECT_FALSE(ParseAddressRange("10.0.0.0/8x").ok());
}

class RegionTableTest : public ::testing::Test {
 protected:
  // eu: 10.0.0.0/8 and 2001:db8:e::/48; us: 10.9.0.0/16 (inside eu's) and 127.0.0.0/8.
  RegionOptions Options(std::string own, std::string fallback = "") {
    RegionOptions options;
    options.regions.push_back(
        {"eu", "https://eu.example.com", {Range("10.0.0.0/8"), Range("2001:db8:e::/48")}});
    options.regions.push_back(
        {"us", "https://us.example.com/v1/", {Range("10.9.0.0/16"), Range("127.0.0.0/8")}});
    options.own_region = std::move(own);
    options.default_region = std::move(fallback);
    return options;
  }
  double Count(const std::string& name, const std::string& region) {
    const std::string text = registry_.RenderPrometheus();
    const std::string series =
        region.empty() ? name : fmt::format("{}{{region=\"{}\"}}", name, region);
    const size_t at = text.find("\n" + series + " ");
    if (at == std::string::npos) return -1;
    return std::stod(text.substr(at + series.size() + 2));
  }

  MetricsRegistry registry_;
};

TEST_F(RegionTableTest, TheLongestMatchingRangeWinsInEitherFamily) {
  RegionTable table(Options("eu"), &registry_);
  EXPECT_EQ(table.RegionOf(Address("10.1.2.3")), 0u);
  EXPECT_EQ(table.RegionOf(Address("10.9.2.3")), 1u);  // /16 beats /8
  EXPECT_EQ(table.RegionOf(Address("::ffff:10.9.2.3")), 1u);
  EXPECT_EQ(table.RegionOf(Address("2001:db8:e:1::5")), 0u);
  EXPECT_EQ(table.RegionOf(Address("127.0.0.1")), 1u);
  EXPECT_EQ(table.RegionOf(Address("192.0.2.1")), std::nullopt);
  EXPECT_EQ(table.RegionOf(Address("2001:db8:f::1")), std::nullopt);
  EXPECT_EQ(table.RegionOf(ip::address()), std::nullopt);  // the socket could not tell
}

TEST_F(RegionTableTest, RedirectSendsAClientOfAnotherRegionThereWithPathAndQuery) {
  RegionTable table(Options("eu"), &registry_);
  std::optional<RegionAnswer> answer = table.Answer("/_redirect/KEY?x=1", Address("127.0.0.1"));
  ASSERT_TRUE(answer.has_value());
  EXPECT_EQ(answer->status, 308u);
  EXPECT_EQ(answer->location, "https://us.example.com/v1/KEY?x=1");
  EXPECT_EQ(answer->body, R"({"region":"us","url":"https://us.example.com/v1/KEY?x=1"})");
  answer = table.Answer("/_redirect?cluster=devnet", Address("10.9.0.1"));
  EXPECT_EQ(answer->location, "https://us.example.com/v1/?cluster=devnet");
  answer = table.Answer("/_redirect", Address("10.9.0.1"));
  EXPECT_EQ(answer->location, "https://us.example.com/v1/");
  EXPECT_EQ(Count("switchyard_api_region_redirects_total", "us"), 3);
}

TEST_F(RegionTableTest, RedirectFromTheOwnRegionAnswers200WithTheLink) {
  RegionTable table(Options("eu"), &registry_);
  std::optional<RegionAnswer> answer = table.Answer("/_redirect/KEY", Address("10.1.0.1"));
  ASSERT_TRUE(answer.has_value());
  EXPECT_EQ(answer->status, 200u);
  EXPECT_EQ(answer->location, "");
  EXPECT_EQ(answer->body, R"({"region":"eu","url":"https://eu.example.com/KEY"})");
  EXPECT_EQ(Count("switchyard_api_region_here_total", "eu"), 1);
  EXPECT_EQ(Count("switchyard_api_region_redirects_total", "eu"), 0);
}

TEST_F(RegionTableTest, AGatewayOfNoRegionRedirectsEveryClient) {
  RegionTable table(Options(""), &registry_);
  EXPECT_EQ(table.Answer("/_redirect", Address("10.1.0.1"))->status, 308u);
  EXPECT_EQ(table.Answer("/_redirect", Address("10.1.0.1"))->location, "https://eu.example.com/");
}

TEST_F(RegionTableTest, GetLinkAnswersTheRegionsUrlAsJson) {
  RegionTable table(Options("eu"), &registry_);
  std::optional<RegionAnswer> answer = table.Answer("/_getlink/KEY", Address("2001:db8:e::9"));
  ASSERT_TRUE(answer.has_value());
  EXPECT_EQ(answer->status, 200u);
  EXPECT_EQ(answer->body, R"({"region":"eu","url":"https://eu.example.com/KEY"})");
  answer = table.Answer("/_getlink", Address("127.0.0.1"));
  EXPECT_EQ(answer->body, R"({"region":"us","url":"https://us.example.com/v1/"})");
  EXPECT_EQ(Count("switchyard_api_region_links_total", "eu"), 1);
  EXPECT_EQ(Count("switchyard_api_region_links_total", "us"), 1);
}

TEST_F(RegionTableTest, AnAddressInNoRangeGets404OrTheDefaultRegion) {
  RegionTable none(Options("eu"), &registry_);
  std::optional<RegionAnswer> answer = none.Answer("/_getlink", Address("192.0.2.1"));
  ASSERT_TRUE(answer.has_value());
  EXPECT_EQ(answer->status, 404u);
  EXPECT_EQ(answer->body, R"({"error":"no region serves the client address 192.0.2.1"})");
  EXPECT_EQ(none.Answer("/_redirect/KEY", Address("2001:db8:f::1"))->status, 404u);
  EXPECT_EQ(Count("switchyard_api_region_unmatched_total", ""), 2);

  MetricsRegistry other;
  RegionTable with_default(Options("eu", "us"), &other);
  answer = with_default.Answer("/_redirect/KEY", Address("192.0.2.1"));
  EXPECT_EQ(answer->status, 308u);
  EXPECT_EQ(answer->location, "https://us.example.com/v1/KEY");
}

TEST_F(RegionTableTest, OnlyTheExactPathsAreAnswered) {
  RegionTable table(Options("eu"), &registry_);
  for (const char* target :
       {"/", "/_redirects", "/_getlinks/x", "/KEY/_redirect", "/_redirec", "/_", "_redirect"}) {
    EXPECT_FALSE(table.Answer(target, Address("127.0.0.1")).has_value()) << target;
  }
  RegionTable off(RegionOptions{}, &registry_);
  EXPECT_FALSE(off.Answer("/_redirect", Address("127.0.0.1")).has_value());
}

TEST_F(RegionTableTest, BytesAUrlMayNotCarryRawArePercentEncoded) {
  RegionTable table(Options("eu"), &registry_);
  EXPECT_EQ(table.Answer(R"(/_getlink/a"b\c)", Address("10.1.0.1"))->body,
            R"({"region":"eu","url":"https://eu.example.com/a%22b%5Cc"})");
}

}  // namespace
}  // namespace switchyard::api_test
