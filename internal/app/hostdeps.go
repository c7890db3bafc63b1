package app

import (
	"context"
	"slices"

	"github.com/netdoctor/netdoctor/internal/evidence/kernel"
	"github.com/netdoctor/netdoctor/internal/netns"
)

// Listening names the servers behind a namespace's TCP listeners without
// reading their configuration: one per process (a server listening on
// two ports is one), the lowest ports first, at most maxPorts ports.
// skip leaves out listeners owned by a process it reports (the caller's
// own). It is what check and the agent trace when no load points at one
// port.
func Listening(listeners []kernel.Listener, maxPorts int, skip func(pid int) bool) []*Server {
	byPort := map[int][]kernel.Listener{}
	for _, l := range listeners {
		if l.Proto == "unix" || l.Port == 0 || len(l.PIDs) == 0 || slices.ContainsFunc(l.PIDs, skip) {
			continue
		}
		byPort[l.Port] = append(byPort[l.Port], l)
	}
	ports := make([]int, 0, len(byPort))
	for p := range byPort {
		ports = append(ports, p)
	}
	slices.Sort(ports)
	seen := map[int]bool{}
	var out []*Server
	for _, p := range ports[:min(len(ports), maxPorts)] {
		for _, l := range byPort[p] {
			s, master := identify("/proc", l, "front")
			if s == nil || seen[master.pid] {
				continue
			}
			seen[master.pid] = true
			out = append(out, s)
		}
	}
	return out
}

// TraceServers follows the servers' outbound connections, as TraceDeps
// does for a run, until ctx ends, and returns copies of them with their
// Deps, plus the destinations found listening in the namespace (role
// "dependency"), whose own connections are followed too. The servers
// given are not written to: a caller may go on sampling them meanwhile.
func TraceServers(ctx context.Context, servers []*Server, listeners []kernel.Listener, ns netns.NS) ([]*Server, error) {
	o := &Observer{proc: "/proc", ns: ns, listeners: listeners, seen: map[int]bool{}, light: true}
	for _, s := range servers {
		c := &Server{Role: s.Role, Addr: s.Addr, Kind: s.Kind, Master: s.Master, PIDs: s.PIDs, Exe: s.Exe, port: s.port}
		key := c.Master
		if key == 0 && len(c.PIDs) > 0 {
			key = c.PIDs[0]
		}
		if o.seen[key] {
			continue
		}
		o.seen[key] = true
		o.Servers = append(o.Servers, c)
	}
	if err := o.TraceDeps(ctx); err != nil {
		return nil, err
	}
	return o.servers(), nil
}

// TraceHost follows the outbound connections of the servers behind the
// namespace's TCP listeners (Listening) until ctx ends: check's and the
// agent's tracing under the host's own traffic. It returns the servers
// that sent requests, with their Deps, and how many were followed.
func TraceHost(ctx context.Context, listeners []kernel.Listener, ns netns.NS, maxPorts int, skip func(pid int) bool) ([]*Server, int, error) {
	servers := Listening(listeners, maxPorts, skip)
	if len(servers) == 0 {
		<-ctx.Done()
		return nil, 0, nil
	}
	all, err := TraceServers(ctx, servers, listeners, ns)
	if err != nil {
		return nil, len(servers), err
	}
	var out []*Server
	for _, s := range all {
		if len(s.Deps) > 0 {
			out = append(out, s)
		}
	}
	return out, len(all), nil
}

// Processes names the server each of servers' processes (masters and
// workers, found again at each call) belongs to, as Observer.Processes
// does: check's profile of the servers behind its listeners keeps their
// samples.
func Processes(servers []*Server) map[int]string {
	return (&Observer{proc: "/proc", Servers: servers}).Processes()
}

// Port is the TCP port of the listener the server was found behind; 0
// for a unix socket, and in a server read back from JSON.
func (s *Server) Port() int { return s.port }
