// switchyard-fault-proxy: a FaultProxy as a process, for the bench (bench/run) to put in
// front of a localnet endpoint and switch while a run goes on. The fault is set through the
// proxy's own control endpoint, `POST /_fault` (and read with `GET /_fault`), on its port.

#include <signal.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "tests/support/fault_proxy.h"

int main(int argc, char** argv) {
  CLI::App app{"switchyard-fault-proxy: an HTTP/1.1 proxy whose faults are switched at run time"};
  std::string upstream;
  uint16_t port = 0;
  std::string ready_file;
  app.add_option("--upstream", upstream, "The endpoint to forward to, http://HOST:PORT")
      ->required();
  app.add_option("--port", port, "Port to listen on, on 127.0.0.1 (0: a free one)")
      ->capture_default_str();
  app.add_option("--ready-file", ready_file, "Write {\"http\":PORT} here once listening");
  CLI11_PARSE(app, argc, argv);

  // Signals are taken by sigwait below; block them before the proxy's threads start.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  auto proxy = switchyard::testing::FaultProxy::Start(upstream, port);
  if (!proxy.ok()) {
    std::fprintf(stderr, "switchyard-fault-proxy: %s\n",
                 std::string(proxy.status().message()).c_str());
    return 2;
  }
  std::fprintf(stderr, "switchyard-fault-proxy: listening on %s, forwarding to %s\n",
               (*proxy)->url().c_str(), upstream.c_str());
  if (!ready_file.empty()) {
    const std::string tmp = ready_file + ".tmp";
    {
      std::ofstream out(tmp, std::ios::trunc);
      out << absl::StrCat("{\"http\":", (*proxy)->port(), "}\n");
    }
    std::rename(tmp.c_str(), ready_file.c_str());
  }
  int signal_number = 0;
  sigwait(&signals, &signal_number);
  return 0;
}
