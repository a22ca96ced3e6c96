#include "engine/event_codec.h"

#include <isa-l/crc.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/endian.h"
#include "common/status.h"

namespace switchyard {
namespace {

constexpr size_t kHeaderSize = 2;
constexpr size_t kCrcSize = 4;

constexpr size_t kV1 = 1;
// Flags and source, after the signature of an account event (version 2).
constexpr size_t kTrailerSize = 2;

constexpr size_t PayloadSize(EventKind kind, uint8_t version = kEventFormatVersion) {
  const size_t trailer = version == kV1 ? 0 : kTrailerSize;
  switch (kind) {
    case EventKind::kDelegated:
      return 32 * 3 + 8 * 3 + 64 + trailer;
    case EventKind::kUndelegated:
      return 32 + 8 + 64 + trailer;
    case EventKind::kSlotSealed:
    case EventKind::kStreamGap:
    case EventKind::kResynced:
      return 8;
  }
  return 0;
}

void AppendBytes(std::string* out, const uint8_t* data, size_t n) {
  out->append(reinterpret_cast<const char*>(data), n);
}

// Reads fields in order from a record whose length was already checked.
class FieldReader {
 public:
  explicit FieldReader(const uint8_t* p) : p_(p) {}
  template <size_t N>
  FixedBytes<N> Bytes() {
    auto v = FixedBytes<N>::FromBytes(p_);
    p_ += N;
    return v;
  }
  uint64_t U64() {
    const uint64_t v = LoadU64LE(p_);
    p_ += 8;
    return v;
  }
  uint8_t U8() { return *p_++; }

 private:
  const uint8_t* p_;
};

void AppendSignatureAndTrailer(std::string* out, const std::optional<Signature>& signature,
                               EventSource source) {
  if (signature) {
    AppendBytes(out, signature->data(), Signature::kSize);
  } else {
    out->append(Signature::kSize, '\0');
  }
  out->push_back(static_cast<char>(signature ? 0 : kEventFlagSignatureUnknown));
  out->push_back(static_cast<char>(source));
}

// Reads the signature, and in version 2 the flags and the source, of an account event.
absl::Status ReadSignatureAndTrailer(FieldReader& r, uint8_t version,
                                     std::optional<Signature>* signature, EventSource* source) {
  const Signature bytes = r.Bytes<Signature::kSize>();
  if (version == kV1) {
    // Version 1 wrote a zero signature for an event read from the program's accounts.
    if (!bytes.IsZero()) *signature = bytes;
    *source = EventSource::kUnrecorded;
    return absl::OkStatus();
  }
  const uint8_t flags = r.U8();
  const uint8_t raw_source = r.U8();
  if ((flags & ~kEventFlagSignatureUnknown) != 0) {
    return absl::DataLossError(absl::StrCat("unknown event flags ", flags));
  }
  if (raw_source > kMaxEventSource) {
    return absl::DataLossError(absl::StrCat("unknown event source ", raw_source));
  }
  if ((flags & kEventFlagSignatureUnknown) == 0) *signature = bytes;
  *source = static_cast<EventSource>(raw_source);
  return absl::OkStatus();
}

}  // namespace

uint32_t Crc32c(std::string_view data) {
  // ISA-L's iSCSI CRC is CRC32C without the final inversion.
  return ~crc32_iscsi(reinterpret_cast<unsigned char*>(const_cast<char*>(data.data())),
                      static_cast<int>(data.size()), 0xFFFFFFFFu);
}

void EncodeEvent(const Event& event, std::string* out) {
  const size_t start = out->size();
  const EventKind kind = KindOf(event);
  out->reserve(start + kHeaderSize + PayloadSize(kind) + kCrcSize);
  out->push_back(static_cast<char>(kEventFormatVersion));
  out->push_back(static_cast<char>(kind));
  std::visit(
      [out](const auto& e) {
        using T = std::decay_t<decltype(e)>;
        if constexpr (std::is_same_v<T, DelegatedEvent>) {
          AppendBytes(out, e.account.data(), 32);
          AppendBytes(out, e.validator.data(), 32);
          AppendBytes(out, e.owner_program.data(), 32);
          AppendU64LE(out, e.slot);
          AppendU64LE(out, e.lamports);
          AppendU64LE(out, e.commit_frequency_ms);
          AppendSignatureAndTrailer(out, e.signature, e.source);
        } else if constexpr (std::is_same_v<T, UndelegatedEvent>) {
          AppendBytes(out, e.account.data(), 32);
          AppendU64LE(out, e.slot);
          AppendSignatureAndTrailer(out, e.signature, e.source);
        } else {
          AppendU64LE(out, e.slot);
        }
      },
      event);
  AppendU32LE(out, Crc32c(std::string_view(*out).substr(start)));
}

std::string EncodeEvent(const Event& event) {
  std::string out;
  EncodeEvent(event, &out);
  return out;
}

absl::StatusOr<Event> DecodeEvent(std::string_view record) {
  if (record.size() < kHeaderSize + kCrcSize) {
    return absl::DataLossError(absl::StrCat("event record too short: ", record.size(), " bytes"));
  }
  const auto* bytes = AsBytes(record.data());
  const uint8_t version = bytes[0];
  if (version != kEventFormatVersion && version != kV1) {
    return absl::DataLossError(absl::StrCat("unknown event format version ", bytes[0],
                                            " (this build reads version ", kEventFormatVersion,
                                            ")"));
  }
  const size_t body = record.size() - kCrcSize;
  const uint32_t stored = LoadU32LE(bytes + body);
  const uint32_t computed = Crc32c(record.substr(0, body));
  if (stored != computed) {
    return absl::DataLossError(
        absl::StrCat("event record checksum mismatch: stored ", stored, ", computed ", computed));
  }
  const uint8_t raw_kind = bytes[1];
  if (raw_kind < 1 || raw_kind > 5) {
    return absl::DataLossError(absl::StrCat("unknown event kind ", raw_kind));
  }
  const auto kind = static_cast<EventKind>(raw_kind);
  if (body - kHeaderSize != PayloadSize(kind, version)) {
    return absl::DataLossError(absl::StrCat(
        "event record of kind ", std::string(KindName(kind)), " (version ", version, ") has ",
        body - kHeaderSize, " payload bytes, expected ", PayloadSize(kind, version)));
  }
  FieldReader r(bytes + kHeaderSize);
  switch (kind) {
    case EventKind::kDelegated: {
      DelegatedEvent e;
      e.account = r.Bytes<32>();
      e.validator = r.Bytes<32>();
      e.owner_program = r.Bytes<32>();
      e.slot = r.U64();
      e.lamports = r.U64();
      e.commit_frequency_ms = r.U64();
      RETURN_IF_ERROR(ReadSignatureAndTrailer(r, version, &e.signature, &e.source));
      return e;
    }
    case EventKind::kUndelegated: {
      UndelegatedEvent e;
      e.account = r.Bytes<32>();
      e.slot = r.U64();
      RETURN_IF_ERROR(ReadSignatureAndTrailer(r, version, &e.signature, &e.source));
      return e;
    }
    case EventKind::kSlotSealed:
      return SlotSealedEvent{r.U64()};
    case EventKind::kStreamGap:
      return StreamGapEvent{r.U64()};
    case EventKind::kResynced:
      return ResyncedEvent{r.U64()};
  }
  return absl::DataLossError("unreachable event kind");
}

std::string EventKey(const Event& event) {
  const Pubkey* account = AccountOf(event);
  if (account == nullptr) return "";
  return std::string(reinterpret_cast<const char*>(account->data()), Pubkey::kSize);
}

}  // namespace switchyard
