// Writes the inputs of the sendTransaction load: deterministic wallets (ed25519 keypairs
// derived from a seed) and signed v0 system transfers between them, one JSON-RPC
// sendTransaction body (base64) per line. Every transaction has its own signature (payer,
// recipient and amount differ), so a localnet that funded the wallets at genesis accepts
// each one once. Used by bench/run:
//   switchyard_bench_transactions --wallets 256 --wallets-out wallets.txt
//   switchyard_bench_transactions --wallets 256 --first 0 --count 500000 --blockhash HASH
//       --out tx.jsonl
// Transfer i is the same for every run with the same seed and wallet count, so disjoint
// [--first, --first + --count) ranges give transactions that were never sent before.
#include <sodium.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "CLI/CLI.hpp"
#include "fmt/format.h"
#include "solana/base64.h"
#include "solana/transaction.h"

namespace switchyard {
namespace {

struct Wallet {
  Pubkey key;
  unsigned char secret[crypto_sign_SECRETKEYBYTES];
};

std::vector<Wallet> MakeWallets(uint64_t seed, size_t count) {
  std::vector<Wallet> wallets(count);
  for (size_t i = 0; i < count; ++i) {
    const std::string label = fmt::format("switchyard-bench/wallet/{}/{}", seed, i);
    unsigned char key_seed[crypto_sign_SEEDBYTES];
    crypto_hash_sha256(key_seed, reinterpret_cast<const unsigned char*>(label.data()),
                       label.size());
    unsigned char public_key[crypto_sign_PUBLICKEYBYTES];
    crypto_sign_seed_keypair(public_key, wallets[i].secret, key_seed);
    wallets[i].key = Pubkey::FromBytes(public_key);
  }
  return wallets;
}

// Transfer number `index`: payer and recipient walk the wallets so that consecutive
// transactions touch different accounts; the amount makes the message unique.
std::string TransferBody(const std::vector<Wallet>& wallets, const Hash& blockhash,
                         uint64_t index) {
  const size_t n = wallets.size();
  const Wallet& payer = wallets[index % n];
  const Wallet& recipient = wallets[(index + 1 + (index / n) % (n - 1)) % n];
  Transaction tx;
  tx.versioned = true;
  tx.version = 0;
  tx.header = MessageHeader{1, 0, 1};
  tx.static_keys = {payer.key, recipient.key, Pubkey()};  // the system program is all zeros
  tx.recent_blockhash = blockhash;
  CompiledInstruction transfer;
  transfer.program_id_index = 2;
  transfer.accounts = {0, 1};
  transfer.data.assign(12, '\0');
  constexpr uint32_t kTransfer = 2;
  const uint64_t lamports = 1 + index;
  std::memcpy(transfer.data.data(), &kTransfer, 4);  // little-endian hosts only (x86, arm64)
  std::memcpy(transfer.data.data() + 4, &lamports, 8);
  tx.instructions.push_back(std::move(transfer));
  absl::StatusOr<std::string> message = EncodeMessage(tx);
  if (!message.ok()) return "";
  Signature signature;
  crypto_sign_detached(signature.data(), nullptr,
                       reinterpret_cast<const unsigned char*>(message->data()), message->size(),
                       payer.secret);
  tx.signatures = {signature};
  absl::StatusOr<std::string> wire = EncodeTransaction(tx);
  if (!wire.ok()) return "";
  return fmt::format(
      R"({{"jsonrpc":"2.0","id":{},"method":"sendTransaction","params":["{}",{{"encoding":"base64"}}]}})",
      index + 1, Base64Encode(*wire));
}

int Run(int argc, char** argv) {
  CLI::App app{"switchyard_bench_transactions: wallets and signed v0 transfers for bench/run"};
  uint64_t seed = 1;
  size_t wallet_count = 256;
  uint64_t first = 0;
  uint64_t count = 0;
  std::string blockhash_text;
  std::string wallets_out;
  std::string out;
  unsigned threads = std::max(1u, std::thread::hardware_concurrency());
  app.add_option("--seed", seed, "Seed of the wallet keys")->capture_default_str();
  app.add_option("--wallets", wallet_count, "Number of wallets (>= 2)")->capture_default_str();
  app.add_option("--wallets-out", wallets_out, "Write the wallets' public keys here, one a line");
  app.add_option("--first", first, "Index of the first transaction")->capture_default_str();
  app.add_option("--count", count, "Number of transactions to write to --out");
  app.add_option("--blockhash", blockhash_text, "Recent blockhash (base58; default all zeros)");
  app.add_option("--out", out, "Write one sendTransaction body per line here");
  app.add_option("--threads", threads, "Signing threads")->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  if (sodium_init() < 0 || wallet_count < 2 || threads == 0) {
    std::fprintf(stderr, "switchyard_bench_transactions: need libsodium, >= 2 wallets, threads\n");
    return 2;
  }
  Hash blockhash;
  if (!blockhash_text.empty()) {
    auto parsed = Hash::FromBase58(blockhash_text);
    if (!parsed.ok()) {
      std::fprintf(stderr, "switchyard_bench_transactions: bad --blockhash\n");
      return 2;
    }
    blockhash = *parsed;
  }
  const std::vector<Wallet> wallets = MakeWallets(seed, wallet_count);
  if (!wallets_out.empty()) {
    std::ofstream file(wallets_out, std::ios::trunc);
    for (const auto& wallet : wallets) file << wallet.key.ToBase58() << '\n';
    if (!file) return 1;
  }
  if (count == 0 || out.empty()) return 0;

  std::ofstream file(out, std::ios::trunc);
  constexpr uint64_t kChunk = 16384;
  std::vector<std::string> chunk(kChunk);
  for (uint64_t begin = 0; begin < count; begin += kChunk) {
    const uint64_t end = std::min(count, begin + kChunk);
    std::vector<std::thread> workers;
    for (unsigned t = 0; t < threads; ++t) {
      workers.emplace_back([&, t] {
        for (uint64_t i = begin + t; i < end; i += threads) {
          chunk[i - begin] = TransferBody(wallets, blockhash, first + i);
        }
      });
    }
    for (auto& worker : workers) worker.join();
    for (uint64_t i = begin; i < end; ++i) {
      if (chunk[i - begin].empty()) {
        std::fprintf(stderr, "switchyard_bench_transactions: cannot encode transaction %lu\n",
                     static_cast<unsigned long>(first + i));
        return 1;
      }
      file << chunk[i - begin] << '\n';
    }
  }
  return file ? 0 : 1;
}

}  // namespace
}  // namespace switchyard

int main(int argc, char** argv) {
  try {
    return switchyard::Run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "switchyard_bench_transactions: %s\n", e.what());
    return 1;
  }
}
