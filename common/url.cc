#include "common/url.h"

#include <charconv>
#include <cstdint>

#include "fmt/format.h"

namespace switchyard {
namespace {

struct SchemeInfo {
  std::string_view prefix;
  Url::Scheme scheme;
  std::string_view default_port;
};
constexpr SchemeInfo kSchemes[] = {{"http://", Url::Scheme::kHttp, "80"},
                                   {"https://", Url::Scheme::kHttps, "443"},
                                   {"ws://", Url::Scheme::kWs, "80"},
                                   {"wss://", Url::Scheme::kWss, "443"}};

std::string_view PrefixOf(Url::Scheme scheme) {
  for (const SchemeInfo& s : kSchemes) {
    if (s.scheme == scheme) return s.prefix;
  }
  return "";
}

absl::Status Bad(std::string_view text, std::string_view what) {
  return absl::InvalidArgumentError(fmt::format("URL '{}' {}", text, what));
}

}  // namespace

absl::StatusOr<Url> ParseUrl(std::string_view text) {
  Url url;
  std::string_view rest;
  std::string_view default_port;
  for (const SchemeInfo& s : kSchemes) {
    if (text.substr(0, s.prefix.size()) == s.prefix) {
      url.scheme = s.scheme;
      url.tls = s.scheme == Url::Scheme::kHttps || s.scheme == Url::Scheme::kWss;
      rest = text.substr(s.prefix.size());
      default_port = s.default_port;
      break;
    }
  }
  if (default_port.empty()) return Bad(text, "must start with http://, https://, ws:// or wss://");
  const size_t slash = rest.find_first_of("/?#");
  const std::string_view authority = rest.substr(0, slash);
  if (slash != std::string_view::npos) {
    url.path.assign(rest[slash] == '/' ? "" : "/");
    url.path.append(rest.substr(slash));
  }
  if (authority.find('@') != std::string_view::npos) return Bad(text, "has user information");
  std::string_view host = authority;
  std::string_view port;
  if (!authority.empty() && authority.front() == '[') {
    const size_t close = authority.find(']');
    if (close == std::string_view::npos) return Bad(text, "has an unclosed IPv6 address");
    host = authority.substr(1, close - 1);
    const std::string_view after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') return Bad(text, "has text after its IPv6 address");
      port = after.substr(1);
      url.explicit_port = true;
    }
  } else if (const size_t colon = authority.rfind(':'); colon != std::string_view::npos) {
    host = authority.substr(0, colon);
    port = authority.substr(colon + 1);
    url.explicit_port = true;
    if (host.find(':') != std::string_view::npos) {
      return Bad(text, "has an IPv6 address without brackets");
    }
  }
  if (host.empty()) return Bad(text, "has no host");
  if (url.explicit_port) {
    uint32_t number = 0;
    const auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), number);
    if (port.empty() || ec != std::errc() || end != port.data() + port.size() || number == 0 ||
        number > 65535) {
      return Bad(text, "has a port that is not a number from 1 to 65535");
    }
  } else {
    port = default_port;
  }
  url.host = std::string(host);
  url.port = std::string(port);
  return url;
}

std::string Url::HostHeader() const {
  const std::string name = host.find(':') != std::string::npos ? "[" + host + "]" : host;
  return explicit_port ? name + ":" + port : name;
}

std::string Url::ToString() const {
  return fmt::format("{}{}{}", PrefixOf(scheme), HostHeader(), path == "/" ? "" : path);
}

absl::StatusOr<Url> PubsubUrlOf(const Url& rpc) {
  Url ws = rpc;
  if (rpc.scheme == Url::Scheme::kHttp) ws.scheme = Url::Scheme::kWs;
  if (rpc.scheme == Url::Scheme::kHttps) ws.scheme = Url::Scheme::kWss;
  if (rpc.websocket() || !rpc.explicit_port) {
    if (!rpc.explicit_port) ws.port = ws.tls ? "443" : "80";
    return ws;
  }
  const int port = std::stoi(rpc.port);
  if (port >= 65535) {
    return absl::InvalidArgumentError(
        fmt::format("URL '{}' has no port + 1 for its pubsub endpoint", rpc.ToString()));
  }
  ws.port = std::to_string(port + 1);
  return ws;
}

std::optional<std::string_view> QueryParameter(std::string_view target, std::string_view name) {
  const size_t question = target.find('?');
  if (question == std::string_view::npos) return std::nullopt;
  std::string_view query = target.substr(question + 1);
  while (!query.empty()) {
    const size_t amp = query.find('&');
    const std::string_view pair = query.substr(0, amp);
    if (pair.size() > name.size() && pair.starts_with(name) && pair[name.size()] == '=') {
      return pair.substr(name.size() + 1);
    }
    if (amp == std::string_view::npos) break;
    query.remove_prefix(amp + 1);
  }
  return std::nullopt;
}

}  // namespace switchyard
