package tune

import (
	"bytes"
	"context"
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

	"github.com/netdoctor/netdoctor/internal/app"
	"github.com/netdoctor/netdoctor/internal/nginx"
)

// testNginx starts a real nginx master as root, its configuration in a
// test directory: the main file, which includes conf.d/*.conf. It is
// stopped when the test ends.
func testNginx(t *testing.T) (pid int, dir, conf string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: it starts nginx and applies plans to it")
	}
	bin, err := exec.LookPath("nginx")
	if err != nil {
		if bin, err = exec.LookPath("/usr/sbin/nginx"); err != nil {
			t.Skip("nginx not installed (scripts/deps.sh installs it)")
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	dir = t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "conf.d"), 0o755); err != nil {
		t.Fatal(err)
	}
	conf = filepath.Join(dir, "nginx.conf")
	var b strings.Builder
	fmt.Fprintf(&b, "daemon off;\nuser root;\nworker_processes 1;\npid %s/nginx.pid;\nerror_log %s/error.log;\n", dir, dir)
	fmt.Fprintf(&b, "events {\n    worker_connections 512;\n}\nhttp {\n")
	for _, d := range []string{"client_body", "proxy", "fastcgi", "uwsgi", "scgi"} {
		fmt.Fprintf(&b, "    %s_temp_path %s/%s_temp;\n", d, dir, d)
	}
	fmt.Fprintf(&b, "    access_log off;\n    tcp_nodelay off;\n    include %s/conf.d/*.conf;\n", dir)
	fmt.Fprintf(&b, "    server {\n        listen %s;\n        location / { return 200 \"ok\\n\"; }\n    }\n}\n", addr)
	if err := os.WriteFile(conf, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-p", dir, "-c", conf)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		cmd.Wait()
	})
	pid = cmd.Process.Pid
	for deadline := time.Now().Add(10 * time.Second); ; {
		pr, err := Live{}.Process(pid)
		if _, ok := nginx.ParseMaster(pr.Cmdline); err == nil && ok && len(app.Children(pid)) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("nginx did not start: %v\n%s", err, out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	return pid, dir, conf
}

// nodelayPlan is the plan netdoctor makes for nginx's tcp_nodelay off:
// the line turned on, validated and reloaded as the master's own binary
// and options say.
func nodelayPlan(t *testing.T, pid int, conf string) *Plan {
	t.Helper()
	old, err := os.ReadFile(conf)
	if err != nil {
		t.Fatal(err)
	}
	pr, err := Live{}.Process(pid)
	if err != nil {
		t.Fatal(err)
	}
	fe := &fileEdits{path: conf, app: "nginx", old: old,
		validate: nginxValidate(&app.Server{Config: conf}, pr), reload: Reload{PID: pid, Start: pr.Start, Exe: pr.Exe, Signal: "HUP"}}
	fe.edits = append(fe.edits, edit{line: bytes.Count(old[:bytes.Index(old, []byte("tcp_nodelay off;"))], []byte("\n")) + 1, replace: setNginxArgs("tcp_nodelay", "on")})
	f, err := fe.file()
	if err != nil {
		t.Fatal(err)
	}
	return &Plan{Version: Version, Changes: []Change{{Kind: KindFile, Key: "file:" + conf, Findings: []string{"nagle-delayed-ack"}, File: f}}}
}

// useJournalDir points apply's journals at a test directory.
func useJournalDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	old := JournalDir
	JournalDir = dir
	t.Cleanup(func() { JournalDir = old })
	return dir
}

