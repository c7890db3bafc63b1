package rules

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/netdoctor/netdoctor/internal/evidence"
)

// Severities, most severe first.
const (
	Critical = "critical"
	Warning  = "warning"
	Info     = "info"
)

// Statuses: active means the problem hurt during the window (a counter
// rose, a queue was full, a lookup failed); latent means a setting or a
// level that will hurt at scale.
const (
	Active = "active"
	Latent = "latent"
)

// Finding is one diagnosed problem. Its fields are the JSON report
// contract (docs/report.md).
type Finding struct {
	ID       string `json:"id"`
	Severity string `json:"severity"`
	Status   string `json:"status"`
	Title    string `json:"title"`
	// Subject names what the finding is about when a rule can fire more
	// than once: a listener, a sysctl, a nameserver, an interface.
	Subject string `json:"subject,omitempty"`
	// Side says where it was observed in a run: "server", "client" or
	// "local" (both in one namespace); empty for check and diagnose.
	Side     string   `json:"side,omitempty"`
	Evidence []Item   `json:"evidence"`
	Fix      []string `json:"fix"`
	// CausedBy names the finding this one is a consequence of (its ID),
	// so a report leads with the cause: TIME_WAIT piling up and local
	// ports running out are what upstream connection churn looks like.
	CausedBy string `json:"caused_by,omitempty"`
	// Explains says which share of the run's failed requests (or of its
	// latency) this finding accounts for, when that is measurable.
	Explains string `json:"explains,omitempty"`
}

// Item is one piece of evidence.
type Item struct {
	Text string `json:"text"`
	// Source names where it was read: a counter ("TcpExt.ListenOverflows"),
	// "sockdiag", "kmsg", "sysctl", "resolver", "process".
	Source string `json:"source"`
	// Window is true when the item was observed changing or happening
	// during the collection window, false for a static setting.
	Window bool `json:"window"`
}

// Rule examines a bundle.
type Rule struct {
	Name  string
	Check func(b *evidence.Bundle) []Finding
}

// All is every rule `check` and `diagnose` run, in no particular order.
var All = []Rule{
	{"listen", checkListen},
	{"conntrack", checkConntrack},
	{"ports", checkPorts},
	{"timewait", checkTimeWait},
	{"loss", checkLoss},
	{"nic", checkNIC},
	{"fd", checkFD},
	{"dns", checkDNS},
	{"sysctl", checkSysctls},
	{"cpu", checkCPU},
	{"buffers", checkBuffers},
	{"bandwidth", checkBandwidth},
}

// Run applies the rules and returns the findings ordered by impact:
// active before latent, then by severity, then by ID and subject. A bundle
// without snapshots has no findings.
func Run(b *evidence.Bundle, rules []Rule) []Finding {
	if len(b.Snapshots) == 0 {
		return nil
	}
	var out []Finding
	for _, r := range rules {
		out = append(out, r.Check(b)...)
	}
	return Sort(out)
}

// Sort orders findings by impact: active before latent, then by severity,
// then by ID, subject and side.
func Sort(out []Finding) []Finding {
	slices.SortStableFunc(out, Compare)
	return out
}

// Compare orders two findings as Sort does.
func Compare(a, b Finding) int {
	return cmp.Or(cmp.Compare(statusRank(a.Status), statusRank(b.Status)),
		cmp.Compare(sevRank(a.Severity), sevRank(b.Severity)),
		cmp.Compare(a.ID, b.ID), cmp.Compare(a.Subject, b.Subject), cmp.Compare(a.Side, b.Side))
}

func statusRank(s string) int {
	if s == Active {
		return 0
	}
	return 1
}

// MoreSevere reports whether severity a ranks above b.
func MoreSevere(a, b string) bool { return sevRank(a) < sevRank(b) }

func sevRank(s string) int {
	switch s {
	case Critical:
		return 0
	case Warning:
		return 1
	}
	return 2
}

// counterItem is evidence that a counter rose in the window.
func counterItem(w evidence.Window, name string) (Item, uint64) {
	d, _ := w.Counter(name)
	return Item{
		Text:   fmt.Sprintf("%s +%d in %s (%.1f/s)", name, d, round(w), w.Rate(name)),
		Source: name, Window: true,
	}, d
}

func round(w evidence.Window) string {
	return w.Duration().Round(100 * 1e6).String()
}

// sysctl returns a sysctl from the last snapshot as an integer.
// SysctlInt is a setting's (first) number as a snapshot recorded it.
func SysctlInt(s *evidence.Snapshot, name string) (int64, bool) {
	v, ok := s.Sysctls[name]
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(strings.Fields(v + " x")[0], 10, 64)
	return n, err == nil
}

func settingItem(name, value string) Item {
	return Item{Text: fmt.Sprintf("%s = %s", name, value), Source: "sysctl"}
}

// sysctlFix returns the runtime and persistent forms of a setting, plus a
// note when the namespace observed is not the caller's.
func sysctlFix(b *evidence.Bundle, name, value string) []string {
	prefix := ""
	if ns := b.Host.NetNS; ns != "" && !GlobalSysctl(name) {
		if strings.ContainsRune(ns, '/') {
			prefix = "nsenter --net=" + ns + " " // ip netns exec takes names only
		} else {
			prefix = "ip netns exec " + ns + " "
		}
	}
	v := value
	if strings.ContainsAny(v, " \t") {
		v = fmt.Sprintf("%q", v)
	}
	return []string{
		fmt.Sprintf("%ssysctl -w %s=%s", prefix, name, v),
		fmt.Sprintf("persist: echo '%s = %s' >> /etc/sysctl.d/90-netdoctor.conf", name, value),
	}
}

// globalSysctl reports settings that exist once per host, writable only
// from the initial namespace.
func GlobalSysctl(name string) bool {
	return strings.HasPrefix(name, "fs.") || name == "net.netfilter.nf_conntrack_max" ||
		name == "net.netfilter.nf_conntrack_buckets" || name == "net.core.netdev_max_backlog" ||
		name == "net.core.rmem_max" || name == "net.core.wmem_max" || name == "net.ipv4.tcp_mem"
}
