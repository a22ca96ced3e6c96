#include "engine/event_text.h"

#include <fmt/format.h>

namespace switchyard {

std::string SignatureText(const std::optional<Signature>& signature) {
  return signature ? signature->ToBase58() : "unknown";
}

std::string EventToJson(const Event& event) {
  const std::string_view kind = KindName(KindOf(event));
  if (const auto* d = std::get_if<DelegatedEvent>(&event)) {
    return fmt::format(
        R"({{"kind":"{}","account":"{}","validator":"{}","owner":"{}","slot":{},"lamports":{},)"
        R"("commit_frequency_ms":{},"signature":"{}","source":"{}"}})",
        kind, d->account.ToBase58(), d->validator.ToBase58(), d->owner_program.ToBase58(), d->slot,
        d->lamports, d->commit_frequency_ms, SignatureText(d->signature), SourceName(d->source));
  }
  if (const auto* u = std::get_if<UndelegatedEvent>(&event)) {
    return fmt::format(R"({{"kind":"{}","account":"{}","slot":{},"signature":"{}","source":"{}"}})",
                       kind, u->account.ToBase58(), u->slot, SignatureText(u->signature),
                       SourceName(u->source));
  }
  return fmt::format(R"({{"kind":"{}","slot":{}}})", kind, SlotOf(event));
}

std::string HistoryEntryToJson(const HistoryEntry& entry) {
  const std::string event = EventToJson(entry.event);
  return fmt::format(R"({{"seq":{},"ignored":{},{})", entry.seq, entry.ignored,
                     std::string_view(event).substr(1));
}

std::string_view HistoryCsvHeader() {
  return "slot,seq,kind,account,validator,owner,lamports,commit_frequency_ms,signature,source,"
         "ignored";
}

std::string HistoryEntryToCsv(const HistoryEntry& entry) {
  const std::string_view kind = KindName(KindOf(entry.event));
  if (const auto* d = std::get_if<DelegatedEvent>(&entry.event)) {
    return fmt::format("{},{},{},{},{},{},{},{},{},{},{}", entry.slot, entry.seq, kind,
                       d->account.ToBase58(), d->validator.ToBase58(), d->owner_program.ToBase58(),
                       d->lamports, d->commit_frequency_ms, SignatureText(d->signature),
                       SourceName(d->source), entry.ignored);
  }
  if (const auto* u = std::get_if<UndelegatedEvent>(&entry.event)) {
    return fmt::format("{},{},{},{},,,,,{},{},{}", entry.slot, entry.seq, kind,
                       u->account.ToBase58(), SignatureText(u->signature), SourceName(u->source),
                       entry.ignored);
  }
  return fmt::format("{},{},{},,,,,,,,{}", entry.slot, entry.seq, kind, entry.ignored);
}

}  // namespace switchyard
