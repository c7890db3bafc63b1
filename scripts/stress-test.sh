#!/usr/bin/env bash
# scripts/stress-test.sh ROUNDS SKIP PACKAGE...: runs the packages' tests
# ROUNDS times in a row, but for those SKIP matches (go test -skip: the
# measuring ones, which judge the machine itself), with every CPU kept
# busy by STRESS_LOOPS busy loops of normal priority per CPU (4: each
# test thread then gets a fifth of a CPU or less), as other jobs on a
# shared CI machine would. It stops at the first failing round; the busy
# loops end with it, on success, failure or Ctrl-C. `make stress` gives
# it the Makefile's lists.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/go/bin:$PATH"

if [ $# -lt 3 ]; then
  echo "usage: $0 ROUNDS SKIP-REGEXP PACKAGE... (make stress)" >&2
  exit 2
fi
rounds=$1 skip=$2
shift 2

# Build first, without the busy loops: the rounds time the tests alone.
go test -count=1 -run '^$' "$@" >/dev/null

# Job control: every background job gets a process group of its own (so
# that a round's go test and its test binaries can be ended together),
# while all stay in this session, so that the kernel's autogroup
# scheduling shares the CPUs between the busy loops and the tests thread
# by thread, not session by session.
set -m
hogs=() tests=""
stop() {
  # The round's go test and its test binaries (their own process group),
  # then the busy loops.
  [ -n "$tests" ] && kill -TERM -- "-$tests" 2>/dev/null || true
  for p in "${hogs[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap stop EXIT
trap 'echo "stress: interrupted" >&2; exit 130' INT TERM
cpus=$(nproc)
loops=$(( cpus * ${STRESS_LOOPS:-4} ))
for _ in $(seq "$loops"); do
  bash -c 'while :; do :; done' &
  hogs+=($!)
done
echo "stress: $loops busy loops on $cpus CPUs (pids ${hogs[*]}), $rounds rounds of: go test -count=1 -skip '$skip' $*"

for r in $(seq "$rounds"); do
  start=$(date +%s)
  # In the background, so that a signal to this script is handled at
  # once (wait returns), not when the round ends.
  go test -count=1 -timeout 30m -skip "$skip" "$@" &
  tests=$!
  if ! wait "$tests"; then
    tests=""
    echo "stress: round $r of $rounds FAILED after $(( $(date +%s) - start )) s" >&2
    exit 1
  fi
  tests=""
  echo "stress: round $r of $rounds passed in $(( $(date +%s) - start )) s ($(cut -d' ' -f1-3 /proc/loadavg) load)"
done
