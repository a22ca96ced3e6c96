// `switchyard audit-digest`: the worked example of docs/audit-digest.md, each digest checked
// against the bytes built here by hand and hashed with OpenSSL and against the document's
// value; the same delegated set from events in another order gives the same digest; one
// changed account changes it; before its delegation an account is not in it.
#include <gtest/gtest.h>
#include <openssl/sha.h>

#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include "fmt/format.h"
#include "tests/support/subprocess.h"
#include "tests/support/temp_dir.h"

namespace switchyard {
namespace {

using testing::CommandResult;
using testing::RunCommand;

constexpr const char* kA = "29d2S7vB453rNYFdR5Ycwt7y9haRT5fwVwL9zTmBhfV2";  // 0x11 x 32
constexpr const char* kB = "gBxS1f6uyyGPuW5MzGBukidSb71jdsCb5fZaoSzULE5";   // 0x0a x 32
constexpr const char* kV = "3JF3sEqM796hk5WFqA6EtmEwJQ9quALszsfJyvXNQKy3";  // 0x22 x 32
constexpr const char* kO = "4Ss5JMkXAD9Z7cktFEdrqeMuT6jGMF1pVozTyPHZ6zT4";  // 0x33 x 32

std::string Delegated(const char* account, uint64_t slot, uint64_t lamports, uint64_t frequency) {
  return fmt::format(
      R"({{"kind":"delegated","account":"{}","validator":"{}","owner":"{}","slot":{},)"
      R"("lamports":{},"commit_frequency_ms":{}}})",
      account, kV, kO, slot, lamports, frequency);
}
std::string Undelegated(const char* account, uint64_t slot) {
  return fmt::format(R"({{"kind":"undelegated","account":"{}","slot":{}}})", account, slot);
}
std::string Sealed(uint64_t slot) {
  return fmt::format(R"({{"kind":"slot_sealed","slot":{}}})", slot);
}

// The log of the worked example.
std::vector<std::string> ExampleLog() {
  return {Delegated(kA, 5, 1000, 30000), Delegated(kB, 6, 2000, 0), Sealed(10), Undelegated(kA, 12),
          Sealed(20)};
}

// One record of the canonical message: the account, validator and owner as a byte repeated
// 32 times, then the three numbers little-endian.
struct Record {
  uint8_t account;
  uint64_t delegation_slot;
  uint64_t lamports;
  uint64_t frequency;
};

void AppendLE(std::string* out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out->push_back(static_cast<char>(v >> (8 * i)));
}

// SHA-256 of the message, built from the document's table, as 64 hex digits.
std::string ExpectedDigest(uint64_t slot, const std::vector<Record>& records) {
  std::string message = "switchyard-audit-digest-v1";
  AppendLE(&message, slot);
  AppendLE(&message, records.size());
  for (const Record& r : records) {
    message.append(32, static_cast<char>(r.account));
    message.append(32, '\x22');
    message.append(32, '\x33');
    AppendLE(&message, r.delegation_slot);
    AppendLE(&message, r.lamports);
    AppendLE(&message, r.frequency);
  }
  unsigned char hash[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(message.data()), message.size(), hash);
  std::string hex;
  for (unsigned char c : hash) hex += fmt::format("{:02x}", c);
  return hex;
}

class AuditDigestTest : public ::testing::Test {
 protected:
  // Appends `lines` to a fresh embedded log and folds it; returns the data dir.
  std::string Fold(const std::string& name, const std::vector<std::string>& lines) {
    const std::string data = dir_.Sub(name);
    const std::string jsonl = dir_.Sub(name + ".jsonl");
    std::string text;
    for (const std::string& line : lines) text += line + "\n";
    std::ofstream(jsonl) << text;
    CommandResult append =
        RunCommand({SWITCHYARD_BINARY, "log", "append", "--jsonl", jsonl, "--data-dir", data});
    EXPECT_EQ(append.exit_code, 0) << append.err;
    CommandResult fold = RunCommand({SWITCHYARD_BINARY, "fold", "--data-dir", data});
    EXPECT_EQ(fold.exit_code, 0) << fold.err;
    return data;
  }

  // The hex the command prints, or the error.
  std::string AuditDigest(const std::string& data, uint64_t slot) {
    CommandResult r = RunCommand(
        {SWITCHYARD_BINARY, "audit-digest", "--slot", std::to_string(slot), "--data-dir", data});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out.size(), 65u) << r.out;
    return r.out.substr(0, r.out.find('\n'));
  }

