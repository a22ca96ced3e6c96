#include "solana/er_record.h"

#include <array>

#include "absl/status/status.h"
#include "common/endian.h"
#include "common/status.h"
#include "fmt/format.h"
#include "solana/internal/borsh_reader.h"
#include "solana/pda.h"

namespace switchyard {
namespace {

using solana_internal::BorshReader;

absl::StatusOr<ErRecord> DecodeV0(BorshReader& r) {
  ErRecord record;
  record.version = kErRecordV0;
  ASSIGN_OR_RETURN(record.identity, r.Key("identity"));
  ASSIGN_OR_RETURN(const uint8_t status, r.U8("status"));
  if (status > static_cast<uint8_t>(ErStatus::kOffline)) {
    return absl::InvalidArgumentError(fmt::format("ER record: unknown status {}", status));
  }
  record.status = static_cast<ErStatus>(status);
  ASSIGN_OR_RETURN(record.block_time_ms, r.U16("block_time_ms"));
  ASSIGN_OR_RETURN(record.base_fee, r.U16("base_fee"));
  ASSIGN_OR_RETURN(std::string_view features, r.Bytes(record.features.size(), "features"));
  std::copy(features.begin(), features.end(), record.features.begin());
  ASSIGN_OR_RETURN(record.load_average, r.U32("load_average"));
  ASSIGN_OR_RETURN(std::string_view country, r.Bytes(3, "country_code"));
  record.country_code = std::string(country);
  ASSIGN_OR_RETURN(record.addr, r.String("addr"));
  RETURN_IF_ERROR(r.End());
  return record;
}

}  // namespace

Pubkey MagicDomainProgramId() {
  static const Pubkey id = *Pubkey::FromBase58(kMagicDomainProgramId);
  return id;
}

Pubkey ErRecordPda(const Pubkey& identity) {
  const std::string_view seeds[] = {
      kErRecordSeed,
      std::string_view(reinterpret_cast<const char*>(identity.data()), Pubkey::kSize)};
  absl::StatusOr<std::pair<Pubkey, uint8_t>> pda =
      FindProgramAddress(seeds, MagicDomainProgramId());
  return pda.ok() ? pda->first : Pubkey();
}

std::string_view ErStatusName(ErStatus status) {
  switch (status) {
    case ErStatus::kActive:
      return "active";
    case ErStatus::kDraining:
      return "draining";
    case ErStatus::kOffline:
      return "offline";
  }
  return "unknown";
}

absl::StatusOr<ErRecord> DecodeErRecord(std::span<const uint8_t> data) {
  BorshReader r(data, "ER record");
  ASSIGN_OR_RETURN(const uint8_t version, r.U8("version"));
  switch (version) {
    case kErRecordV0:
      return DecodeV0(r);
    default:
      return absl::UnimplementedError(
          fmt::format("ER record: unknown version {} (this build knows 0..{})", version,
                      kErRecordLatestVersion));
  }
}

std::string EncodeErRecord(const ErRecord& record) {
  std::string out;
  out.reserve(kErRecordV0FixedSize + record.addr.size());
  out.push_back(static_cast<char>(kErRecordV0));
  out.append(reinterpret_cast<const char*>(record.identity.data()), Pubkey::kSize);
  out.push_back(static_cast<char>(record.status));
  out.push_back(static_cast<char>(record.block_time_ms & 0xff));
  out.push_back(static_cast<char>(record.block_time_ms >> 8));
  out.push_back(static_cast<char>(record.base_fee & 0xff));
  out.push_back(static_cast<char>(record.base_fee >> 8));
  out.append(reinterpret_cast<const char*>(record.features.data()), record.features.size());
  AppendU32LE(&out, record.load_average);
  std::string country = record.country_code.substr(0, 3);
  country.resize(3, '\0');
  out += country;
  AppendU32LE(&out, static_cast<uint32_t>(record.addr.size()));
  out += record.addr;
  return out;
}

}  // namespace switchyard
