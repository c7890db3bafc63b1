package rules

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/netdoctor/netdoctor/internal/evidence"
	"github.com/netdoctor/netdoctor/internal/report"
)

// Rates in bytes per second.
const (
	mbit10 = 1_250_000
	mbit5  = 625_000
	mbit2  = 250_000
)

// timeline returns a bundle of n+1 healthy snapshots one second apart,
// after step has changed each: step(k, s) for snapshot k = 0…n.
func timeline(n int, step func(k int, s *evidence.Snapshot)) *evidence.Bundle {
	b := single(nil)
	b.Snapshots = nil
	for k := 0; k <= n; k++ {
		s := healthy(t0.Add(time.Duration(k) * time.Second))
		if step != nil {
			step(k, &s)
		}
		b.Snapshots = append(b.Snapshots, s)
	}
	return b
}

// during is how many of the seconds from-to (half-open) had passed at
// snapshot k: multiplied by a rate it gives a cumulative counter of a load
// that ran from second from to second to.
func during(k, from, to int) uint64 {
	return uint64(max(0, min(k, to)-from))
}

// veth0 returns a change that adds a veth with the given qdiscs, each
// copied so snapshots do not share them.
func veth0(s *evidence.Snapshot, qs ...evidence.Qdisc) *evidence.Interface {
	s.Interfaces = append(s.Interfaces, evidence.Interface{Name: "veth0", OperState: "up", MTU: 1500,
		SpeedMbps: 10000, LinkKind: "veth", Qdisc: qs[0].Kind, Qdiscs: slices.Clone(qs),
		RxBytes: 5e6, RxPackets: 5e4, TxBytes: 7e6, TxPackets: 6e4})
	return &s.Interfaces[len(s.Interfaces)-1]
}

// tbf10 is `tc qdisc add dev veth0 root handle 1: tbf rate 10mbit burst
// 32kbit latency 50ms` as the collector reads it.
var tbf10 = evidence.Qdisc{Kind: "tbf", Handle: "1:", Parent: "root", RateBytesPerSec: mbit10, BurstBytes: 4000, LimitBytes: 66500,
	Bytes: 1e6, Packets: 1000}

// shaped returns a step for a veth0 behind tbf10 that sends perSec bytes
// per second from second from to second to, while its tbf drops dropsPerSec
// packets and holds backlog bytes.
func shaped(from, to int, perSec, dropsPerSec, backlog uint64) func(int, *evidence.Snapshot) {
	return func(k int, s *evidence.Snapshot) {
		v := veth0(s, tbf10)
		n := during(k, from, to)
		v.TxBytes += n * perSec
		v.TxPackets += n * perSec / 1514
		q := &v.Qdiscs[0]
		q.Bytes += n * perSec
		q.Packets += n * perSec / 1514
		q.Drops += n * dropsPerSec
		q.Overlimits += n * 710
		if k > from && k <= to {
			q.BacklogBytes, q.Qlen = backlog, backlog/1514
		}
	}
}

// linkLoad returns a step for eth0 as a 1 Gbit/s NIC that sends and
// receives the given bytes per second from second from to second to.
func linkLoad(from, to int, tx, rx uint64) func(int, *evidence.Snapshot) {
	return func(k int, s *evidence.Snapshot) {
		iface("eth0", func(i *evidence.Interface) {
			i.SpeedMbps, i.LinkKind = 1000, "device"
			i.Qdiscs = []evidence.Qdisc{{Kind: "fq_codel", Handle: "0:", Parent: "root", Bytes: i.TxBytes, Packets: i.TxPackets}}
			n := during(k, from, to)
			i.TxBytes += n * tx
			i.RxBytes += n * rx
			i.Qdiscs[0].Bytes += n * tx
		})(s)
	}
}

