#pragma once

#include <array>
#include <boost/asio/ip/address.hpp>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "common/metrics.h"

namespace switchyard {

// A block of client addresses in CIDR notation, IPv4 ("10.0.0.0/8") or IPv6
// ("2001:db8::/32"); IPv4 is kept as IPv4-mapped IPv6 so that one comparison serves both (and
// a dual-stack listener's ::ffff:a.b.c.d peers match IPv4 ranges).
struct AddressRange {
  std::array<uint8_t, 16> network{};
  unsigned prefix_length = 0;  // of the 128 bits

  bool Contains(const boost::asio::ip::address& address) const;
};

// Parses "ADDRESS/PREFIX" (or a single address: a /32 or /128). An address with bits set past
// the prefix is an error, since it most likely is a typo.
absl::StatusOr<AddressRange> ParseAddressRange(std::string_view text);

// Regional entry points, as RPC gateways send clients to the one nearest them.
struct RegionOptions {
  struct Region {
    std::string name;                  // a label value: [a-z0-9_-]
    std::string url;                   // the region's public http(s) URL, path allowed
    std::vector<AddressRange> ranges;  // the client addresses it serves
  };
  std::vector<Region> regions;  // empty: regions off, /_redirect and /_getlink are not special
  // This server's own region (a name of `regions`), or empty: a gateway of no region, which
  // redirects every client.
  std::string own_region;
  // The region of an address in no range (a name of `regions`), or empty: such a client gets
  // 404.
  std::string default_region;
};

// The answer to GET /_redirect or /_getlink: a pure decision, written out by the HTTP layer.
struct RegionAnswer {
  unsigned status = 200;
  std::string location;  // set for 308
  std::string body;      // JSON
};

// The counters of one region.
struct RegionCounters {
  Counter* redirects = nullptr;  // 308 to the region
  Counter* here = nullptr;       // /_redirect reached the client's own region: 200
  Counter* links = nullptr;      // /_getlink answered with the region's URL
};

// Which region serves a client address, and the answers of /_redirect and /_getlink. The
// longest matching range wins (equal lengths: the region listed first); an address in no range
// goes to the default region. Built once from validated options, immutable; any thread may
// call it. The registry outlives it.
class RegionTable {
 public:
  RegionTable(RegionOptions options, MetricsRegistry* registry);

  bool enabled() const { return !options_.regions.empty(); }
  // The index in options().regions of the region of `address`, or nullopt.
  std::optional<size_t> RegionOf(const boost::asio::ip::address& address) const;
  // The answer to a GET of `target` from `peer`, when `target` is /_redirect or /_getlink
  // (each alone, or followed by a path or query that is carried over to the region's URL);
  // nullopt for any other target.
  std::optional<RegionAnswer> Answer(std::string_view target,
                                     const boost::asio::ip::address& peer) const;
  const RegionOptions& options() const { return options_; }

 private:
  struct Entry {
    AddressRange range;
    size_t region = 0;
  };

  const RegionOptions options_;
  std::vector<Entry> entries_;  // longest prefix first, then in configured order
  std::optional<size_t> own_;
  std::optional<size_t> default_;
  std::vector<RegionCounters> counters_;  // per region
  Counter* unmatched_ = nullptr;
};

}  // namespace switchyard
