// C11 threads (<threads.h>) on top of the POSIX calls, for ThreadSanitizer runs only
// (scripts/sanitize tsan preloads it).
//
// librdkafka creates its threads and takes its locks through the C11 calls (thrd_create,
// mtx_lock, cnd_wait). Since glibc 2.34 those reach pthread_create and friends inside libc,
// past the symbols that GCC 12's ThreadSanitizer intercepts: a thread librdkafka starts is
// unknown to TSan and crashes in its first malloc, and its locks order nothing. Defined here
// and preloaded, the C11 calls go through the intercepted POSIX ones instead.
//
// tests/tsan.supp has TSan ignore what librdkafka's own calls into the runtime do
// (`called_from_lib`), since the reference counts that order them are invisible to it; that
// would drop the read-write locks librdkafka takes with pthread_rwlock_* directly. Those are
// forwarded from here, so TSan sees them called from this library and keeps them.

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <threads.h>

namespace {

static_assert(sizeof(thrd_t) == sizeof(pthread_t));
static_assert(sizeof(mtx_t) == sizeof(pthread_mutex_t));
static_assert(sizeof(cnd_t) == sizeof(pthread_cond_t));
static_assert(sizeof(once_flag) == sizeof(pthread_once_t));

int FromErrno(int err) {
  switch (err) {
    case 0:
      return thrd_success;
    case EBUSY:
      return thrd_busy;
    case ETIMEDOUT:
      return thrd_timedout;
    case ENOMEM:
      return thrd_nomem;
    default:
      return thrd_error;
  }
}

pthread_mutex_t* AsPosix(mtx_t* m) { return reinterpret_cast<pthread_mutex_t*>(m); }
pthread_cond_t* AsPosix(cnd_t* c) { return reinterpret_cast<pthread_cond_t*>(c); }

struct ThreadStart {
  thrd_start_t function;
  void* argument;
};

void* RunThread(void* start) {
  const ThreadStart copy = *static_cast<ThreadStart*>(start);
  free(start);
  return reinterpret_cast<void*>(static_cast<intptr_t>(copy.function(copy.argument)));
}

// The next definition of a POSIX call after this library's: TSan's interceptor.
template <typename Function>
Function Next(const char* name) {
  return reinterpret_cast<Function>(dlsym(RTLD_NEXT, name));
}

using RwlockCall = int (*)(pthread_rwlock_t*);

}  // namespace

extern "C" {

int pthread_rwlock_init(pthread_rwlock_t* lock, const pthread_rwlockattr_t* attributes) {
  static const auto next =
      Next<int (*)(pthread_rwlock_t*, const pthread_rwlockattr_t*)>("pthread_rwlock_init");
  return next(lock, attributes);
}
int pthread_rwlock_destroy(pthread_rwlock_t* lock) {
  static const auto next = Next<RwlockCall>("pthread_rwlock_destroy");
  return next(lock);
}
int pthread_rwlock_rdlock(pthread_rwlock_t* lock) {
  static const auto next = Next<RwlockCall>("pthread_rwlock_rdlock");
  return next(lock);
}
int pthread_rwlock_wrlock(pthread_rwlock_t* lock) {
  static const auto next = Next<RwlockCall>("pthread_rwlock_wrlock");
  return next(lock);
}
int pthread_rwlock_unlock(pthread_rwlock_t* lock) {
  static const auto next = Next<RwlockCall>("pthread_rwlock_unlock");
  return next(lock);
}

int thrd_create(thrd_t* thread, thrd_start_t function, void* argument) {
  auto* start = static_cast<ThreadStart*>(malloc(sizeof(ThreadStart)));
  if (start == nullptr) return thrd_nomem;
  *start = ThreadStart{function, argument};
  const int err = pthread_create(thread, nullptr, RunThread, start);
  if (err != 0) free(start);
  return FromErrno(err);
}

int thrd_join(thrd_t thread, int* result) {
  void* value = nullptr;
  const int err = pthread_join(thread, &value);
  if (err == 0 && result != nullptr) {
    *result = static_cast<int>(reinterpret_cast<intptr_t>(value));
  }
  return FromErrno(err);
}

int thrd_detach(thrd_t thread) { return FromErrno(pthread_detach(thread)); }

int mtx_init(mtx_t* mutex, int type) {
  pthread_mutexattr_t attributes;
  pthread_mutexattr_init(&attributes);
  if ((type & mtx_recursive) != 0) {
    pthread_mutexattr_settype(&attributes, PTHREAD_MUTEX_RECURSIVE);
  }
  const int err = pthread_mutex_init(AsPosix(mutex), &attributes);
  pthread_mutexattr_destroy(&attributes);
  return FromErrno(err);
}

int mtx_lock(mtx_t* mutex) { return FromErrno(pthread_mutex_lock(AsPosix(mutex))); }
int mtx_trylock(mtx_t* mutex) { return FromErrno(pthread_mutex_trylock(AsPosix(mutex))); }
int mtx_timedlock(mtx_t* mutex, const struct timespec* deadline) {
  return FromErrno(pthread_mutex_timedlock(AsPosix(mutex), deadline));
}
int mtx_unlock(mtx_t* mutex) { return FromErrno(pthread_mutex_unlock(AsPosix(mutex))); }
void mtx_destroy(mtx_t* mutex) { pthread_mutex_destroy(AsPosix(mutex)); }

int cnd_init(cnd_t* condition) { return FromErrno(pthread_cond_init(AsPosix(condition), nullptr)); }
int cnd_signal(cnd_t* condition) { return FromErrno(pthread_cond_signal(AsPosix(condition))); }
int cnd_broadcast(cnd_t* condition) {
  return FromErrno(pthread_cond_broadcast(AsPosix(condition)));
}
int cnd_wait(cnd_t* condition, mtx_t* mutex) {
  return FromErrno(pthread_cond_wait(AsPosix(condition), AsPosix(mutex)));
}
int cnd_timedwait(cnd_t* condition, mtx_t* mutex, const struct timespec* deadline) {
  return FromErrno(pthread_cond_timedwait(AsPosix(condition), AsPosix(mutex), deadline));
}
void cnd_destroy(cnd_t* condition) { pthread_cond_destroy(AsPosix(condition)); }

void call_once(once_flag* flag, void (*function)(void)) {
  pthread_once(reinterpret_cast<pthread_once_t*>(flag), function);
}

}  // extern "C"
