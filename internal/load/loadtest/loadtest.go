package loadtest

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/netdoctor/netdoctor/internal/poll"
)

// Nginx is a running nginx started by StartNginx or StartNginxProcess.
type Nginx struct {
	// Addr is where it listens, "127.0.0.1:PORT".
	Addr string
	// AccessLog is the access log's path, "" when the log is off.
	AccessLog string
	// ErrorLog is the error log's path.
	ErrorLog string
	// Dir holds nginx.conf, the pid file, the logs and the temp paths.
	Dir string
	// PID is the master process's.
	PID int
}

const (
	// Per attempt; nginx itself retries bind() for 2.5 s. Generous: a
	// busy machine may take seconds to start it, and only a broken start
	// waits this long.
	startTimeout = 30 * time.Second
	stopGrace    = 10 * time.Second // from SIGQUIT to SIGKILL
	bindAttempts = 5                // when the port is picked here
)

// quitSignal asks nginx for a graceful shutdown.
const quitSignal = syscall.SIGQUIT

// ErrNotInstalled is returned when no nginx binary is found.
var ErrNotInstalled = errors.New("nginx not installed: run scripts/deps.sh")

// StartNginx starts nginx for cfg in a directory of t.TempDir and stops it
// with t.Cleanup, failed test or not. It skips the test when nginx is not
// installed and fails it when nginx does not start.
func StartNginx(t testing.TB, cfg NginxConfig) *Nginx {
	t.Helper()
	if _, err := nginxBinary(); err != nil {
		t.Skip(err)
	}
	n, stop, err := StartNginxProcess(cfg, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Errorf("stop nginx: %v", err)
		}
	})
	return n
}

// StartNginxProcess starts nginx for cfg with its files in dir, which must
// exist, and returns once it accepts connections. The caller must call
// stop, which shuts nginx down (SIGQUIT, then SIGKILL to the master and its
// workers after 3 s) and waits for it; stop may be called more than once.
func StartNginxProcess(cfg NginxConfig, dir string) (n *Nginx, stop func() error, err error) {
	bin, err := nginxBinary()
	if err != nil {
		return nil, nil, err
	}
	cfg, err = cfg.withDefaults()
	if err != nil {
		return nil, nil, err
	}
	host, port, _ := net.SplitHostPort(cfg.Listen)
	attempts := 1
	if port == "0" {
		attempts = bindAttempts
	}
	for i := 0; ; i++ {
		addr := cfg.Listen
		if port == "0" {
			if addr, err = freeAddr(host); err != nil {
				return nil, nil, err
			}
		}
		n, stop, err = startOnce(bin, cfg, newNginxFiles(dir), addr)
		if err == nil || !errors.Is(err, errAddrInUse) || i+1 >= attempts {
			return n, stop, err
		}
	}
}

// AccessLogLines returns the lines of the access log once it has at
// least want of them: nginx writes each line after the response has gone
// out, so a client can be ahead of the log. It waits up to a minute,
// then returns what there is.
func (n *Nginx) AccessLogLines(t testing.TB, want int) []string {
	t.Helper()
	if n.AccessLog == "" {
		t.Fatal("nginx access log is off: set NginxConfig.AccessLog")
	}
	var lines []string
	poll.Wait(time.Minute, func() bool {
		b, err := os.ReadFile(n.AccessLog)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("read nginx access log: %v", err)
		}
		lines = nil
		if s := strings.TrimSuffix(string(b), "\n"); s != "" {
			lines = strings.Split(s, "\n")
		}
		return len(lines) >= want
	})
	return lines
}

var errAddrInUse = errors.New("address in use")

