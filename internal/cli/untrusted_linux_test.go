package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/netdoctor/netdoctor/internal/agentapi"
	"github.com/netdoctor/netdoctor/internal/app"
	"github.com/netdoctor/netdoctor/internal/netns"
	"github.com/netdoctor/netdoctor/internal/poll"
)

// The programs another user starts under the names of the servers
// netdoctor knows: copies of the test binary (fakeMain).
var fakeNames = []string{"nginx", "php-fpm8.2", "haproxy", "redis-server", "dnsmasq"}

// nobody is the unprivileged user of these tests.
const nobodyUID = 65534

// fakeMain runs the test binary as one of fakeNames, and reports whether
// it did. Run as root, by anyone, it leaves a sentinel beside itself and
// exits: netdoctor ran what another user controls. Run as that user, it
// takes the title ND_TITLE (re-executing itself, so that the kernel's
// command name stays the program's), the command name ND_COMM, and
// serves HTTP on ND_ADDR.
func fakeMain() bool {
	exe, err := os.Executable()
	name := filepath.Base(exe)
	if err != nil || !slices.Contains(fakeNames, name) && name != craftedName {
		return false
	}
	if os.Getuid() == 0 || os.Geteuid() == 0 {
		os.WriteFile(filepath.Join(filepath.Dir(exe), "RAN-AS-ROOT-"+name), []byte(strings.Join(os.Args, " ")+"\n"), 0o644)
		os.Exit(0)
	}
	if title := os.Getenv("ND_TITLE"); title != "" && os.Args[0] != title {
		err := syscall.Exec(exe, []string{title}, os.Environ())
		fmt.Fprintln(os.Stderr, "fake", name, err)
		os.Exit(3)
	}
	if comm := os.Getenv("ND_COMM"); comm != "" {
		// /proc/self/comm is the process's (its first thread's), what
		// prctl(PR_SET_NAME) would set on that thread.
		if err := os.WriteFile("/proc/self/comm", []byte(comm), 0); err != nil {
			fmt.Fprintln(os.Stderr, "fake", name, err)
			os.Exit(3)
		}
	}
	ln, err := net.Listen("tcp", os.Getenv("ND_ADDR"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "fake", name, err)
		os.Exit(3)
	}
	fmt.Println("ready")
	http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok\n") }))
	return true
}

// secretLine is in a file of root's that a symlink planted at a log path
// points to: a line the error-log patterns count and keep as a sample,
// so that any read of it shows in a report.
const secretLine = "upstream timed out ND-SECRET-LINE"

// nobodysDir is a directory of nobody's, where nobody's programs and
// files live: under /tmp (t.TempDir's parents are root's, 0700).
func nobodysDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("/tmp", "nd-nobody-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	if err := os.Chown(dir, nobodyUID, nobodyUID); err != nil {
		t.Fatal(err)
	}
	return dir
}

// asNobody makes path nobody's (a symlink itself, not its target).
func asNobody(t *testing.T, path string) {
	t.Helper()
	if err := os.Lchown(path, nobodyUID, nobodyUID); err != nil {
		t.Fatal(err)
	}
}

// startAsNobody starts cmd as nobody inside namespace ns (forked from a
// thread in it) and waits for its "ready" line, or for port to listen
// when ready is false.
func startAsNobody(t *testing.T, ns string, cmd *exec.Cmd, port int, ready bool) {
	t.Helper()
	n, err := netns.Resolve(ns)
	if err != nil {
		t.Fatal(err)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobodyUID, Gid: nobodyUID}, Setpgid: true, Pdeathsig: syscall.SIGKILL}
	var stderr syncBuffer
	cmd.Stderr = &stderr
	var out io.Reader
	if ready {
		if out, err = cmd.StdoutPipe(); err != nil {
			t.Fatal(err)
		}
	}
	if err := n.Do(cmd.Start); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		cmd.Wait()
	})
	if ready {
		line, _ := bufio.NewReader(out).ReadString('\n')
		if strings.TrimSpace(line) != "ready" {
			t.Fatalf("%s: %q; stderr %s", cmd.Args[0], line, stderr.String())
		}
		return
	}
	poll.Until(t, time.Minute, func() error {
		c, err := n.Dial(context.Background(), "tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			return fmt.Errorf("%s not listening on %d: %v: %s", cmd.Path, port, err, stderr.String())
		}
		c.Close()
		return nil
	})
}

