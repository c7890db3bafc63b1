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

	"github.com/netdoctor/netdoctor/internal/cgroup"
	"github.com/netdoctor/netdoctor/internal/evidence/kernel"
	"github.com/netdoctor/netdoctor/internal/netns"
)

// Server is one application serving a listener: the front one (the
// run's target port) or an upstream the front one sends to.
type Server struct {
	Role string `json:"role"` // "front" or "upstream"
	Addr string `json:"addr"` // the listener, as the kernel reports it
	Kind string `json:"kind"` // "nginx", "php-fpm", or the process name
	// Master is the process that owns the workers (0 when there is no
	// master/worker split); PIDs are the listener's owners.
	Master int        `json:"master,omitempty"`
	PIDs   []int      `json:"pids"`
	Exe    string     `json:"exe,omitempty"`
	Config string     `json:"config,omitempty"` // the main configuration file
	Nginx  *NginxInfo `json:"nginx,omitempty"`
	Pool   *PoolInfo  `json:"pool,omitempty"`
	// HAProxy is what was read of an haproxy's configuration.
	HAProxy *HAProxyInfo `json:"haproxy,omitempty"`
	Logs    []*Log       `json:"logs,omitempty"`
	// Upstreams are the addresses this server sends requests to, from
	// its configuration ("127.0.0.1:9000", "unix:/run/php/www.sock").
	Upstreams []string `json:"upstreams,omitempty"`
	Samples   []Sample `json:"samples,omitempty"`
	// Deps are the destinations it sent requests to while the load ran,
	// from its own connections (TraceDeps), busiest first.
	Deps []Dependency `json:"dependencies,omitempty"`
	// CGroup is the control group that holds its CPU: its quota and
	// where its pressure is read (CPU accounting, from the first sample).
	CGroup *cgroup.Group `json:"cgroup,omitempty"`
	// Runtime is what runs it (Go, Java, Node, gunicorn…) and the
	// parallelism it was given: what names its backlog setting, and the
	// advice that matches it to a CPU quota. nil when unknown, and in
	// runs recorded before it.
	Runtime *Runtime `json:"runtime,omitempty"`
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
	// Threads are the workers' threads that carry a name of their own
	// (threadSamples), for the pools found from their threads.
	Threads []Thread `json:"threads,omitempty"`
	// CPU is where the workers' threads' time went since the previous
	// sample; nil in the first one.
	CPU *CPU `json:"cpu,omitempty"`
	// Sockets are the listening sockets on the server's port and who
	// serves each; Procs the state of every process holding one.
	Sockets []Socket    `json:"sockets,omitempty"`
	Procs   []ProcState `json:"procs,omitempty"`
}

// Observer watches the servers behind one port.
type Observer struct {
	Servers []*Server
	proc    string
	ns      netns.NS

	// mu guards Servers against TraceDeps adding the dependencies it
	// finds listening here; listeners and seen are Discover's.
	mu        sync.Mutex
	listeners []kernel.Listener
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

	// cpuMu guards cpu, each server's CPU accounting between samples;
	// host is /proc/stat at the last sample and scan the processes' CPU
	// time at the last neighbour scan (Sample's alone).
	cpuMu sync.Mutex
	cpu   map[*Server]*cpuState
	host  *hostCPU
	scan  map[int]procTicks
}

// Discover finds the servers behind port among the listeners of one
// namespace, and the upstreams those send to when they listen in the
// same namespace.
func Discover(ctx context.Context, listeners []kernel.Listener, port int, ns netns.NS) *Observer {
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

func (o *Observer) server(ctx context.Context, l kernel.Listener, role string, seen map[int]bool) *Server {
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
	case s.Kind == "haproxy":
		o.haproxy(s, master, l)
	}
	// The build information, the JVM's flags and GOMAXPROCS, where
	// identify named the server from its command line alone (gunicorn
	// rather than python).
	rt, err := runtimeOf(o.proc, master, s.Kind)
	if err != nil {
		s.Notes = append(s.Notes, err.Error())
	}
	if rt != nil {
		if s.Runtime != nil && s.Runtime.Name != "" && rt.Name == RuntimePython {
			rt.Name = s.Runtime.Name
		}
		s.Runtime = rt
	}
	if n := s.Nginx; n != nil && s.Runtime != nil {
		s.Runtime.Parallelism, s.Runtime.Source = n.Workers(), "worker_processes "+n.WorkerProcesses.String()
	}
	if !o.light {
		o.findLogs(s)
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
func identify(proc string, l kernel.Listener, role string) (*Server, procInfo) {
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
	if name := RuntimeOf(master.comm, master.cmdline, isGoBinary(proc, master.pid)); name != "" {
		s.Runtime = &Runtime{Name: name}
	}
	return s, master
}

// findListener finds the listener serving addr: "host:port" matches a
// listener on that address or on the wildcard with the same port;
// "unix:/path" the unix socket at path.
func findListener(ls []kernel.Listener, addr string) (kernel.Listener, bool) {
	if path, ok := strings.CutPrefix(addr, "unix:"); ok {
		for _, l := range ls {
			if l.Proto == "unix" && l.Addr == path {
				return l, true
			}
		}
		return kernel.Listener{}, false
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return kernel.Listener{}, false
	}
	p, _ := strconv.Atoi(port)
	var wild *kernel.Listener
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
	return kernel.Listener{}, false
}

// Sample records one second of every server's workers. Servers are
// sampled concurrently: a status page that hangs (its pool is full) must
// not delay the others.
func (o *Observer) Sample(ctx context.Context) {
	var wg sync.WaitGroup
	now := time.Now()
	prevHost := o.host
	o.host = o.readHostCPU(now)
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
			if s.Kind != "nginx" && s.Kind != "php-fpm" {
				smp.Threads = threadSamples(o.proc, workers, s.port)
			}
			smp.CPU = o.accountCPU(s, workers, now, o.host, prevHost)
			smp.Sockets, smp.Procs = sockets(o.proc, o.listeners, s.port)
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
	o.nameNeighbours()
}

// nameNeighbours adds to each server's latest sample, when its threads
// waited for CPUs that never idled, the other processes that ran there.
func (o *Observer) nameNeighbours() {
	servers := o.servers()
	var hit []*Sample
	skip := map[int]bool{}
	for _, s := range servers {
		for _, pid := range o.pids(s) {
			skip[pid] = true
		}
		if n := len(s.Samples); n > 0 && contended(s.Samples[n-1].CPU) {
			hit = append(hit, &s.Samples[n-1])
		}
	}
	if len(hit) == 0 {
		o.scan = nil // the next contention starts from a scan of its own
		return
	}
	delta := o.scanOthers()
	for _, s := range servers {
		n := len(s.Samples)
		if n == 0 || !contended(s.Samples[n-1].CPU) {
			continue
		}
		o.cpuMu.Lock()
		allowed := o.cpu[s].allowed
		o.cpuMu.Unlock()
		s.Samples[n-1].CPU.Others = neighbours(delta, skip, allowed)
	}
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

// Processes names the server each of the servers' processes (masters
// and workers, found again at each call) belongs to: "nginx
// 0.0.0.0:80". A profiler keeps their samples.
func (o *Observer) Processes() map[int]string {
	out := map[int]string{}
	for _, s := range o.servers() {
		for _, pid := range o.pids(s) {
			if _, ok := out[pid]; !ok {
				out[pid] = s.Kind + " " + s.Addr
			}
		}
	}
	return out
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
