#pragma once

#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "engine/peer_check.h"
#include "ingest/base_clients.h"

namespace switchyard {

// A peer replica's sealed digests, read from its admin listener (GET /status/digest, whose
// JSON api/admin/digest_answer.h reads) with the one HTTP client (HttpReadClient). Each
// request has `timeout`. Used by one thread at a time; calls block it.
class AdminPeerDigests final : public PeerDigestSource {
 public:
  // InvalidArgument for a URL that is not http(s)://HOST:PORT[/PATH].
  static absl::StatusOr<std::unique_ptr<AdminPeerDigests>> Create(const std::string& admin_url,
                                                                  absl::Duration timeout);

  const std::string& name() const override { return name_; }
  absl::StatusOr<std::optional<SealedDigestAt>> Latest() override;
  absl::StatusOr<std::optional<StateDigest>> At(Slot slot) override;

 private:
  AdminPeerDigests(Url url, std::string name, absl::Duration timeout);
  absl::StatusOr<std::optional<SealedDigestAt>> Ask(std::optional<Slot> slot);

  std::string name_;
  absl::Duration timeout_;
  HttpReadClient client_;
};

}  // namespace switchyard
