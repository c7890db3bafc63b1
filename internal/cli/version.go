package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"strings"

	"golang.org/x/sys/unix"
)

// Commit is set at build time with -ldflags "-X ...cli.Commit=HASH";
// without it the Go toolchain's VCS stamp is used when there is one.
var Commit string

// runVersion prints the version and the commit on its first line
// ("netdoctor V (commit C)": scripts read "netdoctor V"), then the
// commit whole, the Go that built it and what this kernel offers the
// collectors: a bug report's first paragraph.
func runVersion(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("version", stderr)
	if _, err := parse(fs, args, stdout); err != nil {
		return err
	}
	commit, modified := Commit, false
	if bi, ok := debug.ReadBuildInfo(); ok && commit == "" {
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				commit = s.Value
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
	}
	if commit == "" {
		commit = "unknown"
	}
	short := commit
	if len(short) > 12 {
		short = short[:12]
	}
	if modified {
		commit += " (modified)"
		short += ", modified"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "netdoctor %s (commit %s)\ncommit: %s\ngo: %s %s/%s\n", Version, short, commit, runtime.Version(), runtime.GOOS, runtime.GOARCH)
	var u unix.Utsname
	if unix.Uname(&u) == nil {
		fmt.Fprintf(&b, "kernel: %s\n", unix.ByteSliceToString(u.Release[:]))
	}
	for _, f := range kernelFeatures() {
		fmt.Fprintf(&b, "  %-22s %s\n", f.name+":", f.state)
	}
	_, err := io.WriteString(stdout, b.String())
	return err
}

type feature struct{ name, state string }

// kernelFeatures says which of the kernel's interfaces the collectors
// use are there, from files anyone can stat.
func kernelFeatures() []feature {
	has := func(path, yes, no string) string {
		if _, err := os.Stat(path); err == nil {
			return yes
		}
		return no
	}
	return []feature{
		{"network namespaces", has("/proc/self/ns/net", "yes", "no")},
		{"conntrack statistics", has("/proc/net/stat/nf_conntrack", "/proc/net/stat/nf_conntrack", has("/proc/sys/net/netfilter/nf_conntrack_max", "netlink only (no CONFIG_NF_CONNTRACK_PROCFS)", "no conntrack"))},
		{"kernel log", has("/dev/kmsg", "/dev/kmsg", "none")},
		{"BTF", has("/sys/kernel/btf/vmlinux", "yes (tracepoints with types)", "no")},
		{"drop reasons", has("/sys/kernel/tracing/events/skb/kfree_skb", "skb:kfree_skb", has("/sys/kernel/debug/tracing/events/skb/kfree_skb", "skb:kfree_skb", "not visible (tracefs not mounted, or not root)"))},
		{"pressure (PSI)", has("/proc/pressure/cpu", "yes", "no")},
	}
}
