package rules

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/netdoctor/netdoctor/internal/evidence"
	"github.com/netdoctor/netdoctor/internal/netns"
	"github.com/netdoctor/netdoctor/internal/report"
)

// BandwidthSaturated: a link or a shaper is full.
const BandwidthSaturated report.FindingID = "bandwidth-saturated"

var _ = define(Class{ID: BandwidthSaturated,
	DropReasons: []string{"QDISC_DROP"}, OnItsLink: true, PathFault: true, Resource: "bandwidth",
	Critical: true,
	Errors:   true, Delays: true, Latency: true,
	Meaning:    "a link or shaper is at its rate; queues add latency and drop",
	Active:     "for ≥ 3 s of the window, an interface sent at ≥ 90 % of a tbf rate or an htb class's ceil, or sent or received at ≥ 90 % of its link speed (warning); critical when the queue in front of it dropped or held a standing backlog",
	LatentWhen: "none",
	Seed:       "001 §1 (`%ifutil`)",
	ReportedBy: "`check`, `diagnose`",
	Doc: `Rule ´bandwidth´ (´bandwidth.go´, ´checkBandwidth´). It needs two snapshots and reads, per interface, the
´/proc/net/dev´ byte counters, the link speed and kind, and the egress qdiscs and htb classes with their
counters (´Interface.Qdiscs´, read over rtnetlink like ´tc -s qdisc´ and ´tc -s class´). A shaper on its
own is no fault, so there is no latent finding.

- The limits of an interface, as configured in the last snapshot, are:
  - a tbf's rate. At the root it is measured against everything the interface sent (´tx_bytes´);
    a tbf further down against the bytes of that tbf;
  - each htb class's ceil, measured against the class's bytes (htb charges a packet to its class and
    every ancestor, so a parent class's bytes include its children's);
  - the link speed from ethtool, against ´tx_bytes´ and, separately, ´rx_bytes´. Speed 0 (unknown, as
    on ´lo´) has no limit. Neither has a link of kind ´veth´, ´tuntap´, ´dummy´ or ´ifb´, whose speed is
    a constant of the driver (veth says 10000 Mb/s), nor a link that moved more than 125 % of its speed
    in some interval (the speed is nominal).
- The rate is taken in each interval between consecutive snapshots, not over the whole window,
  because a load may fill only part of it. An interval counts as saturated at ≥ 90 % of the limit.
  TCP through a shaper settles at 95–100 % of its rate, and Ethernet counters leave out preamble, gap
  and FCS, so a full link with full-size frames reads about 98 %.
- **Active, warning** when the saturated intervals add up to at least 3 s and at least 64 KiB for some
  limit. One or two seconds at the rate are a burst, not saturation. With ´check´'s two snapshots 5 s
  apart, the one interval has to average ≥ 90 %.
- **Critical** when the queue in front of a saturated limit shows the harm: its drops rose in the
  window, or it held packets (backlog or qlen > 0) in at least half, and at least two, of the
  snapshots that bound the saturated intervals. That queue is the tbf itself, the htb class with its
  descendants, or, for the link speed, the root qdisc (received traffic has none).
- One finding per interface; the subject is the interface. Every saturated limit gets its items, the
  lowest rate first: ´veth0 sent 9.6 Mbit/s for 8s = 96% of its tbf rate 10 Mbit/s (peak 9.6 Mbit/s;
  7.68 Mbit/s averaged over 10s)´, with the mean over the saturated intervals, then ´qdisc tbf 1:
  dropped +1232, overlimits +5680, backlog peaked 45 KiB; packets were queued in 8 of 9 samples while
  saturated´, then the configuration as static evidence (´qdisc tbf 1: (parent root) on veth0: rate 10
  Mbit/s, burst 3.91 KiB, limit 64.9 KiB´, ´htb class 1:10 (parent 1:1) on veth0: rate 2 Mbit/s, ceil
  5 Mbit/s´, ´eth0 link speed 1000 Mb/s´).
- Fix, for the lowest saturated limit: a tbf, raised (´tc qdisc change dev veth0 root tbf rate 20mbit
  burst 10000 limit 66500´, twice the rate, keeping its limit) or removed (´tc qdisc del dev veth0
  root´); an htb class, a higher ceil (´tc class change dev veth0 parent 1:1 classid 1:10 htb rate 2mbit
  ceil 10mbit´) or other traffic moved out of it; the link, more capacity (a faster link, a bond).
  Always: send less (compression, caching of large responses, bulk traffic moved off the link). To
  confirm: ´tc -s qdisc show dev X´ and ´ip -s link show dev X´ while the load runs. Commands carry
  ´ip netns exec NS´ (or ´nsenter --net=PATH´) for another namespace.`,
})

