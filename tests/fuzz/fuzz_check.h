#pragma once

namespace switchyard::fuzz {

// A fuzz target's invariant: a violation stops the run where libFuzzer records the input.
inline void Check(bool condition) {
  if (!condition) __builtin_trap();
}

}  // namespace switchyard::fuzz
