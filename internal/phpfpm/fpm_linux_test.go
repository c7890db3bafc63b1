//go:build linux

package phpfpm

import (
	"bufio"
	"bytes"
	stdcmp "cmp"
	"context"
	"errors"
	"flag"
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
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

var capture = flag.Bool("capture", false, "write the real php-fpm's FastCGI responses to testdata/fastcgi/")

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
	case <-time.After(5 * time.Second):
		t.Errorf("php-fpm %d ignored SIGTERM for 5 s, killing its group", pgid)
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
	deadline := time.Now().Add(10 * time.Second)
	for {
		select {
		case <-waited:
			t.Fatalf("php-fpm exited at start:\n%s\n%s", f.file(t, "stderr.log"), f.file(t, "log/php-fpm.log"))
		default:
		}
		_, titled := ParseMaster(f.cmdline(t))
		c, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(f.tcpPort))
		if err == nil {
			c.Close()
		}
		_, errUnix := os.Stat(filepath.Join(f.dir, "run/nostatus.sock"))
		if titled && err == nil && errUnix == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("php-fpm not ready after 10 s (title %q, dial %v):\n%s", f.cmdline(t), err, f.file(t, "log/php-fpm.log"))
		}
		time.Sleep(50 * time.Millisecond)
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

// TestRealFPM runs php-fpm, finds its configuration from its title, loads
// it, checks it against php-fpm's own dump and reads every pool's status.
func TestRealFPM(t *testing.T) {
	f := startFPM(t)
	confPath, ok := ParseMaster(f.cmdline(t))
	if !ok || confPath != f.conf {
		t.Fatalf("ParseMaster(%q) = %q, %v; want %q", f.cmdline(t), confPath, ok, f.conf)
	}
	cfg, err := LoadWith(confPath, Options{Prefix: f.dir})
	if err != nil {
		t.Fatalf("LoadWith() error = %v", err)
	}
	t.Run("Config", func(t *testing.T) { checkRealConfig(t, f, cfg) })
	t.Run("MatchesDump", func(t *testing.T) { checkAgainstDump(t, f, cfg) })
	t.Run("Status", func(t *testing.T) { checkRealStatus(t, f, cfg) })
	t.Run("Busy", func(t *testing.T) { checkBusy(t, f, cfg) })
}

func checkRealConfig(t *testing.T, f *fpmInstance, cfg *Config) {
	pool := func(name string) string { return filepath.Join(f.dir, "etc/pool.d", name) }
	tcp, unix, nostatus := pool("a-tcp.conf"), pool("b-unix.conf"), pool("c-nostatus.conf")
	if diff := cmp.Diff([]string{f.conf, tcp, unix, nostatus}, cfg.Files); diff != "" {
		t.Errorf("Files mismatch (-want +got):\n%s", diff)
	}
	g := cfg.Global
	g.Directives = nil
	wantGlobal := Global{
		PIDFile:                   at(f.dir+"/run/php-fpm.pid", f.conf, 3),
		ErrorLog:                  at(f.dir+"/log/php-fpm.log", f.conf, 4),
		LogLevel:                  def("notice"),
		EmergencyRestartThreshold: at(10, f.conf, 5),
		EmergencyRestartInterval:  at(time.Minute, f.conf, 6),
	}
	if diff := cmp.Diff(wantGlobal, g); diff != "" {
		t.Errorf("Global mismatch (-want +got):\n%s", diff)
	}
	want := []*Pool{{
		Name: "tcp", File: tcp, Line: 1,
		Listen:                  at(Listen{Network: "tcp", Host: "127.0.0.1", Port: f.tcpPort}, tcp, 2),
		ListenBacklog:           def(-1),
		PM:                      at("static", tcp, 3),
		MaxChildren:             at(2, tcp, 4),
		MaxSpawnRate:            def(32),
		ProcessIdleTimeout:      def(10 * time.Second),
		StatusPath:              at("/status", tcp, 5),
		PingPath:                at("/ping", tcp, 6),
		RequestTerminateTimeout: at(30*time.Second, tcp, 7),
		Slowlog:                 at(f.dir+"/log/tcp.slow.log", tcp, 8),
		RequestSlowlogTimeout:   at(5*time.Second, tcp, 9),
		AccessLog:               at(f.dir+"/log/tcp.access.log", tcp, 10),
		CatchWorkersOutput:      at(true, tcp, 11),
		RlimitFiles:             at(1024, tcp, 12),
	}, {
		Name: "unix", File: unix, Line: 1,
		Listen:             at(Listen{Network: "unix", Path: f.dir + "/run/unix.sock"}, unix, 2),
		ListenBacklog:      at(64, unix, 3),
		PM:                 at("static", unix, 4),
		MaxChildren:        at(2, unix, 5),
		MaxSpawnRate:       def(32),
		ProcessIdleTimeout: def(10 * time.Second),
		StatusPath:         at("/fpm-status", unix, 6),
	}, {
		Name: "nostatus", File: nostatus, Line: 1,
		Listen:             at(Listen{Network: "unix", Path: f.dir + "/run/nostatus.sock"}, nostatus, 2),
		ListenBacklog:      def(-1),
		PM:                 at("ondemand", nostatus, 3),
		MaxChildren:        at(1, nostatus, 4),
		MaxSpawnRate:       def(32),
		ProcessIdleTimeout: def(10 * time.Second),
	}}
	if diff := cmp.Diff(want, cfg.Pools, poolCmp, cmpopts.IgnoreFields(Pool{}, "Directives")); diff != "" {
		t.Errorf("Pools mismatch (-want +got):\n%s", diff)
	}
}

