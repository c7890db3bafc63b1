package tune

import (
	"fmt"
	"io/fs"
	"os"
	"strings"
	"testing"

	"github.com/netdoctor/netdoctor/internal/report"
)

// recorded is a host as it was when testdata/seed000.json was captured
// (`netdoctor lab run nginx-php-throughput`, every fault): the server
// namespace's settings, the host-wide ones, and the two configuration
// files the report names, kept beside it.
type recorded struct {
	sysctls map[string]string // "netns name" or "host name"
	files   map[string]string // report path → testdata file
	procs   map[int]Proc
	mem     uint64
}

func (h *recorded) Sysctl(s Scope, name string) (string, error) {
	k := "netns " + name
	if s.Global {
		k = "host " + name
	}
	v, ok := h.sysctls[k]
	if !ok {
		return "", fmt.Errorf("%s: %w", name, fs.ErrNotExist)
	}
	return v, nil
}

func (h *recorded) ReadFile(path string) ([]byte, error) {
	f, ok := h.files[path]
	if !ok {
		return nil, fmt.Errorf("open %s: %w", path, fs.ErrNotExist)
	}
	return os.ReadFile(f)
}

func (h *recorded) Process(pid int) (Proc, error) {
	p, ok := h.procs[pid]
	if !ok {
		return Proc{}, fmt.Errorf("pid %d: %w", pid, fs.ErrNotExist)
	}
	return p, nil
}

func (h *recorded) MemAvailable() uint64 { return h.mem }

const labDir = "/tmp/netdoctor-lab-L28171-1145912215"

func seed000Host() *recorded {
	return &recorded{
		sysctls: map[string]string{
			"netns net.core.somaxconn": "10", "netns net.ipv4.ip_local_port_range": "20000\t20050",
			"netns net.ipv4.tcp_tw_reuse": "0", "netns net.ipv4.tcp_timestamps": "1", "netns net.ipv4.tcp_syncookies": "1",
			"netns net.ipv4.tcp_max_tw_buckets": "131072", "netns net.netfilter.nf_conntrack_tcp_timeout_time_wait": "120",
			"host net.netfilter.nf_conntrack_max": "200", "host net.netfilter.nf_conntrack_buckets": "262144",
			"host net.ipv4.tcp_max_tw_buckets": "131072",
		},
		files: map[string]string{
			labDir + "/nginx/nginx.conf": "testdata/seed000-nginx.conf",
			labDir + "/fpm/php-fpm.conf": "testdata/seed000-php-fpm.conf",
		},
		procs: map[int]Proc{
			28198: {Exe: "/usr/sbin/nginx", Cmdline: "nginx: master process /usr/sbin/nginx -p " + labDir + "/nginx -c " + labDir + "/nginx/nginx.conf", Start: 1, Comm: "nginx"},
			28195: {Exe: "/usr/sbin/php-fpm8.2", Cmdline: "php-fpm: master process (" + labDir + "/fpm/php-fpm.conf)", Start: 2, Comm: "php-fpm8.2", UID: 0},
		},
		mem: 20 << 30,
	}
}

func readSeed000(t *testing.T) *Input {
	t.Helper()
	f, err := os.Open("testdata/seed000.json")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	in, err := ReadInput(f)
	if err != nil {
		t.Fatal(err)
	}
	return in
}

func change(p *Plan, k string) *Change {
	for i := range p.Changes {
		if p.Changes[i].Key == k || strings.HasPrefix(p.Changes[i].Key, k) {
			return &p.Changes[i]
		}
	}
	return nil
}

