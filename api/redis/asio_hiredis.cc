#include "api/redis/asio_hiredis.h"

#include <sys/ioctl.h>

#include <memory>

#include "boost/asio/posix/stream_descriptor.hpp"
#include "boost/asio/post.hpp"

namespace switchyard {
namespace {

namespace net = boost::asio;

// The fd's watcher. hiredis holds it through ac->ev.data (a heap shared_ptr that its cleanup
// hook deletes); each wait in flight holds it too, so it outlives the context it watched.
class FdWatch : public std::enable_shared_from_this<FdWatch> {
 public:
  FdWatch(redisAsyncContext* ac, net::io_context& io)
      : ac_(ac), io_(io), descriptor_(io, ac->c.fd) {}

  static void AddRead(void* data) { Self(data)->StartReading(); }
  static void DelRead(void* data) { Self(data)->reading_ = false; }
  static void AddWrite(void* data) { Self(data)->StartWriting(); }
  static void DelWrite(void* data) { Self(data)->writing_ = false; }
  static void Cleanup(void* data) {
    auto* holder = static_cast<std::shared_ptr<FdWatch>*>(data);
    (*holder)->Detach();
    delete holder;
  }

 private:
  static FdWatch* Self(void* data) { return static_cast<std::shared_ptr<FdWatch>*>(data)->get(); }

  // hiredis is freeing the context and will close the fd: stop watching it without closing.
  void Detach() {
    ac_ = nullptr;
    reading_ = writing_ = false;
    boost::system::error_code ignored;
    descriptor_.cancel(ignored);
    descriptor_.release();
  }

  void StartReading() {
    reading_ = true;
    if (!read_waiting_ && !in_read_) WaitRead();
  }

  void WaitRead() {
    read_waiting_ = true;
    descriptor_.async_wait(net::posix::descriptor_base::wait_read,
                           [self = shared_from_this()](boost::system::error_code ec) {
                             self->read_waiting_ = false;
                             if (ec || self->ac_ == nullptr || !self->reading_) return;
                             self->OnReadable();
                           });
  }

  // The reactor is edge-triggered and hiredis reads one buffer per call: read again while
  // the socket still holds bytes, and only then wait for the next edge.
  void OnReadable() {
    in_read_ = true;
    redisAsyncHandleRead(ac_);
    in_read_ = false;
    if (ac_ == nullptr || !reading_ || read_waiting_) return;
    int available = 0;
    if (::ioctl(ac_->c.fd, FIONREAD, &available) == 0 && available > 0) {
      read_waiting_ = true;
      net::post(io_, [self = shared_from_this()] {
        self->read_waiting_ = false;
        if (self->ac_ != nullptr && self->reading_) self->OnReadable();
      });
      return;
    }
    WaitRead();
  }

  // Until the connect completes, wait for writability (which is how it completes). After
  // it, a socket that stays writable gives the edge-triggered reactor no new edge, so write
  // at once, and wait only when hiredis could not write everything (the send buffer is full,
  // and its draining is an edge).
  void StartWriting() {
    writing_ = true;
    if (write_waiting_ || in_write_) return;
    if ((ac_->c.flags & REDIS_CONNECTED) == 0) {
      WaitWrite();
      return;
    }
    write_waiting_ = true;
    net::post(io_, [self = shared_from_this()] {
      self->write_waiting_ = false;
      if (self->ac_ != nullptr && self->writing_) self->OnWritable();
    });
  }

  void WaitWrite() {
    write_waiting_ = true;
    descriptor_.async_wait(net::posix::descriptor_base::wait_write,
                           [self = shared_from_this()](boost::system::error_code ec) {
                             self->write_waiting_ = false;
                             if (ec || self->ac_ == nullptr || !self->writing_) return;
                             self->OnWritable();
                           });
  }

  void OnWritable() {
    in_write_ = true;
    redisAsyncHandleWrite(ac_);
    in_write_ = false;
    if (ac_ != nullptr && writing_ && !write_waiting_) WaitWrite();
  }

  redisAsyncContext* ac_;
  net::io_context& io_;
  net::posix::stream_descriptor descriptor_;
  bool reading_ = false;
  bool writing_ = false;
  bool read_waiting_ = false;
  bool write_waiting_ = false;
  bool in_read_ = false;   // inside redisAsyncHandleRead, which re-adds the read interest
  bool in_write_ = false;  // inside redisAsyncHandleWrite, which re-adds an unfinished write
};

}  // namespace

absl::Status AttachToAsio(redisAsyncContext* ac, net::io_context& io) {
  if (ac->ev.data != nullptr) return absl::FailedPreconditionError("already attached");
  auto* holder = new std::shared_ptr<FdWatch>(std::make_shared<FdWatch>(ac, io));
  ac->ev.data = holder;
  ac->ev.addRead = &FdWatch::AddRead;
  ac->ev.delRead = &FdWatch::DelRead;
  ac->ev.addWrite = &FdWatch::AddWrite;
  ac->ev.delWrite = &FdWatch::DelWrite;
  ac->ev.cleanup = &FdWatch::Cleanup;
  FdWatch::AddWrite(holder);
  return absl::OkStatus();
}

}  // namespace switchyard