// checkAgainstDump compares Load with what php-fpm -tt prints of the same
// files: the values php-fpm itself would run with.
func checkAgainstDump(t *testing.T, f *fpmInstance, cfg *Config) {
	out, err := exec.Command(f.bin, "-tt", "-R", "-y", f.conf, "-p", f.dir).CombinedOutput()
	if err != nil {
		t.Fatalf("php-fpm -tt: %v\n%s", err, out)
	}
	dump := parseDump(out)
	secs := func(d time.Duration) string { return strconv.Itoa(int(d/time.Second)) + "s" }
	yesNo := func(b bool) string { return map[bool]string{true: "yes", false: "no"}[b] }
	orUndef := func(s string) string { return stdcmp.Or(s, "undefined") }
	g := cfg.Global
	got := map[string]map[string]string{"global": {
		"pid": g.PIDFile.Value, "error_log": g.ErrorLog.Value, "log_level": g.LogLevel.Value,
		"emergency_restart_threshold": strconv.Itoa(g.EmergencyRestartThreshold.Value),
		"emergency_restart_interval":  secs(g.EmergencyRestartInterval.Value),
		"rlimit_files":                strconv.Itoa(g.RlimitFiles.Value),
	}}
	for _, p := range cfg.Pools {
		got[p.Name] = map[string]string{
			"listen": p.Listen.Value.Addr(), "listen.backlog": strconv.Itoa(p.ListenBacklog.Value),
			"pm": p.PM.Value, "pm.max_children": strconv.Itoa(p.MaxChildren.Value),
			"pm.start_servers": strconv.Itoa(p.StartServers.Value), "pm.min_spare_servers": strconv.Itoa(p.MinSpareServers.Value),
			"pm.max_spare_servers": strconv.Itoa(p.MaxSpareServers.Value), "pm.max_requests": strconv.Itoa(p.MaxRequests.Value),
			"pm.max_spawn_rate": strconv.Itoa(p.MaxSpawnRate.Value), "pm.process_idle_timeout": strconv.Itoa(int(p.ProcessIdleTimeout.Value / time.Second)),
			"pm.status_path": orUndef(p.StatusPath.Value), "ping.path": orUndef(p.PingPath.Value),
			"slowlog": orUndef(p.Slowlog.Value), "access.log": orUndef(p.AccessLog.Value),
			"request_terminate_timeout": secs(p.RequestTerminateTimeout.Value),
			"request_slowlog_timeout":   secs(p.RequestSlowlogTimeout.Value),
			"catch_workers_output":      yesNo(p.CatchWorkersOutput.Value), "rlimit_files": strconv.Itoa(p.RlimitFiles.Value),
		}
	}
	// Compare only the keys netdoctor models. php-fpm 8.2 prints log_level
	// before it has stored it ("unknown value").
	delete(got["global"], "log_level")
	for sec, kv := range dump {
		for k := range kv {
			if _, ok := got[sec][k]; !ok {
				delete(kv, k)
			}
		}
	}
	if diff := cmp.Diff(dump, got); diff != "" {
		t.Errorf("Load() differs from php-fpm -tt (-php-fpm +Load):\n%s", diff)
	}
}

