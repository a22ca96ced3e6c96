#pragma once

#include <cstdint>

namespace switchyard {

// A Solana slot number.
using Slot = uint64_t;

}  // namespace switchyard
