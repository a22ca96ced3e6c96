#!/usr/bin/env bash
# End-to-end tests of switchyard-localnet with real Solana clients (@solana/web3.js and the
# MagicBlock ephemeral-rollups SDK). Usage: run_e2e.sh /path/to/switchyard-localnet
# Installs the npm packages into tests/e2e/node_modules (git-ignored) when missing. The
# node tests start the localnet processes on free ports and kill them when they end.
set -euo pipefail
bin="$(realpath "${1:?usage: run_e2e.sh /path/to/switchyard-localnet}")"
dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$dir"
if [[ ! -d node_modules/@solana/web3.js || ! -d node_modules/@magicblock-labs/ephemeral-rollups-sdk ]]; then
  timeout 600 npm ci --no-audit --no-fund --loglevel=error
fi
export SWITCHYARD_LOCALNET_BIN="$bin"
# node's runner kills nothing it did not start; the test file kills its localnets on exit,
# on SIGTERM and on SIGINT. The timeout bounds the whole run.
exec timeout -s TERM 300 node --test --test-concurrency=1 localnet.test.mjs