// htbTree is `tc qdisc add dev veth0 root handle 1: htb default 20` with
// class 1:1 (rate and ceil 10mbit) holding 1:10 (rate 2mbit, ceil 5mbit)
// and 1:20 (rate 5mbit, ceil 10mbit), each with a leaf fq_codel.
func htbTree() []evidence.Qdisc {
	return []evidence.Qdisc{
		{Kind: "htb", Handle: "1:", Parent: "root"},
		{Class: true, Kind: "htb", Handle: "1:1", Parent: "root", RateBytesPerSec: mbit10, CeilBytesPerSec: mbit10},
		{Class: true, Kind: "htb", Handle: "1:10", Parent: "1:1", RateBytesPerSec: mbit2, CeilBytesPerSec: mbit5},
		{Class: true, Kind: "htb", Handle: "1:20", Parent: "1:1", RateBytesPerSec: mbit5, CeilBytesPerSec: mbit10},
	}
}

// htbLoad returns a step for veth0 behind htbTree where class 1:10 carries
// a and 1:20 carries c bytes per second from second from to second to;
// class 1:20 drops drops20 packets per second.
func htbLoad(from, to int, a, c, drops20 uint64) func(int, *evidence.Snapshot) {
	return func(k int, s *evidence.Snapshot) {
		v := veth0(s, htbTree()...)
		n := during(k, from, to)
		v.TxBytes += n * (a + c)
		v.Qdiscs[0].Bytes += n * (a + c)
		v.Qdiscs[0].Drops += n * drops20
		v.Qdiscs[1].Bytes += n * (a + c)
		v.Qdiscs[2].Bytes += n * a
		v.Qdiscs[3].Bytes += n * c
		v.Qdiscs[3].Drops += n * drops20
	}
}

