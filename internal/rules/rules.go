package rules

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/netdoctor/netdoctor/internal/evidence"
	"github.com/netdoctor/netdoctor/internal/netns"
	"github.com/netdoctor/netdoctor/internal/report"
)

// counterItem is evidence that a counter rose in the window.
func counterItem(w evidence.Window, name string) (report.Item, uint64) {
	d, _ := w.Counter(name)
	return report.Item{
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

func settingItem(name, value string) report.Item {
	return report.Item{Text: fmt.Sprintf("%s = %s", name, value), Source: "sysctl"}
}

// sysctlFix returns the runtime and persistent forms of a setting: the
// `sysctl -w` (in the namespace observed, for a per-namespace setting)
// and how to keep it across reboots. report.Actions reads the two lines
// back as one sysctl action (TestSysctlFixActions).
func sysctlFix(b *evidence.Bundle, name, value string) []string {
	prefix := ""
	if !GlobalSysctl(name) {
		prefix = netns.Parse(b.Host.NetNS).ExecPrefix()
	}
	v := value
	if strings.ContainsAny(v, " \t") {
		v = fmt.Sprintf("%q", v)
	}
	return []string{fmt.Sprintf("%ssysctl -w %s=%s", prefix, name, v), persistFix(prefix, name, value)}
}

// persistFix says how to keep a setting across reboots. In the host's
// namespace, one file per setting under /etc/sysctl.d: running it again
// replaces the value instead of adding a line. A namespace's settings
// are not the host's: /etc/sysctl.d applies to the initial namespace
// only, so they are set where the namespace is made.
func persistFix(prefix, name, value string) string {
	if prefix == "" {
		return fmt.Sprintf("persist: echo '%s = %s' > %s", name, value, PersistPath(name))
	}
	v := value
	if strings.ContainsAny(v, " \t") {
		v = fmt.Sprintf("%q", v)
	}
	return fmt.Sprintf("persist: not in /etc/sysctl.d, which is read for the initial namespace only: run the command above where the namespace is created (its setup script, the CNI plugin's tuning), or give the container the sysctl (docker run --sysctl %s=%s, Kubernetes securityContext.sysctls)", name, v)
}

// PersistPath is the file the persist advice writes one setting to:
// /etc/sysctl.d/90-netdoctor-NAME.conf. `tune apply --persist` writes
// /etc/sysctl.d/90-netdoctor.conf, read after it.
func PersistPath(name string) string { return "/etc/sysctl.d/90-netdoctor-" + name + ".conf" }

// GlobalSysctl reports settings that exist once per host, writable only
// from the initial namespace.
func GlobalSysctl(name string) bool {
	return strings.HasPrefix(name, "fs.") || strings.HasPrefix(name, "net.ipv4.neigh.default.") || strings.HasPrefix(name, "net.ipv6.neigh.default.") ||
		name == "net.netfilter.nf_conntrack_max" ||
		name == "net.netfilter.nf_conntrack_buckets" || name == "net.core.netdev_max_backlog" ||
		name == "net.core.rmem_max" || name == "net.core.wmem_max" || name == "net.ipv4.tcp_mem"
}
