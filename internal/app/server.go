package app

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/netdoctor/netdoctor/internal/evidence"
	"github.com/netdoctor/netdoctor/internal/netns"
)

// Server is one application serving a listener: the front one (the
// run's target port) or an upstream the front one sends to.
type Server struct {
	Role string `json:"role"` // "front" or "upstream"
	Addr string `json:"addr"` // the listener, as the kernel reports it
	Kind string `json:"kind"` // "nginx", "php-fpm", or the process name
	// Runtime is what the process runs on, as far as it shows
	// (RuntimeOf): what names its backlog setting. Empty when unknown,
	// and in runs recorded before it.
	Runtime Runtime `json:"runtime,omitempty"`
	// Master is the process that owns the workers (0 when there is no
	// master/worker split); PIDs are the listener's owners.
	Master int        `json:"master,omitempty"`
	PIDs   []int      `json:"pids"`
	Exe    string     `json:"exe,omitempty"`
	Config string     `json:"config,omitempty"` // the main configuration file
	Nginx  *NginxInfo `json:"nginx,omitempty"`
	Pool   *PoolInfo  `json:"pool,omitempty"`
	Logs   []*Log     `json:"logs,omitempty"`
	// Upstreams are the addresses this server sends requests to, from
	// its configuration ("127.0.0.1:9000", "unix:/run/php/www.sock").
	Upstreams []string `json:"upstreams,omitempty"`
	Samples   []Sample `json:"samples,omitempty"`
	// Deps are the destinations it sent requests to while the load ran,
	// from its own connections (TraceDeps), busiest first.
	Deps []Dependency `json:"dependencies,omitempty"`
	// Traced says its outbound connections were traced (TraceDeps):
	// then a destination missing from Deps is one it did not connect to
	// (or only too briefly to be seen), not one nobody looked for.
	Traced bool `json:"traced,omitempty"`
	// Notes say what could not be learned, and why.
	Notes []string `json:"notes,omitempty"`

	status func(ctx context.Context) (*PoolStatus, error)
	port   int // the listener's TCP port; 0 for a unix socket
}

// Sample is one second of a server's workers.
type Sample struct {
	Time time.Time `json:"time"`
	// Workers is the number of worker processes; Waits counts their
	// threads by what they were doing (see the Wait classes).
	Workers int            `json:"workers"`
	Waits   map[string]int `json:"waits"`
	// OtherWaits counts, for threads in WaitOther, the kernel function.
	OtherWaits map[string]int `json:"other_waits,omitempty"`
	// Pool is php-fpm's status page, when the pool has one. A worker
	// serves it, so in a full pool it does not answer: StatusBusy.
	Pool       *PoolStatus `json:"pool,omitempty"`
	StatusBusy bool        `json:"status_busy,omitempty"`
}

// Observer watches the servers behind one port.
type Observer struct {
	Servers []*Server
	proc    string
	ns      netns.NS

	// mu guards Servers against TraceDeps adding the dependencies it
	// finds listening here; listeners and seen are Discover's.
	mu        sync.Mutex
	listeners []evidence.Listener
	seen      map[int]bool
	deps      *tracer
	// light skips reading the servers' configuration (nginx's, the
	// php-fpm pool): tracing needs only their processes.
	light bool

	// ownNS is the namespace's inode and far what the host's other
	// namespaces said about destinations that are no address of this
	// one: only the tracer's goroutine uses them, one at a time.
	ownNS uint64
	far   map[string]*farOwner
}

// Discover finds the servers behind port among the listeners of one
// namespace, and the upstreams those send to when they listen in the
// same namespace.
func Discover(ctx context.Context, listeners []evidence.Listener, port int, ns netns.NS) *Observer {
	seen := map[int]bool{} // by master or first PID
	o := &Observer{proc: "/proc", ns: ns, listeners: listeners, seen: seen}
	var front *Server
	for _, l := range listeners {
		if l.Proto == "unix" || l.Port != port || len(l.PIDs) == 0 {
			continue
		}
		if s := o.server(ctx, l, "front", seen); s != nil {
			front = s
			break
		}
	}
	if front == nil {
		return o
	}
	for _, up := range front.Upstreams {
		l, ok := findListener(listeners, up)
		if !ok {
			front.Notes = append(front.Notes, fmt.Sprintf("upstream %s: no listener in this namespace, not observed", up))
			continue
		}
		o.server(ctx, l, "upstream", seen)
	}
	return o
}

