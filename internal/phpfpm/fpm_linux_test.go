//go:build linux

package phpfpm

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/netdoctor/netdoctor/internal/poll"
)

// fpmBinary finds a php-fpm as Debian (php-fpm8.2), the official images
// (php-fpm) or a source build installs it.
func fpmBinary(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("php-fpm"); err == nil {
		return p
	}
	name := regexp.MustCompile(`^php-fpm[0-9.]*$`)
	var found []string
	dirs := append(filepath.SplitList(os.Getenv("PATH")), "/usr/sbin", "/usr/local/sbin")
	for _, dir := range dirs {
		matches, _ := filepath.Glob(filepath.Join(dir, "php-fpm*"))
		for _, m := range matches {
			if st, err := os.Stat(m); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 && name.MatchString(filepath.Base(m)) {
				found = append(found, m)
			}
		}
	}
	if len(found) == 0 {
		t.Skip("php-fpm not installed: no php-fpm or php-fpm8.* in PATH, /usr/sbin or /usr/local/sbin")
	}
	sort.Strings(found)
	return found[len(found)-1]
}

// fpmInstance is a php-fpm master started for one test.
type fpmInstance struct {
	bin, dir, conf string
	cmd            *exec.Cmd
	tcpPort        int
}

// startFPM writes a master with three pools below a temporary prefix and
// runs it in the foreground in its own process group. Cleanup stops the
// group, also when the test fails.
func startFPM(t *testing.T) *fpmInstance {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: php-fpm runs its pools as root here (-R) and the test reads /proc/PID/cmdline of its master")
	}
	f := &fpmInstance{bin: fpmBinary(t), dir: t.TempDir(), tcpPort: freePort(t)}
	f.conf = filepath.Join(f.dir, "etc/php-fpm.conf")
	f.writeFiles(t)
	f.cmd = exec.Command(f.bin, "-F", "-R", "-y", f.conf, "-p", f.dir)
	log, err := os.Create(filepath.Join(f.dir, "stderr.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	f.cmd.Stdout, f.cmd.Stderr = log, log
	// Pdeathsig asks the kernel to stop the master if this test binary dies
	// without running its cleanups (a -timeout panic); SIGTERM lets the
	// master take its workers down with it.
	f.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	if err := f.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", f.bin, err)
	}
	waited := make(chan struct{})
	go func() { _ = f.cmd.Wait(); close(waited) }()
	t.Cleanup(func() { f.stop(t, waited) })
	f.waitReady(t, waited)
	return f
}

func (f *fpmInstance) stop(t *testing.T, waited <-chan struct{}) {
	pgid := f.cmd.Process.Pid
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case <-waited:
	case <-time.After(30 * time.Second):
		t.Errorf("php-fpm %d ignored SIGTERM for 30 s, killing its group", pgid)
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		<-waited
	}
	// Workers are in the same group; none may outlive the test.
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
}

func (f *fpmInstance) writeFiles(t *testing.T) {
	t.Helper()
	files := map[string]string{
		"etc/php-fpm.conf": "; netdoctor test master\n[global]\npid = run/php-fpm.pid\nerror_log = log/php-fpm.log\n" +
			"emergency_restart_threshold = 10\nemergency_restart_interval = 1m\ninclude = etc/pool.d/*.conf\n",
		"etc/pool.d/a-tcp.conf": fmt.Sprintf("[tcp]\nlisten = 127.0.0.1:%d\npm = static\npm.max_children = 2\n"+
			"pm.status_path = /status\nping.path = /ping\nrequest_terminate_timeout = 30s\nslowlog = log/$pool.slow.log\n"+
			"request_slowlog_timeout = 5\naccess.log = log/$pool.access.log\ncatch_workers_output = yes\nrlimit_files = 1024\n", f.tcpPort),
		"etc/pool.d/b-unix.conf":     "[unix]\nlisten = run/$pool.sock\nlisten.backlog = 64\npm = static\npm.max_children = 2\npm.status_path = /fpm-status\n",
		"etc/pool.d/c-nostatus.conf": "[nostatus]\nlisten = run/$pool.sock\npm = ondemand\npm.max_children = 1\n",
		"www/sleep.php":              "<?php usleep((int)($_GET['ms'] ?? 0) * 1000); echo \"slept\\n\";\n",
		"www/readme.txt":             "not a script\n",
		"log/.keep":                  "",
		"run/.keep":                  "",
	}
	for name, data := range files {
		p := filepath.Join(f.dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// waitReady waits for the title, the TCP listener and the unix sockets.
func (f *fpmInstance) waitReady(t *testing.T, waited <-chan struct{}) {
	t.Helper()
	exited := false
	poll.Until(t, time.Minute, func() error {
		select {
		case <-waited:
			exited = true
			return nil
		default:
		}
		_, titled := ParseMaster(f.cmdline(t))
		c, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(f.tcpPort))
		if err == nil {
			c.Close()
		}
		_, errUnix := os.Stat(filepath.Join(f.dir, "run/nostatus.sock"))
		if titled && err == nil && errUnix == nil {
			return nil
		}
		return fmt.Errorf("php-fpm not ready (title %q, dial %v, status socket %v):\n%s", f.cmdline(t), err, errUnix, f.file(t, "log/php-fpm.log"))
	})
	if exited {
		t.Fatalf("php-fpm exited at start:\n%s\n%s", f.file(t, "stderr.log"), f.file(t, "log/php-fpm.log"))
	}
}

func (f *fpmInstance) cmdline(t *testing.T) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", f.cmd.Process.Pid))
	if err != nil {
		t.Logf("read cmdline: %v", err)
	}
	return string(b)
}

func (f *fpmInstance) file(t *testing.T, name string) string {
	b, err := os.ReadFile(filepath.Join(f.dir, name))
	if err != nil {
		return fmt.Sprintf("(%v)", err)
	}
	return string(b)
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func dialer(l Listen) func(ctx context.Context) (net.Conn, error) {
	return func(ctx context.Context) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, l.Network, l.Addr())
	}
}

func somaxconn(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile("/proc/sys/net/core/somaxconn")
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// exchange sends one request and reads until php-fpm closes, which it
// does after FCGI_END_REQUEST because the request did not ask to keep
// the connection.
func exchange(t *testing.T, l Listen, params [][2]string) []byte {
	t.Helper()
	raw, err := exchangeErr(l, params)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

func exchangeErr(l Listen, params [][2]string) ([]byte, error) {
	req, err := encodeRequest(statusRequestID, params)
	if err != nil {
		return nil, err
	}
	c, err := net.DialTimeout(l.Network, l.Addr(), 2*time.Second)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	if err := c.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
		return nil, err
	}
	if _, err := c.Write(req); err != nil {
		return nil, err
	}
	return io.ReadAll(c)
}
