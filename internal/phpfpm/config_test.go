package phpfpm

import (
	"errors"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// at builds the Setting a directive at file:line produces.
func at[T any](v T, file string, line int) Setting[T] {
	return Setting[T]{Value: v, File: file, Line: line}
}

func def[T any](v T) Setting[T] { return Setting[T]{Value: v} }

var poolCmp = cmpopts.IgnoreUnexported(Pool{})

const (
	debConf = "/etc/php/8.2/fpm/php-fpm.conf"
	debWWW  = "/etc/php/8.2/fpm/pool.d/www.conf"
)

// TestLoadDebian reads Debian 12's php8.2-fpm files, byte for byte as the
// package installs them, below a root directory so the include line stays
// as shipped.
func TestLoadDebian(t *testing.T) {
	cfg, err := LoadWith(debConf, Options{FS: os.DirFS("testdata/debian")})
	if err != nil {
		t.Fatalf("LoadWith() error = %v", err)
	}
	if diff := cmp.Diff([]string{debConf, debWWW}, cfg.Files); diff != "" {
		t.Errorf("Files mismatch (-want +got):\n%s", diff)
	}
	wantInc := []Include{{Pattern: "/etc/php/8.2/fpm/pool.d/*.conf", File: debConf, Line: 145, Matched: []string{debWWW}}}
	if diff := cmp.Diff(wantInc, cfg.Includes); diff != "" {
		t.Errorf("Includes mismatch (-want +got):\n%s", diff)
	}
	g := cfg.Global
	g.Directives = nil
	wantGlobal := Global{
		PIDFile:  at("/run/php/php8.2-fpm.pid", debConf, 19),
		ErrorLog: at("/var/log/php8.2-fpm.log", debConf, 26),
		LogLevel: def("notice"),
	}
	if diff := cmp.Diff(wantGlobal, g); diff != "" {
		t.Errorf("Global mismatch (-want +got):\n%s", diff)
	}
	if len(cfg.Pools) != 1 {
		t.Fatalf("got %d pools, want 1", len(cfg.Pools))
	}
	want := &Pool{
		Name: "www", File: debWWW, Line: 4,
		User:               at("www-data", debWWW, 28),
		Group:              at("www-data", debWWW, 29),
		Listen:             at(Listen{Network: "unix", Path: "/run/php/php8.2-fpm.sock"}, debWWW, 41),
		ListenBacklog:      def(-1),
		PM:                 at("dynamic", debWWW, 116),
		MaxChildren:        at(5, debWWW, 127),
		StartServers:       at(2, debWWW, 132),
		MinSpareServers:    at(1, debWWW, 137),
		MaxSpareServers:    at(3, debWWW, 142),
		MaxSpawnRate:       def(32),
		ProcessIdleTimeout: def(10 * time.Second),
		Directives: []Directive{
			{Key: "user", Value: "www-data", File: debWWW, Line: 28},
			{Key: "group", Value: "www-data", File: debWWW, Line: 29},
			{Key: "listen", Value: "/run/php/php8.2-fpm.sock", File: debWWW, Line: 41},
			{Key: "listen.owner", Value: "www-data", File: debWWW, Line: 53},
			{Key: "listen.group", Value: "www-data", File: debWWW, Line: 54},
			{Key: "pm", Value: "dynamic", File: debWWW, Line: 116},
			{Key: "pm.max_children", Value: "5", File: debWWW, Line: 127},
			{Key: "pm.start_servers", Value: "2", File: debWWW, Line: 132},
			{Key: "pm.min_spare_servers", Value: "1", File: debWWW, Line: 137},
			{Key: "pm.max_spare_servers", Value: "3", File: debWWW, Line: 142},
		},
	}
	if diff := cmp.Diff(want, cfg.Pool("WWW"), poolCmp); diff != "" {
		t.Errorf("Pool(WWW) mismatch (-want +got):\n%s", diff)
	}
	if got, want := cfg.Pools[0].MaxChildren.String(), "5 (/etc/php/8.2/fpm/pool.d/www.conf:127)"; got != want {
		t.Errorf("MaxChildren.String() = %q, want %q", got, want)
	}
	if got := cfg.Pools[0].EffectiveBacklog(4096); got != 4096 {
		t.Errorf("EffectiveBacklog(4096) = %d, want 4096", got)
	}
}

// TestLoadTruncated cuts Debian's www.conf in the middle of line 132.
func TestLoadTruncated(t *testing.T) {
	cfg, err := LoadWith(debConf, Options{FS: os.DirFS("testdata/truncated")})
	if !errors.Is(err, ErrPartial) {
		t.Fatalf("LoadWith() error = %v, want ErrPartial", err)
	}
	var le *LineError
	if !errors.As(err, &le) || le.File != debWWW || le.Line != 132 || !errors.Is(le, errNoValue) {
		t.Errorf("LoadWith() error = %v, want a LineError at %s:132", err, debWWW)
	}
	p := cfg.Pool("www")
	if p == nil {
		t.Fatal("pool www missing")
	}
	got := []Setting[int]{p.MaxChildren, p.StartServers, p.MinSpareServers}
	want := []Setting[int]{at(5, debWWW, 127), def(0), {}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("pool limits mismatch (-want +got):\n%s", diff)
	}
	if got, want := p.Listen.Value.Path, "/run/php/php8.2-fpm.sock"; got != want {
		t.Errorf("Listen.Path = %q, want %q", got, want)
	}
}

// TestLoadOdd reads CRLF lines, a file without a final newline, mixed case,
// quotes, keywords, $pool, ${VAR}, unknown keys, a reopened section, a
// relative include resolved against -p, a pool prefix and two bad lines.
func TestLoadOdd(t *testing.T) {
	const (
		conf = "/etc/fpm/php-fpm.conf"
		a    = "/opt/fpm/pool.d/a.conf"
		b    = "/opt/fpm/pool.d/b.conf"
	)
	cfg, err := LoadWith(conf, Options{FS: os.DirFS("testdata/odd"), Prefix: "/opt/fpm"})
	if !errors.Is(err, ErrPartial) {
		t.Fatalf("LoadWith() error = %v, want ErrPartial", err)
	}
	var pe *PartialError
	if !errors.As(err, &pe) {
		t.Fatalf("LoadWith() error %T, want *PartialError", err)
	}
	var lines []string
	for _, le := range pe.Problems {
		lines = append(lines, le.File+":"+strconv.Itoa(le.Line))
	}
	if diff := cmp.Diff([]string{b + ":4", b + ":5"}, lines); diff != "" {
		t.Errorf("problem lines mismatch (-want +got):\n%s\nerror: %v", diff, err)
	}
	wantInc := []Include{
		{Pattern: "/opt/fpm/pool.d/*.conf", File: conf, Line: 10, Matched: []string{a, b}},
		{Pattern: "/etc/fpm/nothing/*.conf", File: conf, Line: 11},
	}
	if diff := cmp.Diff(wantInc, cfg.Includes); diff != "" {
		t.Errorf("Includes mismatch (-want +got):\n%s", diff)
	}
	g := cfg.Global
	g.Directives = nil
	wantGlobal := Global{
		ErrorLog:                  at("syslog", conf, 4),
		RlimitFiles:               at(65536, conf, 5),
		EmergencyRestartThreshold: at(10, conf, 6),
		EmergencyRestartInterval:  at(time.Minute, conf, 7),
		ProcessControlTimeout:     at(10*time.Second, conf, 8),
		LogLevel:                  at("warning", conf, 9),
	}
	if diff := cmp.Diff(wantGlobal, g); diff != "" {
		t.Errorf("Global mismatch (-want +got):\n%s", diff)
	}
	if _, ok := cfg.Global.ErrorLogFile(); ok {
		t.Error("ErrorLogFile() ok for syslog")
	}
	wantPools := []*Pool{{
		Name: "app", File: a, Line: 1,
		Prefix:                  at("/srv/app", a, 18),
		Listen:                  at(Listen{Network: "tcp", Port: 9000}, a, 2),
		ListenBacklog:           at(1024, a, 3),
		PM:                      at("ondemand", a, 4),
		MaxChildren:             at(50, a, 5),
		MaxSpawnRate:            def(32),
		ProcessIdleTimeout:      at(2*time.Minute, a, 7),
		MaxRequests:             at(500, b, 9),
		StatusPath:              at("/status", a, 8),
		PingPath:                at("/ping", a, 9),
		Slowlog:                 at("/srv/app/log/app.slow", a, 10),
		RequestSlowlogTimeout:   at(5*time.Second, a, 11),
		RequestTerminateTimeout: at(time.Hour, a, 12),
		AccessLog:               at("${LOG_DIR}/app.access.log", a, 13),
		CatchWorkersOutput:      at(true, a, 14),
	}, {
		Name: "other", File: b, Line: 1,
		Listen:             at(Listen{Network: "tcp", Host: "::1", Port: 9001}, b, 2),
		ListenBacklog:      def(-1),
		PM:                 at("static", b, 3),
		MaxSpawnRate:       def(32),
		ProcessIdleTimeout: def(10 * time.Second),
		StatusPath:         def("/"),
		StatusListen:       at(Listen{Network: "unix", Path: "/opt/fpm/status.sock"}, b, 6),
	}}
	if diff := cmp.Diff(wantPools, cfg.Pools, poolCmp, cmpopts.IgnoreFields(Pool{}, "Directives")); diff != "" {
		t.Errorf("Pools mismatch (-want +got):\n%s", diff)
	}
	var keys []string
	for _, d := range cfg.Pool("app").Directives {
		keys = append(keys, d.Key+"="+d.Value)
	}
	for _, want := range []string{"php_admin_value[memory_limit]=256M", "env[PATH]=/usr/bin:/bin", "unknown.key=kept", "pm.start_servers=5", "catch_workers_output=1"} {
		if !strings.Contains(strings.Join(keys, "\n"), want) {
			t.Errorf("app Directives lack %q: %q", want, keys)
		}
	}
	if got, want := cfg.Pool("app").Listen.Value.String(), "*:9000"; got != want {
		t.Errorf("Listen.String() = %q, want %q", got, want)
	}
}

func TestLoadMissing(t *testing.T) {
	cfg, err := LoadWith("/etc/php-fpm.conf", Options{FS: fstest.MapFS{}})
	if cfg != nil || !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("LoadWith() = %v, %v; want nil, fs.ErrNotExist", cfg, err)
	}
}

