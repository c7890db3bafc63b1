package report_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/netdoctor/netdoctor/internal/report"
)

// TestActions: each constructor's typed fields, the JSON a script reads,
// and the lines a person reads, which Render joins in order.
func TestActions(t *testing.T) {
	acts := []report.Action{
		report.SetSysctl("net.netfilter.nf_conntrack_max", "262144", "srv", true).Because("global: set it in the initial namespace"),
		report.Command("echo 262144 > /sys/module/nf_conntrack/parameters/hashsize", "grow the hash with the table, or chains get long"),
		report.SetSysctl("net.core.somaxconn", "4096", "srv", false),
		report.SetSysctl("net.ipv4.ip_local_port_range", "10000 65535", "", false),
		report.Edit("nginx", "/etc/nginx/nginx.conf:18", []string{"tcp_nodelay on;"}, "set `tcp_nodelay on;` at /etc/nginx/nginx.conf:18 (nginx's default), then nginx -s reload"),
		report.Relisten("php-fpm", "127.0.0.1:9000", []int{42, 43}, 4096, "raise the listen() backlog of 127.0.0.1:9000 to 4096"),
		report.Advise("why 4096: the queue must hold a burst"),
		report.SetSysctl("net.ipv4.tcp_tw_reuse", "1", "srv", false).Worded("reuse TIME_WAIT ports: ip netns exec srv sysctl -w net.ipv4.tcp_tw_reuse=1"),
	}
	nsKeep := "not in /etc/sysctl.d, which is read for the initial namespace only: run the command above where the namespace is created (its setup script, the CNI plugin's tuning), or give the container the sysctl (docker run --sysctl net.core.somaxconn=4096, Kubernetes securityContext.sysctls)"
	wantLines := []string{
		"sysctl -w net.netfilter.nf_conntrack_max=262144  (global: set it in the initial namespace)",
		"persist: echo 'net.netfilter.nf_conntrack_max = 262144' > /etc/sysctl.d/90-netdoctor-net.netfilter.nf_conntrack_max.conf",
		"echo 262144 > /sys/module/nf_conntrack/parameters/hashsize  (grow the hash with the table, or chains get long)",
		"ip netns exec srv sysctl -w net.core.somaxconn=4096",
		"persist: " + nsKeep,
		`sysctl -w net.ipv4.ip_local_port_range="10000 65535"`,
		"persist: echo 'net.ipv4.ip_local_port_range = 10000 65535' > /etc/sysctl.d/90-netdoctor-net.ipv4.ip_local_port_range.conf",
		"set `tcp_nodelay on;` at /etc/nginx/nginx.conf:18 (nginx's default), then nginx -s reload",
		"raise the listen() backlog of 127.0.0.1:9000 to 4096",
		"why 4096: the queue must hold a burst",
		"reuse TIME_WAIT ports: ip netns exec srv sysctl -w net.ipv4.tcp_tw_reuse=1",
	}
	if diff := cmp.Diff(wantLines, report.Render(acts)); diff != "" {
		t.Errorf("Render() mismatch (-want +got):\n%s", diff)
	}
	js, err := json.Marshal(acts)
	if err != nil {
		t.Fatal(err)
	}
	var got []map[string]any
	if err := json.Unmarshal(js, &got); err != nil {
		t.Fatal(err)
	}
	want := []map[string]any{
		{"kind": "sysctl", "command": "sysctl -w net.netfilter.nf_conntrack_max=262144", "setting": "net.netfilter.nf_conntrack_max", "value": "262144", "scope": "host",
			"persist": "echo 'net.netfilter.nf_conntrack_max = 262144' > /etc/sysctl.d/90-netdoctor-net.netfilter.nf_conntrack_max.conf", "note": "global: set it in the initial namespace"},
		{"kind": "command", "command": "echo 262144 > /sys/module/nf_conntrack/parameters/hashsize", "scope": "host", "note": "grow the hash with the table, or chains get long"},
		{"kind": "sysctl", "command": "ip netns exec srv sysctl -w net.core.somaxconn=4096", "setting": "net.core.somaxconn", "value": "4096", "scope": "netns srv", "note": "persist: " + nsKeep},
		{"kind": "sysctl", "command": `sysctl -w net.ipv4.ip_local_port_range="10000 65535"`, "setting": "net.ipv4.ip_local_port_range", "value": "10000 65535", "scope": "host",
			"persist": "echo 'net.ipv4.ip_local_port_range = 10000 65535' > /etc/sysctl.d/90-netdoctor-net.ipv4.ip_local_port_range.conf"},
		{"kind": "config", "config": "tcp_nodelay on;", "file": "/etc/nginx/nginx.conf:18", "app": "nginx", "note": wantLines[7]},
		{"kind": "listen", "app": "php-fpm", "addr": "127.0.0.1:9000", "pids": []any{42.0, 43.0}, "backlog": 4096.0, "note": wantLines[8]},
		{"kind": "note", "note": "why 4096: the queue must hold a burst"},
		{"kind": "sysctl", "command": "ip netns exec srv sysctl -w net.ipv4.tcp_tw_reuse=1", "setting": "net.ipv4.tcp_tw_reuse", "value": "1", "scope": "netns srv", "note": wantLines[10]},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("JSON mismatch (-want +got):\n%s", diff)
	}
	if k := report.Keep("net.core.somaxconn", "4096", "srv", false); !strings.HasPrefix(k, "not in /etc/sysctl.d") {
		t.Errorf("Keep of a namespace's setting = %q", k)
	}
}

// TestReadOldFix: a report written before fixes were data gets its fix
// lines as notes, never parsed for the commands they may spell.
func TestReadOldFix(t *testing.T) {
	doc := `{"version": 1, "command": "check", "verdict": "HEALTHY: no problem found", "findings": [{"id": "x", "severity": "warning", "status": "active", "title": "t", "evidence": [], "fix": ["sysctl -w net.core.somaxconn=4096", "persist: echo"]}]}`
	r, err := report.Read(strings.NewReader(doc))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(report.Advice("sysctl -w net.core.somaxconn=4096", "persist: echo"), r.Findings[0].Actions); diff != "" {
		t.Errorf("actions of an old report (-want +got):\n%s", diff)
	}
}
