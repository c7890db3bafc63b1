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
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/netdoctor/netdoctor/internal/poll"
)

// capture keeps the responses as fuzz seeds and replay fixtures:
// go test ./internal/phpfpm -run TestRealFPM -args -capture.
var capture = flag.Bool("capture", false, "write the real php-fpm's FastCGI responses to testdata/fastcgi/")

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
	// Both workers took one (they sleep 2.5 s: the saturation under
	// test) and the third waits in the accept queue.
	poll.Until(t, time.Minute, func() error {
		if q := acceptQueue(t, p.Listen.Value.Port); q != 1 {
			return fmt.Errorf("%d connections in the accept queue of :%d, want the third", q, p.Listen.Value.Port)
		}
		return nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = Status(ctx, dialer(p.Listen.Value), p.StatusPath.Value)
	// Given up at the deadline, not answered when a worker came free.
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 2*time.Second {
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

// acceptQueue is how many connections wait in the accept queue of the
// IPv4 TCP listener on port, from /proc/net/tcp (a listener's rx_queue).
func acceptQueue(t *testing.T, port int) int {
	t.Helper()
	b, err := os.ReadFile("/proc/net/tcp")
	if err != nil {
		t.Fatal(err)
	}
	local := fmt.Sprintf(":%04X", port)
	for _, l := range strings.Split(string(b), "\n")[1:] {
		f := strings.Fields(l)
		// sl local_address rem_address st tx_queue:rx_queue
		if len(f) < 5 || !strings.HasSuffix(f[1], local) || f[3] != "0A" {
			continue
		}
		_, rx, _ := strings.Cut(f[4], ":")
		n, err := strconv.ParseInt(rx, 16, 64)
		if err != nil {
			t.Fatalf("/proc/net/tcp: %q", l)
		}
		return int(n)
	}
	return -1
}