// TestLoadIncludeLoop checks that a file including itself stops at
// php-fpm's depth, and that a bad include is a problem, not a stop.
func TestLoadIncludeLoop(t *testing.T) {
	fsys := fstest.MapFS{
		"etc/fpm.conf": {Data: []byte("[www]\nlisten = 9000\ninclude = /etc/fpm.conf\ninclude = /etc/[\npm = static\n")},
	}
	cfg, err := LoadWith("/etc/fpm.conf", Options{FS: fsys})
	if !errors.Is(err, ErrPartial) {
		t.Fatalf("LoadWith() error = %v, want ErrPartial", err)
	}
	if got, want := len(cfg.Files), maxIncludeDepth+1; got != want {
		t.Errorf("read %d files, want %d", got, want)
	}
	if p := cfg.Pool("www"); p == nil || p.PM.Value != "static" || p.Listen.Value.Port != 9000 {
		t.Errorf("Pool(www) = %+v", p)
	}
}

// TestParseINILine holds cases checked against php-fpm8.2 -tt, which
// prints each value as php-fpm stored it.
func TestParseINILine(t *testing.T) {
	tests := []struct {
		line    string
		want    iniLine
		wantErr error
	}{
		{line: "  ; comment", want: iniLine{}},
		{line: "# comment", want: iniLine{}},
		{line: "\r", want: iniLine{}},
		{line: "[www]\r", want: iniLine{section: "www", isHeader: true}},
		{line: "[ www ] ; c", want: iniLine{section: "www", isHeader: true}},
		{line: "[www", wantErr: errBadSection},
		{line: "listen", wantErr: errNoValue},
		{line: "listen ; = x", wantErr: errNoValue},
		{line: "= x", wantErr: errEmptyKey},
		{line: "k = a=b", wantErr: errEqualsInValue},
		{line: `k = "abc`, wantErr: errUnterminated},
		{line: `k = x "y"`, want: entry("k", "xy")},
		{line: `k = "a" "b"`, want: entry("k", "ab")},
		{line: "k =   x  y  ; c", want: entry("k", "x  y")},
		{line: `k = "a;b" # c`, want: entry("k", "a;b# c")},
		{line: `k = 'a\"b' c`, want: entry("k", `a\"b c`)},
		{line: `k = "a\"b\\\\c\$d\n"`, want: entry("k", `a"b\\c$d\n`)},
		{line: "k = a#b", want: entry("k", "a#b")},
		{line: "k = On", want: entry("k", "1")},
		{line: `k = "On"`, want: entry("k", "On")},
		{line: "k = None", want: entry("k", "")},
		{line: "k = null", want: entry("k", "")},
		{line: "k = ${HOME}/x", want: entry("k", "${HOME}/x")},
		{line: "k = a $pool b", want: entry("k", "a $pool b")},
		{line: "k =", want: entry("k", "")},
		{line: "php_value[error_log] = /var/log/x.log", want: entry("php_value[error_log]", "/var/log/x.log")},
		{line: "k = v\x00junk", want: entry("k", "v")},
	}
	for _, tt := range tests {
		got, err := parseINILine(tt.line)
		if !errors.Is(err, tt.wantErr) {
			t.Errorf("parseINILine(%q) error = %v, want %v", tt.line, err, tt.wantErr)
			continue
		}
		if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(iniLine{})); diff != "" {
			t.Errorf("parseINILine(%q) mismatch (-want +got):\n%s", tt.line, diff)
		}
	}
}

