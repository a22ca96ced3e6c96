// libFuzzer target: DecodeTransaction and DecodeTransactionText on arbitrary bytes. Besides
// the sanitizers, it checks that whatever decodes re-encodes to exactly the same bytes and
// resolves against tables without tripping anything.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "solana/transaction.h"
#include "tests/fuzz/fuzz_check.h"

using switchyard::fuzz::Check;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace switchyard;
  const std::span<const uint8_t> wire(data, size);
  absl::StatusOr<Transaction> tx = DecodeTransaction(wire);
  if (tx.ok()) {
    absl::StatusOr<std::string> encoded = EncodeTransaction(*tx);
    Check(encoded.ok());
    Check(*encoded == std::string_view(reinterpret_cast<const char*>(data), size));
    Check(tx->message_bytes.size() < size);
    for (size_t i = 0; i <= tx->static_keys.size(); ++i) {
      Check(!tx->IsStaticWritable(i) || i < tx->static_keys.size());
    }
    Check(StaticWritableKeys(*tx).size() <= tx->static_keys.size());
    // Tables of a size taken from the table key, so some indexes are out of range.
    std::vector<std::vector<Pubkey>> tables;
    tables.reserve(tx->lookups.size());
    for (const AddressTableLookup& lookup : tx->lookups) {
      std::vector<Pubkey> addresses(lookup.table.data()[0]);
      for (size_t i = 0; i < addresses.size(); ++i)
        addresses[i].data()[0] = static_cast<uint8_t>(i);
      tables.push_back(std::move(addresses));
    }
    size_t next = 0;
    absl::StatusOr<std::vector<AccountMeta>> accounts =
        ResolveAccountKeys(*tx, [&](const Pubkey&) -> const std::vector<Pubkey>* {
          return next < tables.size() ? &tables[next++] : nullptr;
        });
    if (accounts.ok()) Check(accounts->size() >= tx->static_keys.size());
  }
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  (void)DecodeTransactionText(text, TransactionEncoding::kBase64);
  (void)DecodeTransactionText(text, TransactionEncoding::kBase58);
  return 0;
}
