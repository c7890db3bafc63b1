package app

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
)

// farOwner is what the host's other network namespaces said about a
// destination that is no address of the server's namespace.
type farOwner struct {
	name      string // "python3 (pid 12, netns dep)"; "" when none
	observed  bool
	otherHost bool // every namespace looked into, none listens there
}

// lookElsewhere finds the owner of dst in the host's other namespaces,
// once per destination for the Observer's life: the search enters every
// namespace, so it must stay out of the 100 ms samples. A single owner
// found is observed as a server of the run.
func (o *Observer) lookElsewhere(ctx context.Context, dst string) *farOwner {
	if f, ok := o.far[dst]; ok {
		return f
	}
	f := &farOwner{}
	if o.far == nil {
		o.far = map[string]*farOwner{}
	}
	o.far[dst] = f
	ap, err := netip.ParseAddrPort(dst)
	if err != nil || ap.Addr().IsLoopback() {
		return f // a loopback address is always this namespace's
	}
	found, complete := findElsewhere(o.proc, o.ownNS, ap)
	switch len(found) {
	case 0:
		f.otherHost = complete
	case 1:
		f.name, f.observed = o.observeFar(ctx, found[0])
	default:
		// Separate networks that reuse one subnet: which one the
		// server reaches is its routing's business; name them all.
		var names []string
		for _, fl := range found {
			names = append(names, farName(o.proc, fl))
		}
		f.name = strings.Join(names, " or ")
	}
	return f
}

// observeFar makes a listener of another namespace a server of the run,
// observed from its own namespace (its status page, nginx's discovery),
// and names it.
func (o *Observer) observeFar(ctx context.Context, fl farListener) (string, bool) {
	if len(fl.l.PIDs) == 0 {
		return farName(o.proc, fl), false
	}
	sub := &Observer{proc: o.proc, ns: fl.ns.NS}
	s := sub.server(ctx, fl.l, "dependency", o.seen)
	if s == nil {
		// Its owner is already a server of the run (or exited).
		return farName(o.proc, fl), false
	}
	s.Notes = append(s.Notes, fmt.Sprintf("listens in network namespace %s, not the front server's", fl.ns.Label()))
	o.mu.Lock()
	o.Servers = append(o.Servers, s)
	o.mu.Unlock()
	return serverName(s, fl.ns.Label()), true
}

// farName names a listener of another namespace by its first owner.
func farName(proc string, fl farListener) string {
	if len(fl.l.PIDs) > 0 {
		if p, ok := readProc(proc, fl.l.PIDs[0]); ok {
			return procName(kindOf(p.comm), p.pid, fl.ns.Label())
		}
	}
	return "a listener in netns " + fl.ns.Label() + " (owner not found)"
}
