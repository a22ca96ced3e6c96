#include "app/peer_digests.h"

#include "api/admin/digest_answer.h"
#include "common/status.h"
#include "fmt/format.h"

namespace switchyard {

absl::StatusOr<std::unique_ptr<AdminPeerDigests>> AdminPeerDigests::Create(
    const std::string& admin_url, absl::Duration timeout) {
  ASSIGN_OR_RETURN(Url url, ParseUrl(admin_url));
  if (url.websocket()) {
    return absl::InvalidArgumentError(
        fmt::format("peer '{}' is not an http(s) URL of an admin listener", admin_url));
  }
  std::string name = url.ToString();
  return std::unique_ptr<AdminPeerDigests>(
      new AdminPeerDigests(std::move(url), std::move(name), timeout));
}

AdminPeerDigests::AdminPeerDigests(Url url, std::string name, absl::Duration timeout)
    : name_(std::move(name)),
      timeout_(timeout),
      client_(std::move(url), fmt::format("peer {}", name_)) {}

absl::StatusOr<std::optional<SealedDigestAt>> AdminPeerDigests::Ask(std::optional<Slot> slot) {
  ASSIGN_OR_RETURN(HttpReply reply, client_.Get(DigestTarget(slot), timeout_));
  absl::StatusOr<std::optional<DigestAnswer>> answer = ParseDigestAnswer(reply.status, reply.body);
  if (!answer.ok()) {
    return absl::Status(answer.status().code(),
                        fmt::format("peer {} GET {}: {}", name_, DigestTarget(slot),
                                    std::string(answer.status().message())));
  }
  if (!*answer) return std::optional<SealedDigestAt>();
  if (slot && (*answer)->sealed.slot != *slot) {
    return absl::DataLossError(fmt::format("peer {} answered slot {} when asked for slot {}", name_,
                                           (*answer)->sealed.slot, *slot));
  }
  return std::optional<SealedDigestAt>((*answer)->sealed);
}

absl::StatusOr<std::optional<SealedDigestAt>> AdminPeerDigests::Latest() {
  return Ask(std::nullopt);
}

absl::StatusOr<std::optional<StateDigest>> AdminPeerDigests::At(Slot slot) {
  ASSIGN_OR_RETURN(std::optional<SealedDigestAt> sealed, Ask(slot));
  if (!sealed) return std::optional<StateDigest>();
  return std::optional<StateDigest>(sealed->digest);
}

}  // namespace switchyard
