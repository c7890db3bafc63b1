package evidence

import (
	"slices"
	"strings"
	"time"

	"github.com/netdoctor/netdoctor/internal/app"
	"github.com/netdoctor/netdoctor/internal/cpuprof"
	"github.com/netdoctor/netdoctor/internal/load"
)

// Side is which end of a run something was observed at.
type Side string

// Sides of a run. Check and diagnose observe one namespace and leave a
// finding's side empty.
const (
	Server Side = "server"
	Client Side = "client"
	// Local is both at once: the server shares the client's namespace,
	// so one set of snapshots is both sides' evidence.
	Local Side = "local"
)

// Run is everything a run observed: both sides' snapshots from the
// quiet baseline to the tail, the load's result and timeline, the
// servers behind the port with their samples, configuration and logs,
// the path probed before the load and the servers' on-CPU profile.
// `run --bundle` writes it (a bundle file of KindRun), `diagnose` reads
// it back, and the rules read it; so it is JSON.
type Run struct {
	Load      *load.Result `json:"load"`
	LoadStart time.Time    `json:"load_start"`
	LoadEnd   time.Time    `json:"load_end"`
	// Port is the target's port: the front server's listener.
	Port    string        `json:"port"`
	Sides   []*RunSide    `json:"sides"`
	Servers []*app.Server `json:"servers,omitempty"`
	// Path is the path between the hosts as probed before the load,
	// nil when it was not.
	Path *PathProbe `json:"path,omitempty"`
	// Profile is the servers' on-CPU profile during the load, nil when
	// none was taken; ProfileError says why not.
	Profile      *cpuprof.Profile `json:"profile,omitempty"`
	ProfileError string           `json:"profile_error,omitempty"`
}

// SideInfo is one end of a run: where it was observed, or why not. The
// run's report shows it as it is.
type SideInfo struct {
	Name  Side   `json:"name"` // Server or Client
	NetNS string `json:"netns,omitempty"`
	// Observed is true when the side's kernel evidence was sampled.
	Observed bool   `json:"observed"`
	Why      string `json:"why,omitempty"`
	// SameAs names the side whose namespace this one shares: a server
	// reached at an address of the client's namespace is observed
	// through the client's snapshots, and its findings carry Local.
	SameAs Side `json:"same_as,omitempty"`
	// Agent is the URL of the agent the side's evidence came from, over
	// the network; its times are on this host's clock, moved by
	// ClockOffset (the agent's clock minus this host's, measured when
	// the run began, to within ClockUncertainty).
	Agent            string        `json:"agent,omitempty"`
	ClockOffset      time.Duration `json:"clock_offset_ns,omitempty"`
	ClockUncertainty time.Duration `json:"clock_uncertainty_ns,omitempty"`
	// Lost says why the side's evidence stopped before the run ended
	// (its agent became unreachable), and LostAt the time of the last
	// snapshot it gave: the report rests on what came before.
	Lost   string    `json:"lost,omitempty"`
	LostAt time.Time `json:"lost_at,omitzero"`
}

// RunSide is one end of a run with its snapshots, from the quiet
// baseline before the load to the end of the tail. A side that shares
// the other's namespace (SameAs) shares its Bundle.
type RunSide struct {
	SideInfo
	Bundle *Bundle `json:"bundle,omitempty"`
}

// Window is the side's load window: its snapshots from the last one
// taken before the load started.
func (r *Run) Window(s *RunSide) *Bundle {
	if s == nil {
		return nil
	}
	return s.Bundle.From(r.LoadStart)
}

// Server is the observed server side, or nil.
func (r *Run) Server() *RunSide { return r.side(Server) }

// Client is the observed client side, or nil.
func (r *Run) Client() *RunSide { return r.side(Client) }

func (r *Run) side(name Side) *RunSide {
	for _, s := range r.Sides {
		if s.Name == name && s.Observed {
			return s
		}
	}
	return nil
}

// ServerSide is the side server findings carry: Local when the server
// shares the client's namespace.
func (r *Run) ServerSide() Side {
	for _, s := range r.Sides {
		if s.Name == Server && s.SameAs != "" {
			return Local
		}
	}
	return Server
}

// Serves reports whether a listener address is the run's target port or
// one of the servers behind it.
func (r *Run) Serves(addr string) bool {
	if strings.HasSuffix(addr, ":"+r.Port) {
		return true
	}
	for _, s := range r.Servers {
		if s.Addr == addr {
			return true
		}
	}
	return false
}

