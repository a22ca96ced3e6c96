#include "engine/event_log.h"

#include "engine/event_codec.h"

namespace switchyard {

std::vector<OutgoingRecord> ToLogRecords(const Event& event, int32_t partition_count) {
  std::string payload = EncodeEvent(event);
  if (AccountOf(event) != nullptr) return {{EventKey(event), std::move(payload), std::nullopt}};
  std::vector<OutgoingRecord> out;
  out.reserve(static_cast<size_t>(partition_count));
  for (int32_t p = 0; p < partition_count; ++p) out.push_back({"", payload, p});
  return out;
}

}  // namespace switchyard
