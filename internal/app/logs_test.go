package app

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/netdoctor/netdoctor/internal/evidence/kernel"
)

// Real lines, as nginx 1.22 and php-fpm 8.2 wrote them in the lab.
const (
	nginxCannotAssign = `2026/11/22 02:46:04 [crit] 21110#21110: *146 connect() to 10.99.133.1:9000 failed (99: Cannot assign requested address) while connecting to upstream, client: 10.99.133.2, server: , request: "GET / HTTP/1.1", upstream: "fastcgi://10.99.133.1:9000", host: "10.99.133.1"`
	nginxEMFILE       = `2026/11/22 02:50:11 [crit] 22048#22048: accept4() failed (24: Too many open files)`
	nginxTimeout      = `2026/11/22 02:51:00 [error] 311#311: *9 upstream timed out (110: Connection timed out) while reading response header from upstream, client: 10.0.0.2, server: _, request: "GET / HTTP/1.1"`
	fpmMaxChildren    = `[22-Nov-2026 02:46:05] WARNING: [pool www] server reached pm.max_children setting (2), consider raising it`
	accessCombined    = `10.99.133.2 - - [22/Nov/2026:02:46:04 +0000] "GET / HTTP/1.1" 502 157 "-" "netdoctor"`
)

func write(t *testing.T, path string, lines ...string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, l := range lines {
		f.WriteString(l + "\n")
	}
}

// TestLogReadsOnlyTheRun: lines written before Mark are not counted.
func TestLogReadsOnlyTheRun(t *testing.T) {
	p := filepath.Join(t.TempDir(), "error.log")
	write(t, p, nginxCannotAssign, nginxCannotAssign)
	l := &Log{Path: p, Kind: "error"}
	l.Mark()
	write(t, p, nginxCannotAssign, nginxEMFILE, nginxTimeout, fpmMaxChildren, "unrelated notice")
	l.Read()
	want := map[string]int{EventCannotAssign: 1, EventTooManyFiles: 1, EventUpstreamTimeout: 1, EventMaxChildren: 1}
	if l.Lines != 5 || l.Status != "ok" || len(l.Events) != len(want) {
		t.Fatalf("lines %d status %q events %v", l.Lines, l.Status, l.Events)
	}
	for k, n := range want {
		if l.Events[k] != n {
			t.Errorf("%s: %d, want %d", k, l.Events[k], n)
		}
	}
	if l.Samples[EventTooManyFiles] != nginxEMFILE {
		t.Errorf("sample %q", l.Samples[EventTooManyFiles])
	}
	if n := Count([]*Log{l, l}, EventCannotAssign); n != 2 {
		t.Errorf("Count over two logs: %d", n)
	}
}

// TestLogRotated: a log replaced during the run (another inode) is read
// from its start; a log created during the run likewise.
func TestLogRotated(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "error.log")
	write(t, p, strings.Repeat(nginxCannotAssign+"\n", 100))
	l := &Log{Path: p, Kind: "error"}
	l.Mark()
	os.Rename(p, p+".1")
	write(t, p, nginxEMFILE)
	l.Read()
	if l.Lines != 1 || l.Events[EventTooManyFiles] != 1 {
		t.Errorf("after rotation: %d lines, %v", l.Lines, l.Events)
	}
	n := &Log{Path: filepath.Join(dir, "new.log"), Kind: "error"}
	n.Mark()
	write(t, n.Path, fpmMaxChildren)
	n.Read()
	if n.Events[EventMaxChildren] != 1 {
		t.Errorf("created during the run: %v", n.Events)
	}
	missing := &Log{Path: filepath.Join(dir, "never.log"), Kind: "error"}
	missing.Mark()
	missing.Read()
	if missing.Status != "ok" || missing.Lines != 0 {
		t.Errorf("never written: %+v", missing)
	}
}

func TestAccessStatuses(t *testing.T) {
	p := filepath.Join(t.TempDir(), "access.log")
	l := &Log{Path: p, Kind: "access"}
	l.Mark()
	write(t, p, accessCombined, strings.Replace(accessCombined, "502", "200", 1),
		`10.0.0.2 - - [22/Nov/2026:02:46:04 +0000] "GET /a\"b HTTP/1.1" 504 0 "-" "x"`,
		`10.0.0.2 - - [22/Nov/2026:02:46:04 +0000] "-" 400 0 "-" "-"`,
		`garbage without a request`, `10.0.0.2 - - [x] "GET / HTTP/1.1" 49 0`)
	l.Read()
	want := map[int]int{502: 1, 200: 1, 504: 1, 400: 1}
	if len(l.Statuses) != len(want) {
		t.Fatalf("statuses %v", l.Statuses)
	}
	for c, n := range want {
		if l.Statuses[c] != n {
			t.Errorf("%d: %d, want %d", c, l.Statuses[c], n)
		}
	}
}

