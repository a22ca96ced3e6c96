#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "common/pubkey.h"
#include "common/slot.h"

namespace switchyard::testing {

// A switchyard-localnet process started by a test.
struct LocalnetProcess {
  pid_t pid = 0;
  uint16_t http_port = 0;  // 0: it did not become ready within 20 s
};

// Starts `binary --port 0 --threads 1 --ready-file READY ARGS...` and waits for its ready file.
LocalnetProcess StartLocalnetProcess(const std::string& binary, const std::string& ready_file,
                                     const std::vector<std::string>& args);

// The delegated set (account -> authority) at `slot` from a localnet ground-truth file: the
// last line at or below the slot.
std::map<Pubkey, Pubkey> GroundTruthAt(const std::string& path, Slot slot);

}  // namespace switchyard::testing
