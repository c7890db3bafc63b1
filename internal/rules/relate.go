package rules

import (
	"cmp"
	"fmt"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/netdoctor/netdoctor/internal/load"
	"github.com/netdoctor/netdoctor/internal/report"
)

// relate marks symptoms with their cause and orders every cause right
// before its symptoms, keeping the impact order otherwise. What causes
// what is the causes' classes' (Class.Consequences and Is, Blocks and
// Waits, DropReasons against a finding's Dropped, AtCapacity); which
// finding is whose, their About: a pool is blamed for the overflow of
// its own socket only, churn for the ports of its own destination. It
// adds the links as data (CausedBy, CauseSubject, CauseAtCapacity) and
// raises a cause's severity to its worst symptom's; it never changes a
// finding's words.
func relate(fs []report.Finding) []report.Finding {
	fs = report.Sort(fs)
	causeOf := make([]int, len(fs))
	for i := range causeOf {
		causeOf[i] = -1
	}
	// A finding whose rule read where its packets were dropped (a
	// client's retransmissions are what the server's full accept queue
	// dropped) is the consequence of the finding that owns those drops.
	for j := range fs {
		d := fs[j].Dropped
		if d == nil || fs[j].Status != report.Active {
			continue
		}
		for i := range fs {
			if i != j && causeOf[j] < 0 && ownsDrops(fs[i], *d, cmp.Or(d.Side, fs[j].Side)) && !causes(causeOf, j, i) {
				link(fs, causeOf, i, j)
			}
		}
	}
	for i := range fs {
		c := fs[i]
		if c.Status != report.Active {
			continue
		}
		for _, sym := range ClassOf(c.ID).Consequences {
			for j := range fs {
				s := &fs[j]
				if j == i || causeOf[j] >= 0 || sym.Effect == NoEffect || ClassOf(s.ID).Is != sym.Effect || s.Status != report.Active || !sym.At.owns(c.About, s.About) {
					continue
				}
				link(fs, causeOf, i, j)
			}
		}
	}
	// A dependency's own finding is the cause of the time its clients
	// wait on it: the chain across processes (nginx waits on php-fpm,
	// whose pool is full).
	for i := range fs {
		c := fs[i]
		if c.Status != report.Active || !ClassOf(c.ID).Blocks {
			continue
		}
		for j := range fs {
			s := &fs[j]
			if j == i || causeOf[j] >= 0 || s.Status != report.Active || !ClassOf(s.ID).Waits {
				continue
			}
			if len(s.About.Remotes) == 0 || !listensAt(c.About.Listen, s.About.Remotes[0]) || causes(causeOf, j, i) {
				continue
			}
			link(fs, causeOf, i, j)
		}
	}
	// Promotion follows chains of any length: a cause linked before its
	// symptom was promoted by a symptom of its own is promoted again.
	for changed := true; changed; {
		changed = false
		for j, i := range causeOf {
			if i >= 0 && report.MoreSevere(fs[j].Severity, fs[i].Severity) {
				fs[i].Severity, changed = fs[j].Severity, true
			}
		}
	}
	// Causes were promoted: order the roots again, then follow each by
	// its symptoms.
	var roots []int
	for i := range fs {
		if causeOf[i] < 0 {
			roots = append(roots, i)
		}
	}
	slices.SortStableFunc(roots, func(a, b int) int { return report.Compare(fs[a], fs[b]) })
	out := make([]report.Finding, 0, len(fs))
	var emit func(i int)
	emit = func(i int) {
		out = append(out, fs[i])
		for j := range fs {
			if causeOf[j] == i {
				emit(j)
			}
		}
	}
	for _, i := range roots {
		emit(i)
	}
	return out
}

// link marks fs[j] a consequence of fs[i]. A server waiting on a
// dependency at capacity is told so (CauseAtCapacity): more connections
// to it would only queue there, whatever its pool looked like from its
// side.
func link(fs []report.Finding, causeOf []int, i, j int) {
	fs[j].CausedBy = fs[i].ID
	fs[j].CauseSubject = fs[i].Subject
	fs[j].CauseAtCapacity = ClassOf(fs[j].ID).Waits && ClassOf(fs[i].ID).AtCapacity
	causeOf[j] = i
	// A cause is as severe as the worst of what it does.
	if report.MoreSevere(fs[j].Severity, fs[i].Severity) {
		fs[i].Severity = fs[j].Severity
	}
}

// causes reports whether fs[j] is already, through any chain, the cause
// of fs[i]: linking i to j then would make a loop, and both would drop
// out of the report (two services that wait on each other).
func causes(causeOf []int, j, i int) bool {
	for k, n := i, 0; k >= 0 && n <= len(causeOf); k, n = causeOf[k], n+1 {
		if k == j {
			return true
		}
	}
	return false
}

// owns reports whether a cause's symptom is its own, as m says: a
// pool's overflow is its own socket's, churn's ports those of its own
// destinations (when both name them).
func (m Match) owns(cause, sym report.About) bool {
	switch m {
	case OwnListener:
		return sameAddr(sym.Listen, cause.Listen)
	case OwnRemotes:
		return len(cause.Remotes) == 0 || len(sym.Remotes) == 0 || slices.Equal(cause.Remotes, sym.Remotes)
	case OwnLeg:
		return len(cause.Remotes) > 0 && cause.Listen == sym.Listen && slices.Equal(cause.Remotes, sym.Remotes)
	}
	return true
}