func bandwidthCases() []ruleCase {
	return []ruleCase{
		{
			name:   "healthy",
			bundle: timeline(10, nil),
		},
		{
			name:   "tbf idle: a shaper alone is no fault",
			bundle: timeline(10, shaped(0, 0, 0, 0, 0)),
		},
		{
			name:   "tbf at its rate with drops",
			bundle: timeline(10, shaped(1, 9, 1_200_000, 154, 45<<10)),
			want: []want{{ID: "bandwidth-saturated", Status: report.Active, Severity: report.Critical, Subject: "veth0", Evidence: []string{
				"veth0 sent 9.6 Mbit/s for 8s = 96% of its tbf rate 10 Mbit/s (peak 9.6 Mbit/s; 7.68 Mbit/s averaged over 10s)",
				"qdisc tbf 1: dropped +1232, overlimits +5680, backlog peaked 45 KiB",
				"qdisc tbf 1: (parent root) on veth0: rate 10 Mbit/s, burst 3.91 KiB, limit 64.9 KiB",
			}}},
		},
		{
			name:   "tbf at its rate, no drops, no queue",
			bundle: timeline(6, shaped(0, 6, 1_150_000, 0, 0)),
			want: []want{{ID: "bandwidth-saturated", Status: report.Active, Severity: report.Warning, Subject: "veth0", Evidence: []string{
				"veth0 sent 9.2 Mbit/s for 6s = 92% of its tbf rate 10 Mbit/s (peak 9.2 Mbit/s)",
				"qdisc tbf 1: dropped +0, overlimits +4260, backlog peaked 0 B",
			}}},
		},
		{
			name:   "tbf with a standing queue and no drops",
			bundle: timeline(6, shaped(0, 6, 1_240_000, 0, 30000)),
			want: []want{{ID: "bandwidth-saturated", Status: report.Active, Severity: report.Critical, Subject: "veth0", Evidence: []string{
				"backlog peaked 29.3 KiB; packets were queued in 6 of 7 samples while saturated",
			}}},
		},
		{
			name:   "brief burst at the rate",
			bundle: timeline(10, shaped(4, 6, 1_250_000, 300, 60000)),
		},
		{
			name:   "tbf far below its rate",
			bundle: timeline(10, shaped(0, 10, 250_000, 0, 0)),
		},
		{
			name:   "just under 90%",
			bundle: timeline(10, shaped(0, 10, 1_120_000, 0, 0)),
		},
		{
			name:   "tiny shaper, too few bytes to judge",
			bundle: timeline(4, tinyShaper),
		},
		{
			name:   "link speed saturated without a shaper",
			bundle: timeline(8, linkLoad(2, 7, 120_000_000, 2_000_000)),
			want: []want{{ID: "bandwidth-saturated", Status: report.Active, Severity: report.Warning, Subject: "eth0", Evidence: []string{
				"eth0 sent 960 Mbit/s for 5s = 96% of its link speed 1 Gbit/s",
				"qdisc fq_codel 0: dropped +0",
				"eth0 link speed 1000 Mb/s",
			}}},
		},
		{
			name:   "link speed saturated on receive",
			bundle: timeline(8, linkLoad(0, 8, 1_000_000, 118_000_000)),
			want: []want{{ID: "bandwidth-saturated", Status: report.Active, Severity: report.Warning, Subject: "eth0", Evidence: []string{
				"eth0 received 944 Mbit/s for 8s = 94% of its link speed 1 Gbit/s",
			}}},
		},
		{
			name: "lo has no speed",
			bundle: timeline(8, func(k int, s *evidence.Snapshot) {
				iface("lo", func(i *evidence.Interface) { i.TxBytes += uint64(k) * 4e9; i.RxBytes += uint64(k) * 4e9 })(s)
			}),
		},
		{
			name: "veth at its nominal speed",
			bundle: timeline(8, func(k int, s *evidence.Snapshot) {
				v := veth0(s, evidence.Qdisc{Kind: "noqueue", Handle: "0:", Parent: "root"})
				v.TxBytes += uint64(k) * 1_240_000_000
			}),
		},
		{
			name: "a link faster than its reported speed is not held to it",
			bundle: timeline(8, func(k int, s *evidence.Snapshot) {
				iface("eth0", func(i *evidence.Interface) {
					i.SpeedMbps, i.LinkKind = 10, "" // a bundle from before link kinds, tun-like speed
					i.TxBytes += uint64(k) * 1_200_000
					if k == 4 {
						i.TxBytes += 5_000_000
					}
				})(s)
			}),
		},
		{
			name:   "htb leaf class at its ceil",
			bundle: timeline(8, htbLoad(1, 7, 612_000, 125_000, 90)), // the drops are 1:20's
			want: []want{{ID: "bandwidth-saturated", Status: report.Active, Severity: report.Warning, Subject: "veth0", Evidence: []string{
				"veth0 class 1:10 sent 4.9 Mbit/s for 6s = 98% of its htb class 1:10 ceil 5 Mbit/s",
				"htb class 1:10 dropped +0",
				"htb class 1:10 (parent 1:1) on veth0: rate 2 Mbit/s, ceil 5 Mbit/s",
			}}},
		},
		{
			name:   "htb parent class at its ceil, its children below theirs",
			bundle: timeline(8, htbLoad(0, 8, 375_000, 825_000, 20)),
			want: []want{{ID: "bandwidth-saturated", Status: report.Active, Severity: report.Critical, Subject: "veth0", Evidence: []string{
				"veth0 class 1:1 sent 9.6 Mbit/s for 8s = 96% of its htb class 1:1 ceil 10 Mbit/s",
				"htb class 1:1 dropped +160",
			}}},
		},
		{
			name:   "htb classes below their ceilings",
			bundle: timeline(8, htbLoad(0, 8, 250_000, 500_000, 0)),
		},
		{
			name:   "check's two snapshots 5 s apart",
			bundle: twoSnapshots(5*time.Second, shaped(0, 5, 1_230_000, 40, 0)),
			want: []want{{ID: "bandwidth-saturated", Status: report.Active, Severity: report.Critical, Subject: "veth0", Evidence: []string{
				"veth0 sent 9.84 Mbit/s for 5s = 98% of its tbf rate 10 Mbit/s",
				"qdisc tbf 1: dropped +200",
			}}},
		},
		{
			name:   "one snapshot",
			bundle: single(func(s *evidence.Snapshot) { shaped(0, 1, 1_250_000, 10, 0)(1, s) }),
		},
		{
			name: "qdisc replaced in the window: its counters restart",
			bundle: timeline(6, func(k int, s *evidence.Snapshot) {
				shaped(0, 6, 1_200_000, 50, 0)(k, s)
				if k >= 3 {
					q := &s.Interfaces[len(s.Interfaces)-1].Qdiscs[0]
					q.Bytes -= 1e6 + 3*1_200_000
					q.Drops = 0
				}
			}),
			want: []want{{ID: "bandwidth-saturated", Status: report.Active, Severity: report.Warning, Subject: "veth0", Evidence: []string{
				"veth0 sent 9.6 Mbit/s for 6s",
				"qdisc tbf 1: dropped +0",
			}}},
		},
	}
}

