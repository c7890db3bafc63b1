package tune

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/netdoctor/netdoctor/internal/rules"
	"github.com/netdoctor/netdoctor/internal/sizing"
)

// The kernel settings netdoctor plans, and the values it may propose for
// each: the only ones apply writes, whatever a plan file says, because a
// plan is data that anyone may have edited before it reached root (a
// core_pattern starting with "|" runs a program). Build refuses to
// propose a name outside the set (an internal error: a fix that needs a
// new setting adds it here, with its bounds, and to docs/tune.md) and
// notes a value outside its bounds instead of proposing it.

// allowedSetting is a setting netdoctor plans and the values it may
// propose: one of Values when set, else "LOW HIGH" when Range, else an
// integer in [Min, Max].
type allowedSetting struct {
	Name     string
	Values   []string
	Range    bool
	Min, Max int64
	// Why says where the bounds come from, for the error and the docs.
	Why string
}

// portRangeLow is the lowest port an ephemeral range may start at: below
// it live the registered services' ports (sizing.Ports starts there at
// the lowest).
const portRangeLow = 10000

// allowedSettings is the set, in docs/tune.md's order.
var allowedSettings = []allowedSetting{
	// The accept queue: sizing.Backlog's range; the advice table's 4096.
	{Name: "net.core.somaxconn", Min: sizing.DefaultSomaxconn, Max: sizing.MaxBacklog, Why: "the kernel's default to the deepest useful accept queue"},
	{Name: "net.ipv4.ip_local_port_range", Range: true, Why: "sizing.Ports: LOW HIGH with HIGH 65535 and LOW a multiple of 1000 from 10000 to 37000 (at least the default's 28232 ports): never narrowed, never moved below 10000 or off 65535"},
	{Name: "net.ipv4.tcp_max_tw_buckets", Min: twBucketsFloor, Max: 1 << 24, Why: "the kernel's default with 4 GiB of memory to 16M sockets (~3 GiB)"},
	{Name: "net.ipv4.tcp_tw_reuse", Values: []string{"1"}, Why: "outgoing connections reuse TIME_WAIT ports"},
	{Name: "net.ipv4.tcp_syncookies", Values: []string{"1"}, Why: "the advice table's value"},
	{Name: "net.ipv4.tcp_abort_on_overflow", Values: []string{"0"}, Why: "the advice table's value"},
	{Name: "net.ipv4.tcp_timestamps", Values: []string{"1"}, Why: "the advice table's value"},
	{Name: "net.ipv4.tcp_tw_recycle", Values: []string{"0"}, Why: "the advice table's value"},
	{Name: "net.ipv4.tcp_low_latency", Values: []string{"0"}, Why: "the advice table's value"},
	{Name: "net.ipv4.tcp_moderate_rcvbuf", Values: []string{"1"}, Why: "the advice table's value"},
	// The advice table proposes the default 7200 when it is below 60,
	// which it calls harmful; nothing else.
	{Name: "net.ipv4.tcp_keepalive_time", Values: []string{"7200"}, Why: "the kernel's default, which the advice table restores when the setting is below 60"},
	// Host-wide.
	{Name: "net.netfilter.nf_conntrack_max", Min: sizing.MinConntrackMax, Max: 1 << 24, Why: "sizing.Conntrack's floor to 16M entries (~5 GiB at ~320 B)"},
	{Name: "net.netfilter.nf_conntrack_buckets", Min: sizing.MinConntrackMax, Max: 1 << 24, Why: "as nf_conntrack_max, which it follows"},
	{Name: "net.ipv4.neigh.default.gc_thresh1", Min: 1 << 10, Max: 1 << 17, Why: "an eighth of gc_thresh3"},
	{Name: "net.ipv4.neigh.default.gc_thresh2", Min: 1 << 12, Max: 1 << 19, Why: "half of gc_thresh3"},
	{Name: "net.ipv4.neigh.default.gc_thresh3", Min: 1 << 13, Max: 1 << 20, Why: "sizing.Neighbour's floor to 1M entries (~500 MiB)"},
	{Name: "net.ipv6.neigh.default.gc_thresh1", Min: 1 << 10, Max: 1 << 17, Why: "an eighth of gc_thresh3"},
	{Name: "net.ipv6.neigh.default.gc_thresh2", Min: 1 << 12, Max: 1 << 19, Why: "half of gc_thresh3"},
	{Name: "net.ipv6.neigh.default.gc_thresh3", Min: 1 << 13, Max: 1 << 20, Why: "sizing.Neighbour's floor to 1M entries (~500 MiB)"},
	{Name: "net.core.netdev_max_backlog", Min: 1000, Max: 1 << 18, Why: "the kernel's default to 256k packets per CPU"},
	{Name: "net.core.rmem_max", Min: 4 << 20, Max: 64 << 20, Why: "4 MiB, below which buffers' rule proposes 16 MiB, to 64 MiB"},
	{Name: "fs.file-max", Min: 8192, Max: 1 << 40, Why: "a limit, not memory: only ever raised"},
}