// startOnce writes the config for addr, starts nginx and waits until it
// listens, or stops it again.
func startOnce(bin string, cfg NginxConfig, f nginxFiles, addr string) (*Nginx, func() error, error) {
	if err := writeConf(f, cfg, addr); err != nil {
		return nil, nil, fmt.Errorf("write nginx config: %w", err)
	}
	for _, p := range []string{f.pid, f.errorLog, f.stderr} {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, nil, err
		}
	}
	out, err := os.Create(f.stderr)
	if err != nil {
		return nil, nil, err
	}
	defer out.Close() // nginx has its own copy
	cmd := exec.Command(bin, "-p", f.dir, "-c", f.conf, "-e", f.errorLog)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		return nil, nil, fmt.Errorf("start nginx: %w", err)
	}
	p := &proc{cmd: cmd, done: make(chan struct{})}
	go func() { p.waitErr = cmd.Wait(); close(p.done) }()

	if err := waitListening(p, f, addr); err != nil {
		_ = p.stop()
		return nil, nil, err
	}
	n := &Nginx{Addr: addr, ErrorLog: f.errorLog, Dir: f.dir, PID: cmd.Process.Pid}
	if cfg.AccessLog {
		n.AccessLog = f.accessLog
	}
	return n, p.stop, nil
}

// waitListening returns once nginx has written its pid file, which it does
// only after binding every listen address, and addr accepts a connection.
func waitListening(p *proc, f nginxFiles, addr string) error {
	deadline := time.Now().Add(startTimeout)
	for time.Now().Before(deadline) {
		select {
		case <-p.done:
			return startError(f, addr, p.waitErr)
		case <-time.After(10 * time.Millisecond):
		}
		b, err := os.ReadFile(f.pid)
		if err != nil || strings.TrimSpace(string(b)) != strconv.Itoa(p.cmd.Process.Pid) {
			continue
		}
		c, err := net.DialTimeout("tcp", addr, 100*time.Millisecond)
		if err == nil {
			c.Close()
			return nil
		}
	}
	return fmt.Errorf("nginx on %s not accepting connections after %v: %s", addr, startTimeout, logTail(f))
}

// startError explains why nginx exited during startup.
func startError(f nginxFiles, addr string, err error) error {
	tail := logTail(f)
	if strings.Contains(tail, "Address already in use") {
		return fmt.Errorf("nginx on %s: %w: %s", addr, errAddrInUse, tail)
	}
	return fmt.Errorf("nginx on %s exited during startup (%v): %s", addr, err, tail)
}

// logTail is the end of nginx's stderr, or of its error log.
func logTail(f nginxFiles) string {
	for _, p := range []string{f.stderr, f.errorLog} {
		if b, err := os.ReadFile(p); err == nil && len(bytes.TrimSpace(b)) > 0 {
			b = bytes.TrimSpace(b)
			if len(b) > 1000 {
				b = b[len(b)-1000:]
			}
			return string(b)
		}
	}
	return "(nothing logged)"
}

// proc is a started nginx master.
type proc struct {
	cmd     *exec.Cmd
	done    chan struct{} // closed once cmd.Wait has returned
	waitErr error

	once    sync.Once
	stopErr error
}

// stop asks for a graceful shutdown, kills the whole process group if
// that takes longer than stopGrace, and waits for the master.
func (p *proc) stop() error {
	p.once.Do(func() {
		select {
		case <-p.done:
			return // exited by itself: its workers went with it
		default:
		}
		if err := p.cmd.Process.Signal(quitSignal); err != nil {
			p.stopErr = fmt.Errorf("signal nginx %d: %w", p.cmd.Process.Pid, err)
		}
		select {
		case <-p.done:
			return
		case <-time.After(stopGrace):
		}
		// The master has not been waited for yet, so its pid is still the
		// group's id.
		err := killGroup(p.cmd.Process)
		<-p.done
		if err != nil {
			p.stopErr = fmt.Errorf("kill nginx %d: %w", p.cmd.Process.Pid, err)
		} else {
			p.stopErr = fmt.Errorf("nginx %d did not quit within %v: killed", p.cmd.Process.Pid, stopGrace)
		}
	})
	return p.stopErr
}

// freeAddr returns host with a port that was free a moment ago.
func freeAddr(host string) (string, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return "", fmt.Errorf("pick a free port on %s: %w", host, err)
	}
	addr := l.Addr().String()
	return addr, l.Close()
}

// nginxBinary finds nginx in PATH or in the sbin directories that a
// user's PATH often lacks.
func nginxBinary() (string, error) {
	if p, err := exec.LookPath("nginx"); err == nil {
		return p, nil
	}
	for _, p := range []string{"/usr/sbin/nginx", "/usr/local/sbin/nginx", "/usr/local/nginx/sbin/nginx"} {
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", ErrNotInstalled
}
