#!/usr/bin/env bash
# scripts/stress-test.sh ROUNDS SKIP PACKAGE...: runs the packages' tests
# ROUNDS times in a row, but for those SKIP matches (go test -skip: the
# measuring ones, which judge the machine itself), with every CPU kept
# busy by a busy loop of normal priority, as another job on a shared CI
# machine would. It stops at the first failing round; the busy loops end
# with it, on success, failure or Ctrl-C. `make stress` gives it the
# Makefile's lists.
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
for _ in $(seq "$cpus"); do
  bash -c 'while :; do :; done' &
  hogs+=($!)
done
echo "stress: $cpus busy loops (pids ${hogs[*]}), $rounds rounds of: go test -count=1 -skip '$skip' $*"

for r in $(seq "$rounds"); do
  start=$(date +%s)
  # In the background, so that a signal to this script is handled at
  # once (wait returns), not when the round ends.
  setsid go test -count=1 -timeout 30m -skip "$skip" "$@" &
  tests=$!
  if ! wait "$tests"; then
    tests=""
    echo "stress: round $r of $rounds FAILED after $(( $(date +%s) - start )) s" >&2
    exit 1
  fi
  tests=""
  echo "stress: round $r of $rounds passed in $(( $(date +%s) - start )) s ($(cut -d' ' -f1-3 /proc/loadavg) load)"
done
