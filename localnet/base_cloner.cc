#include "localnet/base_cloner.h"

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <utility>

#include "fmt/format.h"
#include "localnet/rpc_json.h"
#include "solana/base64.h"
#include "solana/delegation.h"

namespace switchyard::localnet {
namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;
using error_code = boost::system::error_code;

}  // namespace

BaseCloner::BaseCloner(std::string base_url, Pubkey identity, Bank* bank, absl::Duration timeout,
                       size_t max_queue, int threads)
    : base_url_(std::move(base_url)),
      identity_(identity),
      bank_(bank),
      timeout_(timeout),
      max_queue_(max_queue),
      thread_count_(threads) {}

BaseCloner::~BaseCloner() { Stop(); }

absl::Status BaseCloner::Start() {
  std::string_view url = base_url_;
  if (!url.starts_with("http://")) {
    return absl::InvalidArgumentError(
        fmt::format("--base must be an http:// URL, got '{}'", base_url_));
  }
  url.remove_prefix(7);
  const size_t slash = url.find('/');
  std::string_view authority = url.substr(0, slash);
  target_ = slash == std::string_view::npos ? "/" : std::string(url.substr(slash));
  const size_t colon = authority.rfind(':');
  if (colon == std::string_view::npos) {
    host_ = std::string(authority);
    port_ = "80";
  } else {
    host_ = std::string(authority.substr(0, colon));
    port_ = std::string(authority.substr(colon + 1));
  }
  if (host_.empty()) return absl::InvalidArgumentError("--base has no host");
  for (int i = 0; i < thread_count_; ++i) threads_.emplace_back([this] { Run(); });
  return absl::OkStatus();
}

void BaseCloner::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  for (auto& t : threads_) {
    if (t.joinable()) t.join();
  }
  threads_.clear();
  // Answer whatever is left so no request hangs.
  std::deque<Job> left;
  {
    absl::MutexLock lock(&mu_);
    left.swap(queue_);
  }
  for (Job& job : left) job.done();
}

void BaseCloner::Ensure(std::vector<Pubkey> keys, std::function<void()> done) {
  {
    absl::MutexLock lock(&mu_);
    if (!stopping_ && queue_.size() < max_queue_) {
      queue_.push_back(Job{std::move(keys), std::move(done)});
      return;
    }
  }
  done();  // overloaded or stopping: answer with what the bank has
}

void BaseCloner::Run() {
  while (true) {
    Job job;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this]()
                       ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_ || !queue_.empty(); };
      mu_.Await(absl::Condition(&ready));
      if (stopping_) return;
      job = std::move(queue_.front());
      queue_.pop_front();
    }
    (void)CloneNow(job.keys);  // on failure the request sees the accounts as absent
    job.done();
  }
}

absl::Status BaseCloner::CloneNow(const std::vector<Pubkey>& keys) {
  constexpr size_t kChunk = 50;  // getMultipleAccounts takes 100 keys: accounts + records
  for (size_t start = 0; start < keys.size(); start += kChunk) {
    const size_t n = std::min(kChunk, keys.size() - start);
    std::string list;
    for (size_t i = 0; i < n; ++i) {
      list.append(fmt::format("{}\"{}\"", i == 0 ? "" : ",", keys[start + i].ToBase58()));
    }
    for (size_t i = 0; i < n; ++i) {
      list.append(fmt::format(",\"{}\"", bank_->pdas().Record(keys[start + i]).ToBase58()));
    }
    const std::string body = fmt::format(
        "{{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"getMultipleAccounts\",\"params\":[[{}],"
        "{{\"encoding\":\"base64\"}}]}}",
        list);
    auto response = Post(body);
    if (!response.ok()) return response.status();
    simdjson::dom::element doc;
    simdjson::dom::array values;
    if (ThreadParser().parse(response->data(), response->size()).get(doc) != simdjson::SUCCESS ||
        doc["result"]["value"].get_array().get(values) != simdjson::SUCCESS ||
        values.size() != 2 * n) {
      return absl::DataLossError("unexpected getMultipleAccounts answer from the base");
    }
    auto read_account = [](simdjson::dom::element v) -> std::optional<Account> {
      if (v.is_null()) return std::nullopt;
      Account a;
      std::string_view owner;
      std::string_view data;
      if (v["lamports"].get_uint64().get(a.lamports) != simdjson::SUCCESS ||
          v["owner"].get_string().get(owner) != simdjson::SUCCESS ||
          v["data"].at(0).get_string().get(data) != simdjson::SUCCESS) {
        return std::nullopt;
      }
      bool executable = false;
      if (v["executable"].get_bool().get(executable) == simdjson::SUCCESS) {
        a.executable = executable;
      }
      auto owner_key = Pubkey::FromBase58(owner);
      auto bytes = Base64Decode(data);
      if (!owner_key.ok() || !bytes.ok()) return std::nullopt;
      a.owner = *owner_key;
      a.data = *std::move(bytes);
      return a;
    };
    for (size_t i = 0; i < n; ++i) {
      std::optional<Account> account = read_account(values.at(i).value_unsafe());
      if (!account.has_value()) continue;
      const Pubkey& key = keys[start + i];
      if (account->owner == DelegationProgramId()) {
        std::optional<Account> record_account = read_account(values.at(n + i).value_unsafe());
        if (record_account.has_value()) {
          auto record =
              DecodeDelegationRecord({reinterpret_cast<const uint8_t*>(record_account->data.data()),
                                      record_account->data.size()});
          if (record.ok()) {
            account->owner = record->owner;
            if (record->authority == identity_ || record->authority.IsZero()) {
              bank_->MarkDelegated(key);
            }
          }
        }
      }
      bank_->SetAccountIfAbsent(key, *std::move(account));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> BaseCloner::Post(const std::string& body) {
  net::io_context ioc(1);
  tcp::resolver resolver(ioc);
  beast::tcp_stream stream(ioc);
  beast::flat_buffer buffer;
  http::request<http::string_body> req(http::verb::post, target_, 11);
  req.set(http::field::host, host_);
  req.set(http::field::content_type, "application/json");
  req.body() = body;
  req.prepare_payload();
  http::response_parser<http::string_body> res;
  res.body_limit(64 * 1024 * 1024);
  error_code result = net::error::timed_out;
  const auto timeout = absl::ToChronoNanoseconds(timeout_);
  resolver.async_resolve(host_, port_, [&](error_code ec, tcp::resolver::results_type results) {
    if (ec) {
      result = ec;
      return;
    }
    stream.expires_after(timeout);
    stream.async_connect(results, [&](error_code ec, const tcp::endpoint&) {
      if (ec) {
        result = ec;
        return;
      }
      http::async_write(stream, req, [&](error_code ec, size_t) {
        if (ec) {
          result = ec;
          return;
        }
        http::async_read(stream, buffer, res, [&](error_code ec, size_t) { result = ec; });
      });
    });
  });
  ioc.run_for(timeout + std::chrono::milliseconds(100));
  if (result) {
    return absl::UnavailableError(
        fmt::format("base {} did not answer: {}", base_url_, result.message()));
  }
  if (res.get().result() != http::status::ok) {
    return absl::UnavailableError(
        fmt::format("base {} answered HTTP {}", base_url_, res.get().result_int()));
  }
  return std::move(res.get().body());
}

}  // namespace switchyard::localnet
