#!/usr/bin/env bash
# Snapshot benchmark: one full netdoctor snapshot versus `ss -s` plus
# `ss -ltn` on the same 100k TCP sockets, and the CPU cost of the 1 Hz
# sampler. Runs as root in a namespace of its own; removes it on exit.
#
#   bench/snapshot.sh [SOCKETS] [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/.."
sockets=${1:-100000}
rounds=${2:-10}
ns=ndbench-$$
export PATH="/usr/local/go/bin:$PATH"
[ "$(id -u)" -eq 0 ] || { echo "bench: needs root (namespaces)" >&2; exit 1; }

tmp=$(mktemp -d)
fill_pid=
cleanup() {
  set +e
  exec 9>&- 2>/dev/null
  if [ -n "$fill_pid" ]; then kill "$fill_pid" 2>/dev/null; wait "$fill_pid" 2>/dev/null; fi
  ip netns del "$ns" 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT INT TERM

CGO_ENABLED=0 go build -o "$tmp/netdoctor" ./cmd/netdoctor
go build -o "$tmp/sockfill" ./bench/sockfill
go test -c -o "$tmp/collect.test" ./internal/collect

ip netns add "$ns"
ip -n "$ns" link set lo up
ip netns exec "$ns" sysctl -qw net.ipv4.ip_local_port_range="1024 65535"
mkfifo "$tmp/hold"
ip netns exec "$ns" "$tmp/sockfill" -sockets "$sockets" < "$tmp/hold" > "$tmp/fill.out" &
fill_pid=$!
exec 9>"$tmp/hold"   # keeps sockfill's stdin open until we exit
for _ in $(seq 120); do grep -q ready "$tmp/fill.out" 2>/dev/null && break; sleep 0.5; done
grep -q ready "$tmp/fill.out" || { echo "bench: sockfill did not get ready" >&2; exit 1; }
echo "socket table: $(nsenter --net=/run/netns/$ns ss -s | sed -n 2p)"

ms() { # ms CMD...: wall time of one run in milliseconds
  local s e
  s=$(date +%s%N); "$@" >/dev/null 2>&1; e=$(date +%s%N)
  echo $(( (e - s) / 1000 ))
}
median() { sort -n | awk '{a[NR]=$1} END {m=(NR%2)?a[(NR+1)/2]:(a[NR/2]+a[NR/2+1])/2; printf "%.1f", m/1000}'; }

ss_both() { nsenter --net=/run/netns/$ns ss -s && nsenter --net=/run/netns/$ns ss -ltn; }
nd_once() { "$tmp/netdoctor" collect --netns "$ns" --window 0 --no-dns -o /dev/null; }
: > "$tmp/ss"; : > "$tmp/nd"
for _ in $(seq "$rounds"); do   # alternate, so machine noise hits both alike
  ms ss_both >> "$tmp/ss"
  ms nd_once >> "$tmp/nd"
done
ss_ms=$(median < "$tmp/ss"); nd_ms=$(median < "$tmp/nd")
echo "one-shot, whole process, median of $rounds alternated runs:"
echo "  ss -s + ss -ltn:                         $ss_ms ms"
echo "  netdoctor collect --window 0 (1 snapshot): $nd_ms ms   (ratio $(awk "BEGIN{printf \"%.2f\", $nd_ms/$ss_ms}"))"

echo "steady-state snapshot (the sampler's, after owners are cached):"
NETDOCTOR_BENCH_NETNS=$ns "$tmp/collect.test" -test.run='^$' -test.bench=Snapshot -test.benchtime=20x | grep Benchmark

secs=20
/usr/bin/env time -f "%U %S" -o "$tmp/time" "$tmp/netdoctor" collect --netns "$ns" --window ${secs}s --no-dns -o /dev/null 2>/dev/null
read -r u s < "$tmp/time"
echo "1 Hz sampler for ${secs}s: user ${u}s sys ${s}s = $(awk "BEGIN{printf \"%.2f\", 100*($u+$s)/$secs}")% of one core"
