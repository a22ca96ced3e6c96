// Micro-benchmarks of the wire formats the router decodes on every request: pubkeys in
// base58 (every account key of getAccountInfo/getMultipleAccounts), and sendTransaction
// payloads (base64 and base58, legacy and v0), including the writable-key extraction that
// routing needs.
#include <benchmark/benchmark.h>

#include <random>
#include <string>

#include "common/pubkey.h"
#include "solana/base64.h"
#include "solana/transaction.h"

namespace switchyard {
namespace {

Pubkey RandomKey(std::mt19937_64& rng) {
  std::array<uint8_t, 32> bytes;
  for (size_t i = 0; i < bytes.size(); i += 8) {
    const uint64_t v = rng();
    for (size_t j = 0; j < 8; ++j) bytes[i + j] = static_cast<uint8_t>(v >> (8 * j));
  }
  return Pubkey(bytes);
}

// A system transfer like bench/run's sendTransaction load (1 signature, 3 keys), or, with
// `extra_writable` more writable keys and a second instruction, a larger one.
Transaction Transfer(bool versioned, int extra_writable) {
  std::mt19937_64 rng(5);
  Transaction tx;
  tx.versioned = versioned;
  tx.header = MessageHeader{1, 0, 1};
  tx.static_keys = {RandomKey(rng), RandomKey(rng)};
  for (int i = 0; i < extra_writable; ++i) tx.static_keys.push_back(RandomKey(rng));
  tx.static_keys.push_back(Pubkey());
  tx.recent_blockhash = RandomKey(rng);
  CompiledInstruction ix;
  ix.program_id_index = static_cast<uint8_t>(tx.static_keys.size() - 1);
  ix.accounts = {0, 1};
  ix.data = std::string("\x02\x00\x00\x00\x40\x42\x0f\x00\x00\x00\x00\x00", 12);
  tx.instructions.push_back(ix);
  if (extra_writable > 0) {
    for (int i = 0; i < extra_writable; ++i) ix.accounts.push_back(static_cast<uint8_t>(2 + i));
    tx.instructions.push_back(ix);
  }
  Signature signature;
  for (size_t i = 0; i < Signature::kSize; ++i) signature.data()[i] = static_cast<uint8_t>(i);
  tx.signatures = {signature};
  return tx;
}

std::string Wire(const Transaction& tx) { return *EncodeTransaction(tx); }

void BM_PubkeyFromBase58(benchmark::State& state) {
  std::mt19937_64 rng(1);
  std::vector<std::string> keys(1024);
  for (std::string& key : keys) key = RandomKey(rng).ToBase58();
  size_t i = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(Pubkey::FromBase58(keys[i++ & 1023]));
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_PubkeyFromBase58);

void BM_PubkeyToBase58(benchmark::State& state) {
  std::mt19937_64 rng(1);
  const Pubkey key = RandomKey(rng);
  for (auto _ : state) benchmark::DoNotOptimize(key.ToBase58());
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_PubkeyToBase58);

// Args: versioned (1: v0), extra writable keys.
void BM_DecodeTransactionBase64(benchmark::State& state) {
  const std::string text =
      Base64Encode(Wire(Transfer(state.range(0) != 0, static_cast<int>(state.range(1)))));
  for (auto _ : state) {
    auto tx = DecodeTransactionText(text, TransactionEncoding::kBase64);
    benchmark::DoNotOptimize(tx);
  }
  state.SetItemsProcessed(state.iterations());
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * text.size()));
}
BENCHMARK(BM_DecodeTransactionBase64)->Args({1, 0})->Args({0, 0})->Args({1, 20});

void BM_DecodeTransactionBase58(benchmark::State& state) {
  const Transaction tx = Transfer(state.range(0) != 0, static_cast<int>(state.range(1)));
  const std::string wire = Wire(tx);
  std::string text;
  {
    // Base58 of the whole transaction, as a legacy client sends it.
    std::vector<uint8_t> bytes(wire.begin(), wire.end());
    text = Base58Encode(bytes);
  }
  for (auto _ : state) {
    auto decoded = DecodeTransactionText(text, TransactionEncoding::kBase58);
    benchmark::DoNotOptimize(decoded);
  }
  state.SetItemsProcessed(state.iterations());
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * text.size()));
}
BENCHMARK(BM_DecodeTransactionBase58)->Args({0, 0})->Args({1, 0});

// Decoding plus the writable keys the routing decision looks up.
void BM_DecodeAndWritableKeysV0(benchmark::State& state) {
  const std::string text = Base64Encode(Wire(Transfer(true, 0)));
  for (auto _ : state) {
    auto tx = DecodeTransactionText(text, TransactionEncoding::kBase64);
    benchmark::DoNotOptimize(StaticWritableKeys(*tx));
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_DecodeAndWritableKeysV0);

}  // namespace
}  // namespace switchyard
