#!/usr/bin/env bash
# Agent benchmark: the CPU of `netdoctor agent` at 1 Hz against the
# sampler `run` uses (`netdoctor collect` at 1 Hz: the same collectors,
# without the window, the rules and the HTTP server), alternated, with
# 10k and 100k TCP sockets; then the agent's resident memory once its
# window is full. CPU is counted in steady state, from 5 s after the
# start (the first snapshot, which finds the listeners' owners among every
# process's descriptors, and the process's start are a one-off cost,
# shown apart). Runs as root in a namespace of its own; removes it on
# exit.
#
#   bench/agent.sh [SECONDS] [ROUNDS]          # default 30 s, 3 rounds
#   MEMORY=real bench/agent.sh                 # memory after a real 15 min window at 1 Hz (slow)
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-30}
rounds=${2:-3}
ns=ndagent-$$
export PATH="/usr/local/go/bin:$PATH"
[ "$(id -u)" -eq 0 ] || { echo "bench: needs root (namespaces)" >&2; exit 1; }
hz=$(getconf CLK_TCK)

tmp=$(mktemp -d)
fill_pid=
cleanup() {
  set +e
  exec 9>&- 2>/dev/null
  if [ -n "$fill_pid" ]; then kill "$fill_pid" 2>/dev/null; wait "$fill_pid" 2>/dev/null; fi
  pkill -f "$tmp/netdoctor agent" 2>/dev/null
  ip netns del "$ns" 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT INT TERM

CGO_ENABLED=0 go build -o "$tmp/netdoctor" ./cmd/netdoctor
go build -o "$tmp/sockfill" ./bench/sockfill

# fill N: a fresh namespace holding N ESTABLISHED sockets.
fill() {
  exec 9>&- 2>/dev/null || true
  if [ -n "$fill_pid" ]; then kill "$fill_pid" 2>/dev/null; wait "$fill_pid" 2>/dev/null || true; fi
  ip netns del "$ns" 2>/dev/null || true
  ip netns add "$ns"
  ip -n "$ns" link set lo up
  ip netns exec "$ns" sysctl -qw net.ipv4.ip_local_port_range="1024 65535"
  rm -f "$tmp/hold"; mkfifo "$tmp/hold"
  ip netns exec "$ns" "$tmp/sockfill" -sockets "$1" < "$tmp/hold" > "$tmp/fill.out" &
  fill_pid=$!
  exec 9>"$tmp/hold"
  for _ in $(seq 120); do grep -q ready "$tmp/fill.out" 2>/dev/null && break; sleep 0.5; done
  grep -q ready "$tmp/fill.out" || { echo "bench: sockfill did not get ready" >&2; exit 1; }
  echo "socket table: $(nsenter --net=/run/netns/$ns ss -s | sed -n 2p)"
}

# cpu PID: user+system seconds of a live process.
cpu() { awk -v hz="$hz" '{printf "%.3f", ($14+$15)/hz}' "/proc/$1/stat"; }

# steady PID SECONDS: the process's CPU from 5 s after its start to
# SECONDS later; the first 5 s in $tmp/start.
steady() {
  sleep 5
  local a b
  a=$(cpu "$1"); echo "$a" > "$tmp/start"
  sleep "$2"
  b=$(cpu "$1")
  awk -v a="$a" -v b="$b" 'BEGIN{printf "%.3f", b-a}'
}

# agent SECONDS [FLAGS]: the agent's steady CPU over SECONDS; its RSS in
# $tmp/rss.
agent() {
  local s=$1; shift
  "$tmp/netdoctor" agent --netns "$ns" --listen 127.0.0.1:0 --dns-every 0 "$@" 2>/dev/null &
  local pid=$!
  steady "$pid" "$s"
  awk '/^VmRSS/ {print $2}' "/proc/$pid/status" > "$tmp/rss"
  kill -TERM "$pid"; wait "$pid" || true
}

# sampler SECONDS: the steady CPU of run's sampler, collect at 1 Hz.
sampler() {
  "$tmp/netdoctor" collect --netns "$ns" --window "$(( $1 + 10 ))s" --no-dns -o /dev/null 2>/dev/null &
  local pid=$!
  steady "$pid" "$1"
  kill -TERM "$pid"; wait "$pid" || true
}

pct() { awk -v c="$1" -v s="$secs" 'BEGIN{printf "%.2f", 100*c/s}'; }

ratio() { awk -v a="$1" -v c="$2" 'BEGIN{printf "%.2f", a/c}'; }

for n in 10000 100000; do
  fill "$n"
  echo "1 Hz for ${secs}s, $rounds alternated rounds, CPU as % of one core:"
  for r in $(seq "$rounds"); do
    a=$(agent "$secs"); a0=$(cat "$tmp/start")
    c=$(sampler "$secs"); c0=$(cat "$tmp/start")
    echo "  $n sockets, round $r: agent $(pct "$a")%  sampler $(pct "$c")%  ratio $(ratio "$a" "$c")   (first 5 s: agent ${a0}s, sampler ${c0}s CPU)"
  done
  # Dependency tracing: off, the default burst (3 s every 15 s), and
  # back to back (3 s every 3 s: every listening server's connections
  # looked at every 100 ms all the time, as run does for its target
  # during a load). sockfill's processes own a listener each and hold
  # the namespace's sockets: the tracer walks every descriptor of each.
  echo "dependency tracing, ${secs}s, $rounds alternated rounds, CPU as % of one core:"
  for r in $(seq "$rounds"); do
    o=$(agent "$secs" --dependency-every 0)
    d=$(agent "$secs")
    k=$(agent "$secs" --dependency-every 3s)
    echo "  $n sockets, round $r: off $(pct "$o")%  every 15 s $(pct "$d")% (ratio $(ratio "$d" "$o"))  continuous $(pct "$k")% (ratio $(ratio "$k" "$o"))"
  done
done

fill 10000
if [ "${MEMORY:-}" = real ]; then
  echo "memory: the agent for 15 min 30 s at 1 Hz, --retain 15m (900 snapshots held)"
  agent 930 >/dev/null
else
  echo "memory: the agent for 100 s at 100 ms, --retain 90s: 900 snapshots held, as 15 min at 1 Hz"
  agent 100 --interval 100ms --retain 90s --recent 3s >/dev/null
fi
echo "  resident: $(awk '{printf "%.1f MiB", $1/1024}' "$tmp/rss") with 10000 sockets"
