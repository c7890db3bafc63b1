package cli

import (
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/netdoctor/netdoctor/internal/evidence"
)

// TestCheckNetnsReportsSocketsExactly builds a known socket table in a
// fresh namespace and checks that `check --netns` reports it exactly.
func TestCheckNetnsReportsSocketsExactly(t *testing.T) {
	ns := testNetns(t)
	h := startHelper(t, ns, "sockets")
	pid := h.cmd.Process.Pid
	out := filepath.Join(t.TempDir(), "r.json")
	code, stdout, stderr := runCLI(t, "check", "--netns", ns, "--window", "200ms", "--no-dns", "--json", out)
	if code != ExitOK && code != ExitFindings {
		t.Fatalf("check exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	r := readReport(t, out)
	var tcp []evidence.Listener
	for _, l := range r.Summary.Listeners {
		if l.Proto != "unix" {
			l.Inode = 0
			tcp = append(tcp, l)
		}
	}
	want := []evidence.Listener{
		{Proto: "tcp", Addr: "127.0.0.1:7001", Port: 7001, RecvQ: 3, SendQ: 5, Established: 3, PIDs: []int{pid}, Process: "cli.test"},
		{Proto: "tcp", Addr: "127.0.0.2:7003", Port: 7003, RecvQ: 0, SendQ: 7, PIDs: []int{pid}, Process: "cli.test"},
		{Proto: "tcp6", Addr: "[::1]:7002", Port: 7002, RecvQ: 0, SendQ: 3, PIDs: []int{pid}, Process: "cli.test"},
	}
	if diff := cmp.Diff(want, tcp); diff != "" {
		t.Errorf("listeners mismatch (-want +got):\n%s", diff)
	}
	wantStates := map[string]int{"LISTEN": 3, "ESTABLISHED": 6, "CLOSE_WAIT": 1, "FIN_WAIT2": 1, "TIME_WAIT": 4}
	if diff := cmp.Diff(wantStates, r.Summary.TCPStates); diff != "" {
		t.Errorf("TCP states mismatch (-want +got):\n%s", diff)
	}
	if r.Host.NetNS != ns || r.Host.NetNSInode == 0 {
		t.Errorf("host = %+v, want netns %s with its inode", r.Host, ns)
	}
	// The tiny backlogs are latent risks, named per listener.
	latent := 0
	for _, f := range r.Findings {
		if f.ID == "accept-queue-overflow" && f.Status == "latent" {
			latent++
		}
	}
	if latent != 3 {
		t.Errorf("latent accept-queue-overflow findings = %d, want 3 (one per tiny backlog)", latent)
	}
	for _, want := range []string{"127.0.0.1:7001", "cli.test (pid"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("text report lacks %q:\n%s", want, stdout)
		}
	}
}

// TestCheckAcceptQueueOverflow: somaxconn 8 and a listener that never
// accepts; connections overflowing it during the window must show as an active
// accept-queue overflow naming the listener, its backlog and the counter.
func TestCheckAcceptQueueOverflow(t *testing.T) {
	t.Parallel() // beside the package's other parallel tests: they measure nothing
	ns := testNetns(t)
	mustExec(t, "ip", "netns", "exec", ns, "sysctl", "-qw", "net.core.somaxconn=8")
	h := startHelper(t, ns, "noaccept")
	out := filepath.Join(t.TempDir(), "r.json")
	// The helper overflows the queue from now until told to stop: all
	// through the window, wherever it falls.
	h.stdin.Write([]byte("go\n"))
	h.expect(t, "sent")
	code, stdout, stderr := runCLI(t, "check", "--netns", ns, "--window", "2s", "--no-dns", "--json", out)
	h.stdin.Write([]byte("stop\n"))
	if code != ExitFindings {
		t.Errorf("exit %d, want %d (active critical finding)\n%s\n%s", code, ExitFindings, stdout, stderr)
	}
	r := readReport(t, out)
	var f *struct{}
	for _, fd := range r.Findings {
		if fd.ID != "accept-queue-overflow" || fd.Status != "active" {
			continue
		}
		f = &struct{}{}
		if fd.Subject != "127.0.0.1:7100" || fd.Severity != "critical" {
			t.Errorf("finding subject %q severity %q, want 127.0.0.1:7100 critical", fd.Subject, fd.Severity)
		}
		var text []string
		for _, e := range fd.Evidence {
			text = append(text, e.Text)
		}
		all := strings.Join(text, "\n")
		for _, want := range []string{"TcpExtListenOverflows +", "accept queue 9 of 8", "effective backlog 8 = net.core.somaxconn 8", "pid " + itoa(h.cmd.Process.Pid)} {
			if !strings.Contains(all, want) {
				t.Errorf("evidence lacks %q:\n%s", want, all)
			}
		}
		fix := strings.Join(fd.Fix, "\n")
		if !strings.Contains(fix, "ip netns exec "+ns+" sysctl -w net.core.somaxconn=") {
			t.Errorf("fix does not raise somaxconn in the namespace:\n%s", fix)
		}
	}
	if f == nil {
		t.Fatalf("no active accept-queue-overflow finding:\n%s", stdout)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
