#!/usr/bin/env bash
# End-to-end tests with real Solana clients (@solana/web3.js, @solana/kit and the MagicBlock
# ephemeral-rollups SDK).
#   run_e2e.sh /path/to/switchyard-localnet                      localnet.test.mjs: the clients
#                                                                against switchyard-localnet
#   run_e2e.sh /path/to/switchyard-localnet /path/to/switchyard  router.test.mjs: the clients
#                                                                through `switchyard serve` in
#                                                                front of a localnet base and two ERs;
#                                                                pubsub.test.mjs: web3.js
#                                                                subscriptions through it
#   run_e2e.sh --browser /path/to/switchyard-localnet /path/to/switchyard
#                                                                browser.test.mjs: a page in
#                                                                headless Chromium on another
#                                                                origin, web3.js through
#                                                                Switchyard (CORS)
#   run_e2e.sh --real-er /path/to/switchyard-localnet /path/to/switchyard
#                                                                real_er.test.mjs: the same with
#                                                                the real MagicBlock ephemeral
#                                                                validator as the ER; real_er/setup.sh
#                                                                installs it first
# Installs the npm packages into tests/e2e/node_modules (git-ignored) when missing. The node
# tests start their processes on free ports and kill them when they end.
set -euo pipefail
real_er=0
browser=0
if [[ "${1:-}" == "--real-er" ]]; then
  real_er=1
  shift
elif [[ "${1:-}" == "--browser" ]]; then
  browser=1
  shift
fi
bin="$(realpath "${1:?usage: run_e2e.sh /path/to/switchyard-localnet [/path/to/switchyard]}")"
switchyard_bin=""
if [[ $# -ge 2 ]]; then switchyard_bin="$(realpath "$2")"; fi
dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$dir"
# ctest runs the e2e tests in parallel: one of them installs while the others wait.
exec 9>"$dir/.npm-install.lock"
flock 9
if [[ ! -d node_modules/@solana/web3.js || ! -d node_modules/@solana/kit ||
      ! -d node_modules/@magicblock-labs/ephemeral-rollups-sdk ||
      ! -d node_modules/puppeteer-core || ! -d node_modules/esbuild ]]; then
  timeout 600 npm ci --no-audit --no-fund --loglevel=error
fi
flock -u 9
exec 9>&-
export SWITCHYARD_LOCALNET_BIN="$bin"
tests=(localnet.test.mjs)
if [[ $# -ge 2 ]]; then
  export SWITCHYARD_BIN="$switchyard_bin"
  tests=(router.test.mjs pubsub.test.mjs)
fi
if ((browser)); then
  [[ -n "$switchyard_bin" ]] || { echo "run_e2e.sh --browser needs the switchyard binary" >&2; exit 2; }
  tests=(browser.test.mjs)
fi
if ((real_er)); then
  [[ -n "$switchyard_bin" ]] || { echo "run_e2e.sh --real-er needs the switchyard binary" >&2; exit 2; }
  REAL_ER_RUNTIME="$(timeout 900 "$dir/real_er/setup.sh" | tail -1)"
  export REAL_ER_RUNTIME
  tests=(real_er.test.mjs)
fi
# node's runner kills nothing it did not start; the test files kill their processes on exit,
# on SIGTERM and on SIGINT. The timeout (its signal goes to the whole process group) bounds
# the whole run.
exec timeout -s TERM 300 node --test --test-concurrency=1 "${tests[@]}"
