#include "absl/synchronization/mutex.h"
#include "app/cli.h"

int main(int argc, char** argv) {
  // Debian builds Abseil without NDEBUG, so every absl::Mutex acquisition would also walk
  // the lock-order graph looking for deadlocks (GraphCycles), on the request path too. The
  // executable turns that check off; the tests keep it (docs/architecture.md §4, "Abseil's
  // deadlock detection").
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  return switchyard::RunCli(argc, argv);
}
