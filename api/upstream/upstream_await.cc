#include "api/upstream/upstream_await.h"

namespace switchyard {

namespace asio = boost::asio;

namespace {

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
  return AwaitCallback<absl::StatusOr<UpstreamResponse>>([&client, target = std::move(target),
                                                          body = std::move(body),
                                                          options](UpstreamCallback done) mutable {
    client.Send(target, std::move(body), options, std::move(done));
  });
}

Task<void> AwaitAll(std::vector<Task<void>> tasks) {
  if (tasks.empty()) co_return;
  co_await asio::async_initiate<const asio::use_awaitable_t<>&, void(std::exception_ptr)>(
      InitiateAll{}, asio::use_awaitable, &tasks);
}

}  // namespace switchyard