// TestBuildSeed000 plans from seed 000's report: every kernel and
// configuration change the seed's author made one at a time, each value
// computed from the report, in an order apply can follow.
func TestBuildSeed000(t *testing.T) {
	p, err := Build(readSeed000(t), "seed000.json", seed000Host())
	if err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	p.Text(&text)
	t.Log(text.String())
	srv := Scope{NetNS: "nd-L28171-srv", NetNSInode: 4026532177}
	for _, w := range []struct {
		key, proposed string
		scope         Scope
	}{
		{"sysctl:net.core.somaxconn@", "4096", srv},
		// 999 accepted/s, 984 of them nginx's own to php-fpm, which the
		// plan keeps open: the hash's size is enough.
		{"sysctl:net.netfilter.nf_conntrack_max@", "262144", Scope{Global: true}},
		{"sysctl:net.ipv4.ip_local_port_range@", "10000 65535", srv},
	} {
		c := change(p, w.key)
		if c == nil || c.Sysctl == nil {
			t.Errorf("no %s", w.key)
			continue
		}
		if c.Sysctl.Proposed != w.proposed || c.Sysctl.Scope != w.scope {
			t.Errorf("%s: %s in %+v, want %s in %+v", w.key, c.Sysctl.Proposed, c.Sysctl.Scope, w.proposed, w.scope)
		}
	}
	if c := change(p, "sysctl:net.netfilter.nf_conntrack_buckets"); c != nil {
		t.Errorf("buckets raised though the maximum stays within them: %s", c.Title())
	}
	// What each change was made against, for a verification that cannot
	// see it.
	for _, c := range p.Changes {
		for _, target := range c.Findings {
			if p.Seen[target] == "" {
				t.Errorf("%s: target %s not recorded as seen", c.Key, target)
			}
		}
	}
	if got := p.Seen["conntrack-table-full"]; got != "critical active" {
		t.Errorf("seen conntrack-table-full: %q", got)
	}
	if c := change(p, "sysctl:net.core.somaxconn"); c != nil && c.Sysctl.Current != "10" {
		t.Errorf("somaxconn current %q", c.Sysctl.Current)
	}
	ng := change(p, "file:"+labDir+"/nginx/nginx.conf")
	if ng == nil {
		t.Fatal("no nginx change")
	}
	for _, want := range []string{"+        keepalive 128;\n", "+            fastcgi_keep_conn on;\n"} {
		if !strings.Contains(ng.File.Diff, want) {
			t.Errorf("nginx diff lacks %q:\n%s", want, ng.File.Diff)
		}
	}
	if want := []string{"/usr/sbin/nginx", "-t", "-q", "-p", labDir + "/nginx", "-c", labDir + "/nginx/nginx.conf"}; strings.Join(ng.File.Validate, " ") != strings.Join(want, " ") {
		t.Errorf("nginx validate %q", ng.File.Validate)
	}
	if ng.File.Reload.PID != 28198 || ng.File.Reload.Signal != "HUP" {
		t.Errorf("nginx reload %+v", ng.File.Reload)
	}
	old, _ := os.ReadFile("testdata/seed000-nginx.conf")
	if ng.File.Old != sum(old) || ng.File.New != sum([]byte(ng.File.Content)) {
		t.Errorf("nginx hashes do not match the files")
	}
	fpm := change(p, "file:"+labDir+"/fpm/php-fpm.conf")
	if fpm == nil {
		t.Fatal("no php-fpm change")
	}
	// 200 connections, each pinning a worker with fastcgi_keep_conn, plus
	// an eighth spare and the status page's: 226; static, since dynamic
	// forks 32 a second.
	for _, want := range []string{"+pm.max_children = 226\n", "-pm = dynamic\n", "+pm = static\n"} {
		if !strings.Contains(fpm.File.Diff, want) {
			t.Errorf("php-fpm diff lacks %q:\n%s", want, fpm.File.Diff)
		}
	}
	if fpm.File.Reload.Signal != "USR2" || !strings.HasSuffix(strings.Join(fpm.File.Validate, " "), "-R") {
		t.Errorf("php-fpm validate %q reload %+v", fpm.File.Validate, fpm.File.Reload)
	}
	// The queue that overflowed was php-fpm's, which asks listen() for
	// the limit (-1): no configuration change, but its socket keeps
	// backlog 10 over a reload, as nginx's keeps 10 of its 511 (its
	// backlog unchanged, the reload does not listen() again).
	if strings.Contains(ng.File.Diff, "backlog") || strings.Contains(fpm.File.Diff, "listen.backlog") {
		t.Errorf("a backlog change nobody needs:\n%s\n%s", ng.File.Diff, fpm.File.Diff)
	}
	for _, w := range []struct {
		addr                         string
		pid, asks, current, proposed int
	}{{"127.0.0.1:9000", 28195, -1, 10, 4096}, {"10.99.97.1:80", 28198, 511, 10, 511}} {
		l := change(p, "listen:"+w.addr)
		if l == nil || l.Listen.PID != w.pid || l.Listen.Backlog != w.asks || l.Listen.Current != w.current || l.Listen.Proposed != w.proposed {
			t.Errorf("listener %s: %+v, want %+v", w.addr, l, w)
		}
	}
	// Kernel settings, then files, then listeners.
	rank := map[string]int{KindSysctl: 0, KindFile: 1, KindListen: 2}
	for i := 1; i < len(p.Changes); i++ {
		if rank[p.Changes[i].Kind] < rank[p.Changes[i-1].Kind] {
			t.Errorf("change %d (%s) after a %s", i+1, p.Changes[i].Kind, p.Changes[i-1].Kind)
		}
	}
	if !strings.Contains(strings.Join(p.Notes, "\n"), "syn-queue-overflow") {
		t.Errorf("notes do not explain the SYN queue: %q", p.Notes)
	}
}

