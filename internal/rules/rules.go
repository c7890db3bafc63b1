package rules

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/netdoctor/netdoctor/internal/evidence"
	"github.com/netdoctor/netdoctor/internal/report"
)

// counterItem is evidence that a counter rose in the window.
func counterItem(w evidence.Window, name string) (report.Item, uint64) {
	d, _ := w.Counter(name)
	return report.Item{
		Text:   fmt.Sprintf("%s +%d in %s (%.1f/s)", evidence.Nstat(name), d, round(w), w.Rate(name)),
		Source: evidence.Nstat(name), Window: true,
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

func settingItem(name, value string) report.Item {
	return report.Item{Text: fmt.Sprintf("%s = %s", name, value), Source: "sysctl"}
}

// sysctlFix is the action that sets a setting: its `sysctl -w`, in the
// namespace observed for a per-namespace setting, and how to keep it
// across reboots (report.SetSysctl).
func sysctlFix(b *evidence.Bundle, name, value string) report.Action {
	return report.SetSysctl(name, value, b.Host.NetNS, GlobalSysctl(name))
}

// keepFix says how to keep a setting across reboots, as sysctlFix's
// "persist: " line does.
func keepFix(b *evidence.Bundle, name, value string) string {
	return report.Keep(name, value, b.Host.NetNS, GlobalSysctl(name))
}

// edit is a change to a configuration at src, a setting's "file:line"
// (app.Setting.Source), with text, the line a person reads. Where the
// line is unknown ("default": not set there, to be added) the change is
// advice: a script cannot make it without its line.
func edit(app, src, text string, directives ...string) report.Action {
	if !position(src) {
		return report.Advise(text)
	}
	return report.Edit(app, src, directives, text)
}

// position reports a "file:line" source: an absolute path and a line.
func position(src string) bool {
	i := strings.LastIndexByte(src, ':')
	if i <= 0 || !strings.HasPrefix(src, "/") {
		return false
	}
	n, err := strconv.Atoi(src[i+1:])
	return err == nil && n > 0
}

// notes is advice, one note per line.
func notes(lines ...string) []report.Action { return report.Advice(lines...) }

// GlobalSysctl reports settings that exist once per host, writable only
// from the initial namespace.
func GlobalSysctl(name string) bool {
	return strings.HasPrefix(name, "fs.") || strings.HasPrefix(name, "net.ipv4.neigh.default.") || strings.HasPrefix(name, "net.ipv6.neigh.default.") ||
		name == "net.netfilter.nf_conntrack_max" ||
		name == "net.netfilter.nf_conntrack_buckets" || name == "net.core.netdev_max_backlog" ||
		name == "net.core.rmem_max" || name == "net.core.wmem_max" || name == "net.ipv4.tcp_mem"
}
