#!/usr/bin/env bash
# The TCP layer test against iperf3: `netdoctor load tcp://…` (client) and
# `netdoctor agent --test-endpoint` (server) beside `iperf3 -c` and
# `iperf3 -s`, across a veth pair between two namespaces of their own,
# unshaped and then through a tbf of RATE on the server's side (it
# shapes down, server to client; up stays unshaped). Every
# client runs on CPU 0, every server on CPU 1 (where the scheduler puts
# sender and receiver moves either tool by up to a third). The tools
# alternate, RUNS runs of SECONDS each direction; it prints each run and
# the medians of bits per second up (client to server) and down, and the
# ratios netdoctor/iperf3. Runs as root; removes the namespaces on exit.
#
#   bench/layer.sh [SECONDS] [RUNS] [RATE]   # default 5 s, 3 runs, 100mbit
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-5}
runs=${2:-3}
rate=${3:-100mbit}
export PATH="/usr/local/go/bin:$PATH:/usr/sbin:/sbin"

die() { echo "layer: $*" >&2; exit 1; }
[[ $secs =~ ^[1-9][0-9]*$ ]] || die "SECONDS must be a whole number of seconds, got '$secs'"
[[ $runs =~ ^[1-9][0-9]*$ ]] || die "RUNS must be a positive number, got '$runs'"
[[ $rate =~ ^[1-9][0-9]*[kmg]bit$ ]] || die "RATE must be like 100mbit, got '$rate'"
[ "$(id -u)" -eq 0 ] || die "needs root (namespaces)"
for t in iperf3 taskset python3 go; do
  command -v "$t" >/dev/null || die "$t not found: run scripts/deps.sh lab"
done
{ taskset -c 0 true && taskset -c 1 true; } 2>/dev/null || die "needs CPUs 0 and 1"

c=ndlc-$$ s=ndls-$$
tmp=$(mktemp -d)
pids=()
cleanup() {
  set +e
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
  wait 2>/dev/null
  ip netns del "$c" 2>/dev/null
  ip netns del "$s" 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT INT TERM
CGO_ENABLED=0 go build -trimpath -o "$tmp/netdoctor" ./cmd/netdoctor
head -c 32 /dev/urandom | base64 >"$tmp/token"
chmod 600 "$tmp/token"
ip netns add "$c"
ip netns add "$s"
ip link add ndl0 netns "$c" type veth peer name ndl1 netns "$s"
ip -n "$c" addr add 10.251.0.1/24 dev ndl0
ip -n "$s" addr add 10.251.0.2/24 dev ndl1
for n in "$c" "$s"; do ip -n "$n" link set lo up; done
ip -n "$c" link set ndl0 up
ip -n "$s" link set ndl1 up
ip netns exec "$s" taskset -c 1 iperf3 -s -p 5201 >/dev/null 2>&1 & pids+=($!)
ip netns exec "$s" taskset -c 1 "$tmp/netdoctor" agent --token-file "$tmp/token" --listen 127.0.0.1:0 \
  --test-endpoint 10.251.0.2:9121 >/dev/null 2>&1 & pids+=($!)
for port in 5201 9121; do
  for _ in $(seq 100); do
    ip netns exec "$c" bash -c "exec 3<>/dev/tcp/10.251.0.2/$port" 2>/dev/null && break
    sleep 0.1
  done
done

# nd prints netdoctor's up and down bits/s; ip3 iperf3's receiver's, each
# direction a run of its own (-R for down).
nd() {
  ip netns exec "$c" taskset -c 0 "$tmp/netdoctor" load -d "${secs}s" --token-file "$tmp/token" --json - tcp://10.251.0.2:9121 2>/dev/null |
    python3 -c 'import json,sys; t=json.load(sys.stdin)["tcp"]; print(t[0]["bits_per_second"], t[1]["bits_per_second"])'
}
ip3() {
  local up down
  up=$(ip netns exec "$c" taskset -c 0 iperf3 -c 10.251.0.2 -p 5201 -t "$secs" -J |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["end"]["sum_received"]["bits_per_second"])')
  down=$(ip netns exec "$c" taskset -c 0 iperf3 -c 10.251.0.2 -p 5201 -t "$secs" -R -J |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["end"]["sum_received"]["bits_per_second"])')
  echo "$up $down"
}
median() { sort -g | awk '{v[NR]=$1} END{print (NR%2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'; }
mbit() { awk '{printf "%.0f", $1/1e6}'; }

for shape in none "$rate"; do
  [ "$shape" = none ] || ip netns exec "$s" tc qdisc replace dev ndl1 root tbf rate "$shape" burst 32kbit latency 50ms
  : >"$tmp/nd" ; : >"$tmp/ip3"
  for run in $(seq "$runs"); do
    a=$(nd); echo "$a" >>"$tmp/nd"
    b=$(ip3); echo "$b" >>"$tmp/ip3"
    echo "shaper $shape run $run: netdoctor up $(echo "${a% *}" | mbit) down $(echo "${a#* }" | mbit), iperf3 up $(echo "${b% *}" | mbit) down $(echo "${b#* }" | mbit) Mbit/s"
  done
  ndu=$(cut -d' ' -f1 "$tmp/nd" | median) ndd=$(cut -d' ' -f2 "$tmp/nd" | median)
  ipu=$(cut -d' ' -f1 "$tmp/ip3" | median) ipd=$(cut -d' ' -f2 "$tmp/ip3" | median)
  awk -v s="$shape" -v a="$ndu" -v b="$ndd" -v x="$ipu" -v y="$ipd" 'BEGIN{
    printf "shaper %s medians: up netdoctor %.0f iperf3 %.0f Mbit/s (ratio %.2f), down netdoctor %.0f iperf3 %.0f Mbit/s (ratio %.2f)\n",
      s, a/1e6, x/1e6, a/x, b/1e6, y/1e6, b/y}'
done
