package lab

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/netdoctor/netdoctor/internal/netns"
)

// Self is how the lab starts netdoctor itself in a namespace (its small
// built-in servers, its agent, and the measurements on the client side,
// labrun.Measure): the binary
// and extra environment. A test binary sets it to re-run itself in a
// helper role.
var Self = func() (exe string, env []string) {
	exe, _ = os.Executable()
	return exe, nil
}

// StartSelf runs `netdoctor ARGS` in namespace ns and, when ready is
// not empty, waits until the process prints it.
func (e *Env) StartSelf(ctx context.Context, ns netns.NS, name, ready string, args ...string) (*Proc, error) {
	exe, env := Self()
	p, err := e.start(ns, name, env, append([]string{exe}, args...)...)
	if err != nil || ready == "" {
		return p, err
	}
	return p, e.WaitOutput(ctx, p, ready)
}

// WaitOutput waits until p has printed want, or exits, or 10 s pass.
func (e *Env) WaitOutput(ctx context.Context, p *Proc, want string) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		if b, _ := os.ReadFile(p.Log); strings.Contains(string(b), want) {
			return nil
		}
		if p.Exited() {
			return fmt.Errorf("%s exited before it was ready: %s", p.Name, p.tail())
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("%s not ready after 10 s: %s", p.Name, p.tail())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// ResolvConf gives namespace ns its own resolv.conf: `ip netns exec`
// bind-mounts /etc/netns/NS/resolv.conf over /etc/resolv.conf for what
// it starts, and netdoctor reads it from there. It must be written before
// the processes that resolve are started. The directory is removed on
// Close (and by Clean).
func (e *Env) ResolvConf(ns netns.NS, content string) error {
	dir := filepath.Join("/etc/netns", ns.Name)
	if _, err := os.Stat("/etc/netns"); err != nil {
		// Not there before: leave none behind (its removal fails
		// harmlessly while another lab still has its directory in it).
		if err := e.record(change{EmptyDir: "/etc/netns"}); err != nil {
			return err
		}
	}
	if err := e.record(change{Dir: dir}); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "resolv.conf"), []byte(content), 0o644)
}

// Dnsmasq is a caching resolver answering the lab's own names.
type Dnsmasq struct {
	Listen []string          // addresses, port 53
	Hosts  map[string]string // name → IPv4 address, answered authoritatively
	// BogusPriv answers reverse lookups of private ranges locally
	// (NXDOMAIN unless a host above has the address) instead of
	// forwarding them.
	BogusPriv bool
}

// StartDnsmasq starts dnsmasq in namespace ns: no upstream servers, no
// DHCP, only the given names (NXDOMAIN for any other).
func (e *Env) StartDnsmasq(ctx context.Context, ns netns.NS, d *Dnsmasq) (*Proc, error) {
	bin, err := findBinary("dnsmasq")
	if err != nil {
		return nil, ErrMissing{[]string{"dnsmasq (dnsmasq-base)"}}
	}
	dir := filepath.Join(e.Dir, "dnsmasq")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var hosts strings.Builder
	for name, addr := range d.Hosts {
		fmt.Fprintf(&hosts, "%s %s\n", addr, name)
	}
	hostsFile := filepath.Join(dir, "hosts")
	if err := os.WriteFile(hostsFile, []byte(hosts.String()), 0o644); err != nil {
		return nil, err
	}
	args := []string{bin, "--keep-in-foreground", "--no-daemon", "--conf-file=/dev/null", "--no-resolv", "--no-hosts",
		"--addn-hosts=" + hostsFile, "--bind-interfaces", "--user=root", "--pid-file=" + filepath.Join(dir, "dnsmasq.pid"),
		"--cache-size=1000", "--log-facility=" + filepath.Join(dir, "dnsmasq.log"),
		// Every other name is local too: NXDOMAIN at once, where no
		// upstream would make it REFUSED.
		"--local=/#/"}
	for _, l := range d.Listen {
		args = append(args, "--listen-address="+l)
	}
	if d.BogusPriv {
		args = append(args, "--bogus-priv")
	}
	p, err := e.start(ns, "dnsmasq", nil, args...)
	if err != nil {
		return nil, err
	}
	// dnsmasq answers over TCP on the same addresses.
	return p, e.WaitListening(ctx, p, ns, d.Listen[0]+":53")
}

// StartRedis starts redis-server in namespace ns on addr ("ip:port"),
// without persistence.
func (e *Env) StartRedis(ctx context.Context, ns netns.NS, addr string) (*Proc, error) {
	bin, err := findBinary("redis-server")
	if err != nil {
		return nil, err
	}
	host, port, ok := strings.Cut(addr, ":")
	if !ok {
		return nil, fmt.Errorf("redis address %q: want ip:port", addr)
	}
	dir := filepath.Join(e.Dir, "redis")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	p, err := e.start(ns, "redis-server", nil, bin, "--bind", host, "--port", port, "--dir", dir,
		"--save", "", "--appendonly", "no", "--daemonize", "no", "--protected-mode", "no", "--maxclients", "10000")
	if err != nil {
		return nil, err
	}
	return p, e.WaitListening(ctx, p, ns, addr)
}

