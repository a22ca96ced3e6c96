// Loaded with LD_PRELOAD into the ephemeral validator, which aborts when it cannot raise its
// open-file limit to 1,000,000: a request above the hard limit is clamped to the hard limit.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <sys/resource.h>

typedef int (*SetrlimitFn)(__rlimit_resource_t, const struct rlimit*);

int setrlimit(__rlimit_resource_t resource, const struct rlimit* limit) {
  SetrlimitFn next = (SetrlimitFn)dlsym(RTLD_NEXT, "setrlimit");
  struct rlimit hard;
  if (resource == RLIMIT_NOFILE && getrlimit(resource, &hard) == 0) {
    struct rlimit clamped = *limit;
    if (clamped.rlim_cur > hard.rlim_max) clamped.rlim_cur = hard.rlim_max;
    if (clamped.rlim_max > hard.rlim_max) clamped.rlim_max = hard.rlim_max;
    return next(resource, &clamped);
  }
  return next(resource, limit);
}