// TestBuildNginxBacklog: when nginx's own queue overflowed, its listen
// gets a backlog sized from the load (200 connections at once, doubled,
// a power of two: 512, below the kernel's default somaxconn, so 4096),
// and nginx listens again on reload, so netdoctor does not.
func TestBuildNginxBacklog(t *testing.T) {
	in := readSeed000(t)
	in.Findings[0].Subject = "10.99.97.1:80"
	p, err := Build(in, "seed000.json", seed000Host())
	if err != nil {
		t.Fatal(err)
	}
	ng := change(p, "file:"+labDir+"/nginx/nginx.conf")
	if ng == nil || !strings.Contains(ng.File.Diff, "-        listen 10.99.97.1:80;\n+        listen 10.99.97.1:80 backlog=4096;\n") {
		t.Fatalf("nginx listen not changed: %+v", ng)
	}
	if c := change(p, "listen:10.99.97.1:80"); c != nil {
		t.Errorf("nginx re-listens on reload, yet: %s", c.Title())
	}
}

// TestBuildLive: what the host has already, or lacks, is not planned.
func TestBuildLive(t *testing.T) {
	h := seed000Host()
	h.sysctls["netns net.core.somaxconn"] = "4096"
	delete(h.sysctls, "netns net.ipv4.ip_local_port_range")
	p, err := Build(readSeed000(t), "seed000.json", h)
	if err != nil {
		t.Fatal(err)
	}
	if c := change(p, "sysctl:net.core.somaxconn"); c != nil {
		t.Errorf("somaxconn already 4096, yet: %s", c.Title())
	}
	if c := change(p, "sysctl:net.ipv4.ip_local_port_range"); c != nil {
		t.Errorf("a setting the kernel lacks is planned: %s", c.Title())
	}
	if !strings.Contains(strings.Join(p.Notes, "\n"), "ip_local_port_range: this kernel") {
		t.Errorf("no note for the missing setting: %q", p.Notes)
	}
	// The php-fpm socket still has backlog 10: somaxconn is 4096 now, so
	// nothing raises it but a listen() again... which needs a somaxconn
	// change to be planned; without one the plan leaves the socket.
	h.sysctls["netns net.core.somaxconn"] = "10"
	h.files = nil
	p, err = Build(readSeed000(t), "seed000.json", h)
	if err != nil {
		t.Fatal(err)
	}
	if c := change(p, "file:"); c != nil {
		t.Errorf("unreadable file planned: %s", c.Title())
	}
	if !strings.Contains(strings.Join(p.Notes, "\n"), "cannot read") {
		t.Errorf("no note for the unreadable file: %q", p.Notes)
	}
}

func TestCheckAdvice(t *testing.T) {
	for _, c := range []struct {
		name, cur, proposed string
		bad                 bool
	}{
		{"net.ipv4.tcp_tw_recycle", "0", "1", true},
		{"net.ipv4.tcp_max_tw_buckets", "262144", "5000", true},
		{"net.ipv4.tcp_max_tw_buckets", "5000", "262144", false},
		{"net.ipv4.tcp_fin_timeout", "60", "10", true},
		{"net.netfilter.nf_conntrack_tcp_timeout_time_wait", "120", "30", true},
		{"net.ipv4.tcp_abort_on_overflow", "0", "1", true},
		{"net.ipv4.tcp_abort_on_overflow", "1", "0", false},
		{"net.ipv4.tcp_max_syn_backlog", "512", "65535", true},
		{"net.ipv4.tcp_low_latency", "0", "1", true},
		{"net.ipv4.tcp_timestamps", "1", "0", true},
		{"net.ipv4.tcp_timestamps", "0", "1", false},
		{"net.ipv4.tcp_tw_reuse", "2", "1", false},
		{"net.core.somaxconn", "4096", "128", true},
		{"net.core.somaxconn", "10", "4096", false},
	} {
		err := Check(Change{Kind: KindSysctl, Sysctl: &Sysctl{Name: c.name, Current: c.cur, Proposed: c.proposed}})
		if (err != nil) != c.bad {
			t.Errorf("%s %s → %s: %v, want refused %v", c.name, c.cur, c.proposed, err, c.bad)
		}
	}
	p := &Plan{Changes: []Change{{Kind: KindSysctl, Sysctl: &Sysctl{Name: "net.netfilter.nf_conntrack_max", Current: "65536", Proposed: "1048576"}}}}
	if err := checkPlan(p, func() int { return 262144 }); err == nil {
		t.Error("nf_conntrack_max past the buckets without them: accepted")
	}
	p.Changes = append(p.Changes, Change{Kind: KindSysctl, Sysctl: &Sysctl{Name: "net.netfilter.nf_conntrack_buckets", Current: "262144", Proposed: "1048576"}})
	if err := checkPlan(p, func() int { return 262144 }); err != nil {
		t.Error(err)
	}
}

