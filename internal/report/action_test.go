package report_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/netdoctor/netdoctor/internal/report"
)

// TestActions: fix lines as the rules write them, read as actions.
func TestActions(t *testing.T) {
	fix := []string{
		"sysctl -w net.netfilter.nf_conntrack_max=262144  (global: set it in the initial namespace)",
		"persist: echo 'net.netfilter.nf_conntrack_max = 262144' > /etc/sysctl.d/90-netdoctor-net.netfilter.nf_conntrack_max.conf",
		"echo 262144 > /sys/module/nf_conntrack/parameters/hashsize  (grow the hash with the table, or chains get long)",
		"ip netns exec srv sysctl -w net.core.somaxconn=4096",
		"persist: not in /etc/sysctl.d, which is read for the initial namespace only: …",
		"set `tcp_nodelay on;` at /etc/nginx/nginx.conf:18 (nginx's default), then nginx -s reload",
		"why 4096: the queue must hold a burst",
		"prlimit --pid 42 --nofile=65535:65535  (until it restarts)",
	}
	want := []report.Action{
		{Kind: "sysctl", Command: "sysctl -w net.netfilter.nf_conntrack_max=262144", Setting: "net.netfilter.nf_conntrack_max", Value: "262144", Scope: "host",
			Persist: "echo 'net.netfilter.nf_conntrack_max = 262144' > /etc/sysctl.d/90-netdoctor-net.netfilter.nf_conntrack_max.conf", Note: "global: set it in the initial namespace"},
		{Kind: "command", Command: "echo 262144 > /sys/module/nf_conntrack/parameters/hashsize", Scope: "host", Note: "grow the hash with the table, or chains get long"},
		{Kind: "sysctl", Command: "ip netns exec srv sysctl -w net.core.somaxconn=4096", Setting: "net.core.somaxconn", Value: "4096", Scope: "netns srv",
			Note: "persist: not in /etc/sysctl.d, which is read for the initial namespace only: …"},
		{Kind: "config", Config: "tcp_nodelay on;", File: "/etc/nginx/nginx.conf:18", Note: fix[5]},
		{Kind: "note", Note: "why 4096: the queue must hold a burst"},
		{Kind: "command", Command: "prlimit --pid 42 --nofile=65535:65535", Scope: "process 42", Note: "until it restarts"},
	}
	if diff := cmp.Diff(want, report.Actions(fix)); diff != "" {
		t.Errorf("Actions() mismatch (-want +got):\n%s", diff)
	}
}