var _ = register(Rule{Name: "bandwidth", Order: 130, Scope: PerSide, IDs: []report.FindingID{BandwidthSaturated}, Checks: "bandwidth and shapers", Check: checkBandwidth})

// Thresholds of bandwidth-saturated. A rate counts as saturated at 90 %
// of its limit: TCP through a shaper settles at 95–100 % of its rate, and
// Ethernet counters, which leave out preamble, gap and FCS, read about
// 98 % of line rate with full-size frames. Three seconds of it, summed
// over the sample intervals, tell a saturated link from a burst; the
// minimum of bytes keeps a few packets against a tiny nominal rate out.
const (
	saturatedShare    = 0.9
	minSaturated      = 3 * time.Second
	minSaturatedBytes = 64 << 10
	// A link that moved more than this share of its reported speed is not
	// held to it: the speed is nominal (virtual devices).
	nominalExcess = 1.25
)

// nominalSpeed lists link kinds whose reported speed is a constant of the
// driver, not a limit: veth reports 10000 Mb/s, tun/tap 10 Mb/s.
var nominalSpeed = map[string]bool{"veth": true, "tuntap": true, "tun": true, "dummy": true, "ifb": true}

// limit is one rate that traffic of an interface may be held to: a tbf
// rate, an htb class's ceiling or the link speed.
type limit struct {
	iface string
	dir   string // "sent" or "received"
	kind  string // "tbf", "htb" or "link"
	// conf is the shaper (nil for the link speed).
	conf        *evidence.Qdisc
	speedMbps   int
	bytesPerSec float64
	// bytes reads the cumulative bytes measured against the limit.
	bytes  func(i *evidence.Interface) (uint64, bool)
	source string
	// queue names the qdisc or classes in front of the limit whose drops
	// and backlog tell whether it hurt; label "" when there is none.
	queue queueRef
}

// queueRef selects qdiscs or classes of one interface and sums them.
type queueRef struct {
	label string
	keys  map[qkey]bool
}

type qkey struct {
	class  bool
	handle string
}

// usage is what one limit saw over the window.
type usage struct {
	satTime   time.Duration // in intervals at ≥ saturatedShare of the limit
	satBytes  uint64
	peak      float64 // highest rate of any interval, bytes/s
	total     uint64
	totalTime time.Duration
	// bounds are the snapshot indexes that open or close a saturated
	// interval; standing backlog is judged on them.
	bounds map[int]bool
}

// checkBandwidth finds interfaces whose traffic ran at a shaper's rate or
// at the link speed for several seconds of the window. Rates are taken
// per sample interval, so a load that fills only part of the window
// still shows. A shaper alone is no fault and raises nothing.
func checkBandwidth(in *Input) []report.Finding {
	b := in.Bundle
	if _, ok := b.Window(); !ok {
		return nil
	}
	last := &b.Snapshots[len(b.Snapshots)-1]
	var out []report.Finding
	for i := range last.Interfaces {
		if f, ok := bandwidthFinding(b, &last.Interfaces[i]); ok {
			if it, ok := pathBandwidthItem(in); ok {
				f.Evidence = append(f.Evidence, it)
			}
			f.Evidence = append(f.Evidence, dropItemsOn(in, f.Subject, "QDISC_DROP")...)
			out = append(out, f)
		}
	}
	return out
}

