package lab

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// Target is what a built scenario serves, and what observing it needs
// beyond the scenario's load.
type Target struct {
	URL string
	// DNS: the run also probes the nameservers of both sides (run
	// --dns), because what the scenario breaks is name resolution.
	DNS bool
}

// Build starts the scenario's servers in e with the faults of stage
// (1 = all of them, Fixed() = none) and returns what to load.
func (s *Scenario) Build(ctx context.Context, e *Env, stage int) (*Target, error) {
	b, ok := builders[s.Name]
	if !ok {
		return nil, fmt.Errorf("scenario %s has no builder", s.Name)
	}
	if stage < 1 || stage > s.Fixed() {
		return nil, fmt.Errorf("scenario %s has stages 1 to %d (%d: fixed)", s.Name, len(s.Stages), s.Fixed())
	}
	return b(ctx, e, func(k int) bool { return k >= stage && k <= len(s.Stages) })
}

// fault reports whether stage k's fault is present.
type builder func(ctx context.Context, e *Env, fault func(k int) bool) (*Target, error)

var builders = map[string]builder{
	"nginx-php-throughput": nginxPHP,
	"healthy":              healthy,
	"nginx-nagle":          nginxNagle,
	"dns-no-resolver":      dnsScenario(dnsNone),
	"dns-slow-resolver":    dnsScenario(dnsSlow),
	"ping-ptr-timeout":     dnsScenario(dnsPTR),
	"syn-flood":            synFlood,
	"conntrack-sawtooth":   conntrackSawtooth,
	"accept-queue-backlog": acceptQueue,
	"kv-redis":             kvRedis,
	"python-pool":          pythonPool,
	"python-dns":           pythonDNS,
	"haproxy-reset":        haproxyReset,
	"proxy-churn":          proxyChurn,
	"stall-tenth":          stallTenth,
}

// steps runs lab calls in order and stops at the first error.
func steps(fs ...func() error) error {
	for _, f := range fs {
		if err := f(); err != nil {
			return err
		}
	}
	return nil
}

func (e *Env) url(port int) *Target {
	if port == 80 {
		return &Target{URL: "http://" + e.ServerIP + "/"}
	}
	return &Target{URL: fmt.Sprintf("http://%s:%d/", e.ServerIP, port)}
}

// nginxPHP is seed 000: every fault of the article's five stages.
func nginxPHP(ctx context.Context, e *Env, fault func(int) bool) (*Target, error) {
	srv := e.ServerNS
	conntrackMax := 262144
	if fault(1) {
		conntrackMax = 200
	}
	fpm := &FPM{MaxChildren: phpChildren}
	if fault(2) {
		fpm.Dynamic, fpm.MaxChildren = true, 5
	}
	ng := &Nginx{PHP: fpm, Workers: 2, KeepConn: !fault(5), Keepalive: phpKeepalive}
	err := steps(
		func() error { return e.TrackConnections(srv, conntrackMax) },
		func() error {
			if fault(3) {
				return e.Sysctl(srv, "net.core.somaxconn", "10")
			}
			fpm.Backlog, ng.Backlog = 4096, 4096
			return e.Sysctl(srv, "net.core.somaxconn", "4096")
		},
		func() error {
			if fault(4) {
				return e.Sysctl(srv, "net.ipv4.ip_local_port_range", "20000 20050")
			}
			return e.Sysctl(srv, "net.ipv4.ip_local_port_range", "15000 65000")
		},
		func() error {
			if fault(5) {
				return e.Sysctl(srv, "net.ipv4.tcp_tw_reuse", "0")
			}
			return nil
		},
	)
	if err != nil {
		return nil, err
	}
	if _, err := e.StartFPM(ctx, fpm); err != nil {
		return nil, err
	}
	if _, err := e.StartNginx(ctx, ng); err != nil {
		return nil, err
	}
	return e.url(80), nil
}

// Seed 000's pool, fixed: php-fpm serves a kept-alive FastCGI connection
// with one worker for as long as nginx keeps it, so the pool must exceed
// what nginx holds open. nginx opens a connection only when none is idle,
// so with an idle cache as large as each worker's share of the 200
// concurrent requests it holds at most 200, and opens no more once warm.
const (
	phpChildren  = 256
	phpKeepalive = 128
)

