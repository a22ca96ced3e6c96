#include "api/net/regions.h"

#include <algorithm>
#include <boost/asio/ip/address_v6.hpp>
#include <charconv>

#include "fmt/format.h"

namespace switchyard {
namespace {

namespace ip = boost::asio::ip;

std::array<uint8_t, 16> MappedBytes(const ip::address& address) {
  if (address.is_v4()) return ip::make_address_v6(ip::v4_mapped, address.to_v4()).to_bytes();
  return address.to_v6().to_bytes();
}

// Whether the first `bits` bits of `a` and `b` are equal.
bool SamePrefix(const std::array<uint8_t, 16>& a, const std::array<uint8_t, 16>& b, unsigned bits) {
  const unsigned whole = bits / 8;
  if (!std::equal(a.begin(), a.begin() + whole, b.begin())) return false;
  const unsigned rest = bits % 8;
  if (rest == 0) return true;
  const auto mask = static_cast<uint8_t>(0xff << (8 - rest));
  return (a[whole] & mask) == (b[whole] & mask);
}

constexpr std::string_view kRedirectPath = "/_redirect";
constexpr std::string_view kLinkPath = "/_getlink";

// The rest of `target` after `path` when `target` is `path` alone or followed by '/' or '?'.
std::optional<std::string_view> RestAfter(std::string_view target, std::string_view path) {
  if (!target.starts_with(path)) return std::nullopt;
  std::string_view rest = target.substr(path.size());
  if (!rest.empty() && rest.front() != '/' && rest.front() != '?') return std::nullopt;
  return rest;
}

// `url` with `rest` (a path and query) in place of its trailing slash. Bytes that a URL or a
// JSON string may not carry raw are percent-encoded.
std::string Link(std::string_view url, std::string_view rest) {
  std::string out(url);
  while (!out.empty() && out.back() == '/') out.pop_back();
  if (rest.empty() || rest.front() == '?') out += '/';
  for (const char c : rest) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte <= 0x20 || byte >= 0x7f || c == '"' || c == '\\') {
      out += fmt::format("%{:02X}", byte);
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace

bool AddressRange::Contains(const ip::address& address) const {
  return SamePrefix(MappedBytes(address), network, prefix_length);
}

absl::StatusOr<AddressRange> ParseAddressRange(std::string_view text) {
  const size_t slash = text.find('/');
  const std::string address_text(text.substr(0, slash));
  boost::system::error_code ec;
  const ip::address address = ip::make_address(address_text, ec);
  if (ec) {
    return absl::InvalidArgumentError(
        fmt::format("'{}' is not an IPv4 or IPv6 address range (ADDRESS/PREFIX)", text));
  }
  const unsigned width = address.is_v4() ? 32 : 128;
  unsigned prefix = width;
  if (slash != std::string_view::npos) {
    const std::string_view digits = text.substr(slash + 1);
    const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), prefix);
    if (digits.empty() || error != std::errc() || end != digits.data() + digits.size() ||
        prefix > width) {
      return absl::InvalidArgumentError(
          fmt::format("'{}': the prefix length must be 0 to {}", text, width));
    }
  }
  AddressRange range;
  range.network = MappedBytes(address);
  range.prefix_length = prefix + (128 - width);
  std::array<uint8_t, 16> masked{};
  for (unsigned bit = 0; bit < range.prefix_length; ++bit) {
    masked[bit / 8] |= range.network[bit / 8] & static_cast<uint8_t>(0x80 >> (bit % 8));
  }
  if (masked != range.network) {
    return absl::InvalidArgumentError(
        fmt::format("'{}' has address bits set past its /{} prefix", text, prefix));
  }
  return range;
}

RegionTable::RegionTable(RegionOptions options, MetricsRegistry* registry)
    : options_(std::move(options)) {
  for (size_t r = 0; r < options_.regions.size(); ++r) {
    const RegionOptions::Region& region = options_.regions[r];
    for (const AddressRange& range : region.ranges) entries_.push_back(Entry{range, r});
    if (region.name == options_.own_region) own_ = r;
    if (region.name == options_.default_region) default_ = r;
    const MetricLabels labels = {{"region", region.name}};
    RegionCounters counters;
    counters.redirects = &registry->AddCounter(
        "switchyard_api_region_redirects_total",
        "GET /_redirect answered 308 to the client's region, per region", labels);
    counters.here = &registry->AddCounter(
        "switchyard_api_region_here_total",
        "GET /_redirect from a client of this server's own region (answered 200), per region",
        labels);
    counters.links =
        &registry->AddCounter("switchyard_api_region_links_total",
                              "GET /_getlink answered with a region's URL, per region", labels);
    counters_.push_back(counters);
  }
  std::stable_sort(entries_.begin(), entries_.end(), [](const Entry& a, const Entry& b) {
    return a.range.prefix_length > b.range.prefix_length;
  });
  if (!options_.regions.empty()) {
    unmatched_ = &registry->AddCounter(
        "switchyard_api_region_unmatched_total",
        "GET /_redirect and /_getlink from an address in no region's range, with no default "
        "region (answered 404)");
  }
}

std::optional<size_t> RegionTable::RegionOf(const ip::address& address) const {
  if (!address.is_unspecified()) {
    const std::array<uint8_t, 16> bytes = MappedBytes(address);
    for (const Entry& entry : entries_) {
      if (SamePrefix(bytes, entry.range.network, entry.range.prefix_length)) return entry.region;
    }
  }
  return default_;
}

std::optional<RegionAnswer> RegionTable::Answer(std::string_view target,
                                                const ip::address& peer) const {
  if (!enabled() || target.size() < kLinkPath.size() || target[1] != '_') return std::nullopt;
  std::optional<std::string_view> rest = RestAfter(target, kRedirectPath);
  const bool redirect = rest.has_value();
  if (!redirect) rest = RestAfter(target, kLinkPath);
  if (!rest) return std::nullopt;
  RegionAnswer answer;
  const std::optional<size_t> region = RegionOf(peer);
  if (!region) {
    unmatched_->Increment();
    answer.status = 404;
    answer.body = fmt::format(R"({{"error":"no region serves the client address {}"}})",
                              peer.is_unspecified() ? std::string("(unknown)") : peer.to_string());
    return answer;
  }
  const RegionOptions::Region& chosen = options_.regions[*region];
  const std::string link = Link(chosen.url, *rest);
  answer.body = fmt::format(R"({{"region":"{}","url":"{}"}})", chosen.name, link);
  if (!redirect) {
    counters_[*region].links->Increment();
  } else if (own_ == region) {
    counters_[*region].here->Increment();
  } else {
    counters_[*region].redirects->Increment();
    answer.status = 308;
    answer.location = link;
  }
  return answer;
}

}  // namespace switchyard