// bandwidthFinding judges every limit of one interface, as configured in
// the last snapshot, and reports the saturated ones, lowest rate first.
func bandwidthFinding(b *evidence.Bundle, ifc *evidence.Interface) (report.Finding, bool) {
	type hit struct {
		l limit
		u usage
	}
	var hits []hit
	for _, l := range limits(ifc) {
		u := measure(b, l)
		if u.satTime < minSaturated || u.satBytes < minSaturatedBytes {
			continue
		}
		if l.kind == "link" && u.peak > nominalExcess*l.bytesPerSec {
			continue
		}
		hits = append(hits, hit{l, u})
	}
	if len(hits) == 0 {
		return report.Finding{}, false
	}
	slices.SortStableFunc(hits, func(x, y hit) int { return cmp.Compare(x.l.bytesPerSec, y.l.bytesPerSec) })
	top := hits[0]
	f := report.Finding{ID: BandwidthSaturated, Severity: report.Warning, Status: report.Active, Subject: ifc.Name, About: report.About{Interface: ifc.Name},
		Title: fmt.Sprintf("Interface %s is saturated: %s at %.0f%% of its %s for %s", ifc.Name, top.l.dir,
			100*rateOf(top.u)/top.l.bytesPerSec, limitName(top.l), top.u.satTime.Round(100*time.Millisecond))}
	for _, h := range hits {
		f.Evidence = append(f.Evidence, rateItem(h.l, h.u))
		if it, hurt, ok := queueItem(b, h.l, h.u); ok {
			f.Evidence = append(f.Evidence, it)
			if hurt {
				f.Severity = report.Critical
			}
		}
		f.Evidence = append(f.Evidence, confItem(h.l))
	}
	f.Actions = notes(bandwidthFix(b, top.l)...)
	return f, true
}

// limits lists the rates that apply to an interface: the root and nested
// tbf rates, the ceiling of each htb class, and the link speed in each
// direction when it is a real one.
func limits(ifc *evidence.Interface) []limit {
	var out []limit
	name := ifc.Name
	var root *evidence.Qdisc
	for i := range ifc.Qdiscs {
		q := &ifc.Qdiscs[i]
		key := qkey{q.Class, q.Handle}
		own := func(i *evidence.Interface) (uint64, bool) {
			if x := findQdisc(i, key); x != nil {
				return x.Bytes, true
			}
			return 0, false
		}
		if !q.Class && q.Parent == "root" {
			root = q
		}
		switch {
		case !q.Class && q.Kind == "tbf" && q.RateBytesPerSec > 0:
			l := limit{iface: name, dir: "sent", kind: "tbf", conf: q, bytesPerSec: float64(q.RateBytesPerSec),
				bytes: own, source: "qdisc", queue: queueRef{label: "qdisc tbf " + q.Handle, keys: map[qkey]bool{key: true}}}
			if q.Parent == "root" {
				// Everything the interface sends passes a root shaper.
				l.bytes, l.source = txBytes, "/proc/net/dev"
			}
			out = append(out, l)
		case q.Class && q.Kind == "htb" && q.CeilBytesPerSec > 0:
			// htb charges a packet to its class and every ancestor, so a
			// class's bytes include its subtree's; its queue is its
			// leaves'.
			out = append(out, limit{iface: name, dir: "sent", kind: "htb", conf: q, bytesPerSec: float64(q.CeilBytesPerSec),
				bytes: own, source: "qdisc", queue: queueRef{label: "htb class " + q.Handle, keys: subtree(ifc, q.Handle)}})
		}
	}
	if ifc.SpeedMbps > 0 && !nominalSpeed[ifc.LinkKind] {
		speed := float64(ifc.SpeedMbps) * 1e6 / 8
		tx := limit{iface: name, dir: "sent", kind: "link", speedMbps: ifc.SpeedMbps, bytesPerSec: speed, bytes: txBytes, source: "/proc/net/dev"}
		if root != nil {
			tx.queue = queueRef{label: "qdisc " + root.Kind + " " + root.Handle, keys: map[qkey]bool{{false, root.Handle}: true}}
		}
		rx := limit{iface: name, dir: "received", kind: "link", speedMbps: ifc.SpeedMbps, bytesPerSec: speed, bytes: rxBytes, source: "/proc/net/dev"}
		out = append(out, tx, rx)
	}
	return out
}