// ndIn runs netdoctor with args in namespace ns, bounded: a command that
// blocks on what another user planted fails the test instead of hanging.
func ndIn(t *testing.T, ns string, limit time.Duration, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", ns, os.Args[0]}, args...)...)
	cmd.Env = append(os.Environ(), "ND_HELPER=cli")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("netdoctor %s did not end within %v (blocked?)\n%s", strings.Join(args, " "), limit, stderr.String())
	}
	code := 0
	if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return code, stdout.String(), stderr.String()
}

// TestOtherUsersServers: an unprivileged user runs, in a namespace,
// programs named like every server netdoctor recognises, titled like
// their masters and naming configurations, modules and logs of the
// user's (logs that are a FIFO and symlinks to a file of root's), and
// Debian's own nginx with the user's configuration. Under the agent,
// check and run, netdoctor observes them from /proc and their sockets
// and says what it did not read and why; it runs nothing of theirs (no
// sentinel), opens nothing they planted (no hang, no secret line in any
// report), and creates nothing in their directory.
// writeExe writes an executable the test then runs, through a child
// (cat): this process never holds it open for writing, so no child that
// another test forks meanwhile inherits that descriptor, which makes the
// exec fail with ETXTBSY ("text file busy") until that child has exec'd
// too (golang/go#22315; CI, with four tests at a time).
func writeExe(t *testing.T, path string, b []byte) {
	t.Helper()
	cmd := exec.Command("/bin/sh", "-c", `cat > "$1"`, "sh", path)
	cmd.Stdin = bytes.NewReader(b)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("write %s: %v %s", path, err, out)
	}
	if err := os.Chmod(path, 0o755); err != nil {
		t.Fatal(err)
	}
}