// TestApplyRefuses applies crafted plans, each something netdoctor would
// not have planned, to a real nginx: every one is refused with a line
// that says why, before anything is written or run: no journal, the
// files as they were, kernel.core_pattern as it was, no sentinel made by
// a command the plan names, no signal to a process it names.
func TestApplyRefuses(t *testing.T) {
	pid, dir, conf := testNginx(t)
	jdir := useJournalDir(t)
	sentinel := filepath.Join(t.TempDir(), "sentinel")
	touch := []string{"/bin/sh", "-c", "touch " + sentinel}
	// A process that is not nginx, which SIGHUP would kill.
	sleeper := exec.Command("sleep", "300")
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sleeper.Process.Kill(); sleeper.Wait() })
	st, err := procfs.Stat(strconv.Itoa(sleeper.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	// A program of another user titled as an nginx master.
	fake := exec.Command("sleep", "300")
	fake.Args[0] = "nginx: master process /usr/sbin/nginx -c " + conf
	fake.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	if err := fake.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fake.Process.Kill(); fake.Wait() })
	fakeSt, err := procfs.Stat(strconv.Itoa(fake.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	// A file nginx does not read, and one it reads through a symlink
	// that leads out of its directory.
	other := filepath.Join(dir, "other.conf")
	outside := filepath.Join(t.TempDir(), "outside.conf")
	for _, p := range []string{other, outside} {
		if err := os.WriteFile(p, []byte("server_tokens on;\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(outside, filepath.Join(dir, "conf.d", "link.conf")); err != nil {
		t.Fatal(err)
	}
	// A file it reads that belongs to another user.
	theirs := filepath.Join(dir, "conf.d", "theirs.conf")
	if err := os.WriteFile(theirs, []byte("keepalive_timeout 60s;\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(theirs, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	// A line in a file nginx reads that looks like nginx -T's header of
	// another file: the files tune may edit are those the includes name.
	hdr := filepath.Join(dir, "conf.d", "header.conf")
	if err := os.WriteFile(hdr, []byte("# configuration file "+other+":\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	corePattern, _ := os.ReadFile("/proc/sys/kernel/core_pattern")
	files := []string{conf, other, outside, theirs}
	contents := map[string]string{}
	for _, p := range files {
		b, _ := os.ReadFile(p)
		contents[p] = string(b)
	}

	// fileAt is the valid plan moved to another file, adding a line
	// netdoctor would add.
	fileAt := func(p *Plan, path string) *Plan {
		f := p.Changes[0].File
		old, _ := os.ReadFile(path)
		f.Path, f.Old = path, sum(old)
		f.Content = string(old) + "proxy_http_version 1.1;\n"
		f.New = sum([]byte(f.Content))
		return p
	}
	sysctlPlan := func(name, value string, global bool) *Plan {
		return &Plan{Version: Version, Changes: []Change{{Kind: KindSysctl, Key: "sysctl:" + name,
			Sysctl: &Sysctl{Name: name, Proposed: value, Scope: Scope{Global: global}}}}}
	}
	for _, c := range []struct {
		name string
		plan func() *Plan
		want string
	}{
		{"a sysctl outside the set", func() *Plan { return sysctlPlan("kernel.core_pattern", "|"+strings.Join(touch, " ")+" %p", false) },
			"refused: kernel.core_pattern is not a setting netdoctor plans"},
		{"a value out of bounds", func() *Plan { return sysctlPlan("net.core.somaxconn", "100000000", false) },
			`refused: net.core.somaxconn = "100000000" is outside netdoctor's bounds 4096–65535`},
		{"a value with a line of its own", func() *Plan { return sysctlPlan("net.core.somaxconn", "8192\nkernel.core_pattern = |/bin/sh", false) },
			"is outside netdoctor's bounds"},
		{"a keepalive time", func() *Plan { return sysctlPlan("net.ipv4.tcp_keepalive_time", "300", false) },
			`netdoctor only sets it to 7200`},
		{"a number with a sign", func() *Plan { return sysctlPlan("net.core.somaxconn", "+8192", false) },
			"is outside netdoctor's bounds"},
		{"a port range off the default", func() *Plan { return sysctlPlan("net.ipv4.ip_local_port_range", "20000 50000", false) },
			"is outside netdoctor's bounds"},
		{"a host-wide setting in a namespace's scope", func() *Plan { return sysctlPlan("net.netfilter.nf_conntrack_max", "262144", false) },
			"is host-wide"},
		{"a file nginx does not read", func() *Plan { return fileAt(nodelayPlan(t, pid, conf), other) },
			"is not a file nginx pid " + strconv.Itoa(pid) + " reads"},
		{"a symlink out of the configuration", func() *Plan { return fileAt(nodelayPlan(t, pid, conf), filepath.Join(dir, "conf.d", "link.conf")) },
			"outside nginx's configuration directory"},
		{"a file of another user", func() *Plan { return fileAt(nodelayPlan(t, pid, conf), theirs) },
			"belongs to uid 65534"},
		{"a master reading a file of another user", func() *Plan { return nodelayPlan(t, pid, conf) },
			"include " + theirs + ": " + theirs + " belongs to uid 65534"},
		{"a validation of its own", func() *Plan {
			p := nodelayPlan(t, pid, conf)
			p.Changes[0].File.Validate = touch
			return p
		}, "the plan validates with `/bin/sh -c touch"},
		{"a reload of another process", func() *Plan {
			p := nodelayPlan(t, pid, conf)
			p.Changes[0].File.Reload = Reload{PID: sleeper.Process.Pid, Start: st.StartTime, Exe: "/usr/bin/sleep", Signal: "HUP"}
			return p
		}, fmt.Sprintf("pid %d (sleep) is not an nginx or php-fpm master", sleeper.Process.Pid)},
		{"a reload signal of its own", func() *Plan {
			p := nodelayPlan(t, pid, conf)
			p.Changes[0].File.Reload.Signal = "KILL"
			return p
		}, "the plan reloads with kill -KILL"},
		{"a master without its start time", func() *Plan {
			p := nodelayPlan(t, pid, conf)
			p.Changes[0].File.Reload.Start = 0
			return p
		}, "lacks pid"},
		{"a value out of bounds in the file", func() *Plan {
			p := nodelayPlan(t, pid, conf)
			f := p.Changes[0].File
			f.Content = strings.Replace(f.Content, "worker_connections 512;", "worker_connections 99999999;", 1)
			f.New = sum([]byte(f.Content))
			return p
		}, `"99999999" is outside netdoctor's bounds`},
		{"a line netdoctor does not write", func() *Plan {
			p := nodelayPlan(t, pid, conf)
			f := p.Changes[0].File
			f.Content = "load_module /tmp/evil.so;\n" + f.Content
			f.New = sum([]byte(f.Content))
			return p
		}, `"load_module /tmp/evil.so;": adds a line netdoctor does not add`},
		{"content that is not its hash", func() *Plan {
			p := nodelayPlan(t, pid, conf)
			p.Changes[0].File.Content += "# more\n"
			return p
		}, "does not hash to its new_sha256"},
		{"a listener of another process", func() *Plan {
			return &Plan{Version: Version, Changes: []Change{{Kind: KindListen, Key: "listen:x", Listen: &Listener{
				Addr: "127.0.0.1:1", PID: sleeper.Process.Pid, Start: st.StartTime, Backlog: 4096, Proposed: 4096}}}}
		}, "is not an nginx or php-fpm master"},
		{"a listener of another user's master", func() *Plan {
			return &Plan{Version: Version, Changes: []Change{{Kind: KindListen, Key: "listen:x", Listen: &Listener{
				Addr: "127.0.0.1:1", PID: fake.Process.Pid, Start: fakeSt.StartTime, Backlog: 4096, Proposed: 4096}}}}
		}, "runs as uid 65534: not root's alone: netdoctor re-listens on masters running as root only"},
		{"a configuration of another user's master", func() *Plan {
			p := nodelayPlan(t, pid, conf)
			p.Changes[0].File.Reload = Reload{PID: fake.Process.Pid, Start: fakeSt.StartTime, Exe: "/usr/bin/sleep", Signal: "HUP"}
			return p
		}, "runs as uid 65534: not root's alone: netdoctor changes the configuration of masters running as root only"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var out bytes.Buffer
			j, err := Apply(context.Background(), c.plan(), "crafted.json", Options{Config: true, Out: &out})
			if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
				t.Errorf("Apply = %v; want one line with %q\n%s", err, c.want, out.String())
			}
			if j != nil {
				t.Errorf("a journal: %s", j.Path)
			}
			if ents, _ := os.ReadDir(jdir); len(ents) > 0 {
				t.Errorf("journal directory not empty: %v", ents)
			}
			if _, err := os.Stat(sentinel); err == nil {
				t.Errorf("the plan's command ran")
			}
			for _, p := range files {
				if b, _ := os.ReadFile(p); string(b) != contents[p] {
					t.Errorf("%s changed", p)
				}
			}
			if b, _ := os.ReadFile("/proc/sys/kernel/core_pattern"); !bytes.Equal(b, corePattern) {
				t.Errorf("kernel.core_pattern is %q, was %q", b, corePattern)
			}
			if err := sleeper.Process.Signal(syscall.Signal(0)); err != nil {
				t.Errorf("the sleeper got a signal: %v", err)
			}
			if err := fake.Process.Signal(syscall.Signal(0)); err != nil {
				t.Errorf("the other user's program got a signal: %v", err)
			}
		})
	}
}

// TestApplyDerived: the plan netdoctor makes passes; the dry run shows
// the diff computed now and the commands from the master itself, and
// apply validates, reloads and rolls back with those.
func TestApplyDerived(t *testing.T) {
	pid, _, conf := testNginx(t)
	useJournalDir(t)
	p := nodelayPlan(t, pid, conf)
	was, _ := os.ReadFile(conf)
	var out bytes.Buffer
	if _, err := Apply(context.Background(), p, "plan.json", Options{Config: true, DryRun: true, Out: &out}); err != nil {
		t.Fatal(err)
	}
	pr, err := Live{}.Process(pid)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{fmt.Sprintf("validate (%s -t -q -p %s -c %s)", pr.Exe, filepath.Dir(conf), conf),
		fmt.Sprintf("reload (kill -HUP %d (%s))", pid, pr.Exe), "|      access_log off;", "| -    tcp_nodelay off;", "| +    tcp_nodelay on;"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("dry run does not show %q:\n%s", want, out.String())
		}
	}
	workers := app.Children(pid)
	out.Reset()
	j, err := Apply(context.Background(), p, "plan.json", Options{Config: true, Out: &out})
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if b, _ := os.ReadFile(conf); string(b) != p.Changes[0].File.Content {
		t.Errorf("%s not written", conf)
	}
	if now := app.Children(pid); overlaps(now, workers) {
		t.Errorf("nginx not reloaded: workers %v, were %v", now, workers)
	}
	out.Reset()
	if err := Rollback(j, &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if b, _ := os.ReadFile(conf); !bytes.Equal(b, was) {
		t.Errorf("%s not restored", conf)
	}
}

// TestLiveReadFile: planning reads a file a report names only when a
// running master that apply would accept reads it: a report naming a
// file of root's gets no content of it into a plan.
func TestLiveReadFile(t *testing.T) {
	_, _, conf := testNginx(t)
	b, err := Live{}.ReadFile(conf)
	if err != nil || !strings.Contains(string(b), "tcp_nodelay off;") {
		t.Fatalf("nginx's own configuration: %v\n%s", err, b)
	}
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte("root:secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{secret, "/etc/shadow", "/proc/self/environ"} {
		if b, err := (Live{}).ReadFile(p); err == nil || len(b) > 0 {
			t.Errorf("%s: read (%d bytes), want refused", p, len(b))
		}
	}
}
