package rules

import (
	"net"
	"net/url"

	"github.com/netdoctor/netdoctor/internal/evidence"
	"github.com/netdoctor/netdoctor/internal/report"
	"github.com/netdoctor/netdoctor/internal/sizing"
)

// Helpers of the rules about outgoing connections (ports.go, churn.go).

// connects is how a side opens and closes its outgoing connections over
// the window: what the port range must hold.
type connects struct {
	// opens and resets are Tcp.ActiveOpens and Tcp.OutRsts over the
	// window; rate is opens a second.
	opens, resets uint64
	rate          float64
	// attempts is the connections a second the side tried to open: the
	// opens, or in a run where it opens one per request, the requests it
	// handled, since a connect that finds no free port never sends a SYN
	// and counts nowhere in the kernel.
	attempts float64
	// answered and perReq: in a run, the requests the server answered
	// other than for want of a connection, and opens per answered one.
	answered uint64
	perReq   float64
	// reset is true when the side closes its connections with a reset
	// (as haproxy's nolinger and many proxies do): no TIME_WAIT holds the
	// port afterwards, so hold is 0; else hold is how long a closed
	// connection keeps its port (TIME_WAIT, or 1 s with tcp_tw_reuse).
	reset bool
	hold  float64
}

// connectsOf measures a side's outgoing connections.
func connectsOf(in *Input) connects {
	b := in.Bundle
	var c connects
	last := &b.Snapshots[len(b.Snapshots)-1]
	reuse, _ := SysctlInt(last, "net.ipv4.tcp_tw_reuse")
	c.hold = sizing.PortHold(reuse == 1)
	w, ok := b.Window()
	if !ok {
		return c
	}
	c.opens, _ = w.Counter("Tcp.ActiveOpens")
	c.resets, _ = w.Counter("Tcp.OutRsts")
	c.rate = w.Rate("Tcp.ActiveOpens")
	c.attempts = c.rate
	tw := 0
	for _, s := range b.Snapshots {
		if s.Sockets == nil {
			continue
		}
		for _, r := range s.Sockets.Remotes {
			if !in.loadsOwn(r.Addr) {
				tw = max(tw, r.TimeWait)
			}
		}
	}
	// Closed with resets: as many resets sent as connections opened, and
	// next to no TIME_WAIT left by thousands of them.
	if c.opens >= 100 && 2*c.resets >= c.opens && uint64(tw)*20 < c.opens {
		c.reset, c.hold = true, 0
	}
	if !in.ServerSide() || in.Run.Load == nil || in.Run.Load.Requests == 0 {
		return c
	}
	lr := in.Run.Load
	c.answered = lr.Requests - min(lr.Requests, uint64(logStatuses(in.Run.Servers)[502]))
	if c.answered == 0 {
		c.answered = lr.Status["2xx"]
	}
	c.perReq = float64(c.opens) / float64(max(c.answered, 1))
	if c.perReq >= 0.5 || exhausted(in) {
		c.attempts = max(c.rate, lr.RPS)
	}
	return c
}

// exhausted reports a remote, not the load's, holding 90 % of the port
// range at some point.
func exhausted(in *Input) bool {
	lo, hi, ok := portRange(&in.Bundle.Snapshots[len(in.Bundle.Snapshots)-1])
	if !ok {
		return false
	}
	r := busiestRemote(in.Bundle, in.loadsOwn)
	return r.Ephemeral > 0 && r.Ephemeral >= (hi-lo+1)*9/10
}

// busiestRemote is the remote with the most ephemeral ports in use in any
// snapshot, skipping those skip says are not the side's own.
func busiestRemote(b *evidence.Bundle, skip func(string) bool) evidence.Remote {
	var best evidence.Remote
	for _, s := range b.Snapshots {
		if s.Sockets == nil {
			continue
		}
		for _, r := range s.Sockets.Remotes {
			if r.Ephemeral > best.Ephemeral && (skip == nil || !skip(r.Addr)) {
				best = r
			}
		}
	}
	return best
}

// loadsOwn reports whether an outgoing connection's remote is the run's
// target as seen from the client's namespace: such connections are the
// load generator's own, opened as it was asked (keep-alive or one per
// request), and no finding of the client's side blames them. Outside a
// run, and on the server's own side, nothing is the load's.
func (in *Input) loadsOwn(addr string) bool {
	if in.Run == nil || in.Run.Load == nil || (in.Side != report.Client && in.Side != report.Local) {
		return false
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil || port != in.Run.Port {
		return false
	}
	u, err := url.Parse(in.Run.Load.URL)
	if err != nil {
		return false
	}
	// A name resolves to an address of the target: on the client's side
	// the connections to the target's port are the load's.
	want := net.ParseIP(u.Hostname())
	return want == nil || want.Equal(net.ParseIP(host))
}