func TestJudge(t *testing.T) {
	f := func(id report.FindingID, sev report.Severity, status report.Status, counter string) report.Finding {
		return report.Finding{ID: id, Severity: sev, Status: status, Evidence: []report.Item{{Text: "x", Source: counter, Window: true}}}
	}
	rate := func(m map[string]float64) func(string) float64 { return func(s string) float64 { return m[s] } }
	p := &Plan{Changes: []Change{
		{Key: "a", Findings: []string{"accept-queue-overflow"}},
		{Key: "b", Findings: []string{"conntrack-table-full"}},
		{Key: "c", Findings: []string{"nagle-delayed-ack"}},
		{Key: "d", Findings: []string{"upstream-connection-churn"}},
		{Key: "e", Findings: []string{"dns-slow"}},
		{Key: "f", Findings: []string{"ephemeral-port-exhaustion"}},
		{Key: "g", Findings: []string{"syn-queue-overflow"}},
	}, Seen: map[string]string{"ephemeral-port-exhaustion": "critical active"}}
	before := Outcome{Findings: []report.Finding{
		f("accept-queue-overflow", report.Critical, report.Active, "TcpExt.ListenOverflows"),
		f("conntrack-table-full", report.Critical, report.Active, "conntrack.drop"),
		f("nagle-delayed-ack", report.Warning, report.Active, "TcpExt.DelayedACKs"),
		f("upstream-connection-churn", report.Warning, report.Active, "Tcp.ActiveOpens"),
		f("syn-queue-overflow", report.Warning, report.Active, "TcpExt.ListenDrops"),
	}, Rate: rate(map[string]float64{"TcpExt.ListenOverflows": 100, "TcpExt.DelayedACKs": 50, "Tcp.ActiveOpens": 1000, "TcpExt.ListenDrops": 40})}
	after := Outcome{Findings: []report.Finding{
		f("conntrack-table-full", report.Warning, report.Latent, "conntrack.drop"),
		f("nagle-delayed-ack", report.Critical, report.Active, "TcpExt.DelayedACKs"),
		f("upstream-connection-churn", report.Warning, report.Active, "Tcp.ActiveOpens"),
		f("syn-queue-overflow", report.Warning, report.Active, "TcpExt.ListenDrops"),
	}, Rate: rate(map[string]float64{"Tcp.ActiveOpens": 500, "TcpExt.ListenDrops": 35})}
	want := map[string]string{"a": Fixed, "b": Fixed, "c": Worse, "d": Improved, "e": NotJudged, "f": NotJudged, "g": NoEffect}
	for _, v := range Judge(p, before, after) {
		if v.Verdict != want[v.Key] {
			t.Errorf("%s: %s, want %s (%v → %v)", v.Key, v.Verdict, want[v.Key], v.Before, v.After)
		}
		// A change not judged says what the plan was made against.
		if v.Key == "f" && !strings.Contains(v.Note, "ephemeral-port-exhaustion critical active") {
			t.Errorf("f: note %q does not say what the plan's report had", v.Note)
		}
	}
}

func TestReadPlanBad(t *testing.T) {
	for _, s := range []string{"", "{", `{"version": 2}`, `{"version": 1, "changes": [{"kind": "sysctl"}]}`, `{"version": 1, "changes": [{"kind": "rm -rf", "file": {}}]}`} {
		if _, err := ReadPlan(strings.NewReader(s)); err == nil {
			t.Errorf("%q: accepted", s)
		}
	}
	for _, s := range []string{"", "[]", `{"version": 1, "command": "load"}`} {
		if _, err := ReadInput(strings.NewReader(s)); err == nil {
			t.Errorf("report %q: accepted", s)
		}
	}
}
