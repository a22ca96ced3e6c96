#include "tests/support/localnet_process.h"

#include <simdjson.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "tests/support/subprocess.h"

namespace switchyard::testing {

LocalnetProcess StartLocalnetProcess(const std::string& binary, const std::string& ready_file,
                                     const std::vector<std::string>& args) {
  std::vector<std::string> argv = {binary, "--port",       "0",       "--threads",
                                   "1",    "--ready-file", ready_file};
  argv.insert(argv.end(), args.begin(), args.end());
  LocalnetProcess process;
  process.pid = StartProcess(argv);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!std::filesystem::exists(ready_file) && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (!std::filesystem::exists(ready_file)) return process;
  simdjson::dom::parser parser;
  uint64_t port = 0;
  if (parser.load(ready_file)["http"].get_uint64().get(port) == simdjson::SUCCESS) {
    process.http_port = static_cast<uint16_t>(port);
  }
  return process;
}

std::map<Pubkey, Pubkey> GroundTruthAt(const std::string& path, Slot slot) {
  std::ifstream in(path);
  std::map<Pubkey, Pubkey> out;
  simdjson::dom::parser parser;
  for (std::string line; std::getline(in, line);) {
    simdjson::dom::element doc = parser.parse(line).value();
    if (doc["slot"].get_uint64().value() > slot) break;
    out.clear();
    simdjson::dom::object delegated = doc["delegated"].get_object().value();
    for (auto [account, authority] : delegated) {
      out[*Pubkey::FromBase58(account)] = *Pubkey::FromBase58(authority.get_string().value());
    }
  }
  return out;
}

}  // namespace switchyard::testing
