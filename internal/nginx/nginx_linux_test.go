package nginx

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/netdoctor/netdoctor/internal/poll"
)

// nginxBinary returns the installed nginx, skipping the test without one
// or without root, which nginx needs to run as it runs in production.
func nginxBinary(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: runs nginx")
	}
	for _, p := range []string{"/usr/sbin/nginx", "/usr/local/nginx/sbin/nginx"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	p, err := exec.LookPath("nginx")
	if err != nil {
		t.Skip("nginx not installed: apt-get install nginx")
	}
	return p
}

// master is an nginx master started by startMaster.
type master struct {
	pid  int
	dir  string // prefix and configuration directory, ending in "/"
	conf string
	port int
}

// startMaster starts nginx in the foreground in a directory of its own,
// with its configuration split over a glob include, and stops it, master
// and workers, when the test ends.
func startMaster(t *testing.T, bin string) *master {
	t.Helper()
	var lastErr error
	for range 3 { // the free port may be taken before nginx binds it
		m, err := tryStart(t, bin)
		if err == nil {
			return m
		}
		lastErr = err
	}
	t.Fatalf("start nginx: %v", lastErr)
	return nil
}

func tryStart(t *testing.T, bin string) (*master, error) {
	dir := t.TempDir() + "/"
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	m := &master{dir: dir, conf: dir + "nginx.conf", port: port}
	files := map[string]string{
		"nginx.conf": "worker_processes 2;\npid nginx.pid;\nerror_log error.log;\nevents { worker_connections 64; }\n" +
			"http {\n    access_log off;\n    include servers/*.conf;\n}\n",
		"servers/live.conf": fmt.Sprintf("server {\n    listen 127.0.0.1:%d backlog=77;\n    location / { return 204; }\n}\n", port),
	}
	for name, text := range files {
		if err := os.MkdirAll(filepath.Dir(dir+name), 0o755); err != nil {
			return nil, err
		}
		if err := os.WriteFile(dir+name, []byte(text), 0o644); err != nil {
			return nil, err
		}
	}
	var stderr bytes.Buffer
	cmd := exec.Command(bin, "-c", m.conf, "-p", dir, "-e", dir+"startup.log", "-g", "daemon off; master_process on;")
	cmd.Stderr = &stderr
	// A process group of its own, so that the workers can be killed with
	// the master; and death with the test binary if it is killed.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	m.pid = cmd.Process.Pid
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	// stop asks for a fast shutdown, in which the master reaps its
	// workers before it exits; SIGKILL to the group, sent before the
	// master is reaped so that the group id cannot have been reused, is
	// the fallback.
	stop := func() {
		syscall.Kill(m.pid, syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			syscall.Kill(-m.pid, syscall.SIGKILL)
			<-exited
		}
	}
	var exit error
	gone := false
	listening := poll.Wait(time.Minute, func() bool {
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), time.Second)
		if err == nil {
			c.Close()
			return true
		}
		select {
		case exit = <-exited:
			gone = true
			return true
		default:
			return false
		}
	})
	switch {
	case gone:
		return nil, fmt.Errorf("nginx exited: %v: %s", exit, stderr.String())
	case !listening:
		stop()
		return nil, fmt.Errorf("nginx not listening on %d after a minute: %s", port, stderr.String())
	}
	t.Cleanup(func() {
		stop()
		if err := syscall.Kill(-m.pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("nginx process group %d still has processes after the master exited (kill 0: %v)", m.pid, err)
		}
	})
	return m, nil
}

func readCmdline(t *testing.T, pid int) string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// children returns the pids of pid's children.
func children(t *testing.T, pid int) []int {
	t.Helper()
	var kids []int
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces, so cut at ")".
		_, rest, _ := strings.Cut(string(b), ") ")
		f := strings.Fields(rest)
		if len(f) > 1 && f[1] == strconv.Itoa(pid) {
			kid, _ := strconv.Atoi(e.Name())
			kids = append(kids, kid)
		}
	}
	return kids
}