// ownsDrops reports whether finding c owns the drops d of a finding's
// packets, on side: an active finding there whose class owns the drop
// reason (DropReasons) or that is about it (About.DropReason), and
// about the same interface and listener where both name one.
func ownsDrops(c report.Finding, d report.Dropped, side report.Side) bool {
	cl := ClassOf(c.ID)
	if c.Status != report.Active || c.Side != side || !cl.counts(c) {
		return false
	}
	if !slices.Contains(cl.DropReasons, d.Reason) && c.About.DropReason != d.Reason {
		return false
	}
	if cl.OnItsLink && c.About.Interface != d.Interface {
		return false
	}
	if c.About.Interface != "" && d.Interface != "" && c.About.Interface != d.Interface {
		return false
	}
	return c.About.Listen == "" || d.Listen == "" || sameAddr(c.About.Listen, d.Listen) || portOf(d.Listen) != "" && portOf(c.About.Listen) == portOf(d.Listen)
}

// listensAt reports whether a server listening at listen answers at
// addr: the same address, or the same port on a wildcard listener.
func listensAt(listen, addr string) bool {
	if sameAddr(listen, addr) {
		return true
	}
	lh, lp, err1 := net.SplitHostPort(listen)
	_, ap, err2 := net.SplitHostPort(addr)
	if err1 != nil || err2 != nil || lp != ap {
		return false
	}
	ip := net.ParseIP(lh)
	return lh == "*" || ip != nil && ip.IsUnspecified()
}

// sameAddr compares listener addresses loosely: a pool listening on
// "127.0.0.1:9000" is the socket the kernel reports as 127.0.0.1:9000,
// and a unix path is itself.
func sameAddr(a, b string) bool {
	return a != "" && b != "" && strings.TrimPrefix(a, "unix:") == strings.TrimPrefix(b, "unix:")
}

// Failure classes a finding can account for.
const (
	failConn   = "conn"   // connect errors, resets, timeouts: the kernel dropped or refused
	failStatus = "status" // 5xx responses: the proxy could not get an answer upstream
)

// explainsClass says what kind of the run's failed requests a finding
// accounts for (its class's Fails), front being the run's port.
func explainsClass(f report.Finding, front string) string {
	c := ClassOf(f.ID)
	if !c.counts(f) {
		return ""
	}
	switch c.Fails {
	case FailsConnections:
		return failConn
	case FailsAtFront:
		// A listener behind the front one fails no client connection
		// itself.
		if front == "" || f.About.Listen == "" || portOf(f.About.Listen) == front {
			return failConn
		}
	case FailsOutgoing:
		if f.Side == report.Client {
			return failConn
		}
		return failStatus
	case Fails5xx:
		return failStatus
	}
	return ""
}

// portOf is an address's port ("" for a unix socket).
func portOf(addr string) string {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return ""
	}
	return port
}

// explain fills in, for active findings, the share of the run's failed
// requests they account for. Findings of one class share the failures:
// the text names the others, rather than each claiming all of them.
func explain(fs []report.Finding, lr *load.Result, frontPort string) {
	if lr == nil {
		return
	}
	conn := lr.Errors.Total()
	status := lr.Status["5xx"]
	failed := failures(lr)
	if conn == 0 {
		retried(fs, lr, frontPort, failed)
	}
	if failed == 0 {
		return
	}
	byClass := map[string][]int{}
	taken := map[string]bool{}
	for i, f := range fs {
		// A consequence accounts for its class too (an accept queue
		// overflowing behind a full pool: the connections it dropped);
		// the report names its cause beside it, and rank credits the
		// cause with what its consequences account for.
		if f.Status != report.Active {
			continue
		}
		if f.Explains != "" {
			// The rule counted what it explains itself (log lines);
			// the class is taken.
			delete(byClass, explainsClass(f, frontPort))
			taken[explainsClass(f, frontPort)] = true
			continue
		}
		if c := explainsClass(f, frontPort); c != "" && !taken[c] {
			byClass[c] = append(byClass[c], i)
		}
	}
	for class, idx := range byClass {
		n, what := conn, "connection errors and timeouts"
		if class == failStatus {
			n, what = status, "5xx responses"
		}
		if n == 0 {
			continue
		}
		for _, i := range idx {
			// Shared with the other findings of the class, not with a
			// cause or a consequence: a chain fails the same requests.
			var with []string
			for _, j := range idx {
				if j != i && !isCause(fs[i], fs[j]) && !isCause(fs[j], fs[i]) {
					with = append(with, string(fs[j].ID))
				}
			}
			text := fmt.Sprintf("accounts for the %d %s: %.0f%% of the %d failed requests", n, what, 100*float64(n)/float64(failed), failed)
			if 100*n < failed {
				// Less than a percent: say that it hurt little here,
				// rather than claim a share that rounds to nothing.
				text = fmt.Sprintf("little measurable in this run: the %d %s are under 1%% of the %d failed requests", n, what, failed)
			}
			if len(with) > 0 {
				text = fmt.Sprintf("with %s, %s", strings.Join(with, ", "), text)
			}
			fs[i].Explains = text
			fs[i].Failed = n
		}
	}
}