func TestClassify(t *testing.T) {
	for _, c := range []struct {
		state byte
		wchan string
		want  string
	}{
		{'R', "0", WaitRunning},
		{'S', "inet_csk_accept", WaitIdle},
		{'S', "do_epoll_wait", WaitIdle},
		{'S', "hrtimer_nanosleep", WaitSleep},
		{'S', "locks_lock_inode_wait", WaitFile},
		{'D', "locks_lock_inode_wait", WaitFile},
		{'S', "futex_wait_queue", WaitLock},
		{'S', "wait_woken", WaitNetwork},
		{'D', "folio_wait_bit_common", WaitDisk},
		{'S', "pipe_read", WaitOther},
	} {
		if got := classify(c.state, c.wchan); got != c.want {
			t.Errorf("%c %s: %s, want %s", c.state, c.wchan, got, c.want)
		}
	}
}

func TestFindListener(t *testing.T) {
	ls := []kernel.Listener{
		{Proto: "tcp", Addr: "0.0.0.0:9000", Port: 9000},
		{Proto: "tcp", Addr: "127.0.0.1:8080", Port: 8080},
		{Proto: "unix", Addr: "/run/php/php8.2-fpm.sock"},
	}
	for addr, want := range map[string]string{
		"127.0.0.1:9000":                "0.0.0.0:9000", // the wildcard serves it
		"localhost:8080":                "127.0.0.1:8080",
		"unix:/run/php/php8.2-fpm.sock": "/run/php/php8.2-fpm.sock",
		"10.0.0.5:8080":                 "",
		"unix:/other.sock":              "",
	} {
		l, ok := findListener(ls, addr)
		if (want == "") == ok || l.Addr != want {
			t.Errorf("%s: %q %v, want %q", addr, l.Addr, ok, want)
		}
	}
}

// TestShape: lines that say the same of other requests share a shape.
func TestShape(t *testing.T) {
	for _, c := range []struct{ a, b string }{
		{`2026-11-28 20:41:03,118 ERROR [worker-3] pool exhausted: 17 of 16 busy, dropped request 0x7f3a9c "GET /api/42"`,
			`2026-11-28 20:41:04,902 ERROR [worker-11] pool exhausted: 16 of 16 busy, dropped request 0x7f3b01 "GET /api/7"`},
		{`java.net.SocketTimeoutException: Read timed out from 10.0.0.5:5432 after 3000 ms`,
			`java.net.SocketTimeoutException: Read timed out from 10.0.0.17:5432 after 3001 ms`},
		{`[28-Nov-2026 20:41:03] WARNING: [pool www] child 4242 said into stderr: "x"`,
			`[28-Nov-2026 20:41:09] WARNING: [pool www] child 4250 said into stderr: "yy"`},
	} {
		if sa, sb := Shape([]byte(c.a)), Shape([]byte(c.b)); sa != sb {
			t.Errorf("%q\n%q: different shapes", sa, sb)
		}
	}
	if Shape([]byte("ERROR pool exhausted")) == Shape([]byte("ERROR upstream reset")) {
		t.Error("two messages share a shape")
	}
	if s := Shape([]byte(strings.Repeat("word ", 100))); len(s) > maxShape {
		t.Errorf("shape of %d bytes", len(s))
	}
	if s := Shape([]byte(`unterminated "quote 123`)); s != `unterminated "…"` {
		t.Errorf("%q", s)
	}
}

// TestFoundLog: a log found from a descriptor is read as both kinds:
// requests by status, known messages by class, the rest by shape, at
// most maxMessages shapes.
func TestFoundLog(t *testing.T) {
	p := filepath.Join(t.TempDir(), "app.log")
	write(t, p, "before the run")
	l := &Log{Path: p, Kind: "found"}
	l.Mark()
	var lines []string
	for i := range 50 {
		lines = append(lines, accessCombined, fmt.Sprintf("ERROR backend pool exhausted, dropped request %d", i))
	}
	for i := range 40 {
		lines = append(lines, fmt.Sprintf("shape%c of its own", 'A'+i))
	}
	write(t, p, append(lines, fpmMaxChildren, "")...)
	l.Read()
	if l.Statuses[502] != 50 || l.Events[EventMaxChildren] != 1 {
		t.Errorf("statuses %v events %v", l.Statuses, l.Events)
	}
	top := l.TopMessages(2)
	if len(top) != 2 || top[0] != "ERROR backend pool exhausted, dropped request N" || l.Messages[top[0]] != 50 || top[1] != otherMessages {
		t.Errorf("top %q of %v", top, l.Messages)
	}
	if len(l.Messages) != maxMessages+1 || l.MessageSamples[top[0]] != "ERROR backend pool exhausted, dropped request 0" {
		t.Errorf("%d shapes; sample %q", len(l.Messages), l.MessageSamples[top[0]])
	}
}