func (o *Observer) server(ctx context.Context, l evidence.Listener, role string, seen map[int]bool) *Server {
	s, master := identify(o.proc, l, role)
	if s == nil || seen[master.pid] {
		return nil
	}
	seen[master.pid] = true
	switch {
	case o.light:
	case s.Kind == "nginx":
		o.nginx(ctx, s, master)
	case s.Kind == "php-fpm":
		o.fpm(s, master, l)
	}
	for _, lg := range s.Logs {
		lg.Mark()
	}
	o.mu.Lock()
	o.Servers = append(o.Servers, s)
	o.mu.Unlock()
	return s
}

// identify names the server owning listener l, and its master: the
// owner whose parent is no owner (nginx's and php-fpm's masters hold the
// listening socket along with their workers; a single-process server is
// its own "master"). nil when every owner exited.
func identify(proc string, l evidence.Listener, role string) (*Server, procInfo) {
	s := &Server{Role: role, Addr: l.Addr, PIDs: l.PIDs}
	if l.Proto != "unix" {
		s.port = l.Port
	}
	var master procInfo
	for _, pid := range l.PIDs {
		p, ok := readProc(proc, pid)
		if !ok {
			continue
		}
		if master.pid == 0 || !slices.Contains(l.PIDs, p.ppid) {
			master = p
		}
	}
	if master.pid == 0 {
		return nil, master
	}
	s.Kind = kindOf(master.comm)
	if len(l.PIDs) > 1 {
		s.Master = master.pid
	}
	s.Exe = strings.TrimSuffix(master.exe, " (deleted)")
	s.Runtime = RuntimeOf(master.comm, master.cmdline, isGoBinary(proc, master.pid))
	return s, master
}

// findListener finds the listener serving addr: "host:port" matches a
// listener on that address or on the wildcard with the same port;
// "unix:/path" the unix socket at path.
func findListener(ls []evidence.Listener, addr string) (evidence.Listener, bool) {
	if path, ok := strings.CutPrefix(addr, "unix:"); ok {
		for _, l := range ls {
			if l.Proto == "unix" && l.Addr == path {
				return l, true
			}
		}
		return evidence.Listener{}, false
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return evidence.Listener{}, false
	}
	p, _ := strconv.Atoi(port)
	var wild *evidence.Listener
	for i, l := range ls {
		if l.Proto == "unix" || l.Port != p {
			continue
		}
		lh, _, _ := net.SplitHostPort(l.Addr)
		if lh == host || (host == "localhost" && (lh == "127.0.0.1" || lh == "::1")) {
			return l, true
		}
		if lh == "0.0.0.0" || lh == "::" || lh == "*" {
			wild = &ls[i]
		}
	}
	if wild != nil {
		return *wild, true
	}
	return evidence.Listener{}, false
}

// Sample records one second of every server's workers. Servers are
// sampled concurrently: a status page that hangs (its pool is full) must
// not delay the others.
func (o *Observer) Sample(ctx context.Context) {
	var wg sync.WaitGroup
	now := time.Now()
	for _, s := range o.servers() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			workers := s.PIDs
			if s.Master != 0 {
				workers = children(o.proc, s.Master)
			}
			smp := Sample{Time: now, Workers: len(workers)}
			smp.Waits, smp.OtherWaits = Waits(o.proc, workers, s.port)
			if s.status != nil {
				sctx, cancel := context.WithTimeout(ctx, 800*time.Millisecond)
				st, err := s.status(sctx)
				switch {
				case err == nil:
					smp.Pool = st
				case sctx.Err() != nil && ctx.Err() == nil:
					smp.StatusBusy = true
				}
				cancel()
			}
			s.Samples = append(s.Samples, smp)
		}()
	}
	wg.Wait()
}

// Last is every server's latest sample, for a caller that samples and
// then looks.
func (o *Observer) Last() []Sample {
	var out []Sample
	for _, s := range o.servers() {
		if n := len(s.Samples); n > 0 {
			out = append(out, s.Samples[n-1])
		}
	}
	return out
}

// Finish reads what the servers' logs gained since Discover and returns
// the servers.
func (o *Observer) Finish() []*Server {
	for _, s := range o.servers() {
		for _, l := range s.Logs {
			l.Read()
		}
	}
	return o.servers()
}

// Current is a copy of Servers, which a dependency trace may grow while
// it runs: read it, not Servers, then.
func (o *Observer) Current() []*Server { return o.servers() }

// servers is a copy of Servers, which TraceDeps may grow.
func (o *Observer) servers() []*Server {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.Servers)
}