  switchyard::testing::TempDir dir_;
};

TEST_F(AuditDigestTest, TheWorkedExampleMatchesTheBytesBuiltByHandAndTheDocument) {
  const std::string data = Fold("example", ExampleLog());
  const Record a{0x11, 5, 1000, 30000};
  const Record b{0x0a, 6, 2000, 0};
  EXPECT_EQ(AuditDigest(data, 4), ExpectedDigest(4, {}));
  EXPECT_EQ(AuditDigest(data, 5), ExpectedDigest(5, {a}));
  EXPECT_EQ(AuditDigest(data, 10), ExpectedDigest(10, {b, a}));
  EXPECT_EQ(AuditDigest(data, 20), ExpectedDigest(20, {b}));
  // The values docs/audit-digest.md shows.
  EXPECT_EQ(AuditDigest(data, 4),
            "5c483ffe024dace5e85131c425608ee42326a75c152166224cb37e321d067c92");
  EXPECT_EQ(AuditDigest(data, 5),
            "1f9a98b7684a1d5656abeac44c2ac291f7ebdb3a89965e5bce083a8d29cf4cfb");
  EXPECT_EQ(AuditDigest(data, 10),
            "9f0415974a70b77a8ebffe56a5ecad77f454255d17b9fb79df69c0f9b4fec435");
  EXPECT_EQ(AuditDigest(data, 20),
            "cd564e64a6300b6921728e976e374df42db70957128c9b17a115cf8d79941a1b");

  CommandResult json = RunCommand(
      {SWITCHYARD_BINARY, "audit-digest", "--slot", "10", "--format", "json", "--data-dir", data});
  EXPECT_EQ(json.exit_code, 0) << json.err;
  EXPECT_EQ(json.out, fmt::format(R"({{"slot":10,"accounts":2,"sha256":"{}","applied_slot":20}})"
                                  "\n",
                                  ExpectedDigest(10, {b, a})));
}

TEST_F(AuditDigestTest, TheSameDelegatedSetFromEventsInAnotherOrderHasTheSameDigest) {
  const std::string example = Fold("example", ExampleLog());
  // B before A; A first delegated elsewhere (different lamports) and then again at slot 5; a
  // stale undelegation of B (slot 3, below its delegation) that the fold ignores.
  const std::string reordered = Fold(
      "reordered", {Delegated(kB, 6, 2000, 0), Delegated(kA, 4, 777, 1), Undelegated(kB, 3),
                    Delegated(kA, 5, 1000, 30000), Sealed(10), Undelegated(kA, 12), Sealed(20)});
  EXPECT_EQ(AuditDigest(reordered, 10), AuditDigest(example, 10));
  EXPECT_EQ(AuditDigest(reordered, 20), AuditDigest(example, 20));
  // At slot 4 the two logs hold different sets (A at 777 lamports here, nothing there).
  EXPECT_NE(AuditDigest(reordered, 4), AuditDigest(example, 4));
}

TEST_F(AuditDigestTest, OneChangedAccountChangesTheDigest) {
  const std::string example = Fold("example", ExampleLog());
  const std::string changed =
      Fold("changed", {Delegated(kA, 5, 1000, 30000), Delegated(kB, 6, 2001, 0), Sealed(10),
                       Undelegated(kA, 12), Sealed(20)});
  EXPECT_NE(AuditDigest(changed, 10), AuditDigest(example, 10));
  EXPECT_EQ(AuditDigest(changed, 10),
            ExpectedDigest(10, {{0x0a, 6, 2001, 0}, {0x11, 5, 1000, 30000}}));
  // Before B's delegation (slot 6) the two states are the same.
  EXPECT_EQ(AuditDigest(changed, 5), AuditDigest(example, 5));
}

TEST_F(AuditDigestTest, BeforeItsDelegationAnAccountIsAbsent) {
  const std::string data = Fold("example", ExampleLog());
  EXPECT_EQ(AuditDigest(data, 5), ExpectedDigest(5, {{0x11, 5, 1000, 30000}}));
  EXPECT_EQ(AuditDigest(data, 0), ExpectedDigest(0, {}));
  CommandResult json = RunCommand(
      {SWITCHYARD_BINARY, "audit-digest", "--slot", "5", "--format", "json", "--data-dir", data});
  EXPECT_NE(json.out.find(R"("accounts":1,)"), std::string::npos) << json.out;
}

TEST_F(AuditDigestTest, ASlotAboveTheAppliedSlotIsRefused) {
  const std::string data = Fold("example", ExampleLog());
  CommandResult r =
      RunCommand({SWITCHYARD_BINARY, "audit-digest", "--slot", "21", "--data-dir", data});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("slot 21 is above the applied slot 20"), std::string::npos) << r.err;
  EXPECT_EQ(r.out, "");
}

}  // namespace
}  // namespace switchyard