// healthy is seed 000's stack as it ends: the article raised
// nf_conntrack_max and kept its stateful firewall, so the control keeps
// one too. Connection tracking costs every packet a lookup (measured
// about 5-10% of this stack's throughput on two cores); a control
// without it would hold the fixed seed to a bar no fix can reach, and a
// table that is tracked but roomy is part of what "quiet on a healthy
// system" must cover.
func healthy(ctx context.Context, e *Env, _ func(int) bool) (*Target, error) {
	if err := e.TrackConnections(e.ServerNS, 262144); err != nil {
		return nil, err
	}
	fpm := &FPM{MaxChildren: phpChildren, Backlog: 4096}
	if _, err := e.StartFPM(ctx, fpm); err != nil {
		return nil, err
	}
	if _, err := e.StartNginx(ctx, &Nginx{PHP: fpm, Workers: 2, KeepConn: true, Keepalive: phpKeepalive, Backlog: 4096}); err != nil {
		return nil, err
	}
	return e.url(80), nil
}

func nginxNagle(ctx context.Context, e *Env, fault func(int) bool) (*Target, error) {
	// Headers leave in one write, the body by sendfile in another: with
	// Nagle on, the body waits for the headers' ACK, which the client
	// delays 40 ms.
	if _, err := e.StartNginx(ctx, &Nginx{NoDelayOff: fault(1), Sendfile: true, BodyBytes: 900}); err != nil {
		return nil, err
	}
	return e.url(80), nil
}

type dnsFault int

const (
	dnsNone dnsFault = iota // no nameserver at all
	dnsSlow                 // a far resolver
	dnsPTR                  // PTR queries unanswered
)

// backendName is what the DNS scenarios' page resolves per request.
const backendName = "backend.lab"

// dnsScenario is seed 001 §4–5: a page that resolves a name per request
// (its backend, or the client's address) through the server's resolver.
// dnsmasq is the healthy resolver: a local cache answering the lab's
// names, and private-range PTR queries itself. The faulty ones are an
// empty resolv.conf, or a relay in front of dnsmasq that delays every
// query or drops PTR queries.
func dnsScenario(kind dnsFault) builder {
	return func(ctx context.Context, e *Env, fault func(int) bool) (*Target, error) {
		srv := e.ServerNS
		conf := "# written by netdoctor's lab\nnameserver 127.0.0.1\n"
		listen := []string{"127.0.0.1", e.ServerIP}
		if fault(1) {
			switch kind {
			case dnsNone:
				conf = "# written by netdoctor's lab: no nameserver\nsearch lab\n"
				// glibc falls back to 127.0.0.1 without a nameserver
				// line: nothing may answer there.
				listen = listen[1:]
			case dnsSlow:
				conf = "# written by netdoctor's lab\nnameserver 127.0.0.2\n"
			case dnsPTR:
				// glibc's 5 s timeout makes each lookup 10 s (the
				// article's ping took 11 s); 1 s keeps requests inside
				// the run.
				conf = "# written by netdoctor's lab\nnameserver 127.0.0.2\noptions timeout:1 attempts:2\n"
			}
		}
		// The client resolves through the server's dnsmasq, so that its
		// side of the run has a working resolver.
		err := steps(
			func() error { return e.ResolvConf(srv, conf) },
			func() error {
				return e.ResolvConf(e.ClientNS, "# written by netdoctor's lab\nnameserver "+e.ServerIP+"\n")
			},
		)
		if err != nil {
			return nil, err
		}
		if _, err := e.StartDnsmasq(ctx, srv, &Dnsmasq{Listen: listen,
			Hosts: map[string]string{backendName: e.ServerIP}, BogusPriv: true}); err != nil {
			return nil, err
		}
		if fault(1) && kind != dnsNone {
			args := []string{"lab", "serve", "dns-relay", "--listen", "127.0.0.2:53", "--upstream", "127.0.0.1:53"}
			if kind == dnsSlow {
				args = append(args, "--delay", "150ms")
			} else {
				args = append(args, "--drop-ptr")
			}
			if _, err := e.StartSelf(ctx, srv, "dns-relay", "ready", args...); err != nil {
				return nil, err
			}
		}
		script := fmt.Sprintf(`$ip = gethostbyname(%q);
if ($ip === %q) { http_response_code(502); echo "cannot resolve %s\n"; } else { echo "backend at $ip\n"; }`, backendName, backendName, backendName)
		if kind == dnsPTR {
			// As Apache's HostnameLookups On, or a logger that names
			// its clients.
			script = `$name = gethostbyaddr($_SERVER['REMOTE_ADDR']); echo "hello $name\n";`
		}
		// More workers than the load's 20 connections: the pool is not
		// the limit, the lookups are.
		fpm := &FPM{MaxChildren: 32, Script: script}
		if _, err := e.StartFPM(ctx, fpm); err != nil {
			return nil, err
		}
		if _, err := e.StartNginx(ctx, &Nginx{PHP: fpm, KeepConn: true}); err != nil {
			return nil, err
		}
		t := e.url(80)
		t.DNS = true
		return t, nil
	}
}

