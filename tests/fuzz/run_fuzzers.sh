#!/usr/bin/env bash
# Builds the libFuzzer targets with clang++-14 in <build-dir> and runs each for <seconds>
# from the committed seed corpus (tests/fuzz/corpus/<target>). New inputs go to a scratch
# directory, never into the committed corpus. Exits non-zero on a crash, a leak, a sanitizer
# report or a build failure; a crashing input is left as <build-dir>/crash-<target>-*.
#
# Usage: tests/fuzz/run_fuzzers.sh <build-dir> <seconds-per-target> [<runs-per-target>]
# With <runs-per-target>, each target runs that many inputs, <seconds-per-target> being the
# cap. Each target's executions are printed as "== <target>: <n> executions".
# SWITCHYARD_FUZZ_JOBS=N (default 1) runs each target in libFuzzer's fork mode with N worker
# processes sharing one corpus: the HTTP end-to-end target waits on its server thread half of
# the time, so two workers on two cores nearly double its rate. SWITCHYARD_FUZZ_TARGETS (a
# space-separated list) runs only those targets.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
build=${1:?build directory}
seconds=${2:?seconds per target}
runs=${3:-}
jobs=${SWITCHYARD_FUZZ_JOBS:-1}
cxx=${SWITCHYARD_FUZZ_CXX:-clang++-14}

cmake -S "$here" -B "$build" -G Ninja -DCMAKE_CXX_COMPILER="$cxx" \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo > "$build.configure.log" 2>&1 ||
  { cat "$build.configure.log"; exit 1; }
cmake --build "$build" -j2

targets=(transaction_fuzzer delegation_fuzzer rpc_request_fuzzer upstream_answer_fuzzer
  pubsub_client_fuzzer event_codec_fuzzer upstream_notification_fuzzer config_fuzzer
  http_server_fuzzer)
if [[ -n ${SWITCHYARD_FUZZ_TARGETS:-} ]]; then
  read -r -a targets <<< "$SWITCHYARD_FUZZ_TARGETS"
fi
fork=()
if (( jobs > 1 )); then
  # A crash, a leak, a timeout or an out-of-memory in any worker ends the run, as without fork
  # mode (fork mode ignores timeouts and out-of-memory by default).
  fork=(-fork="$jobs" -ignore_timeouts=0 -ignore_ooms=0)
fi
for target in "${targets[@]}"; do
  scratch="$build/scratch/$target"
  rm -rf "$scratch"
  mkdir -p "$scratch"
  echo "== $target for ${seconds}s"
  "$build/$target" "${fork[@]}" -max_total_time="$seconds" ${runs:+-runs="$runs"} -timeout=10 \
    -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$build/crash-$target-" \
    "$scratch" "$here/corpus/$target" 2> "$build/$target.log" ||
    { tail -n 60 "$build/$target.log"; exit 1; }
  executed=$(sed -n 's/^stat::number_of_executed_units: *//p' "$build/$target.log")
  if [[ -z $executed ]]; then
    # Fork mode prints no final stats; its progress lines begin with "#<runs so far>:".
    executed=$(sed -n 's/^#\([0-9][0-9]*\): cov:.*/\1/p' "$build/$target.log" | tail -n 1)
  fi
  echo "== $target: ${executed:-?} executions"
done
