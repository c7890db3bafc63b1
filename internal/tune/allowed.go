package tune

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/netdoctor/netdoctor/internal/rules"
	"github.com/netdoctor/netdoctor/internal/sizing"
)

// The kernel settings netdoctor plans, and the values it may propose for
// each: the only ones apply writes, whatever a plan file says, because a
// plan is data that anyone may have edited before it reached root (a
// core_pattern starting with "|" runs a program). Build refuses to
// propose a name outside the set (an internal error: a fix that needs a
// new setting declares it in its finding's class, with its bounds, and
// adds it to docs/tune.md) and notes a value outside its bounds instead
// of proposing it.

// allowedSetting is a setting netdoctor plans and the values it may
// propose, as the class of the finding whose fix it is declares it
// (rules.Class.Tunables): one of Values when set, else "LOW HIGH" when
// Range, else an integer in [Min, Max].
type allowedSetting struct{ rules.Tunable }

// portRangeLow is the lowest port an ephemeral range may start at: below
// it live the registered services' ports (sizing.Ports starts there at
// the lowest).
const portRangeLow = 10000

// allowedSettings is the set, every finding's, in the rules' order.
var allowedSettings = sync.OnceValue(func() []allowedSetting {
	var out []allowedSetting
	for _, t := range rules.Tunables() {
		out = append(out, allowedSetting{t})
	}
	return out
})

// allowed returns the set's entry for name.
func allowed(name string) (allowedSetting, bool) {
	set := allowedSettings()
	i := slices.IndexFunc(set, func(a allowedSetting) bool { return a.Name == name })
	if i < 0 {
		return allowedSetting{}, false
	}
	return set[i], true
}

// AllowedSysctls lists the settings netdoctor plans, in the rules'
// order (docs/tune.md lists them all).
func AllowedSysctls() []string {
	set := allowedSettings()
	out := make([]string, len(set))
	for i, a := range set {
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
