#include "api/upstream/upstream_await.h"

#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>

namespace switchyard {

namespace asio = boost::asio;

namespace {

using Signature = void(absl::StatusOr<UpstreamResponse>);

struct InitiateSend {
  UpstreamClient* client;

  template <typename Handler>
  void operator()(Handler handler, std::string target, std::string body,
                  SendOptions options) const {
    struct Operation {
      explicit Operation(Handler h) : handler(std::move(h)) {}
      Handler handler;
      bool initiating = true;  // Send has not returned yet
    };
    auto operation = std::make_shared<Operation>(std::move(handler));
    client->Send(target, std::move(body), options,
                 [operation](absl::StatusOr<UpstreamResponse> response) {
                   auto executor = asio::get_associated_executor(operation->handler);
                   auto resume = [operation, response = std::move(response)]() mutable {
                     operation->handler(std::move(response));
                   };
                   // An answer before Send returned must not resume the coroutine inside
                   // its own initiation: it resumes from the executor's queue instead.
                   if (operation->initiating) {
                     asio::post(executor, std::move(resume));
                   } else {
                     asio::dispatch(executor, std::move(resume));
                   }
                 });
    operation->initiating = false;
  }
};

// The join of AwaitAll: counts the tasks still running and resumes the waiter after the last.
template <typename Handler>
struct Join {
  Join(size_t count, Handler h) : remaining(count), handler(std::move(h)) {}
  size_t remaining;
  std::exception_ptr error;
  Handler handler;
};

struct InitiateAll {
  template <typename Handler>
  void operator()(Handler handler, std::vector<Task<void>>* tasks) const {
    auto executor = asio::get_associated_executor(handler);
    auto join = std::make_shared<Join<Handler>>(tasks->size(), std::move(handler));
    for (Task<void>& task : *tasks) {
      asio::co_spawn(executor, std::move(task), [join](std::exception_ptr error) {
        if (error && !join->error) join->error = error;
        if (--join->remaining == 0) join->handler(join->error);
      });
    }
  }
};

}  // namespace

Task<absl::StatusOr<UpstreamResponse>> SendAsync(UpstreamClient& client, std::string target,
                                                 std::string body, SendOptions options) {
  return asio::async_initiate<const asio::use_awaitable_t<>&, Signature>(
      InitiateSend{&client}, asio::use_awaitable, std::move(target), std::move(body), options);
}

Task<void> AwaitAll(std::vector<Task<void>> tasks) {
  if (tasks.empty()) co_return;
  co_await asio::async_initiate<const asio::use_awaitable_t<>&, void(std::exception_ptr)>(
      InitiateAll{}, asio::use_awaitable, &tasks);
}

}  // namespace switchyard