// SYNFlood sends TCP SYNs from random source addresses at about pps per
// second from namespace ns to addr ("ip:port") with hping3, for at most
// d: seed 001 §6's flood, bounded. Random sources get no route back, so
// each SYN leaves a half-open connection in the server's SYN queue.
func (e *Env) SYNFlood(ns netns.NS, addr string, pps int, d time.Duration) (*Proc, error) {
	bin, err := findBinary("hping3")
	if err != nil {
		return nil, err
	}
	timeout, err := findBinary("timeout")
	if err != nil {
		return nil, err
	}
	host, port, ok := strings.Cut(addr, ":")
	if !ok {
		return nil, fmt.Errorf("flood target %q: want ip:port", addr)
	}
	interval := fmt.Sprintf("u%d", max(1, 1000000/pps))
	return e.start(ns, "hping3", nil, timeout, "-s", "KILL", fmt.Sprintf("%.0f", d.Seconds()), bin,
		"-q", "-S", "-p", port, "-i", interval, "--rand-source", host)
}

// StartPython writes script to Dir/NAME.py and runs it with Debian's
// python3 in namespace ns, with args, waiting until it listens on addr
// ("ip:port"). Debian's interpreter comes first: a pyenv or virtualenv
// python3 earlier in PATH may lack what the standard library should have.
func (e *Env) StartPython(ctx context.Context, ns netns.NS, name string, script []byte, addr string, args ...string) (*Proc, error) {
	bin, err := findBinary("/usr/bin/python3", "python3")
	if err != nil {
		return nil, ErrMissing{[]string{"python3"}}
	}
	path := filepath.Join(e.Dir, name+".py")
	if err := os.WriteFile(path, script, 0o644); err != nil {
		return nil, err
	}
	// -u: unbuffered, so that its output reaches the log as it is printed.
	p, err := e.start(ns, name, nil, append([]string{bin, "-u", path}, args...)...)
	if err != nil {
		return nil, err
	}
	return p, e.WaitListening(ctx, p, ns, addr)
}

// HAProxy is an haproxy in mode http in front of one backend.
type HAProxy struct {
	Listen  string // "ip:port"
	Backend string // "ip:port"
	// Close opens a connection to the backend per request and closes it
	// with a reset (option http-server-close, http-pretend-keepalive and
	// nolinger): no TIME_WAIT is left, each connect and reset costs. Else backend
	// connections are kept alive and shared (http-reuse always).
	Close bool
	// Maxconn is the frontend's own maxconn (0 writes none: the global
	// 4096 holds).
	Maxconn int
}

// StartHAProxy writes haproxy.cfg under Dir/haproxy and starts haproxy in
// the server namespace, in the foreground.
func (e *Env) StartHAProxy(ctx context.Context, h *HAProxy) (*Proc, error) {
	bin, err := findBinary("haproxy")
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(e.Dir, "haproxy")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format+"\n", a...) }
	p("# written by netdoctor's lab")
	p("global")
	// Each connection proxied takes two descriptors: 4096 fits the
	// lab's loads and any RLIMIT_NOFILE of 10000 or more.
	p("    maxconn 4096")
	p("    pidfile %s/haproxy.pid", dir)
	p("defaults")
	p("    mode http")
	p("    timeout connect 5s")
	p("    timeout client 30s")
	p("    timeout server 30s")
	p("frontend web")
	p("    bind %s", h.Listen)
	if h.Maxconn > 0 {
		p("    maxconn %d", h.Maxconn)
	}
	p("    default_backend app")
	p("backend app")
	if h.Close {
		// http-server-close alone sends "Connection: close": the backend
		// would close first and keep the TIME_WAIT. Pretending keep-alive,
		// haproxy closes first, after the whole response, with a RST
		// (nolinger; haproxy lingers not on server connections it closes
		// itself anyway, unless the server closed first).
		p("    option http-server-close")
		p("    option http-pretend-keepalive")
		p("    option nolinger")
	} else {
		p("    http-reuse always")
	}
	p("    server app1 %s maxconn 1000", h.Backend)
	conf := filepath.Join(dir, "haproxy.cfg")
	if err := os.WriteFile(conf, []byte(b.String()), 0o644); err != nil {
		return nil, err
	}
	// -db: stay in the foreground, in the lab's process group.
	proc, err := e.Start(e.ServerNS, "haproxy", bin, "-db", "-f", conf)
	if err != nil {
		return nil, err
	}
	if err := e.WaitListening(ctx, proc, e.ServerNS, h.Listen); err != nil {
		return nil, err
	}
	return proc, nil
}

// StartAgent starts `netdoctor agent` in the lab's server namespace, on
// the server's address with a token of its own, and returns its URL and
// the token's file: the run reaches it over the veth, as it would reach
// an agent on another host. extra are more of the agent's flags. The
// agent is the product under test, so it runs as users run it: a
// process started with its flags (what it serves, on which address,
// with which token, has no type of its own that a job could carry).
func (e *Env) StartAgent(ctx context.Context, extra ...string) (url, tokenFile string, p *Proc, err error) {
	var b [24]byte
	rand.Read(b[:])
	tokenFile = filepath.Join(e.Dir, "agent.token")
	if err := os.WriteFile(tokenFile, []byte(base64.StdEncoding.EncodeToString(b[:])+"\n"), 0o600); err != nil {
		return "", "", nil, fmt.Errorf("agent token: %w", err)
	}
	addr := net.JoinHostPort(e.ServerIP, "9120")
	// Resolvers are probed when the run asks, as with --server-netns.
	args := append([]string{"agent", "--listen", addr, "--token-file", tokenFile, "--dns-every", "0"}, extra...)
	if p, err = e.StartSelf(ctx, e.ServerNS, "agent", "agent serving", args...); err != nil {
		return "", "", nil, fmt.Errorf("start the agent: %w", err)
	}
	return "http://" + addr, tokenFile, p, nil
}
