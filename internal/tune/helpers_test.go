package tune

import (
	"fmt"
	"io/fs"
	"os"
	"slices"
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

// pick keeps the report's findings of the given IDs, in the order the IDs
// are given (so that a test chooses the order the builder sees them in).
func pick(t *testing.T, in *Input, ids ...report.FindingID) *Input {
	t.Helper()
	var kept []report.Finding
	for _, id := range ids {
		i := slices.IndexFunc(in.Findings, func(f report.Finding) bool { return f.ID == id })
		if i < 0 {
			t.Fatalf("the report has no %s", id)
		}
		kept = append(kept, in.Findings[i])
	}
	in.Findings = kept
	return in
}

// build plans from in against h, failing the test on an error.
func build(t *testing.T, in *Input, h Host) *Plan {
	t.Helper()
	p, err := Build(in, "seed000.json", h)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// notes is a plan's notes, one a line.
func notes(p *Plan) string { return strings.Join(p.Notes, "\n") }

// onlyNote fails unless p changes nothing and says why in one note that
// contains want: a finding never leaves a plan silently.
func onlyNote(t *testing.T, p *Plan, want string) {
	t.Helper()
	if len(p.Changes) != 0 || len(p.Notes) != 1 || !strings.Contains(p.Notes[0], "not planned, because ") || !strings.Contains(p.Notes[0], want) {
		t.Errorf("want no change and one note saying %q, got %s", want, titles(p))
	}
}

// sysctlChange is the proposal for a setting, failing the test without
// one.
func sysctlChange(t *testing.T, p *Plan, name string) *Sysctl {
	t.Helper()
	c := change(p, "sysctl:"+name+"@")
	if c == nil || c.Sysctl == nil {
		t.Fatalf("no change of %s in %s", name, titles(p))
	}
	return c.Sysctl
}

// fileChange is the change of a configuration file, failing the test
// without one.
func fileChange(t *testing.T, p *Plan, path string) *File {
	t.Helper()
	c := change(p, "file:"+path)
	if c == nil || c.File == nil {
		t.Fatalf("no change of %s in %s", path, titles(p))
	}
	return c.File
}

// titles lists a plan's changes and notes, for a failure's message.
func titles(p *Plan) string {
	var s []string
	for _, c := range p.Changes {
		s = append(s, c.Title())
	}
	return fmt.Sprintf("changes %q, notes %q", s, p.Notes)
}
