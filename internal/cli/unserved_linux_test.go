package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/netdoctor/netdoctor/internal/lab"
	"github.com/netdoctor/netdoctor/internal/poll"
	"github.com/netdoctor/netdoctor/internal/rules"
)

// pyReuseport is a single-threaded HTTP server on its own SO_REUSEPORT
// socket, polled with epoll (the selector Linux's Python picks), that
// answers each request and closes; argv[1] is the address, argv[2] a
// file it creates once it listens.
const pyReuseport = `import selectors, socket, sys
host, port = sys.argv[1].rsplit(":", 1)
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
s.bind((host, int(port)))
s.listen(64)
s.setblocking(False)
sel = selectors.EpollSelector()
sel.register(s, selectors.EVENT_READ)
open(sys.argv[2], "w").close()
while True:
    for _ in sel.select():
        try:
            c, _ = s.accept()
        except BlockingIOError:
            continue
        c.setblocking(True)
        c.settimeout(2)
        try:
            buf = b""
            while b"\r\n\r\n" not in buf:
                d = c.recv(4096)
                if not d:
                    break
                buf += d
            c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nConnection: close\r\n\r\nok\n")
        except OSError:
            pass
        c.close()
`

// testRunStoppedReuseport: two python3 processes each serve their own
// SO_REUSEPORT socket on one port; one is stopped (SIGSTOP) for the
// run. The kernel still hashes half of the new connections to its
// socket: the stopped process and that socket are named. Continued, the
// same servers show nothing of it.
func testRunStoppedReuseport(t *testing.T) {
	e := newLab(t)
	addr := e.ServerIP + ":8090"
	var pids []int
	for i := range 2 {
		ready := filepath.Join(e.Dir, fmt.Sprintf("reuse%d.ready", i))
		p, err := e.Start(e.ServerNS, fmt.Sprintf("reuse%d", i), "python3", "-c", pyReuseport, addr, ready)
		labMust(t, err)
		poll.Until(t, 10e9, func() error { _, err := os.Stat(ready); return err })
		pids = append(pids, p.Cmd.Process.Pid)
	}
	stopped := pids[1]
	inode := listeningInode(t, stopped)
	if err := syscall.Kill(stopped, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	// Continued on every way out, so that the lab's SIGTERM reaches it.
	cont := func() { syscall.Kill(stopped, syscall.SIGCONT) }
	t.Cleanup(cont)

	_, r, text := runBundle(t, e, "http://"+addr+"/", "-c 8 --no-keepalive -d 3s")
	t.Logf("verdict %s", r.Verdict)
	var found bool
	for _, f := range r.Findings {
		if f.ID != rules.ListenerUnserved {
			continue
		}
		found = true
		t.Logf("%s: %s; %v; %v", f.ID, f.Title, f.Evidence, f.Actions)
		want := fmt.Sprintf("pid %d (stopped) is the only server of listening socket %s (inode %d)", stopped, addr, inode)
		if f.About.PID != stopped || !strings.Contains(f.Title, want) {
			t.Errorf("title %q (pid %d), want %q", f.Title, f.About.PID, want)
		}
	}
	if !found {
		t.Fatalf("no %s finding for stopped pid %d:\n%s", rules.ListenerUnserved, stopped, text)
	}

	cont()
	_, r, text = runBundle(t, e, "http://"+addr+"/", "-c 8 --no-keepalive -d 2s")
	for _, f := range r.Findings {
		if f.ID == rules.ListenerUnserved {
			t.Errorf("none stopped, yet: %s\n%s", f.Title, text)
		}
	}
}

// listeningInode is the inode of the one socket process pid listens on
// (the script's only socket).
func listeningInode(t *testing.T, pid int) uint64 {
	t.Helper()
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, ent := range ents {
		l, _ := os.Readlink(dir + "/" + ent.Name())
		var ino uint64
		if _, err := fmt.Sscanf(l, "socket:[%d]", &ino); err == nil {
			return ino
		}
	}
	t.Fatalf("pid %d holds no socket", pid)
	return 0
}

// testRunStoppedNginxWorker: nginx with two workers on reuseport
// sockets, one worker stopped. Every worker holds every socket (the
// master opens them all); each polls its own, which its epoll instance
// shows: the stopped worker is named as the only server of its socket,
// seen by epoll, not assumed from the holders.
func testRunStoppedNginxWorker(t *testing.T) {
	e := newLab(t)
	n := &lab.Nginx{Port: 8095, Workers: 2, Reuseport: true, BodyBytes: 64}
	p, err := e.StartNginx(context.Background(), n)
	labMust(t, err)
	var workers []int
	poll.Until(t, 10e9, func() error {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", p.Cmd.Process.Pid, p.Cmd.Process.Pid))
		if err != nil {
			return err
		}
		workers = workers[:0]
		for _, f := range strings.Fields(string(b)) {
			var pid int
			fmt.Sscan(f, &pid)
			workers = append(workers, pid)
		}
		if len(workers) < 2 {
			return fmt.Errorf("workers %v", workers)
		}
		return nil
	})
	stopped := workers[1]
	if err := syscall.Kill(stopped, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(stopped, syscall.SIGCONT) })
	_, r, text := runBundle(t, e, fmt.Sprintf("http://%s:%d/", e.ServerIP, n.Port), "-c 8 --no-keepalive -d 3s")
	t.Logf("verdict %s", r.Verdict)
	var found bool
	for _, f := range r.Findings {
		if f.ID != rules.ListenerUnserved {
			continue
		}
		found = true
		t.Logf("%s: %s; %v", f.ID, f.Title, f.Evidence)
		if f.About.PID != stopped || !strings.Contains(f.Title, fmt.Sprintf("pid %d (stopped) is the only server of listening socket", stopped)) {
			t.Errorf("title %q (pid %d), want stopped worker %d", f.Title, f.About.PID, stopped)
		}
		for _, ev := range f.Evidence {
			if strings.Contains(ev.Text, "taken for its servers") {
				t.Errorf("the worker's epoll was not read: %s", ev.Text)
			}
		}
	}
	if !found {
		t.Fatalf("no %s finding for stopped worker %d:\n%s", rules.ListenerUnserved, stopped, text)
	}
}
