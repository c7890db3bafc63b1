package tune

import (
	"strings"
	"testing"

	"github.com/netdoctor/netdoctor/internal/rules"
)

// TestPorts: 984 connections/s, each port held 60 s in TIME_WAIT, need
// more ports than any range holds: the widest, 10000–65535, as headroom,
// and the reason says that keeping connections open is the fix.
func TestPorts(t *testing.T) {
	p := build(t, pick(t, readSeed000(t), rules.EphemeralPortExhaustion), seed000Host())
	c := change(p, "sysctl:net.ipv4.ip_local_port_range@")
	if c == nil || c.Sysctl.Current != "20000 20050" || c.Sysctl.Proposed != "10000 65535" {
		t.Fatalf("port range: %s, want 20000 20050 → 10000 65535", titles(p))
	}
	want := "984 connections/s × 60 s in TIME_WAIT × 1.25 = 73805 ports needed per destination; the range gives 55536 (it had 51); the range alone cannot hold them: keeping connections open (upstream-connection-churn) is the fix, the range is headroom"
	if strings.Join(c.Why, "\n") != want {
		t.Errorf("why %q, want %q", c.Why, want)
	}
}

// TestPortsReuse: with tcp_tw_reuse on, a port is held 1 s: the kernel's
// default width (28232 ports), at the top of the range, is enough for
// 984 connections/s.
func TestPortsReuse(t *testing.T) {
	h := seed000Host()
	h.sysctls["netns net.ipv4.tcp_tw_reuse"] = "1"
	p := build(t, pick(t, readSeed000(t), rules.EphemeralPortExhaustion), h)
	if s := sysctlChange(t, p, "net.ipv4.ip_local_port_range"); s.Proposed != "37000 65535" {
		t.Errorf("port range → %s, want the default width, 37000 65535", s.Proposed)
	}
}

// TestPortsWideEnough: with tcp_tw_reuse on, the kernel's default range
// (32768–60999) holds 984 connections/s: it is left.
func TestPortsWideEnough(t *testing.T) {
	h := seed000Host()
	h.sysctls["netns net.ipv4.tcp_tw_reuse"] = "1"
	h.sysctls["netns net.ipv4.ip_local_port_range"] = "32768 60999"
	p := build(t, pick(t, readSeed000(t), rules.EphemeralPortExhaustion), h)
	if len(p.Changes) != 0 || len(p.Notes) != 0 {
		t.Errorf("range wide enough, yet: %s", titles(p))
	}
}