// allowed returns the set's entry for name.
func allowed(name string) (allowedSetting, bool) {
	i := slices.IndexFunc(allowedSettings, func(a allowedSetting) bool { return a.Name == name })
	if i < 0 {
		return allowedSetting{}, false
	}
	return allowedSettings[i], true
}

// AllowedSysctls lists the settings netdoctor plans, in docs/tune.md's
// order.
func AllowedSysctls() []string {
	out := make([]string, len(allowedSettings))
	for i, a := range allowedSettings {
		out[i] = a.Name
	}
	return out
}

// errNotPlanned reports a setting outside the set.
type errNotPlanned struct{ name string }

func (e errNotPlanned) Error() string {
	return fmt.Sprintf("%s is not a setting netdoctor plans (docs/tune.md lists them)", e.name)
}

// checkAllowed checks a proposal against the set: the name, the value's
// bounds, and the scope (a host-wide setting is written in the initial
// namespace, any other in the namespace the plan names).
func checkAllowed(s Sysctl) error {
	a, ok := allowed(s.Name)
	if !ok {
		return errNotPlanned{s.Name}
	}
	if g := rules.GlobalSysctl(s.Name); g != s.Global {
		if g {
			return fmt.Errorf("%s is host-wide: the plan must say so (\"global\": true)", s.Name)
		}
		return fmt.Errorf("%s is a namespace's setting, not host-wide", s.Name)
	}
	return a.check(s.Proposed)
}

// check checks a value against the setting's bounds.
func (a allowedSetting) check(v string) error {
	switch {
	case len(a.Values) > 0:
		if !slices.Contains(a.Values, v) {
			return fmt.Errorf("%s = %q: netdoctor only sets it to %s (%s)", a.Name, v, strings.Join(a.Values, " or "), a.Why)
		}
	case a.Range:
		lo, hi, ok := portRange(v)
		if !ok || lo < portRangeLow || hi != sizing.PortRangeHigh || lo%1000 != 0 || hi-lo+1 < sizing.DefaultPortWidth {
			return fmt.Errorf("%s = %q is outside netdoctor's bounds (%s)", a.Name, v, a.Why)
		}
	default:
		n, err := decimal(v)
		if err != nil || n < a.Min || n > a.Max {
			return fmt.Errorf("%s = %q is outside netdoctor's bounds %d–%d (%s)", a.Name, v, a.Min, a.Max, a.Why)
		}
	}
	return nil
}

// checkLive checks a proposal against the value in force, which apply
// reads when it runs: a limit (values.go: the neighbour thresholds, the
// keepalive time and the port range's width too) only goes up.
func checkLive(s Sysctl, cur string) error {
	if isLimit(s.Name) && larger(normalize(cur), s.Proposed) {
		return fmt.Errorf("%s %s → %s would lower a limit", s.Name, normalize(cur), s.Proposed)
	}
	return nil
}

// portRange parses "LOW HIGH" as netdoctor writes it: two decimal
// numbers and one space.
func portRange(v string) (lo, hi int64, ok bool) {
	l, h, found := strings.Cut(v, " ")
	if !found {
		return 0, 0, false
	}
	lo, err1 := decimal(l)
	hi, err2 := decimal(h)
	return lo, hi, err1 == nil && err2 == nil
}

// decimal parses a number as netdoctor writes it: digits only, no sign,
// no leading zero (the kernel would take "+61" or "0x10"; a plan may
// not).
func decimal(v string) (int64, error) {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || strconv.FormatInt(n, 10) != v || n < 0 {
		return 0, fmt.Errorf("%q is not a decimal number", v)
	}
	return n, nil
}
