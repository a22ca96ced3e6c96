#!/usr/bin/env bash
# Checks scripts/lib/known_aborts.sh on ctest logs written here: only a run whose every failure
# is librdkafka's teardown abort is reported as such.
set -euo pipefail
source "$(dirname "$0")/../../scripts/lib/known_aborts.sh"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/Testing/Temporary"

section() {  # name, output line, verdict
  cat <<SECTION
1/3 Testing: $1
1/3 Test: $1
Output:
----------------------------------------------------------
[ RUN      ] $1
$2
<end of output>
Test time =   1.41 sec
----------------------------------------------------------
$3
"$1" end time: Dec 04 18:16 UTC
"$1" time elapsed: 00:00:01
----------------------------------------------------------

SECTION
}
abort_line='kafka_event_log_test: rdkafka_broker.c:4616: rd_kafka_broker_destroy_final: Assertion `thrd_is_current(rkb->rkb_thread)'"'"' failed.'
fail=0
expect() {  # description, expected status, expected output
  local out status=0
  out=$(only_known_aborts "$work") || status=$?
  if [[ "$status" != "$2" || "$out" != "$3" ]]; then
    echo "FAIL: $1: status $status (want $2), output [$out] (want [$3])"
    fail=1
  else
    echo "ok: $1"
  fi
}

{
  section "Kafka.A" "$abort_line" "Test Failed."
  section "Kafka.AB" "[  FAILED  ] Kafka.AB" "Test Failed."
  section "Other.C" "[       OK ] Other.C" "Test Passed."
} >"$work/Testing/Temporary/LastTest.log"

printf '240:Kafka.A\n' >"$work/Testing/Temporary/LastTestsFailed.log"
expect "one test that aborted in librdkafka's teardown" 0 "Kafka.A"

printf '240:Kafka.A\n241:Kafka.AB\n' >"$work/Testing/Temporary/LastTestsFailed.log"
expect "an abort and an assertion failure" 1 ""

printf '241:Kafka.AB\n' >"$work/Testing/Temporary/LastTestsFailed.log"
expect "an assertion failure in a test whose name extends an aborted one's" 1 ""

printf '9:Missing.D\n' >"$work/Testing/Temporary/LastTestsFailed.log"
expect "a failed test with no section in the log" 1 ""

: >"$work/Testing/Temporary/LastTestsFailed.log"
expect "no failed test" 1 ""
exit $fail