func TestOtherUsersServers(t *testing.T) {
	t.Parallel() // beside the package's other parallel tests: they measure nothing
	ns := testNetns(t)
	dir := nobodysDir(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// The user's programs: one copy of the test binary, theirs, linked
	// under each server's name.
	b, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	fake := filepath.Join(dir, "nd-fake")
	writeExe(t, fake, b)
	asNobody(t, fake)
	for _, n := range fakeNames {
		if err := os.Link(fake, filepath.Join(dir, n)); err != nil {
			t.Fatal(err)
		}
	}
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte(secretLine+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	mkdir := func(p string) {
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
		asNobody(t, p)
	}
	write := func(p, text string) {
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		asNobody(t, p)
	}
	logs := filepath.Join(dir, "logs")
	mkdir(logs)
	for _, f := range []string{"error.log", "fpm.log"} {
		if err := syscall.Mkfifo(filepath.Join(logs, f), 0o666); err != nil {
			t.Fatal(err)
		}
		asNobody(t, filepath.Join(logs, f))
	}
	for _, f := range []string{"access.log", "slow.log"} {
		if err := os.Symlink(secret, filepath.Join(logs, f)); err != nil {
			t.Fatal(err)
		}
		asNobody(t, filepath.Join(logs, f))
	}
	mkdir(filepath.Join(dir, "conf.d"))
	write(filepath.Join(dir, "conf.d", "mod.conf"), "load_module "+dir+"/evil.so;\n")
	write(filepath.Join(dir, "nginx.conf"), fmt.Sprintf("error_log %s/error.log;\nevents {}\nhttp {\n    access_log %s/access.log;\n    include %s/conf.d/*.conf;\n    server { listen 127.0.0.1:8081; }\n}\n", logs, logs, dir))
	write(filepath.Join(dir, "php-fpm.conf"), fmt.Sprintf("[global]\nerror_log = %s/fpm.log\n[www]\nlisten = 127.0.0.1:8082\npm = static\npm.max_children = 5\nslowlog = %s/slow.log\nrequest_slowlog_timeout = 1s\n", logs, logs))
	titles := map[string]string{
		"nginx":        "nginx: master process " + dir + "/nginx -c " + dir + "/nginx.conf",
		"php-fpm8.2":   "php-fpm: master process (" + dir + "/php-fpm.conf)",
		"haproxy":      dir + "/haproxy -f " + dir + "/haproxy.cfg",
		"redis-server": dir + "/redis-server 127.0.0.1:8084",
		"dnsmasq":      dir + "/dnsmasq -C " + dir + "/dnsmasq.conf",
	}
	ports := map[string]int{"nginx": 8081, "php-fpm8.2": 8082, "haproxy": 8083, "redis-server": 8084, "dnsmasq": 8085}
	for _, n := range fakeNames {
		cmd := exec.Command(filepath.Join(dir, n))
		cmd.Env = []string{"ND_TITLE=" + titles[n], fmt.Sprintf("ND_ADDR=127.0.0.1:%d", ports[n]), "PATH=/usr/bin:/bin"}
		startAsNobody(t, ns, cmd, ports[n], true)
	}
	// Debian's nginx, root's binary, started by the user with their
	// configuration: running it as root (nginx -T) would create the log
	// its later include names, and load any module it names.
	realNginx := "/usr/sbin/nginx"
	if _, err := os.Stat(realNginx); err == nil {
		real := filepath.Join(dir, "real")
		mkdir(real)
		mkdir(filepath.Join(real, "conf.d"))
		var temp strings.Builder
		for _, d := range []string{"client_body", "proxy", "fastcgi", "uwsgi", "scgi"} {
			fmt.Fprintf(&temp, "    %s_temp_path %s/%s_temp;\n", d, real, d)
		}
		write(filepath.Join(real, "nginx.conf"), fmt.Sprintf("pid %s/nginx.pid;\nerror_log %s/error.log;\nevents {}\nhttp {\n%s    access_log off;\n    include %s/conf.d/*.conf;\n    server { listen 127.0.0.1:8086; return 200 ok; }\n}\n", real, real, temp.String(), real))
		cmd := exec.Command(realNginx, "-p", real+"/", "-c", real+"/nginx.conf", "-e", real+"/startup.log", "-g", "daemon off; master_process on;")
		startAsNobody(t, ns, cmd, 8086, false)
		write(filepath.Join(real, "conf.d", "late.conf"), "access_log "+dir+"/RAN-AS-ROOT-nginx-T.log;\n")
		ports["real nginx"] = 8086
	} else {
		t.Logf("%s not installed: Debian's nginx under another user's configuration not tried", realNginx)
	}

	// check, then run against each front, then the agent.
	code, stdout, stderr := ndIn(t, ns, 90*time.Second, "check", "--window", "1s", "--no-dns", "--json", "-")
	if code != ExitOK && code != ExitFindings {
		t.Errorf("check: exit %d\n%s", code, stderr)
	}
	reports := map[string]string{"check": stdout}
	for name, port := range ports {
		code, stdout, stderr := ndIn(t, ns, 2*time.Minute, "run", "--json", "-", "-c", "2", "-t", "1", "-d", "2s", "--baseline", "1s", "--tail", "1s",
			fmt.Sprintf("http://127.0.0.1:%d/", port))
		if !strings.HasPrefix(strings.TrimSpace(stdout), "{") {
			t.Errorf("run against %s: exit %d, no report\n%s", name, code, stderr)
			continue
		}
		reports["run "+name] = stdout
		var r runJSON
		if err := json.Unmarshal([]byte(stdout), &r); err != nil {
			t.Fatal(err)
		}
		s := frontServer(r.Servers)
		switch {
		case s == nil:
			t.Errorf("run against %s: the server was not observed: %+v", name, r.Servers)
		case name == "nginx" || name == "php-fpm8.2" || name == "real nginx":
			// Its configuration is not read, so no log it names is: the
			// only logs are those its processes hold open for appending
			// and nobody owns (never the secret its links point at).
			configLogs := 0
			for _, l := range s.Logs {
				if l.Kind != "found" || l.Path == secret {
					configLogs++
				}
			}
			if s.Nginx != nil || s.Pool != nil || configLogs > 0 || !notesSay(s, "runs as uid 65534") {
				t.Errorf("run against %s: its configuration was read, or not said why not: nginx %+v pool %+v logs %+v notes %q", name, s.Nginx, s.Pool, s.Logs, s.Notes)
			}
		case s.Kind != name:
			t.Errorf("run against %s: kind %q", name, s.Kind)
		}
	}
	agentReports := agentOnOthers(t, ns, ports)
	for k, v := range agentReports {
		reports[k] = v
	}

	for what, rep := range reports {
		if strings.Contains(rep, "ND-SECRET") {
			t.Errorf("%s: the report holds the line of root's file that a symlink at a log path points to", what)
		}
	}
	// Nothing of the user's ran as root, nothing was made in their
	// directory by root.
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if strings.HasPrefix(d.Name(), "RAN-AS-ROOT-") {
			b, _ := os.ReadFile(p)
			t.Errorf("%s: netdoctor ran the user's program as root: %s", p, b)
		}
		if fi, err := d.Info(); err == nil && fi.Sys().(*syscall.Stat_t).Uid == 0 {
			t.Errorf("%s: made by root in the user's directory", p)
		}
		return nil
	})
}