// tinyShaper is a 100 kbit/s tbf that is full for 4 s: 48 kB in all.
func tinyShaper(k int, s *evidence.Snapshot) {
	tiny := tbf10
	tiny.RateBytesPerSec = 12_500
	v := veth0(s, tiny)
	v.TxBytes += uint64(k) * 12_000
	v.Qdiscs[0].Drops += uint64(k) * 5
}

func TestCheckBandwidth(t *testing.T) {
	runCases(t, "checkBandwidth", checkBandwidth, bandwidthCases())
}

// twoSnapshots is a bundle of snapshot 0 and snapshot n of step, dt apart,
// as `netdoctor check` takes them.
func twoSnapshots(dt time.Duration, step func(int, *evidence.Snapshot)) *evidence.Bundle {
	n := int(dt / time.Second)
	b := timeline(n, step)
	b.Snapshots = []evidence.Snapshot{b.Snapshots[0], b.Snapshots[n]}
	return b
}

// TestBandwidthTwoSnapshotsOneSecond: with only two snapshots 1 s apart
// (the rules tests' usual bundle) nothing can be saturated for 3 s.
func TestBandwidthTwoSnapshotsOneSecond(t *testing.T) {
	if got := checkBandwidth(on(twoSnapshots(time.Second, shaped(0, 1, 1_250_000, 500, 60000)))); len(got) != 0 {
		t.Errorf("checkBandwidth(on()) over 1 s = %v, want nothing", keys(got))
	}
}

// TestBandwidthFindingsShape checks what every firing case must have:
// window evidence, a static item naming the limit, a fix that says what
// to change and how to confirm it, and no latent finding anywhere.
func TestBandwidthFindingsShape(t *testing.T) {
	firing := 0
	for _, tc := range bandwidthCases() {
		for _, f := range checkBandwidth(on(tc.bundle)) {
			firing++
			if f.Status != report.Active {
				t.Errorf("%s: %s finding, want active only", tc.name, f.Status)
			}
			if !slices.ContainsFunc(f.Evidence, func(it report.Item) bool { return it.Window }) {
				t.Errorf("%s: no window evidence: %+v", tc.name, f.Evidence)
			}
			if !slices.ContainsFunc(f.Evidence, func(it report.Item) bool { return !it.Window }) {
				t.Errorf("%s: no static item naming the limit: %+v", tc.name, f.Evidence)
			}
			if !hasFix(f, "ip -s link show dev "+f.Subject) || (strings.Contains(f.Title, " sent ") && !hasFix(f, "tc -s qdisc show dev "+f.Subject)) {
				t.Errorf("%s: fix does not say how to confirm: %q", tc.name, fixOf(f))
			}
		}
	}
	if firing < 5 {
		t.Errorf("only %d findings across the cases", firing)
	}
}

