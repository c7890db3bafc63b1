package lab

import (
	"context"
	"net"
	"strconv"
)

// The scenarios below run servers netdoctor has no knowledge of (a
// Python service, haproxy, home-made Go servers): what it finds there
// it must find from the kernel's evidence and the load's, not from a
// server's configuration or logs it knows how to read.

// appPort is where these scenarios' services listen on ServerIP.
const appPort = 8080

func (e *Env) appAddr() string { return net.JoinHostPort(e.ServerIP, strconv.Itoa(appPort)) }

// pythonPool is a Python service with a fixed pool of 4 worker threads,
// each request 50 ms off the CPU: 4 requests are served at once, the
// others wait unread in their sockets' receive queues.
func pythonPool(ctx context.Context, e *Env, fault func(int) bool) (*Target, error) {
	workers := 64
	if fault(1) {
		workers = 4
	}
	addr := e.appAddr()
	if _, err := e.StartPython(ctx, e.ServerNS, "pool", poolPy, addr,
		"--addr", addr, "--workers", strconv.Itoa(workers), "--sleep", "0.05"); err != nil {
		return nil, err
	}
	return e.url(appPort), nil
}

// pythonDNS is a threaded Python service that resolves its backend's
// name per request through dnsmasq in its namespace, with glibc's
// default options (timeout 5 s, 2 attempts), and a 30 % loss on the way
// to the resolver.
func pythonDNS(ctx context.Context, e *Env, fault func(int) bool) (*Target, error) {
	srv := e.ServerNS
	err := steps(
		func() error {
			return e.ResolvConf(srv, "# written by netdoctor's lab: glibc's default options (timeout:5 attempts:2)\nnameserver 127.0.0.1\n")
		},
		// The client resolves through the server's dnsmasq, so that its
		// side of the run has a working resolver.
		func() error {
			return e.ResolvConf(e.ClientNS, "# written by netdoctor's lab\nnameserver "+e.ServerIP+"\n")
		},
		func() error {
			if fault(1) {
				return e.DropUDP(srv, 53, 30)
			}
			return nil
		},
	)
	if err != nil {
		return nil, err
	}
	if _, err := e.StartDnsmasq(ctx, srv, &Dnsmasq{Listen: []string{"127.0.0.1", e.ServerIP},
		Hosts: map[string]string{backendName: e.ServerIP}, BogusPriv: true}); err != nil {
		return nil, err
	}
	addr := e.appAddr()
	if _, err := e.StartPython(ctx, srv, "lookup", lookupPy, addr, "--addr", addr, "--name", backendName); err != nil {
		return nil, err
	}
	// No --dns: run probes the server's resolver by itself once it sees
	// the workers waiting in lookups, as it must for a user who did not
	// think of it.
	return e.url(appPort), nil
}

// haproxyReset is haproxy in front of nginx, opening a backend
// connection per request and closing it with a reset: connects and
// resets churn, yet no TIME_WAIT is left to hold a port.
func haproxyReset(ctx context.Context, e *Env, fault func(int) bool) (*Target, error) {
	if _, err := e.StartNginx(ctx, &Nginx{Name: "backend", Listen: "127.0.0.1:8080", Body: "hello from the backend\n"}); err != nil {
		return nil, err
	}
	if _, err := e.StartHAProxy(ctx, &HAProxy{Listen: e.ServerIP + ":80", Backend: "127.0.0.1:8080", Close: fault(1)}); err != nil {
		return nil, err
	}
	return e.url(80), nil
}

// proxyChurn is the built-in proxy in front of nginx, connecting per
// request and closing first, in a namespace with 100 local ports and
// tcp_tw_reuse 0: each connection's TIME_WAIT holds its port 60 s, so
// the ports run out after 100 requests and the rest get 502.
func proxyChurn(ctx context.Context, e *Env, fault func(int) bool) (*Target, error) {
	srv := e.ServerNS
	// tcp_tw_reuse 0 in both: the fix needs no TIME_WAIT reuse.
	err := steps(
		func() error { return e.Sysctl(srv, "net.ipv4.tcp_tw_reuse", "0") },
		func() error {
			if fault(1) {
				return e.Sysctl(srv, "net.ipv4.ip_local_port_range", "20000 20099")
			}
			return nil
		},
	)
	if err != nil {
		return nil, err
	}
	if _, err := e.StartNginx(ctx, &Nginx{Name: "backend", Listen: "127.0.0.1:8080", Body: "hello from the backend\n"}); err != nil {
		return nil, err
	}
	args := []string{"lab", "serve", "proxy", "--listen", e.ServerIP + ":80", "--backend", "127.0.0.1:8080"}
	if !fault(1) {
		args = append(args, "--keepalive")
	}
	return e.startSelfListening(ctx, "proxy", 80, args...)
}

// stallTenth is the built-in server holding every tenth request 5 s.
func stallTenth(ctx context.Context, e *Env, fault func(int) bool) (*Target, error) {
	every := "0"
	if fault(1) {
		every = "10"
	}
	return e.startSelfListening(ctx, "stall", appPort, "lab", "serve", "stall", "--addr", e.appAddr(), "--every", every, "--hold", "5s")
}

// startSelfListening starts one of netdoctor's built-in servers (args:
// `netdoctor ARGS`) in the server namespace and waits until it listens
// on port of ServerIP.
func (e *Env) startSelfListening(ctx context.Context, name string, port int, args ...string) (*Target, error) {
	p, err := e.StartSelf(ctx, e.ServerNS, name, "", args...)
	if err != nil {
		return nil, err
	}
	if err := e.WaitListening(ctx, p, e.ServerNS, net.JoinHostPort(e.ServerIP, strconv.Itoa(port))); err != nil {
		return nil, err
	}
	return e.url(port), nil
}