// agentOnOthers runs the agent in ns: its pools follow every listener
// without being asked; a watch asks for each server as run does. It
// returns what the API and /metrics said.
func agentOnOthers(t *testing.T, ns string, ports map[string]int) map[string]string {
	t.Helper()
	tok := filepath.Join(t.TempDir(), "token")
	const token = "untrusted-test-token-0123456789"
	if err := os.WriteFile(tok, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, "ip", "netns", "exec", ns, os.Args[0], "agent", "--listen", "127.0.0.1:9120", "--token-file", tok,
		"--interval", "200ms", "--dns-every", "0", "--dependency-every", "3s")
	cmd.Env = append(os.Environ(), "ND_HELPER=cli")
	var logs syncBuffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cancel()
		cmd.Wait()
	}()
	n, _ := netns.Resolve(ns)
	client := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{DialContext: n.Dial}}
	get := func(path string) (int, string) {
		req, _ := http.NewRequest(http.MethodGet, "http://127.0.0.1:9120"+path, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := client.Do(req)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	out := map[string]string{}
	// The pools: every application's series once the agent has followed
	// them for a while (the followed servers' logs are read too).
	// Asked every 200 ms: the agent answers 20 requests a second.
	var metrics string
	poll.UntilEvery(t, 30*time.Second, 200*time.Millisecond, func() error {
		code, body := get("/metrics")
		if code != http.StatusOK || !strings.Contains(body, `app="haproxy"`) || !strings.Contains(body, `app="nginx"`) {
			return fmt.Errorf("the agent follows no application (%d):\n%s\n%s", code, grepLines(body, "app_workers"), logs.String())
		}
		metrics = body
		return nil
	})
	out["agent /metrics"] = metrics
	for name, port := range ports {
		code, body := get(fmt.Sprintf("%s?port=%d", agentapi.PathServers, port))
		if code != http.StatusOK {
			t.Errorf("agent servers?port=%d (%s): %d %s", port, name, code, body)
			continue
		}
		out["agent servers "+name] = body
		if (name == "nginx" || name == "php-fpm8.2" || name == "real nginx") && !strings.Contains(body, "runs as uid 65534") {
			t.Errorf("agent servers?port=%d (%s): does not say why the configuration was not read:\n%s", port, name, body)
		}
	}
	code, body := get(agentapi.PathFindings)
	if code != http.StatusOK {
		t.Errorf("agent findings: %d %s", code, body)
	}
	out["agent findings"] = body
	return out
}

func frontServer(ss []*app.Server) *app.Server {
	for _, s := range ss {
		if s.Role == "front" {
			return s
		}
	}
	return nil
}

func notesSay(s *app.Server, sub string) bool {
	for _, n := range s.Notes {
		if strings.Contains(n, sub) {
			return true
		}
	}
	return false
}

// TestRootServerUserLogs: nginx run by root, its configuration root's,
// its logs in a directory the user it serves as may write, where that
// user replaced the error log by a FIFO and the access log by a symlink
// to a file of root's. run reads the configuration as before (file:line
// of its listen), and reports each log as not read and why: no hang, no
// line of root's file.
func TestRootServerUserLogs(t *testing.T) {
	t.Parallel() // beside the package's other parallel tests: they measure nothing
	bin := "/usr/sbin/nginx"
	if _, err := os.Stat(bin); err != nil {
		t.Skip("nginx not installed (scripts/deps.sh installs it)")
	}
	ns := testNetns(t)
	dir := t.TempDir()
	logs := filepath.Join(dir, "logs")
	if err := os.Mkdir(logs, 0o755); err != nil {
		t.Fatal(err)
	}
	asNobody(t, logs)
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte(secretLine+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(dir, "nginx.conf")
	var b strings.Builder
	fmt.Fprintf(&b, "pid %s/nginx.pid;\nerror_log %s/error.log;\nevents {}\nhttp {\n", dir, logs)
	for _, d := range []string{"client_body", "proxy", "fastcgi", "uwsgi", "scgi"} {
		fmt.Fprintf(&b, "    %s_temp_path %s/%s_temp;\n", d, dir, d)
	}
	fmt.Fprintf(&b, "    access_log %s/access.log;\n    server {\n        listen 127.0.0.1:8090 backlog=77;\n        return 200 ok;\n    }\n}\n", logs)
	if err := os.WriteFile(conf, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	n, err := netns.Resolve(ns)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-p", dir+"/", "-c", conf, "-e", dir+"/startup.log", "-g", "daemon off; master_process on;")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := n.Do(cmd.Start); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); cmd.Wait() })
	poll.Until(t, time.Minute, func() error {
		c, err := n.Dial(context.Background(), "tcp", "127.0.0.1:8090")
		if err != nil {
			return fmt.Errorf("nginx not listening on 8090: %w", err)
		}
		c.Close()
		return nil
	})
	// What the user nginx writes as could do in its log directory.
	for _, f := range []string{"error.log", "access.log"} {
		os.Remove(filepath.Join(logs, f))
	}
	if err := syscall.Mkfifo(filepath.Join(logs, "error.log"), 0o666); err != nil {
		t.Fatal(err)
	}
	asNobody(t, filepath.Join(logs, "error.log"))
	if err := os.Symlink(secret, filepath.Join(logs, "access.log")); err != nil {
		t.Fatal(err)
	}
	asNobody(t, filepath.Join(logs, "access.log"))

	code, stdout, stderr := ndIn(t, ns, 2*time.Minute, "run", "--json", "-", "-c", "2", "-t", "1", "-d", "2s", "--baseline", "1s", "--tail", "1s", "http://127.0.0.1:8090/")
	var r runJSON
	if err := json.Unmarshal([]byte(stdout), &r); err != nil {
		t.Fatalf("exit %d: %v\n%s", code, err, stderr)
	}
	s := frontServer(r.Servers)
	if s == nil || s.Kind != "nginx" || s.Nginx == nil || len(s.Nginx.Listens) != 1 || s.Nginx.Listens[0].Backlog != 77 || s.Nginx.Listens[0].Source != conf+":12" {
		t.Fatalf("root's nginx: its configuration not read as before: %+v %+v", s, s.Nginx)
	}
	status := map[string]string{}
	for _, l := range s.Logs {
		status[filepath.Base(l.Path)] = l.Status
	}
	if !strings.Contains(status["error.log"], "FIFO") || !strings.Contains(status["access.log"], "symlink in a directory of uid 65534") {
		t.Errorf("log statuses %q: want the FIFO and the symlink named, not read", status)
	}
	if strings.Contains(stdout, "ND-SECRET") {
		t.Error("the report holds the line of root's file behind the symlink")
	}
}