func synFlood(ctx context.Context, e *Env, fault func(int) bool) (*Target, error) {
	srv := e.ServerNS
	cookies := "1"
	if fault(1) {
		cookies = "0"
	}
	err := steps(
		func() error { return e.Sysctl(srv, "net.ipv4.tcp_syncookies", cookies) },
		func() error { return e.Sysctl(srv, "net.ipv4.tcp_max_syn_backlog", "256") },
		// SYN-ACKs to the flood's random sources need a route to leave
		// by (the client's namespace then drops them), or the server
		// drops each SYN before queueing it.
		func() error { return e.defaultRoute(srv, e.ClientIP) },
	)
	if err != nil {
		return nil, err
	}
	if _, err := e.StartNginx(ctx, &Nginx{}); err != nil {
		return nil, err
	}
	if _, err := e.SYNFlood(e.ClientNS, e.ServerIP+":80", 2000, 60*time.Second); err != nil {
		return nil, err
	}
	// Let the queue fill before the measured client starts.
	time.Sleep(500 * time.Millisecond)
	return e.url(80), nil
}

func conntrackSawtooth(ctx context.Context, e *Env, fault func(int) bool) (*Target, error) {
	srv := e.ServerNS
	max := 262144
	if fault(1) {
		max = 2000
	}
	err := steps(
		func() error { return e.TrackConnections(srv, max) },
		func() error { return e.Sysctl(srv, "net.netfilter.nf_conntrack_tcp_timeout_time_wait", "3") },
	)
	if err != nil {
		return nil, err
	}
	if _, err := e.StartNginx(ctx, &Nginx{Name: "backend", Listen: "127.0.0.1:8080", Body: "hello from the backend\n"}); err != nil {
		return nil, err
	}
	if _, err := e.StartNginx(ctx, &Nginx{Proxy: "127.0.0.1:8080"}); err != nil {
		return nil, err
	}
	return e.url(80), nil
}

func acceptQueue(ctx context.Context, e *Env, fault func(int) bool) (*Target, error) {
	backlog := "5000"
	if fault(1) {
		backlog = "50"
	}
	args := []string{"lab", "serve", "mock", "--addr", e.ServerIP + ":5000", "--backlog", backlog,
		"--workers", "100", "--sleep", "35ms"}
	if fault(2) {
		args = append(args, "--log", filepath.Join(e.Dir, "mock.log"), "--hold", "2ms")
	}
	if _, err := e.StartSelf(ctx, e.ServerNS, "mock", "ready", args...); err != nil {
		return nil, err
	}
	return e.url(5000), nil
}

// kvLua is seed 004's handler: GET a key from redis, connecting per
// request (close) or through the worker's pool (set_keepalive).
const kvLua = `local redis = require "nginx.redis"
local red = redis:new()
red:set_timeout(1000)
local ok, err = red:connect("127.0.0.1", 6379)
if not ok then
    ngx.status = 502
    ngx.say("redis: ", err)
    return
end
local v = red:get("greeting")
if not v or v == ngx.null then v = "hello" end
ngx.say(v, " from redis")
%s
`

func kvRedis(ctx context.Context, e *Env, fault func(int) bool) (*Target, error) {
	srv := e.ServerNS
	if fault(1) {
		if err := e.Sysctl(srv, "net.ipv4.tcp_max_tw_buckets", "1024"); err != nil {
			return nil, err
		}
	}
	if _, err := e.StartRedis(ctx, srv, "127.0.0.1:6379"); err != nil {
		return nil, err
	}
	release := "red:set_keepalive(10000, 1024)"
	if fault(1) {
		release = "red:close()"
	}
	lua := filepath.Join(e.Dir, "kv.lua")
	if err := os.WriteFile(lua, []byte(fmt.Sprintf(kvLua, release)), 0o644); err != nil {
		return nil, err
	}
	if _, err := e.StartNginx(ctx, &Nginx{Workers: 2, LuaFile: lua}); err != nil {
		return nil, err
	}
	return e.url(80), nil
}
