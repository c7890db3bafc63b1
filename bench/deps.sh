#!/usr/bin/env bash
# Dependency tracing on an active pool: a Go front (the cli tests'
# httpfront helper) with 128 connections to a backend (httpbackend) that
# answers in parts after 20 ms, under 256 clients, in a namespace of its
# own; `netdoctor agent --dependency-every 3s` (tracing back to back) of
# another build and of this tree alternated, CPU as % of one core over
# SECONDS after 5 s. Runs as root; removes the namespace on exit.
#
#   bench/deps.sh OTHER_NETDOCTOR [SECONDS] [ROUNDS]   # default 20 s, 3 rounds
set -euo pipefail
cd "$(dirname "$0")/.."
other=${1:?usage: bench/deps.sh OTHER_NETDOCTOR [SECONDS] [ROUNDS]}
secs=${2:-20}
rounds=${3:-3}
ns=nddeps-$$
[ "$(id -u)" -eq 0 ] || { echo "bench: needs root (namespaces)" >&2; exit 1; }
hz=$(getconf CLK_TCK)
tmp=$(mktemp -d)
pids=()
cleanup() {
  set +e
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
  wait 2>/dev/null
  ip netns del "$ns" 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT INT TERM
CGO_ENABLED=0 go build -o "$tmp/netdoctor" ./cmd/netdoctor
go test -c -o "$tmp/cli.test" ./internal/cli
ip netns add "$ns"
ip -n "$ns" link set lo up
mkfifo "$tmp/hold"
exec 9<>"$tmp/hold"
ND_HELPER=httpbackend ND_ADDR=127.0.0.1:7300 ND_DELAY=20ms ND_PARTS=3 ND_NODELAY=1 ip netns exec "$ns" "$tmp/cli.test" <&9 >/dev/null & pids+=($!)
ND_HELPER=httpfront ND_ADDR=127.0.0.1:8080 ND_BACKEND=127.0.0.1:7300 ND_POOL=128 ip netns exec "$ns" "$tmp/cli.test" <&9 >/dev/null & pids+=($!)
sleep 2
ip netns exec "$ns" "$tmp/netdoctor" load -c 256 -t 1 -d $((rounds * 2 * (secs + 6) + 10))s http://127.0.0.1:8080/ >/dev/null 2>&1 & pids+=($!)
sleep 3
cpu() { awk -v hz="$hz" '{printf "%.3f", ($14+$15)/hz}' "/proc/$1/stat"; }
for round in $(seq "$rounds"); do
  for b in "$other" "$tmp/netdoctor"; do
    "$b" agent --netns "$ns" --listen 127.0.0.1:0 --dns-every 0 --dependency-every 3s 2>/dev/null &
    p=$!
    sleep 5
    a=$(cpu "$p")
    sleep "$secs"
    z=$(cpu "$p")
    kill -TERM "$p"
    wait "$p" || true
    name=this; [ "$b" = "$other" ] && name=other
    echo "round $round $name: $(awk -v a="$a" -v z="$z" -v s="$secs" 'BEGIN{printf "%.2f %% of a core", (z-a)/s*100}')"
  done
done
