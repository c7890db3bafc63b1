package rules

import (
	"strings"
	"testing"

	"github.com/netdoctor/netdoctor/internal/evidence"
	"github.com/netdoctor/netdoctor/internal/report"
)

// Regressions for bugs found by review; each failed before its fix.

// A failed socket dump must not hide rising overflow counters.
func TestListenWithoutSockets(t *testing.T) {
	b := bundle(func(s *evidence.Snapshot) { s.Sockets = nil },
		all(func(s *evidence.Snapshot) { s.Sockets = nil }, raise(50, "TcpExt.ListenOverflows", "TcpExt.TCPReqQFullDrop")))
	got := keys(checkListen(on(b)))
	if len(got) != 2 || got[0].ID != "accept-queue-overflow" || got[1].ID != "syn-queue-overflow" {
		t.Errorf("checkListen(on()) without sockets = %v, want accept- and syn-queue-overflow", got)
	}
}

// A missing sysctl is unknown, not zero: no "tcp_syncookies = 0" claim,
// no advice to raise somaxconn from 0.
func TestMissingSysctlsAreUnknown(t *testing.T) {
	drop := func(names ...string) func(*evidence.Snapshot) {
		return func(s *evidence.Snapshot) {
			for _, n := range names {
				delete(s.Sysctls, n)
			}
		}
	}
	gone := drop("net.ipv4.tcp_syncookies", "net.core.somaxconn", "net.ipv4.tcp_max_tw_buckets")
	b := bundle(all(gone, listeners(nginxFull)), all(gone, listeners(nginxFull),
		raise(10, "TcpExt.TCPReqQFullDoCookies", "TcpExt.ListenOverflows", "TcpExt.TCPTimeWaitOverflow")))
	for _, f := range append(checkListen(on(b)), checkTimeWait(on(b))...) {
		for _, text := range append(evidenceTexts(f), fixOf(f)...) {
			if strings.Contains(text, "= 0") || strings.Contains(text, "somaxconn=4096") || strings.Contains(text, "is 0") {
				t.Errorf("%s claims a missing sysctl: %q", f.ID, text)
			}
		}
	}
}

// A resolver that answers SERVFAIL or REFUSED to everything does not work.
func TestDNSRefusedIsFailure(t *testing.T) {
	b := bundle(nil, func(s *evidence.Snapshot) {
		s.Resolver = &evidence.Resolver{ConfPath: "/etc/resolv.conf", Nameservers: []string{"10.0.0.53"}, Probes: []evidence.DNSProbe{
			{Server: "10.0.0.53", Type: "A", Name: "web1", Rcode: "REFUSED"},
		}}
	})
	got := keys(checkDNS(on(b)))
	if len(got) != 1 || got[0].ID != "dns-misconfigured" {
		t.Errorf("checkDNS(on()) with REFUSED = %v, want dns-misconfigured", got)
	}
}

// A one-port range with no connections is latent, not "exhausted towards ".
func TestPortsNoRemote(t *testing.T) {
	one := all(setSysctl("net.ipv4.ip_local_port_range", "40000 40000"), func(s *evidence.Snapshot) { s.Sockets.Remotes = nil })
	b := bundle(one, one)
	for _, f := range checkPorts(on(b)) {
		if f.Status == report.Active {
			t.Errorf("checkPorts(on()) with no remotes fired active: %+v", f)
		}
	}
}

// Fixes for a namespace given as a path use nsenter: ip netns exec only
// takes names.
func TestSysctlFixNetnsPath(t *testing.T) {
	b := inNetNS(bundle(nil, nil), "/proc/4242/ns/net")
	if got := sysctlFix(b, "net.core.somaxconn", "4096").Lines[0]; got != "nsenter --net=/proc/4242/ns/net sysctl -w net.core.somaxconn=4096" {
		t.Errorf("sysctlFix() = %q", got)
	}
	if got := Check(&evidence.Bundle{}); got != nil {
		t.Errorf("Run() on an empty bundle = %v, want nil", got)
	}
}

// Ticks that go down (iowait) must not hide a busy CPU.
func TestCPUTicksGoingDown(t *testing.T) {
	b := bundle(func(s *evidence.Snapshot) {
		s.CPU = []evidence.CPU{{CPU: 0, Idle: 1000, IOWait: 5}}
	}, func(s *evidence.Snapshot) {
		s.CPU = []evidence.CPU{{CPU: 0, User: 100, Idle: 1000, IOWait: 4}}
	})
	if got := keys(checkCPU(on(b))); len(got) != 1 || got[0].ID != "cpu-saturated" {
		t.Errorf("checkCPU(on()) = %v, want cpu-saturated", got)
	}
}
