#pragma once

#include <cstdint>
#include <cstring>
#include <string>

namespace switchyard {

// Little- and big-endian fixed-width integers in byte buffers. Big-endian keys sort in
// numeric order under a bytewise comparator.

inline void AppendU32LE(std::string* out, uint32_t v) {
  char b[4];
  for (int i = 0; i < 4; ++i) b[i] = static_cast<char>(v >> (8 * i));
  out->append(b, 4);
}
inline void AppendU64LE(std::string* out, uint64_t v) {
  char b[8];
  for (int i = 0; i < 8; ++i) b[i] = static_cast<char>(v >> (8 * i));
  out->append(b, 8);
}
inline void AppendU64BE(std::string* out, uint64_t v) {
  char b[8];
  for (int i = 0; i < 8; ++i) b[i] = static_cast<char>(v >> (8 * (7 - i)));
  out->append(b, 8);
}
inline uint32_t LoadU32LE(const uint8_t* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}
inline uint64_t LoadU64LE(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}
inline uint64_t LoadU64BE(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = (v << 8) | p[i];
  return v;
}
inline const uint8_t* AsBytes(const char* p) { return reinterpret_cast<const uint8_t*>(p); }

}  // namespace switchyard