// parseDump reads the "[section]" and "\tkey = value" lines of php-fpm -tt.
func parseDump(out []byte) map[string]map[string]string {
	dump := map[string]map[string]string{}
	var cur map[string]string
	line := regexp.MustCompile(`NOTICE: (?:\[(\S+)\]$|\t(\S+) = (.*)$)`)
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		m := line.FindStringSubmatch(sc.Text())
		switch {
		case m == nil:
		case m[1] != "":
			cur = map[string]string{}
			dump[m[1]] = cur
		case cur != nil:
			cur[m[2]] = m[3]
		}
	}
	return dump
}

// script is a file php-fpm may open but not run.
func script(f *fpmInstance) string { return filepath.Join(f.dir, "www/readme.txt") }

func checkRealStatus(t *testing.T, f *fpmInstance, cfg *Config) {
	ctx := context.Background()
	for _, name := range []string{"tcp", "unix"} {
		p := cfg.Pool(name)
		st, err := Status(ctx, dialer(p.Listen.Value), p.StatusPath.Value)
		if err != nil {
			t.Errorf("Status(%s) error = %v", name, err)
			continue
		}
		t.Logf("Status(%s) = %+v", name, *st)
		// The worker answering is one of the two, and active.
		if st.Pool != name || st.ProcessManager != "static" || st.TotalProcesses != 2 ||
			st.IdleProcesses+st.ActiveProcesses != 2 || st.ActiveProcesses < 1 || st.AcceptedConn < 1 {
			t.Errorf("Status(%s) = %+v, want pool %s, static, 2 processes, 1+ active", name, *st, name)
		}
		if age := time.Since(st.StartTime); age < 0 || age > time.Minute || st.StartSince > time.Minute {
			t.Errorf("Status(%s) start %v, %v ago: not this master", name, st.StartTime, st.StartSince)
		}
	}
	// php-fpm reports the TCP accept queue's size, which is what
	// EffectiveBacklog predicts from listen.backlog = -1.
	p := cfg.Pool("tcp")
	st, err := Status(ctx, dialer(p.Listen.Value), "/status")
	if err != nil {
		t.Fatal(err)
	}
	if want := p.EffectiveBacklog(somaxconn(t)); st.ListenQueueLen != want {
		t.Errorf("tcp listen queue len = %d, want EffectiveBacklog = %d", st.ListenQueueLen, want)
	}

	nostatus := cfg.Pool("nostatus")
	_, err = Status(ctx, dialer(nostatus.Listen.Value), "/status")
	var se *StatusError
	if !errors.Is(err, ErrNoStatus) || !errors.As(err, &se) || se.Code != 404 || se.Body != "File not found." || se.Stderr != "Primary script unknown" {
		t.Errorf("Status(nostatus, /status) error = %v, want ErrNoStatus, 404 File not found.", err)
	}
	// A path that is a file without .php meets security.limit_extensions.
	_, err = Status(ctx, dialer(nostatus.Listen.Value), script(f))
	if !errors.Is(err, ErrNoStatus) || !errors.As(err, &se) || se.Code != 403 || se.Body != "Access denied." {
		t.Errorf("Status(nostatus, %s) error = %v, want ErrNoStatus, 403 Access denied.", script(f), err)
	}
	if _, err := Status(ctx, dialer(nostatus.Listen.Value), nostatus.StatusPath.Value); !errors.Is(err, ErrNoStatus) {
		t.Errorf("Status(nostatus, \"\") error = %v, want ErrNoStatus", err)
	}
	_, err = Status(ctx, dialer(p.Listen.Value), "/nope.php")
	if !errors.As(err, &se) || se.Code != 404 {
		t.Errorf("Status(tcp, /nope.php) error = %v, want a 404 StatusError", err)
	}
	t.Run("Decode", func(t *testing.T) { checkRawResponses(t, f, cfg) })
}

