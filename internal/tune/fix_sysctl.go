package tune

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/netdoctor/netdoctor/internal/report"
	"github.com/netdoctor/netdoctor/internal/rules"
	"github.com/netdoctor/netdoctor/internal/sizing"
)

// This file fixes the findings of rules/sysctl.go, settings copied from
// old advice (riskySysctl), and of rules/timewait.go (twBuckets), which
// sizes the same tcp_max_tw_buckets the advice table corrects. generic,
// the fix of every finding without one of its own, is here too: it takes
// the setting the finding's fix sets.

var _ = planFix(rules.RiskySysctl, rankRest, (*builder).riskySysctl)

// riskySysctl corrects the setting a risky-sysctl finding names.
func (b *builder) riskySysctl(f report.Finding) error { return b.risky(f, f.About.Setting) }

var _ = planFix(rules.TimewaitBucketOverflow, rankRest, (*builder).twBuckets)

// twBuckets raises tcp_max_tw_buckets past the sockets in TIME_WAIT.
func (b *builder) twBuckets(f report.Finding) error {
	return b.risky(f, "net.ipv4.tcp_max_tw_buckets")
}

// risky corrects a setting the advice table marks harmful.
func (b *builder) risky(f report.Finding, name string) error {
	cur, ok := b.current(name)
	if !ok {
		return b.generic(f)
	}
	v, err := strconv.ParseInt(strings.Fields(cur + " 0")[0], 10, 64)
	if err != nil {
		return b.generic(f)
	}
	bad, value, why, known := rules.Risky(name, v)
	if !known {
		return b.generic(f)
	}
	if !bad && f.ID == rules.RiskySysctl {
		b.satisfied(f, fmt.Sprintf("%s is %s now, no longer risky", name, cur))
		return nil
	}
	switch name {
	case "net.ipv4.tcp_max_tw_buckets":
		var more string
		value, more = b.twBucketsValue(name)
		why += more
	case "net.core.somaxconn":
		value = strconv.Itoa(max(atoi(value), b.somax))
	}
	return b.sysctl(f, name, value, name+": "+why)
}

// twBucketsValue sizes tcp_max_tw_buckets for four times the sockets in
// TIME_WAIT now, at least the kernel's own default, and says so.
func (b *builder) twBucketsValue(name string) (value, why string) {
	tw := b.in.Summary.TCPStates["TIME_WAIT"]
	want := max(sizing.MinTWBuckets, sizing.NextPow2(4*tw))
	if host, err := b.h.Sysctl(Scope{Global: true}, name); err == nil && atoi(host) > want {
		want = atoi(host) // the kernel's default there: half the established hash
	}
	value = strconv.Itoa(want)
	return value, fmt.Sprintf("; proposed %s: the larger of %d (the kernel's default with 4 GiB of memory or more, or the host namespace's own value when larger) and four times the %d sockets in TIME_WAIT now", value, sizing.MinTWBuckets, tw)
}

// generic takes the setting the finding's rule computed from its
// evidence, when its fix sets one: its first sysctl action.
func (b *builder) generic(f report.Finding) error {
	for _, a := range f.Actions {
		if a.Kind == report.ActionSysctl {
			return b.sysctl(f, a.Setting, a.Value, fmt.Sprintf("%s: the value %s's rule computed from its evidence (%s)", a.Setting, f.ID, evidenceText(f)))
		}
	}
	if len(f.Fix) > 0 {
		// The fix's words, for a person: what to do by hand.
		b.note(f, "no automatic change: "+f.Fix[0])
	}
	return nil
}

// evidenceText is what the finding measured over the window (else its
// first item), for the reason of a generic change.
func evidenceText(f report.Finding) string {
	var t []string
	for _, e := range f.Evidence {
		if e.Window {
			t = append(t, e.Text)
		}
	}
	if len(t) == 0 && len(f.Evidence) > 0 {
		t = append(t, f.Evidence[0].Text)
	}
	return strings.Join(t, "; ")
}
