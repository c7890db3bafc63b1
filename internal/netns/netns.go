package netns

import (
	"os"
	"path/filepath"
	"strings"
)

// NS is one network namespace: the caller's own (an empty Path) or one
// that `ip netns` names or a path designates (/proc/PID/ns/net, a bind
// mount). Resolve it once and carry it: it knows how to enter itself
// (Do), how a shell enters it (ExecPrefix) and which resolv.conf its
// programs read (ResolvConf).
type NS struct {
	// Name is the namespace's `ip netns` name: it was given by name, or
	// by a path under /run/netns. Empty otherwise.
	Name string
	// Path is the file setns(2) opens; empty for the caller's own.
	Path string
	// Inode identifies the namespace: the id the kernel prints ("table
	// full in netns 4026532246") and /proc/PID/ns/net links to. Zero
	// when unknown (Parse does not look).
	Inode uint64
}

// runDirs are where `ip netns add` keeps its namespaces (/var/run is
// /run on every current distribution; old bundles may name either).
var runDirs = []string{"/run/netns", "/var/run/netns"}

// Parse reads a namespace as the user gave it, by `ip netns` name or by
// path, without looking at the system: for reports and plans read from
// a file. "" is the caller's own namespace.
func Parse(nameOrPath string) NS {
	if nameOrPath == "" {
		return NS{}
	}
	if !strings.ContainsRune(nameOrPath, '/') {
		return NS{Name: nameOrPath, Path: filepath.Join(runDirs[0], nameOrPath)}
	}
	n := NS{Path: nameOrPath}
	dir, base := filepath.Split(filepath.Clean(nameOrPath))
	for _, d := range runDirs {
		if filepath.Clean(dir) == d && base != "." && base != ".." {
			n.Name = base
		}
	}
	return n
}

// Own reports whether n is the caller's own namespace.
func (n NS) Own() bool { return n.Path == "" }

// String is the namespace as a user names it: its name, else its path;
// "" for the caller's own.
func (n NS) String() string {
	if n.Name != "" {
		return n.Name
	}
	return n.Path
}

// ExecPrefix is what runs a command inside the namespace from a shell:
// "ip netns exec NAME " for a named one (which also bind-mounts its
// /etc/netns/NAME files), "nsenter --net=PATH " for another, "" for
// the caller's own.
func (n NS) ExecPrefix() string {
	switch {
	case n.Own():
		return ""
	case n.Name != "":
		return "ip netns exec " + n.Name + " "
	}
	return "nsenter --net=" + n.Path + " "
}

// ResolvConf is the resolv.conf the namespace's programs read: for a
// named namespace /etc/netns/NAME/resolv.conf when it exists (`ip netns
// exec` bind-mounts it over /etc/resolv.conf), otherwise
// /etc/resolv.conf.
func (n NS) ResolvConf() string { return n.resolvConfIn("/etc") }

func (n NS) resolvConfIn(etc string) string {
	def := filepath.Join(etc, "resolv.conf")
	if n.Name == "" || n.Name == "." || n.Name == ".." || strings.ContainsRune(n.Name, '/') {
		return def
	}
	p := filepath.Join(etc, "netns", n.Name, "resolv.conf")
	if _, err := os.Stat(p); err != nil {
		return def
	}
	return p
}