func txBytes(i *evidence.Interface) (uint64, bool) { return i.TxBytes, true }
func rxBytes(i *evidence.Interface) (uint64, bool) { return i.RxBytes, true }

// subtree returns the htb class handle and the handles of its descendant
// classes.
func subtree(ifc *evidence.Interface, handle string) map[qkey]bool {
	parent := map[string]string{}
	for _, q := range ifc.Qdiscs {
		if q.Class {
			parent[q.Handle] = q.Parent
		}
	}
	out := map[qkey]bool{}
	for h := range parent {
		// Walk up to the qdisc, at most one step per class (no loops).
		p := h
		for range len(parent) + 1 {
			if p == handle {
				out[qkey{true, h}] = true
				break
			}
			next, ok := parent[p]
			if !ok {
				break
			}
			p = next
		}
	}
	return out
}

func findQdisc(i *evidence.Interface, k qkey) *evidence.Qdisc {
	for j := range i.Qdiscs {
		if i.Qdiscs[j].Class == k.class && i.Qdiscs[j].Handle == k.handle {
			return &i.Qdiscs[j]
		}
	}
	return nil
}

func findIface(s *evidence.Snapshot, name string) *evidence.Interface {
	for j := range s.Interfaces {
		if s.Interfaces[j].Name == name {
			return &s.Interfaces[j]
		}
	}
	return nil
}

// measure takes the rate against l in each interval between consecutive
// snapshots. A counter that went down (qdisc replaced) counts as 0 for
// that interval.
func measure(b *evidence.Bundle, l limit) usage {
	u := usage{bounds: map[int]bool{}}
	for k := 1; k < len(b.Snapshots); k++ {
		s0, s1 := &b.Snapshots[k-1], &b.Snapshots[k]
		dt := s1.Time.Sub(s0.Time)
		i0, i1 := findIface(s0, l.iface), findIface(s1, l.iface)
		if dt <= 0 || i0 == nil || i1 == nil {
			continue
		}
		a, ok0 := l.bytes(i0)
		z, ok1 := l.bytes(i1)
		if !ok0 || !ok1 {
			continue
		}
		var d uint64
		if z > a {
			d = z - a
		}
		rate := float64(d) / dt.Seconds()
		u.total += d
		u.totalTime += dt
		u.peak = max(u.peak, rate)
		if rate >= saturatedShare*l.bytesPerSec {
			u.satTime += dt
			u.satBytes += d
			u.bounds[k-1], u.bounds[k] = true, true
		}
	}
	return u
}

// rateOf is the mean rate over the saturated intervals, bytes/s.
func rateOf(u usage) float64 {
	if u.satTime <= 0 {
		return 0
	}
	return float64(u.satBytes) / u.satTime.Seconds()
}

func limitName(l limit) string {
	switch l.kind {
	case "tbf":
		return "tbf rate " + bitrate(l.bytesPerSec)
	case "htb":
		return "htb class " + l.conf.Handle + " ceil " + bitrate(l.bytesPerSec)
	}
	return "link speed " + bitrate(l.bytesPerSec)
}

// rateItem is the measured rate: "veth0 sent 9.6 Mbit/s for 8s = 96% of
// its tbf rate 10 Mbit/s (peak …; … averaged over the 20s window)".
func rateItem(l limit, u usage) report.Item {
	who := l.iface
	if l.kind == "htb" {
		who = l.iface + " class " + l.conf.Handle
	}
	r := rateOf(u)
	text := fmt.Sprintf("%s %s %s for %s = %.0f%% of its %s (peak %s", who, l.dir, bitrate(r),
		u.satTime.Round(100*time.Millisecond), 100*r/l.bytesPerSec, limitName(l), bitrate(u.peak))
	if u.totalTime > u.satTime {
		text += fmt.Sprintf("; %s averaged over %s", bitrate(float64(u.total)/u.totalTime.Seconds()), u.totalTime.Round(100*time.Millisecond))
	}
	return report.Item{Text: text + ")", Source: l.source, Window: true}
}

