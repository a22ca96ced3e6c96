#include "localnet/pubsub.h"

#include <iterator>
#include <utility>

#include "fmt/format.h"
#include "localnet/json_writer.h"

namespace switchyard::localnet {
namespace {

using simdjson::dom::array;
using simdjson::dom::element;

std::string Notification(std::string_view method, std::string_view result, uint64_t id) {
  return fmt::format(
      "{{\"jsonrpc\":\"2.0\",\"method\":\"{}\",\"params\":{{\"result\":{},\"subscription\":{}}}}}",
      method, result, id);
}

std::string WithContext(Slot slot, std::string_view value) {
  return fmt::format("{{\"context\":{{\"slot\":{}}},\"value\":{}}}", slot, value);
}

std::string AccountValue(const Account& account, const AccountConfig& config) {
  std::string out;
  if (!AppendAccountJson(&out, account, config.encoding, config.slice).ok()) {
    out.clear();
    (void)AppendAccountJson(&out, account, DataEncoding::kBase64, config.slice);
  }
  return out;
}

}  // namespace

PubSubHub::PubSubHub(Bank* bank, FaultOptions faults)
    : bank_(bank), faults_(faults), drop_rng_(faults.seed) {}

void PubSubHub::AddSession(const std::shared_ptr<NotificationSink>& session) {
  absl::MutexLock lock(&mu_);
  sessions_[session.get()] = session;
}

void PubSubHub::RemoveSession(const NotificationSink* session) {
  absl::MutexLock lock(&mu_);
  sessions_.erase(session);
  std::vector<uint64_t> ids;
  for (const auto& [id, sub] : subs_) {
    if (sub.owner == session) ids.push_back(id);
  }
  for (uint64_t id : ids) {
    Unindex(subs_[id]);
    subs_.erase(id);
  }
}

size_t PubSubHub::subscription_count() const {
  absl::MutexLock lock(&mu_);
  return subs_.size();
}

void PubSubHub::Index(const Subscription& sub) {
  switch (sub.kind) {
    case Kind::kAccount:
      by_account_[sub.key].insert(sub.id);
      break;
    case Kind::kProgram:
      by_program_[sub.key].insert(sub.id);
      break;
    case Kind::kLogs:
      logs_.insert(sub.id);
      break;
    case Kind::kSlot:
      slots_.insert(sub.id);
      break;
    case Kind::kRoot:
      roots_.insert(sub.id);
      break;
    case Kind::kBlock:
      blocks_.insert(sub.id);
      break;
    case Kind::kSignature:
      by_signature_[sub.signature].insert(sub.id);
      break;
  }
}

void PubSubHub::Unindex(const Subscription& sub) {
  auto erase_from = [&](auto& map, const auto& key) {
    auto it = map.find(key);
    if (it == map.end()) return;
    it->second.erase(sub.id);
    if (it->second.empty()) map.erase(it);
  };
  switch (sub.kind) {
    case Kind::kAccount:
      erase_from(by_account_, sub.key);
      break;
    case Kind::kProgram:
      erase_from(by_program_, sub.key);
      break;
    case Kind::kLogs:
      logs_.erase(sub.id);
      break;
    case Kind::kSlot:
      slots_.erase(sub.id);
      break;
    case Kind::kRoot:
      roots_.erase(sub.id);
      break;
    case Kind::kBlock:
      blocks_.erase(sub.id);
      break;
    case Kind::kSignature:
      erase_from(by_signature_, sub.signature);
      break;
  }
}

void PubSubHub::HandleMessage(const std::shared_ptr<NotificationSink>& session,
                              std::string_view text) {
  std::string out;
  element doc;
  if (ThreadParser().parse(text.data(), text.size()).get(doc) != simdjson::SUCCESS) {
    AppendErrorResponse(&out, "null", -32700, "Parse error");
    session->Send(std::move(out));
    return;
  }
  std::string id = "null";
  element id_el;
  if (doc["id"].get(id_el) == simdjson::SUCCESS) id = simdjson::minify(id_el);
  std::string_view method;
  if (doc["method"].get_string().get(method) != simdjson::SUCCESS) {
    AppendErrorResponse(&out, id, -32600, "Invalid request");
    session->Send(std::move(out));
    return;
  }
  array params;
  element params_el;
  if (doc["params"].get(params_el) != simdjson::SUCCESS || params_el.is_null()) {
    params = EmptyArray();
  } else if (params_el.get_array().get(params) != simdjson::SUCCESS) {
    AppendErrorResponse(&out, id, -32602, "Invalid params: params must be an array");
    session->Send(std::move(out));
    return;
  }
  std::string immediate;
  out = Subscribe(session, id, method, params, &immediate);
  session->Send(std::move(out));
  if (!immediate.empty()) session->Send(std::move(immediate));
}

std::string PubSubHub::Subscribe(const std::shared_ptr<NotificationSink>& session,
                                 std::string_view id, std::string_view method, array params,
                                 std::string* immediate) {
  std::string out;
  auto result = [&](std::string_view value) {
    return fmt::format("{{\"jsonrpc\":\"2.0\",\"result\":{},\"id\":{}}}", value, id);
  };
  auto error = [&](int code, std::string_view message) {
    AppendErrorResponse(&out, id, code, message);
    return out;
  };

  if (method.ends_with("Unsubscribe")) {
    uint64_t sub_id = 0;
    auto p = ParamAt(params, 0);
    if (!p.has_value() || p->get_uint64().get(sub_id) != simdjson::SUCCESS) {
      return error(-32602, "Invalid params");
    }
    absl::MutexLock lock(&mu_);
    auto it = subs_.find(sub_id);
    if (it == subs_.end() || it->second.owner != session.get()) {
      return error(-32602, "Invalid subscription id.");
    }
    Unindex(it->second);
    subs_.erase(it);
    return result("true");
  }

  Subscription sub;
  sub.sink = session;
  sub.owner = session.get();
  ConfigView config(params, 1);
  if (method == "accountSubscribe" || method == "programSubscribe") {
    auto key = PubkeyParam(params, 0);
    if (!key.has_value()) return error(-32602, "Invalid param: Invalid");
    auto cfg = ReadAccountConfig(config);
    if (!cfg.ok()) return error(-32602, std::string(cfg.status().message()));
    sub.config = *cfg;
    sub.key = *key;
    sub.kind = method == "accountSubscribe" ? Kind::kAccount : Kind::kProgram;
    if (sub.kind == Kind::kProgram) {
      auto filter = ReadFilters(config);
      if (!filter.ok()) return error(-32602, std::string(filter.status().message()));
      sub.filter = *std::move(filter);
    }
  } else if (method == "logsSubscribe") {
    sub.kind = Kind::kLogs;
    auto p = ParamAt(params, 0);
    if (!p.has_value()) return error(-32602, "Invalid params");
    if (auto text = StringOf(*p)) {
      if (*text != "all" && *text != "allWithVotes") return error(-32602, "Invalid params");
      sub.logs_all = true;
    } else {
      array mentions;
      if ((*p)["mentions"].get_array().get(mentions) != simdjson::SUCCESS || mentions.size() != 1) {
        return error(-32602, "Invalid Request: Only 1 address supported");
      }
      auto key = PubkeyParam(mentions, 0);
      if (!key.has_value()) return error(-32602, "Invalid Request: Invalid pubkey provided");
      sub.key = *key;
    }
  } else if (method == "slotSubscribe") {
    sub.kind = Kind::kSlot;
  } else if (method == "rootSubscribe") {
    sub.kind = Kind::kRoot;
  } else if (method == "blockSubscribe") {
    // "all" or {"mentionsAccountOrProgram": pubkey}; blocks list their signatures only.
    sub.kind = Kind::kBlock;
    auto p = ParamAt(params, 0);
    if (!p.has_value()) return error(-32602, "Invalid params");
    if (auto text = StringOf(*p)) {
      if (*text != "all") return error(-32602, "Invalid params");
      sub.logs_all = true;
    } else {
      std::string_view mention;
      if ((*p)["mentionsAccountOrProgram"].get_string().get(mention) != simdjson::SUCCESS) {
        return error(-32602, "Invalid params");
      }
      auto key = Pubkey::FromBase58(mention);
      if (!key.ok()) return error(-32602, "Invalid Request: Invalid pubkey provided");
      sub.key = *key;
    }
  } else if (method == "signatureSubscribe") {
    sub.kind = Kind::kSignature;
    auto p = ParamAt(params, 0);
    auto text = p ? StringOf(*p) : std::nullopt;
    auto sig = text ? Signature::FromBase58(*text)
                    : absl::StatusOr<Signature>(absl::InvalidArgumentError(""));
    if (!sig.ok()) return error(-32602, "Invalid param: Invalid");
    sub.signature = *sig;
  } else {
    return error(-32601, "Method not found");
  }

  absl::MutexLock lock(&mu_);
  sub.id = next_id_++;
  if (sub.kind == Kind::kSignature) {
    if (auto status = bank_->GetSignatureStatus(sub.signature); status.has_value()) {
      *immediate = Notification(
          "signatureNotification",
          WithContext(status->slot, fmt::format("{{\"err\":{}}}", status->err_json)), sub.id);
      return result(std::to_string(sub.id));
    }
  }
  Index(sub);
  const uint64_t sub_id = sub.id;
  subs_.emplace(sub_id, std::move(sub));
  return result(std::to_string(sub_id));
}

bool PubSubHub::ShouldDrop() {
  if (faults_.drop_notification_rate <= 0) return false;
  return std::uniform_real_distribution<double>(0.0, 1.0)(drop_rng_) <
         faults_.drop_notification_rate;
}

void PubSubHub::Publish(const SlotEffects& effects) {
  std::vector<std::pair<std::shared_ptr<NotificationSink>, std::string>> outbox;
  std::vector<std::shared_ptr<NotificationSink>> to_close;
  {
    absl::MutexLock lock(&mu_);
    auto emit = [&](const Subscription& sub, std::string message) {
      if (ShouldDrop()) return;
      if (auto sink = sub.sink.lock()) outbox.emplace_back(std::move(sink), std::move(message));
    };
    static const Account kClosed;
    for (const auto& [key, account] : effects.changed) {
      if (auto it = by_account_.find(key); it != by_account_.end()) {
        for (uint64_t id : it->second) {
          const Subscription& sub = subs_[id];
          emit(sub,
               Notification("accountNotification",
                            WithContext(effects.slot,
                                        AccountValue(account ? *account : kClosed, sub.config)),
                            id));
        }
      }
      if (account == nullptr) continue;
      if (auto it = by_program_.find(account->owner); it != by_program_.end()) {
        for (uint64_t id : it->second) {
          const Subscription& sub = subs_[id];
          if (!sub.filter.Matches(*account)) continue;
          std::string value = fmt::format("{{\"account\":{},\"pubkey\":\"{}\"}}",
                                          AccountValue(*account, sub.config), key.ToBase58());
          emit(sub, Notification("programNotification", WithContext(effects.slot, value), id));
        }
      }
    }
    for (const TxRecordRef& tx : effects.transactions) {
      if (!logs_.empty()) {
        std::string value = fmt::format("{{\"err\":{},\"logs\":[", tx->err_json);
        for (size_t i = 0; i < tx->logs.size(); ++i) {
          if (i > 0) value.push_back(',');
          AppendJsonString(&value, tx->logs[i]);
        }
        fmt::format_to(std::back_inserter(value), "],\"signature\":\"{}\"}}", tx->id.ToBase58());
        const std::string result = WithContext(effects.slot, value);
        for (uint64_t id : logs_) {
          const Subscription& sub = subs_[id];
          bool match = sub.logs_all;
          for (size_t i = 0; !match && i < tx->message.key_count(); ++i) {
            match = tx->message.key(i) == sub.key;
          }
          if (match) emit(sub, Notification("logsNotification", result, id));
        }
      }
      if (auto it = by_signature_.find(tx->id); it != by_signature_.end()) {
        const std::string result =
            WithContext(effects.slot, fmt::format("{{\"err\":{}}}", tx->err_json));
        for (uint64_t id : it->second) {
          emit(subs_[id], Notification("signatureNotification", result, id));
          subs_.erase(id);
        }
        by_signature_.erase(it);
      }
    }
    if (!slots_.empty()) {
      const std::string result = fmt::format("{{\"parent\":{},\"root\":{},\"slot\":{}}}",
                                             effects.parent, effects.slot, effects.slot);
      for (uint64_t id : slots_) emit(subs_[id], Notification("slotNotification", result, id));
    }
    if (!roots_.empty()) {
      // Every slot is final at once here: the root is the slot itself.
      const std::string result = std::to_string(effects.slot);
      for (uint64_t id : roots_) emit(subs_[id], Notification("rootNotification", result, id));
    }
    if (!blocks_.empty()) {
      const BlockhashInfo latest = bank_->LatestBlockhash();
      const Hash previous = last_blockhash_;
      last_blockhash_ = latest.blockhash;
      for (uint64_t id : blocks_) {
        const Subscription& sub = subs_[id];
        std::string signatures;
        int64_t block_time = 0;
        for (const TxRecordRef& tx : effects.transactions) {
          bool match = sub.logs_all;
          for (size_t i = 0; !match && i < tx->message.key_count(); ++i) {
            match = tx->message.key(i) == sub.key;
          }
          if (!match) continue;
          if (!signatures.empty()) signatures.push_back(',');
          fmt::format_to(std::back_inserter(signatures), "\"{}\"", tx->id.ToBase58());
          block_time = tx->block_time;
        }
        if (!sub.logs_all && signatures.empty()) continue;
        const std::string value = fmt::format(
            "{{\"slot\":{},\"err\":null,\"block\":{{\"blockhash\":\"{}\","
            "\"previousBlockhash\":\"{}\",\"parentSlot\":{},\"blockHeight\":{},"
            "\"blockTime\":{},\"signatures\":[{}]}}}}",
            effects.slot, latest.blockhash.ToBase58(), previous.ToBase58(), effects.parent,
            bank_->block_height(), block_time == 0 ? "null" : std::to_string(block_time),
            signatures);
        emit(sub, Notification("blockNotification", WithContext(effects.slot, value), id));
      }
    }
    if (faults_.drop_websockets_at_slot != 0 && effects.slot == faults_.drop_websockets_at_slot) {
      for (const auto& [raw, weak] : sessions_) {
        if (auto sink = weak.lock()) to_close.push_back(std::move(sink));
      }
    }
  }
  for (auto& [sink, message] : outbox) sink->Send(std::move(message));
  for (auto& sink : to_close) sink->Close();
}

void PubSubHub::CloseAll() {
  std::vector<std::shared_ptr<NotificationSink>> sinks;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [raw, weak] : sessions_) {
      if (auto sink = weak.lock()) sinks.push_back(std::move(sink));
    }
  }
  for (auto& sink : sinks) sink->Close();
}

}  // namespace switchyard::localnet