// own are the PIDs of the netdoctor processes that took the run's
// bundles on h's kernel and in its PID namespace: the load generator and
// any agent beside it. A side's observer skips only itself, so an agent
// on the load generator's host sees the load generator among the
// processes that took the servers' CPUs; it is netdoctor's own load,
// never a neighbour to blame.
func (r *Run) own(h Host, also []Host) map[int]bool {
	own := map[int]bool{}
	if h.BootID == "" || h.PIDNSInode == 0 {
		return own
	}
	hosts := also
	for _, s := range r.Sides {
		if s.Bundle != nil {
			hosts = append(hosts, s.Bundle.Host)
		}
	}
	for _, o := range hosts {
		if o.PID > 0 && o.BootID == h.BootID && o.PIDNSInode == h.PIDNSInode {
			own[o.PID] = true
		}
	}
	return own
}

// ForgetOwn takes netdoctor's own processes (own, where the servers
// were observed: the server side, or the client's when it observed
// them, and the observers in also, which watched beside the run's
// sides: an agent twin), and the kernel's worker that sends netdoctor
// the connections' ends (endsWorker), out of the processes the servers'
// samples and profile name as their neighbours; the profile's samples
// of them count as its own (Self). Run once before the diagnosis, so
// that no rule and no line of the report names netdoctor's own load as
// another process on the servers' CPUs.
func (r *Run) ForgetOwn(also ...Host) {
	s := r.Server()
	if s == nil || s.Bundle == nil {
		s = r.Client()
	}
	if s == nil || s.Bundle == nil {
		return
	}
	own := r.own(s.Bundle.Host, also)
	ends := r.watchedEnds(s.Bundle.Host.BootID)
	if len(own) == 0 && !ends {
		return
	}
	mine := func(pid int, comm string) bool { return own[pid] || ends && endsWorker(comm) }
	for _, srv := range r.Servers {
		for _, smp := range srv.Samples {
			if smp.CPU != nil {
				smp.CPU.Others = slices.DeleteFunc(smp.CPU.Others, func(n app.Neighbour) bool { return mine(n.PID, n.Comm) })
			}
		}
	}
	if p := r.Profile; p != nil {
		p.Others = slices.DeleteFunc(p.Others, func(o cpuprof.Other) bool {
			if mine(o.PID, o.Comm) {
				p.Self += o.Samples
				return true
			}
			return false
		})
	}
}

// watchedEnds says whether a side on the kernel of boot listened to the
// kernel's notices of TCP connections' ends (sockdiag.WatchEnds): then
// that kernel's worker sending them (endsWorker) ran for netdoctor.
func (r *Run) watchedEnds(boot string) bool {
	if boot == "" {
		return false
	}
	for _, sd := range r.Sides {
		if sd.Bundle == nil || sd.Bundle.Host.BootID != boot {
			continue
		}
		for _, snap := range sd.Bundle.Snapshots {
			if snap.Senders != nil && snap.Senders.Ends {
				return true
			}
		}
	}
	return false
}

// endsWorker says whether comm, as /proc/PID/comm names a kernel worker
// thread, is the one that last ran the "sock_diag_events" workqueue:
// sock_diag_broadcast_destroy queues a destroyed TCP socket's last state
// there for the destroy groups' listeners, and only while someone
// listens. Under a new connection per request it took some 9 % of two
// CPUs beside seed 000's servers: netdoctor's own cost (its sides listen,
// for the connections' last tcp_info), never a neighbour to blame. The
// kernel appends the workqueue of the worker's latest work, "+" while it
// runs it and "-" after (wq_worker_comm).
func endsWorker(comm string) bool {
	w, ok := strings.CutPrefix(comm, "kworker/")
	if !ok {
		return false
	}
	_, q, ok := strings.Cut(w, "-")
	if !ok {
		_, q, ok = strings.Cut(w, "+")
	}
	return ok && q == "sock_diag_events"
}

// Samples are a server's samples taken while the load ran.
func (r *Run) Samples(s *app.Server) []app.Sample {
	var out []app.Sample
	for _, smp := range s.Samples {
		if !smp.Time.Before(r.LoadStart) && !smp.Time.After(r.LoadEnd) {
			out = append(out, smp)
		}
	}
	return out
}

// Traced is what check or the agent saw of the host's servers'
// outbound connections under production traffic, without a load: each
// server that sent requests, with its dependency table.
type Traced struct {
	Start   time.Time `json:"start"`
	Seconds float64   `json:"seconds"`
	// IntervalMS is how often each connection was looked at.
	IntervalMS int `json:"interval_ms"`
	// Servers are the servers followed; only those with dependencies
	// are kept.
	Servers []*app.Server `json:"servers"`
	// Followed is how many servers were followed, with or without
	// dependencies.
	Followed int `json:"followed"`
}

// HostProfile is check's on-CPU profile of the servers behind the
// namespace's listeners during its window, apart from the dependencies'
// trace, which may fail while the profile does not. What the rules read,
// not part of a report: the report has the profile summed up.
type HostProfile struct {
	Profile *cpuprof.Profile
	// Servers are the servers profiled, found as the window began.
	Servers []*app.Server
	// Error says why there is no profile.
	Error string
}
