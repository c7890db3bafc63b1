package rules

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/netdoctor/netdoctor/internal/evidence"
	"github.com/netdoctor/netdoctor/internal/report"
)

// TestPersistFix: the persist advice is idempotent, a file per setting
// written with > (never appended to), and in a namespace it never names
// /etc/sysctl.d, which applies to the initial namespace only; a global
// setting seen from a namespace is the host's, persisted in its file.
func TestPersistFix(t *testing.T) {
	host := &evidence.Bundle{}
	ns := &evidence.Bundle{Host: evidence.Host{NetNS: "srv"}}
	byPath := &evidence.Bundle{Host: evidence.Host{NetNS: "/proc/42/ns/net"}}
	for _, c := range []struct {
		name         string
		b            *evidence.Bundle
		setting, v   string
		run, persist string
	}{
		{"host", host, "net.core.somaxconn", "4096", "sysctl -w net.core.somaxconn=4096",
			"persist: echo 'net.core.somaxconn = 4096' > /etc/sysctl.d/90-netdoctor-net.core.somaxconn.conf"},
		{"host, spaces", host, "net.ipv4.ip_local_port_range", "10000 65535", `sysctl -w net.ipv4.ip_local_port_range="10000 65535"`,
			"persist: echo 'net.ipv4.ip_local_port_range = 10000 65535' > /etc/sysctl.d/90-netdoctor-net.ipv4.ip_local_port_range.conf"},
		{"netns", ns, "net.core.somaxconn", "4096", "ip netns exec srv sysctl -w net.core.somaxconn=4096",
			"persist: not in /etc/sysctl.d, which is read for the initial namespace only: run the command above where the namespace is created (its setup script, the CNI plugin's tuning), or give the container the sysctl (docker run --sysctl net.core.somaxconn=4096, Kubernetes securityContext.sysctls)"},
		{"netns path", byPath, "net.ipv4.tcp_syncookies", "1", "nsenter --net=/proc/42/ns/net sysctl -w net.ipv4.tcp_syncookies=1", "persist: not in /etc/sysctl.d"},
		{"global from a netns", ns, "fs.file-max", "262144", "sysctl -w fs.file-max=262144",
			"persist: echo 'fs.file-max = 262144' > /etc/sysctl.d/90-netdoctor-fs.file-max.conf"},
	} {
		got := sysctlFix(c.b, c.setting, c.v).Lines
		if len(got) != 2 || got[0] != c.run || !strings.HasPrefix(got[1], c.persist) {
			t.Errorf("%s: sysctlFix = %q, want %q and %q…", c.name, got, c.run, c.persist)
		}
		if c.b.Host.NetNS != "" && !GlobalSysctl(c.setting) && strings.Contains(got[1], "90-netdoctor") {
			t.Errorf("%s: a namespace's setting persisted in the host's file: %q", c.name, got[1])
		}
	}

	// Run the host's advice twice in a scratch root: one file, one line,
	// the latest value.
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh")
	}
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "etc/sysctl.d"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"4096", "4096", "8192"} {
		cmd := sysctlFix(host, "net.core.somaxconn", v).Persist
		cmd = strings.ReplaceAll(cmd, "/etc/", root+"/etc/")
		if out, err := exec.Command("sh", "-c", cmd).CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", cmd, err, out)
		}
	}
	files, _ := filepath.Glob(filepath.Join(root, "etc/sysctl.d/*"))
	b, _ := os.ReadFile(filepath.Join(root, "etc/sysctl.d/90-netdoctor-net.core.somaxconn.conf"))
	if len(files) != 1 || string(b) != "net.core.somaxconn = 8192\n" {
		t.Errorf("after running the advice three times: files %v, content %q; want one file holding the last value", files, b)
	}
}

// TestSysctlFixActions: a setting is one sysctl action, with its scope
// and the persist command only where a host file applies; its lines are
// the command and how to keep it.
func TestSysctlFixActions(t *testing.T) {
	for _, c := range []struct {
		b                     *evidence.Bundle
		setting, value, scope string
		persist               bool
	}{
		{&evidence.Bundle{}, "net.core.somaxconn", "4096", "host", true},
		{&evidence.Bundle{}, "net.ipv4.ip_local_port_range", "10000 65535", "host", true},
		{&evidence.Bundle{Host: evidence.Host{NetNS: "srv"}}, "net.ipv4.ip_local_port_range", "10000 65535", "netns srv", false},
		{&evidence.Bundle{Host: evidence.Host{NetNS: "/proc/42/ns/net"}}, "net.core.somaxconn", "8", "netns /proc/42/ns/net", false},
		{&evidence.Bundle{Host: evidence.Host{NetNS: "srv"}}, "fs.file-max", "262144", "host", true},
	} {
		a := sysctlFix(c.b, c.setting, c.value)
		fix := a.Lines
		if a.Kind != report.ActionSysctl || len(fix) != 2 || a.Command != fix[0] || a.Setting != c.setting || a.Value != c.value || a.Scope != c.scope ||
			(a.Persist != "") != c.persist || (c.persist && "persist: "+a.Persist != fix[1]) || (!c.persist && !strings.Contains(a.Note, "securityContext.sysctls")) {
			t.Errorf("sysctlFix(%s, %s) = %+v", c.setting, c.value, a)
		}
	}
}
