// libFuzzer target: the event codec on arbitrary bytes, as the fold reads records from the
// log. Whatever decodes must encode to bytes that decode to the same event again.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "engine/event_codec.h"
#include "tests/fuzz/fuzz_check.h"

using switchyard::fuzz::Check;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace switchyard;
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  (void)DecodeEvent(input);
  // The same bytes with a checksum that matches, so that the fuzzer reaches the fields past it.
  if (size < 4) return 0;
  std::string record(input.substr(0, size - 4));
  const uint32_t crc = Crc32c(record);
  for (int i = 0; i < 4; ++i) record.push_back(static_cast<char>(crc >> (8 * i)));
  absl::StatusOr<Event> event = DecodeEvent(record);
  if (!event.ok()) return 0;
  // A record of an older version re-encodes as the current one: its bytes may differ, the
  // event may not.
  const std::string encoded = EncodeEvent(*event);
  absl::StatusOr<Event> again = DecodeEvent(encoded);
  Check(again.ok());
  Check(*again == *event);
  Check(EncodeEvent(*again) == encoded);
  Check(EventKey(*again) == EventKey(*event));
  return 0;
}