func TestBandwidthFix(t *testing.T) {
	tests := []struct {
		name string
		b    *evidence.Bundle
		want []string
	}{
		{"tbf", timeline(6, shaped(0, 6, 1_240_000, 10, 0)), []string{
			"`tc qdisc change dev veth0 root tbf rate 20mbit burst 10000 limit 66500`",
			"`tc qdisc del dev veth0 root`",
			"`tc -s qdisc show dev veth0`",
		}},
		{"tbf in a namespace", inNetNS(timeline(6, shaped(0, 6, 1_240_000, 10, 0)), "srv"), []string{
			"`ip netns exec srv tc qdisc change dev veth0 root tbf rate 20mbit",
			"`ip netns exec srv tc -s qdisc show dev veth0`",
			"`ip netns exec srv ip -s link show dev veth0`",
		}},
		{"tbf in a namespace given by path", inNetNS(timeline(6, shaped(0, 6, 1_240_000, 10, 0)), "/proc/42/ns/net"), []string{
			"`nsenter --net=/proc/42/ns/net tc qdisc del dev veth0 root`",
		}},
		{"htb", timeline(8, htbLoad(1, 7, 612_000, 125_000, 0)), []string{
			"`tc class change dev veth0 parent 1:1 classid 1:10 htb rate 2mbit ceil 10mbit`",
		}},
		{"htb top class", timeline(8, htbLoad(0, 8, 375_000, 825_000, 0)), []string{
			"`tc class change dev veth0 parent 1: classid 1:1 htb rate 10mbit ceil 20mbit`",
		}},
		{"link", timeline(8, linkLoad(2, 7, 120_000_000, 0)), []string{
			"a faster link",
			"compress",
			"cache",
		}},
	}
	for _, tt := range tests {
		got := checkBandwidth(on(tt.b))
		if len(got) != 1 {
			t.Fatalf("%s: checkBandwidth(on()) = %v, want one finding", tt.name, keys(got))
		}
		for _, w := range tt.want {
			if !hasFix(got[0], w) {
				t.Errorf("%s: no fix line contains %q:\n%s", tt.name, w, strings.Join(fixOf(got[0]), "\n"))
			}
		}
	}
}

// TestBandwidthInRun checks the rule is in the registry and its finding sorts with
// the others.
func TestBandwidthInRun(t *testing.T) {
	b := timeline(10, shaped(1, 9, 1_200_000, 154, 45<<10))
	got := Check(b)
	if !slices.ContainsFunc(got, func(f report.Finding) bool { return f.ID == "bandwidth-saturated" && f.Subject == "veth0" }) {
		t.Errorf("Run() = %v, want bandwidth-saturated on veth0", keys(got))
	}
	checkOrder(t, got)
	for _, f := range Check(timeline(10, nil)) {
		if f.ID == "bandwidth-saturated" {
			t.Errorf("Run() on a healthy timeline: %v", f)
		}
	}
}

func TestBandwidthFormats(t *testing.T) {
	for in, want := range map[float64]string{
		1_250_000: "10 Mbit/s", 1_200_000: "9.6 Mbit/s", 120_000_000: "960 Mbit/s", 125_000_000: "1 Gbit/s",
		1_234_567: "9.88 Mbit/s", 12_500: "100 kbit/s", 100: "800 bit/s", 0: "0 bit/s", 124_990_000: "1000 Mbit/s",
	} {
		if got := bitrate(in); got != want {
			t.Errorf("bitrate(%v) = %q, want %q", in, got, want)
		}
	}
	for in, want := range map[uint64]string{0: "0 B", 900: "900 B", 45 << 10: "45 KiB", 4000: "3.91 KiB", 3 << 19: "1.5 MiB"} {
		if got := byteSize(in); got != want {
			t.Errorf("byteSize(%d) = %q, want %q", in, got, want)
		}
	}
	for in, want := range map[uint64]string{2_500_000: "20mbit", 250_000_000: "2gbit", 12_500: "100kbit", 1_234_567: "9877kbit", 100: "800bit"} {
		if got := tcRate(in); got != want {
			t.Errorf("tcRate(%d) = %q, want %q", in, got, want)
		}
	}
}

func TestSubtree(t *testing.T) {
	ifc := &evidence.Interface{Qdiscs: append(htbTree(),
		evidence.Qdisc{Class: true, Kind: "htb", Handle: "1:11", Parent: "1:10"},
		evidence.Qdisc{Class: true, Kind: "htb", Handle: "2:1", Parent: "2:2"}, // a loop must not hang
		evidence.Qdisc{Class: true, Kind: "htb", Handle: "2:2", Parent: "2:1"},
	)}
	got := subtree(ifc, "1:10")
	want := map[qkey]bool{{true, "1:10"}: true, {true, "1:11"}: true}
	if len(got) != len(want) || !got[qkey{true, "1:10"}] || !got[qkey{true, "1:11"}] {
		t.Errorf("subtree(1:10) = %v, want %v", got, want)
	}
	if got := subtree(ifc, "1:1"); len(got) != 4 {
		t.Errorf("subtree(1:1) = %v, want 1:1, 1:10, 1:11, 1:20", got)
	}
}