// queueItem reports the queue in front of a limit: drops, overlimits and
// requeues over the window, the peak backlog, and whether a backlog stood
// through the saturated intervals. hurt is true when packets were
// dropped or the backlog stood.
func queueItem(b *evidence.Bundle, l limit, u usage) (it report.Item, hurt, ok bool) {
	if l.queue.label == "" {
		return report.Item{}, false, false
	}
	w, _ := b.Window()
	first, okF := queueAt(w.First, l)
	lastQ, okL := queueAt(w.Last, l)
	if !okL {
		return report.Item{}, false, false
	}
	rise := func(a, z uint64) uint64 {
		if !okF || z < a {
			return 0
		}
		return z - a
	}
	drops, over, requeues := rise(first.Drops, lastQ.Drops), rise(first.Overlimits, lastQ.Overlimits), rise(first.Requeues, lastQ.Requeues)
	var peak uint64
	held, bounds := 0, 0
	for k := range b.Snapshots {
		q, ok := queueAt(&b.Snapshots[k], l)
		if !ok {
			continue
		}
		peak = max(peak, q.BacklogBytes)
		if u.bounds[k] {
			bounds++
			if q.BacklogBytes > 0 || q.Qlen > 0 {
				held++
			}
		}
	}
	standing := held >= 2 && 2*held >= bounds
	text := fmt.Sprintf("%s dropped +%d, overlimits +%d, backlog peaked %s", l.queue.label, drops, over, byteSize(peak))
	if requeues > 0 {
		text += fmt.Sprintf(", requeues +%d", requeues)
	}
	if standing {
		text += fmt.Sprintf("; packets were queued in %d of %d samples while saturated", held, bounds)
	}
	return report.Item{Text: text, Source: "qdisc", Window: true}, drops > 0 || standing, true
}

// queueAt sums the queue's qdiscs or classes in one snapshot.
func queueAt(s *evidence.Snapshot, l limit) (evidence.Qdisc, bool) {
	i := findIface(s, l.iface)
	if i == nil {
		return evidence.Qdisc{}, false
	}
	var sum evidence.Qdisc
	found := false
	for _, q := range i.Qdiscs {
		if !l.queue.keys[qkey{q.Class, q.Handle}] {
			continue
		}
		found = true
		sum.Drops += q.Drops
		sum.Overlimits += q.Overlimits
		sum.Requeues += q.Requeues
		sum.BacklogBytes += q.BacklogBytes
		sum.Qlen += q.Qlen
	}
	return sum, found
}

// confItem is the limit as configured.
func confItem(l limit) report.Item {
	q := l.conf
	switch l.kind {
	case "tbf":
		text := fmt.Sprintf("qdisc tbf %s (parent %s) on %s: rate %s", q.Handle, q.Parent, l.iface, bitrate(l.bytesPerSec))
		if q.BurstBytes > 0 {
			text += ", burst " + byteSize(q.BurstBytes)
		}
		if q.LimitBytes > 0 {
			text += ", limit " + byteSize(q.LimitBytes)
		}
		return report.Item{Text: text, Source: "qdisc"}
	case "htb":
		return report.Item{Text: fmt.Sprintf("htb class %s (parent %s) on %s: rate %s, ceil %s", q.Handle, q.Parent, l.iface,
			bitrate(float64(q.RateBytesPerSec)), bitrate(float64(q.CeilBytesPerSec))), Source: "qdisc"}
	}
	return report.Item{Text: fmt.Sprintf("%s link speed %d Mb/s", l.iface, l.speedMbps), Source: "ethtool"}
}

