package tune

import (
	"strings"
	"testing"

	"github.com/netdoctor/netdoctor/internal/report"
	"github.com/netdoctor/netdoctor/internal/rules"
)

// TestPorts: nginx attempted a connect for each of the load's 45828
// requests a second (984 got a port: a connect that finds none sends no
// SYN), each port held 60 s in TIME_WAIT: more ports than any range
// holds. The widest, 10000–65535, as headroom, and the reason says that
// keeping connections open is the fix.
func TestPorts(t *testing.T) {
	p := build(t, pick(t, readSeed000(t), rules.EphemeralPortExhaustion), seed000Host())
	c := change(p, "sysctl:net.ipv4.ip_local_port_range@")
	if c == nil || c.Sysctl.Current != "20000 20050" || c.Sysctl.Proposed != "10000 65535" {
		t.Fatalf("port range: %s, want 20000 20050 → 10000 65535", titles(p))
	}
	want := "45828 connections/s × 60 s in TIME_WAIT × 1.25 = 3437110 ports needed per destination; the range gives 55536 (it had 51); the range alone cannot hold them: keeping connections open (upstream-connection-churn) is the fix, the range is headroom"
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
	p := build(t, latentPorts(t), h)
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
	onlyNote(t, build(t, latentPorts(t), h), "net.ipv4.ip_local_port_range (32768 60999) already holds the 1250 ports")
}

// latentPorts is seed 000's port finding as a latent one (a range too
// small, nothing exhausted) under a load of 1000 requests a second, about
// the 984 connections/s the kernel counted.
func latentPorts(t *testing.T) *Input {
	t.Helper()
	in := pick(t, readSeed000(t), rules.EphemeralPortExhaustion)
	in.Findings[0].Status = report.Latent
	in.Load.RPS = 1000
	return in
}
