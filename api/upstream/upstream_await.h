#pragma once

// Coroutine forms of the upstream client and a join of parallel awaits, for the request and
// subscription pipelines. Everything runs on the caller's executor (one worker's io_context).

// clang-format off
// Before Asio: boost/asio/awaitable.hpp uses std::exchange without including <utility>.
#include <utility>
// clang-format on

#include <boost/asio/async_result.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <cstddef>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "api/upstream/upstream_client.h"

namespace switchyard {

template <typename T>
using Task = boost::asio::awaitable<T>;

namespace upstream_await_internal {

template <typename T, typename Start>
struct InitiateCallback {
  mutable Start start;  // called once

  template <typename Handler>
  void operator()(Handler handler) const {
    struct Operation {
      explicit Operation(Handler h) : handler(std::move(h)) {}
      Handler handler;
      bool initiating = true;  // `start` has not returned yet
    };
    auto operation = std::make_shared<Operation>(std::move(handler));
    start(std::function<void(T)>([operation](T result) {
      auto executor = boost::asio::get_associated_executor(operation->handler);
      auto resume = [operation, result = std::move(result)]() mutable {
        operation->handler(std::move(result));
      };
      // An answer before `start` returned must not resume the coroutine inside its own
      // initiation: it resumes from the executor's queue instead.
      if (operation->initiating) {
        boost::asio::post(executor, std::move(resume));
      } else {
        boost::asio::dispatch(executor, std::move(resume));
      }
    }));
    operation->initiating = false;
  }
};

}  // namespace upstream_await_internal

// An operation that reports through a callback, as an awaitable: `start(done)` begins it, and
// the coroutine resumes on its own executor with what `done` is called with (once), also when
// `done` is called before `start` returns.
template <typename T, typename Start>
Task<T> AwaitCallback(Start start) {
  return boost::asio::async_initiate<const boost::asio::use_awaitable_t<>&, void(T)>(
      upstream_await_internal::InitiateCallback<T, Start>{std::move(start)},
      boost::asio::use_awaitable);
}

// UpstreamClient::Send as an awaitable: the HTTP answer, or why there is none (as Send reports
// it). The coroutine resumes on its own executor, also when Send answers before it returns.
Task<absl::StatusOr<UpstreamResponse>> SendAsync(UpstreamClient& client, std::string target,
                                                 std::string body, SendOptions options);

// Runs every task at once on the current executor and resumes when the last one has finished.
// An exception of a task is rethrown here (the first one), after every task has finished.
Task<void> AwaitAll(std::vector<Task<void>> tasks);

namespace upstream_await_internal {

template <typename T>
Task<void> Into(Task<T> task, std::optional<T>* out) {
  out->emplace(co_await std::move(task));
}

}  // namespace upstream_await_internal

// The results of `tasks`, run at once, in the order of `tasks`.
template <typename T>
Task<std::vector<T>> AwaitEach(std::vector<Task<T>> tasks) {
  std::vector<std::optional<T>> results(tasks.size());
  std::vector<Task<void>> joined;
  joined.reserve(tasks.size());
  for (size_t i = 0; i < tasks.size(); ++i) {
    joined.push_back(upstream_await_internal::Into(std::move(tasks[i]), &results[i]));
  }
  co_await AwaitAll(std::move(joined));
  std::vector<T> out;
  out.reserve(results.size());
  for (std::optional<T>& result : results) out.push_back(*std::move(result));
  co_return out;
}

// The results of two tasks of different types, run at once.
template <typename A, typename B>
Task<std::pair<A, B>> AwaitBoth(Task<A> a, Task<B> b) {
  std::optional<A> first;
  std::optional<B> second;
  std::vector<Task<void>> joined;
  joined.push_back(upstream_await_internal::Into(std::move(a), &first));
  joined.push_back(upstream_await_internal::Into(std::move(b), &second));
  co_await AwaitAll(std::move(joined));
  co_return std::pair<A, B>(*std::move(first), *std::move(second));
}

}  // namespace switchyard