func entry(k, v string) iniLine { return iniLine{key: k, value: v, isEntry: true} }

func TestParseListen(t *testing.T) {
	tests := []struct {
		in      string
		want    Listen
		wantErr bool
	}{
		{in: "9000", want: Listen{Network: "tcp", Port: 9000}},
		{in: "*:9000", want: Listen{Network: "tcp", Port: 9000}},
		{in: "127.0.0.1:9000", want: Listen{Network: "tcp", Host: "127.0.0.1", Port: 9000}},
		{in: "[::]:9000", want: Listen{Network: "tcp", Host: "::", Port: 9000}},
		{in: "localhost:9000", want: Listen{Network: "tcp", Host: "localhost", Port: 9000}},
		{in: "/run/php/php8.2-fpm.sock", want: Listen{Network: "unix", Path: "/run/php/php8.2-fpm.sock"}},
		{in: "php.sock", want: Listen{Network: "unix", Path: "php.sock"}},
		{in: "127.0.0.1:0", wantErr: true},
		{in: "127.0.0.1:70000", wantErr: true},
		{in: "127.0.0.1:", wantErr: true},
	}
	for _, tt := range tests {
		got, err := parseListen(tt.in)
		if (err != nil) != tt.wantErr {
			t.Errorf("parseListen(%q) error = %v, want error %v", tt.in, err, tt.wantErr)
			continue
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("parseListen(%q) mismatch (-want +got):\n%s", tt.in, diff)
		}
	}
}

// TestLoadIncludeGlob checks glob(3)'s order and its rule for leading dots.
func TestLoadIncludeGlob(t *testing.T) {
	fsys := fstest.MapFS{
		"etc/fpm.conf":                {Data: []byte("include=/etc/pool.d/*.conf\n")},
		"etc/pool.d/b.conf":           {Data: []byte("[b]\n")},
		"etc/pool.d/a.conf":           {Data: []byte("[a]\n")},
		"etc/pool.d/.a.conf.swp.conf": {Data: []byte("[swap]\n")},
		"etc/pool.d/dir.conf/x":       {Data: []byte("[x]\n")},
	}
	cfg, err := LoadWith("/etc/fpm.conf", Options{FS: fsys})
	if err != nil {
		t.Fatalf("LoadWith() error = %v", err)
	}
	want := []string{"/etc/fpm.conf", "/etc/pool.d/a.conf", "/etc/pool.d/b.conf"}
	if diff := cmp.Diff(want, cfg.Files); diff != "" {
		t.Errorf("Files mismatch (-want +got):\n%s", diff)
	}
}