// checkRawResponses decodes whole responses read off the wire with the
// pure decoder, and with -capture keeps them as fuzz seeds.
func checkRawResponses(t *testing.T, f *fpmInstance, cfg *Config) {
	cases := []struct {
		pool, path, file string
		wantErr          error
	}{
		{pool: "tcp", path: "/status", file: "status-json.bin"},
		{pool: "nostatus", path: "/status", file: "not-found.bin", wantErr: ErrNoStatus},
		{pool: "nostatus", path: script(f), file: "access-denied.bin", wantErr: ErrNoStatus},
	}
	for _, c := range cases {
		raw := exchange(t, cfg.Pool(c.pool).Listen.Value, statusParams(c.path))
		r, err := decodeResponse(raw, statusRequestID)
		if err != nil {
			t.Errorf("decodeResponse(%s) error = %v", c.file, err)
			continue
		}
		if _, err := parseStatusPage(c.path, r); !errors.Is(err, c.wantErr) {
			t.Errorf("parseStatusPage(%s) error = %v, want %v", c.file, err, c.wantErr)
		}
		if *capture {
			if err := os.WriteFile(filepath.Join("testdata/fastcgi", c.file), raw, 0o644); err != nil {
				t.Error(err)
			}
		}
	}
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

// checkBusy occupies both workers of the tcp pool with slow requests and a
// third in the accept queue, then checks that Status gives up at its
// deadline and that afterwards the pool reports the queue it had.
func checkBusy(t *testing.T, f *fpmInstance, cfg *Config) {
	p := cfg.Pool("tcp")
	before, err := Status(context.Background(), dialer(p.Listen.Value), p.StatusPath.Value)
	if err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(f.dir, "www/sleep.php")
	params := [][2]string{
		{"REQUEST_METHOD", "GET"}, {"SCRIPT_FILENAME", script}, {"SCRIPT_NAME", "/sleep.php"},
		{"QUERY_STRING", "ms=2500"}, {"REQUEST_URI", "/sleep.php?ms=2500"},
	}
	var wg sync.WaitGroup
	bodies := make([][]byte, 3)
	errs := make([]error, 3)
	for i := range bodies {
		wg.Go(func() { bodies[i], errs[i] = exchangeErr(p.Listen.Value, params) })
	}
	time.Sleep(300 * time.Millisecond) // the three are accepted or queued
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = Status(ctx, dialer(p.Listen.Value), p.StatusPath.Value)
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > time.Second {
		t.Errorf("Status() on a saturated pool = %v after %v, want DeadlineExceeded after 300 ms", err, time.Since(start))
	}
	wg.Wait()
	for i, raw := range bodies {
		if errs[i] != nil {
			t.Errorf("sleep request %d: %v", i, errs[i])
			continue
		}
		if r, err := decodeResponse(raw, statusRequestID); err != nil || !bytes.Contains(r.stdout, []byte("slept")) {
			t.Errorf("sleep request %d: %v, %q", i, err, raw)
		}
	}
	after, err := Status(context.Background(), dialer(p.Listen.Value), p.StatusPath.Value)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("after saturation: %+v", *after)
	if after.MaxListenQueue < 1 || after.MaxActiveProcesses != 2 || after.AcceptedConn < before.AcceptedConn+4 {
		t.Errorf("after saturation: max listen queue %d (want 1+), max active %d (want 2), accepted %d (want %d+)",
			after.MaxListenQueue, after.MaxActiveProcesses, after.AcceptedConn, before.AcceptedConn+4)
	}
}