func TestLiveMaster(t *testing.T) {
	bin := nginxBinary(t)
	m := startMaster(t, bin)

	// The master retitles itself once it runs its cycle, after it
	// listens: on a busy machine a while after the port accepts.
	var cmdline string
	var inv Invocation
	poll.Until(t, time.Minute, func() error {
		var ok bool
		cmdline = readCmdline(t, m.pid)
		if inv, ok = ParseMaster(cmdline); !ok {
			return fmt.Errorf("ParseMaster(%q) not ok for a running master", cmdline)
		}
		return nil
	})
	want := Invocation{Binary: bin, Conf: m.conf, Prefix: m.dir, ErrorLog: m.dir + "startup.log", Globals: "daemon off; master_process on;"}
	if diff := cmp.Diff(want, inv); diff != "" {
		t.Errorf("ParseMaster(%q) mismatch (-want +got):\n%s", cmdline, diff)
	}

	// Workers start soon after the listening socket, and retitle
	// themselves once they run (on a busy machine, a while later).
	var kids []int
	poll.Until(t, time.Minute, func() error {
		kids = children(t, m.pid)
		if len(kids) != 2 {
			return fmt.Errorf("master %d has %d children, want 2 workers", m.pid, len(kids))
		}
		for _, kid := range kids {
			if cmdline := readCmdline(t, kid); !strings.HasPrefix(cmdline, "nginx: worker process") {
				return fmt.Errorf("worker %d cmdline %q", kid, cmdline)
			}
		}
		return nil
	})
	for _, kid := range kids {
		if _, ok := ParseMaster(readCmdline(t, kid)); ok {
			t.Errorf("ParseMaster(%q) ok for a worker", readCmdline(t, kid))
		}
	}

	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", m.pid))
	if err != nil {
		t.Fatal(err)
	}
	// nginx -T binds the master's address, which is in use, and must
	// not fail for it.
	inv.Dir = fmt.Sprintf("/proc/%d/cwd", m.pid)
	dump, err := Dump(context.Background(), exe, inv)
	if err != nil {
		t.Fatalf("Dump: %v", err)
	}
	c, err := Parse(dump)
	if err != nil {
		t.Fatalf("Parse(Dump): %v", err)
	}
	if diff := cmp.Diff([]string{m.conf, m.dir + "servers/live.conf"}, c.Files); diff != "" {
		t.Errorf("dumped files mismatch (-want +got):\n%s", diff)
	}
	// What netdoctor reads itself, running nothing, is what nginx dumped.
	read, err := Read(os.DirFS("/"), m.conf)
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	if diff := cmp.Diff(c, read); diff != "" {
		t.Errorf("Read differs from nginx -T (-dump +read):\n%s", diff)
	}
	if err := c.AddGlobals(inv.Globals); err != nil {
		t.Fatal(err)
	}
	b, err := ReadBuild(context.Background(), exe)
	if err != nil {
		t.Fatalf("ReadBuild: %v", err)
	}
	f, err := os.Open(exe)
	if err != nil {
		t.Fatal(err)
	}
	scanned, ok, err := ScanBuild(f)
	f.Close()
	if err != nil || !ok || scanned != b {
		t.Errorf("ScanBuild of %s: %+v (%v %v), want nginx -V's %+v", exe, scanned, ok, err, b)
	}
	s := c.Summary(b.With(inv))
	wantListens := []Listen{{
		Scope:    Scope{Server: Pos{m.dir + "servers/live.conf", 1}},
		Addr:     fmt.Sprintf("127.0.0.1:%d", m.port),
		HostPort: fmt.Sprintf("127.0.0.1:%d", m.port),
		Backlog:  77,
		Pos:      Pos{m.dir + "servers/live.conf", 2},
	}}
	if diff := cmp.Diff(wantListens, s.Listens); diff != "" {
		t.Errorf("Listens mismatch (-want +got):\n%s", diff)
	}
	if got, want := s.WorkerProcesses, (Setting{Value: "2", N: 2, Pos: Pos{m.conf, 1}}); got != want {
		t.Errorf("WorkerProcesses = %+v, want %+v", got, want)
	}
	// The error log the configuration names is relative to -p.
	if got := s.ErrorLogs[0].File; got != m.dir+"error.log" {
		t.Errorf("error log file %q, want %q", got, m.dir+"error.log")
	}
	if _, err := os.Stat(s.ErrorLogs[0].File); err != nil {
		t.Errorf("nginx did not open the error log Summary names: %v", err)
	}
}

// TestFixturesAreNginxOutput dumps testdata/app and testdata/odd again
// with the installed nginx and compares them with the saved dumps, which
// were taken in /tmp/netdoctor-nginx-NAME/.
func TestFixturesAreNginxOutput(t *testing.T) {
	bin := nginxBinary(t)
	for _, name := range []string{"app", "odd"} {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), name)
			if err := os.CopyFS(dir, os.DirFS(filepath.Join("testdata", name))); err != nil {
				t.Fatal(err)
			}
			if err := os.Mkdir(filepath.Join(dir, "logs"), 0o755); err != nil {
				t.Fatal(err)
			}
			dump, err := Dump(context.Background(), bin, Invocation{Conf: dir + "/nginx.conf", Prefix: dir + "/"})
			if err != nil {
				t.Fatalf("Dump: %v", err)
			}
			got := strings.ReplaceAll(string(dump), dir+"/", "/tmp/netdoctor-nginx-"+name+"/")
			want := string(readFixture(t, name+".dump"))
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("nginx -T of testdata/%s differs from testdata/%s.dump (-want +got):\n%s", name, name, diff)
			}
		})
	}
}

func TestDumpFailure(t *testing.T) {
	bin := nginxBinary(t)
	dir := t.TempDir()
	conf := filepath.Join(dir, "bad.conf")
	if err := os.WriteFile(conf, []byte("events {}\nhttp {\n    bogus_directive on;\n}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Dump(context.Background(), bin, Invocation{Conf: conf, Prefix: dir + "/", ErrorLog: filepath.Join(dir, "e.log")})
	// nginx's last line is "configuration file ... test failed"; the
	// [emerg] line before it says why.
	want := fmt.Sprintf(`nginx: [emerg] unknown directive "bogus_directive" in %s:3`, conf)
	if err == nil || !strings.HasSuffix(err.Error(), want) {
		t.Errorf("Dump error = %v, want one ending in %q", err, want)
	}
}

func TestDumpDeleted(t *testing.T) {
	_, err := Dump(context.Background(), "/usr/sbin/nginx (deleted)", Invocation{})
	if !errors.Is(err, ErrDeleted) {
		t.Errorf("Dump error = %v, want ErrDeleted", err)
	}
}

func TestDumpTimeout(t *testing.T) {
	exe := filepath.Join(t.TempDir(), "slow-nginx")
	if err := os.WriteFile(exe, []byte("#!/bin/sh\nsleep 30\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := Dump(ctx, exe, Invocation{})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Dump error = %v, want context.DeadlineExceeded", err)
	}
	// At the deadline, not when the script's 30 s sleep ends.
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("Dump returned after %v, want soon after the 200ms deadline", d)
	}
}