// bandwidthFix names what to change for the lowest saturated limit, and
// how to confirm it.
func bandwidthFix(b *evidence.Bundle, l limit) []string {
	ns := netns.Parse(b.Host.NetNS).ExecPrefix()
	dev := l.iface
	var out []string
	switch l.kind {
	case "tbf":
		q := l.conf
		rate := 2 * q.RateBytesPerSec
		burst := max(q.BurstBytes, rate/250) // at least one tick of 4 ms
		queue := "latency 50ms"
		if q.LimitBytes > 0 {
			queue = fmt.Sprintf("limit %d", q.LimitBytes)
		}
		where := "root"
		if q.Parent != "root" {
			where = "parent " + q.Parent + " handle " + q.Handle
		}
		out = append(out,
			fmt.Sprintf("the tbf shaper is the limit: if its rate is deliberate, raise it, e.g. to twice the rate: `%stc qdisc change dev %s %s tbf rate %s burst %d %s`", ns, dev, where, tcRate(rate), burst, queue),
			fmt.Sprintf("or remove the shaper if nothing needs it: `%stc qdisc del dev %s %s`", ns, dev, where))
	case "htb":
		q := l.conf
		parent := q.Parent
		if parent == "root" {
			parent = strings.SplitN(q.Handle, ":", 2)[0] + ":"
		}
		out = append(out,
			fmt.Sprintf("the htb class %s is at its ceil: raise ceil (and rate, if this traffic must be guaranteed more), e.g. `%stc class change dev %s parent %s classid %s htb rate %s ceil %s`",
				q.Handle, ns, dev, parent, q.Handle, tcRate(q.RateBytesPerSec), tcRate(2*q.CeilBytesPerSec)),
			"or move traffic that should not share this class to another one (tc filters), or remove the shaping")
	default:
		out = append(out, fmt.Sprintf("the link itself is full (%d Mb/s): add capacity, a faster link or NIC, or a bond of several links (`mode 802.3ad`), or spread the service over more hosts", l.speedMbps))
	}
	out = append(out, "send less: compress responses (gzip/brotli), cache large or repeated responses close to clients (CDN, proxy cache), and check for unexpected bulk traffic (backups, logs, replication) sharing the link")
	if l.dir == "received" {
		return append(out, fmt.Sprintf("confirm while the load runs: `%sip -s link show dev %s` (received bytes per second stay below 90%% of the link speed)", ns, dev))
	}
	return append(out, fmt.Sprintf("confirm while the load runs: `%stc -s qdisc show dev %s` (drops, overlimits and backlog stop growing) and `%sip -s link show dev %s` (bytes per second stay below 90%% of the new limit)", ns, dev, ns, dev))
}

// bitrate formats bytes per second as bits: "9.6 Mbit/s", "1 Gbit/s".
func bitrate(bytesPerSec float64) string {
	bits := 8 * bytesPerSec
	for _, u := range []struct {
		div  float64
		name string
	}{{1e9, "Gbit/s"}, {1e6, "Mbit/s"}, {1e3, "kbit/s"}} {
		if bits >= u.div {
			return short(bits/u.div) + " " + u.name
		}
	}
	return short(bits) + " bit/s"
}

// byteSize formats a byte count: "900 B", "45 KiB", "1.5 MiB".
func byteSize(n uint64) string {
	switch {
	case n >= 1<<20:
		return short(float64(n)/(1<<20)) + " MiB"
	case n >= 1<<10:
		return short(float64(n)/(1<<10)) + " KiB"
	}
	return strconv.FormatUint(n, 10) + " B"
}

// short prints a number with three significant digits at most and no
// trailing zeros: 9.6, 10, 950, 1.25.
func short(v float64) string {
	d := 2
	switch {
	case v >= 100:
		d = 0
	case v >= 10:
		d = 1
	}
	s := strconv.FormatFloat(v, 'f', d, 64)
	if strings.ContainsRune(s, '.') {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	return s
}

// tcRate writes a rate in bytes per second as tc's bits: "16mbit".
func tcRate(bytesPerSec uint64) string {
	bits := 8 * bytesPerSec
	switch {
	case bits >= 1e9 && bits%1e9 == 0:
		return strconv.FormatUint(bits/1e9, 10) + "gbit"
	case bits >= 1e6 && bits%1e6 == 0:
		return strconv.FormatUint(bits/1e6, 10) + "mbit"
	case bits >= 1e3:
		return strconv.FormatUint(uint64(math.Round(float64(bits)/1e3)), 10) + "kbit"
	}
	return strconv.FormatUint(bits, 10) + "bit"
}
