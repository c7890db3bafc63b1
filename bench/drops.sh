#!/usr/bin/env bash
# The drop monitor's cost (bench/README.md, "Drop monitor"), as root:
#   bench/drops.sh [RUNS]
# 1. per drop: a datagram to a port nothing listens on, dropped by the
#    kernel (NO_SOCKET), with nothing on skb:kfree_skb, with netdoctor's
#    monitor, and with bpftrace counting by reason (the reference), RUNS
#    times each, alternating; medians of the sender's ns/op and of the
#    attached program's own run time per drop (BPF_ENABLE_STATS);
# 2. sustained: 100 000 drops a second for 5 s, monitor and bpftrace: the
#    CPU their programs took, and what reading the monitor's counts once a
#    second took;
# 3. what a snapshot pays to read the counts, at idle and with the ledger
#    full; and one search of the conntrack tables for flows not seen yet.
# With BEFORE=path/to/dropmon.test (another version's test binary, built
# with `go test -c ./internal/dropmon` from its checkout), that version's
# monitor is measured too, in turn with this one: before/after.
# bpftrace's tracepoints need tracefs: mounted for the run when it is not,
# and unmounted after. Drops happen in a namespace of the benchmark's own.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/go/bin:$PATH"
runs=${1:-5}
[ "$(id -u)" -eq 0 ] || { echo "bench/drops.sh: needs root" >&2; exit 1; }
mounted=0
if ! mountpoint -q /sys/kernel/tracing; then
  mount -t tracefs nodev /sys/kernel/tracing
  mounted=1
fi
bin=$(mktemp -d)
cleanup() {
  rm -rf "$bin"
  if [ "$mounted" -eq 1 ]; then umount /sys/kernel/tracing; fi
}
trap cleanup EXIT
go test -c -o "$bin/dropmon.test" ./internal/dropmon
before=${BEFORE:-}
for _ in $(seq "$runs"); do
  for m in none dropmon bpftrace; do
    "$bin/dropmon.test" -test.run '^$' -test.bench "^BenchmarkDrop\$/^$m\$" -test.count 1 | grep '^BenchmarkDrop' || true
    if [ -n "$before" ] && [ "$m" = dropmon ]; then
      "$before" -test.run '^$' -test.bench '^BenchmarkDrop$/^dropmon$' -test.count 1 | grep '^BenchmarkDrop' |
        sed 's|^BenchmarkDrop/dropmon|BenchmarkDrop/dropmon-before|' || true
    fi
  done
done | awk '
  { name=$1; ns[name]=ns[name] " " $3; if ($6 == "bpf-ns/drop") bpf[name]=bpf[name] " " $5 }
  function median(s,   a, n, i, j, t) {
    n = split(s, a, " ")
    for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
    return n ? (n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2) : "-"
  }
  END {
    printf "%-30s %12s %14s\n", "per drop (median of runs)", "ns/op", "bpf-ns/drop"
    for (k in ns) printf "%-30s %12s %14s\n", k, median(ns[k]), median(bpf[k])
  }'
"$bin/dropmon.test" -test.run '^$' -test.bench '^BenchmarkSustained$' -test.benchtime 5x | grep '^BenchmarkSustained' || true
if [ -n "$before" ]; then
  "$before" -test.run '^$' -test.bench '^BenchmarkSustained$/^dropmon$' -test.benchtime 5x | grep '^BenchmarkSustained' |
    sed 's|^BenchmarkSustained/dropmon|BenchmarkSustained/dropmon-before|' || true
  "$before" -test.run '^$' -test.bench '^BenchmarkNamespace$' -test.count 3 | grep '^BenchmarkNamespace' |
    sed 's|^BenchmarkNamespace|BenchmarkNamespace-before|' || true
fi
"$bin/dropmon.test" -test.run '^$' -test.bench '^BenchmarkNamespace$' -test.count 3 | grep '^BenchmarkNamespace' || true
"$bin/dropmon.test" -test.run '^$' -test.bench '^BenchmarkJoin$' -test.count 3 | grep '^BenchmarkJoin' || true
