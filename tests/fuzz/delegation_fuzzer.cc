// libFuzzer target: the delegation program's account and instruction decoders, and the ER
// registry's record decoder, on arbitrary bytes. Whatever decodes must re-encode to the same
// bytes.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "solana/delegation.h"
#include "solana/er_record.h"
#include "tests/fuzz/fuzz_check.h"

using switchyard::fuzz::Check;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace switchyard;
  const std::span<const uint8_t> bytes(data, size);
  const std::string_view text(reinterpret_cast<const char*>(data), size);

  if (auto record = DecodeDelegationRecord(bytes); record.ok()) {
    Check(EncodeDelegationRecord(*record) == text);
  }
  if (auto metadata = DecodeDelegationMetadata(bytes); metadata.ok()) {
    Check(EncodeDelegationMetadata(*metadata) == text);
  }
  if (auto er = DecodeErRecord(bytes); er.ok()) {
    Check(EncodeErRecord(*er) == text);
  }

  // Keys 0..11, then the delegation program at index 12.
  std::vector<Pubkey> keys(12);
  for (size_t i = 0; i < keys.size(); ++i) keys[i].data()[0] = static_cast<uint8_t>(i + 1);
  keys.push_back(DelegationProgramId());

  CompiledInstruction all_accounts{12, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, std::string(text)};
  if (auto ix = DecodeDelegationInstruction(all_accounts, keys); ix.ok()) {
    const bool zero_tag = size >= 8 && text.substr(0, 8) == std::string_view("\0\0\0\0\0\0\0\0", 8);
    if (ix->kind == DelegationInstructionKind::kDelegate && zero_tag) {
      Check(EncodeDelegateInstructionData(ix->commit_frequency_ms, ix->seeds, ix->validator) ==
            text);
    }
  }

  // The first byte picks how many of the following bytes are account indexes (some out of
  // range); the rest is the instruction data.
  if (size > 0) {
    const size_t count = std::min<size_t>(data[0] % 16, size - 1);
    CompiledInstruction picked{static_cast<uint8_t>(data[0] >> 4),
                               std::vector<uint8_t>(data + 1, data + 1 + count),
                               std::string(text.substr(1 + count))};
    (void)DecodeDelegationInstruction(picked, keys);
  }
  return 0;
}