// isCause reports whether finding a is named as b's cause.
func isCause(a, b report.Finding) bool {
	return b.CausedBy == a.ID && b.CauseSubject == a.Subject
}

// retried states the impact of the active findings whose counters count
// dropped connections in a run whose load had no connection error: the
// drops were real, yet no request failed from them, because the clients'
// TCP sent each dropped SYN (or handshake) again, or because they were
// not the load's connections. Said, lest "0 failed requests" read as a
// contradiction of the verdict.
func retried(fs []report.Finding, lr *load.Result, frontPort string, failed uint64) {
	for i, f := range fs {
		c := ClassOf(f.ID)
		if f.Status != report.Active || f.Explains != "" || !c.Drops || !c.counts(f) {
			continue
		}
		none := "none of the load's requests failed"
		if failed > 0 {
			none = fmt.Sprintf("none of the load's %d failed requests was a connection error", failed)
		}
		tail := fmt.Sprintf("the clients' TCP sent the dropped connections again (a SYN after 1 s, then 3 s…), so they cost time instead: the load's p99 %s, max %s", report.Dur(lr.Latency.P99), report.Dur(lr.Latency.Max))
		if explainsClass(f, frontPort) == "" && f.About.Listen != "" && portOf(f.About.Listen) != frontPort {
			tail = fmt.Sprintf("%s is not the port the load targets (%s): what it dropped were other clients' connections, or its own front server's, sent again by their TCP", f.About.Listen, frontPort)
		}
		fs[i].Explains = none + ": " + tail
	}
}

// failures counts the run's failed requests: errors plus 4xx and 5xx.
func failures(lr *load.Result) uint64 {
	if lr == nil {
		return 0
	}
	return lr.Errors.Total() + lr.Status["5xx"] + lr.Status["4xx"]
}

// shareText is "accounts for N WHAT: P% of the F failed requests", N being at
// most seen (the load's own count of that kind).
func shareText(n, seen uint64, what string, failed uint64) string {
	n = min(n, seen)
	if n == 0 || failed == 0 {
		return ""
	}
	return fmt.Sprintf("accounts for %d %s: %.0f%% of the %d failed requests", n, what, 100*float64(n)/float64(failed), failed)
}

// rank puts the causes that hurt the run most first, each still followed
// by its symptoms: active before latent, then by the failed requests they
// account for, then, when the run was slow, the causes of latency, and
// severity and the report's order after that. The verdict names the
// first.
func rank(fs []report.Finding, lr *load.Result) []report.Finding {
	var groups [][]report.Finding
	for _, f := range fs {
		if f.CausedBy == "" || len(groups) == 0 {
			groups = append(groups, nil)
		}
		groups[len(groups)-1] = append(groups[len(groups)-1], f)
	}
	slow := slowLoad(lr)
	// A cause fails what its consequences account for.
	failed := func(g []report.Finding) uint64 {
		var n uint64
		for _, f := range g {
			if f.Status == report.Active {
				n = max(n, f.Failed)
			}
		}
		return n
	}
	slices.SortStableFunc(groups, func(a, b []report.Finding) int {
		x, y := a[0], b[0]
		return cmp.Or(cmp.Compare(activeRank(x), activeRank(y)),
			cmp.Compare(failed(b), failed(a)),
			cmp.Compare(latencyRank(x, slow), latencyRank(y, slow)),
			cmp.Compare(sevRank(x.Severity), sevRank(y.Severity)),
			cmp.Compare(sideRank(x.Side), sideRank(y.Side)),
			report.Compare(x, y))
	})
	out := fs[:0:0]
	for _, g := range groups {
		out = append(out, g...)
	}
	return out
}

// sideRank puts the server's findings before the client's: the load's
// host is rarely the one being diagnosed.
func sideRank(s report.Side) int {
	if s == report.Client {
		return 1
	}
	return 0
}

func sevRank(s report.Severity) int {
	switch s {
	case report.Critical:
		return 0
	case report.Warning:
		return 1
	}
	return 2
}

func activeRank(f report.Finding) int {
	if f.Status == report.Active {
		return 0
	}
	return 1
}

// latencyRank puts a cause of latency first when the run was slow.
func latencyRank(f report.Finding, slow bool) int {
	if slow && f.Status == report.Active && ClassOf(f.ID).Delays {
		return 0
	}
	return 1
}

// slowLoad reports a load whose median took 30 ms or more, or whose tail
// took a second or ten medians.
func slowLoad(lr *load.Result) bool {
	if lr == nil || lr.Requests == 0 {
		return false
	}
	l := lr.Latency
	return l.P50 >= 30*time.Millisecond || l.P99 >= time.Second || (l.P99 >= 100*time.Millisecond && l.P99 >= 10*l.P50)
}
