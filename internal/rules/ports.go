package rules

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/netdoctor/netdoctor/internal/app"
	"github.com/netdoctor/netdoctor/internal/evidence"
	"github.com/netdoctor/netdoctor/internal/report"
	"github.com/netdoctor/netdoctor/internal/sizing"
)

// EphemeralPortExhaustion: a connecting side ran out of local ports, or has too few.
const EphemeralPortExhaustion report.FindingID = "ephemeral-port-exhaustion"

var _ = define(Class{ID: EphemeralPortExhaustion,
	Tunables: []Tunable{{Name: "net.ipv4.ip_local_port_range", Range: true, Why: "sizing.Ports: LOW HIGH with HIGH 65535 and LOW a multiple of 1000 from 10000 to 37000 (at least the default's 28232 ports): never narrowed, never moved below 10000 or off 65535"}},
	Is:       PortsExhausted, Resource: "ports",
	Critical: true, Latent: true,
	Errors: true, Delays: true, Fails: FailsOutgoing,
	Meaning:    "outgoing connections to one destination use up the local port range; `connect()` fails with EADDRNOTAVAIL",
	Active:     "one remote holds ≥ 90 % of the range (critical)",
	LatentWhen: "`ip_local_port_range` has fewer than 10000 ports (warning)",
	Seed:       "000 stage 4",
	ReportedBy: "`check`, `diagnose`",
	Doc: `Rule ´ports´ (´ports.go´). It needs ´net.ipv4.ip_local_port_range´ in the last snapshot as two integers
´lo hi´ with hi ≥ lo. The range size is ´hi − lo + 1´ (28232 for the default ´32768 60999´). No kernel
counter records EADDRNOTAVAIL, because ´connect()´ fails before any packet is sent. The evidence is
therefore the socket dump: ´Sockets.Remotes[].Ephemeral´ counts the connections to one remote whose local
port is inside the range.

- **Active, critical** when the busiest remote (most ephemeral ports in any snapshot) holds at least
  ´size × 9 / 10´ ports (integer division): ´51 of 51 local ports in use towards 127.0.0.1:9000 (0
  ESTABLISHED, 51 TIME_WAIT)´, with the range setting. The subject is the remote.
- **Latent, warning** otherwise, when the range has fewer than 10000 ports
  (´net.ipv4.ip_local_port_range = 20000 20050 (51 ports)´).
- Fix: reuse connections (keep-alive, ´upstream { keepalive }´, ´fastcgi_keep_conn on´). When the range
  holds fewer ports than the connects/s × the time a port stays taken × 1.25, or than the default
  28232, widen it as ´tune plan´ does: ending at 65535, starting on a thousand, never below 10000
  (´10000 65535´ for seed 000), and say when no range can hold them (reuse is then the fix). The time a
  port stays taken is the TIME_WAIT, 60 s (1 s with ´tcp_tw_reuse = 1´), or none when the side closes
  its connections with a reset (´TcpOutRsts´ about ´TcpActiveOpens´, next to no TIME_WAIT): a range
  then holds them, and no latent warning is raised for a small one. The connects/s are
  ´TcpActiveOpens´, or in a run where the server opens a connection per request or ran out of ports,
  the requests it handled a second: a connect that finds no free port sends no SYN and counts in no
  counter. When ´tcp_tw_reuse´ is not 1, set it to 1 on the connecting side.
- In a run, the load's own connections to the target (the client side's remotes on the target's
  port) are the load generator's: they never make this finding, which ´load-generator-saturated´
  covers when they limit the load, and the load's report says how many local ports they took.
- In a run, nginx's "(99: Cannot assign requested address)" lines make it **active, critical** on the
  server side even when no socket sample caught the ports all in use.`,
})

var _ = register(Rule{Name: "ports", Order: 30, Scope: PerSide, IDs: []report.FindingID{EphemeralPortExhaustion}, Checks: "local ports", Check: checkPorts})

// smallPortRange is the size of ip_local_port_range below which a busy
// client runs out of ports: at 1000 new connections per second and 60 s
// of TIME_WAIT, 60000 ports are in use.
const smallPortRange = 10000

func portRange(s *evidence.Snapshot) (lo, hi int, ok bool) {
	f := strings.Fields(s.Sysctls["net.ipv4.ip_local_port_range"])
	if len(f) != 2 {
		return 0, 0, false
	}
	lo, err1 := strconv.Atoi(f[0])
	hi, err2 := strconv.Atoi(f[1])
	return lo, hi, err1 == nil && err2 == nil && hi >= lo
}

// checkPorts finds outgoing connections that use up the local port range
// (seed 000 stage 4): from the sockets towards the busiest remote, or, in
// a run, from nginx's log, since ports may run out and come back between
// two samples, where the socket counts miss it.
func checkPorts(in *Input) []report.Finding {
	c := connectsOf(in)
	out := kernelPorts(in, c)
	logged, u, ok := portsLogged(in)
	if !ok {
		return out
	}
	item := report.Item{Text: logged, Source: "log", Window: true}
	for i, k := range out {
		if k.ID == EphemeralPortExhaustion {
			out[i].Evidence = append([]report.Item{item}, k.Evidence...)
			out[i].Status, out[i].Severity = report.Active, report.Critical
			return out
		}
	}
	return append(out, report.Finding{ID: EphemeralPortExhaustion, Severity: report.Critical, Status: report.Active, Side: in.Run.ServerSide(),
		Subject: strings.Join(u.Servers, ","), About: report.About{Remotes: u.Servers},
		Title:    fmt.Sprintf("nginx ran out of local ports connecting to %s", strings.Join(u.Servers, ",")),
		Evidence: []report.Item{item, {Text: fmt.Sprintf("the load saw %d 5xx responses", in.Run.Load.Status["5xx"]), Source: "load", Window: true}},
		Actions:  append(portFix(in.Bundle, c), report.Advise("the lasting fix: reuse upstream connections (see "+report.JoinIDs(causesOf(EphemeralPortExhaustion))+")"))})
}

// portsLogged is the first line in which an nginx of a run's server side
// logged that it could not connect to an upstream it does not keep
// connections to for want of a local port ("99: Cannot assign requested
// address").
func portsLogged(in *Input) (string, app.NginxUpstream, bool) {
	if !in.ServerSide() || in.Run.Load == nil || in.Run.Load.Requests == 0 {
		return "", app.NginxUpstream{}, false
	}
	if _, ok := in.Bundle.Window(); !ok {
		return "", app.NginxUpstream{}, false
	}
	for _, s := range in.Run.Servers {
		if s.Nginx == nil {
			continue
		}
		for _, u := range s.Nginx.Upstreams {
			if u.Reuse {
				continue
			}
			if logged, n := logItem(s, app.EventCannotAssign, cannotAssign); n > 0 {
				return logged, u, true
			}
		}
	}
	return "", app.NginxUpstream{}, false
}

// kernelPorts is port exhaustion from the sockets and the range alone:
// exhausted towards one remote (not the load's own connections, which
// the load generator judges itself), or a range too small for the
// connections that hold a port.
func kernelPorts(in *Input, c connects) []report.Finding {
	b := in.Bundle
	last := &b.Snapshots[len(b.Snapshots)-1]
	lo, hi, ok := portRange(last)
	if !ok {
		return nil
	}
	size := hi - lo + 1
	rangeItem := settingItem("net.ipv4.ip_local_port_range", fmt.Sprintf("%d %d (%d ports)", lo, hi, size))
	var out []report.Finding
	busiest := busiestRemote(b, in.loadsOwn)
	switch {
	case busiest.Ephemeral > 0 && busiest.Ephemeral >= size*9/10:
		out = append(out, report.Finding{ID: EphemeralPortExhaustion, Severity: report.Critical, Status: report.Active, Subject: busiest.Addr, About: report.About{Remotes: []string{busiest.Addr}},
			Title: fmt.Sprintf("Local ports exhausted towards %s: new connections fail with EADDRNOTAVAIL", busiest.Addr),
			Evidence: []report.Item{
				{Text: fmt.Sprintf("%d of %d local ports in use towards %s (%d ESTABLISHED, %d TIME_WAIT)", busiest.Ephemeral, size, busiest.Addr, busiest.Established, busiest.TimeWait), Source: "sockdiag", Window: true},
				rangeItem,
			},
			Actions: portFix(b, c),
		})
	case size < smallPortRange && !c.reset:
		// Closed with resets, connections free their ports at once:
		// a small range then holds them.
		out = append(out, report.Finding{ID: EphemeralPortExhaustion, Severity: report.Warning, Status: report.Latent,
			Title:    fmt.Sprintf("Only %d local ports: a client making more than %d connections a minute to one server will run out", size, size),
			Evidence: []report.Item{rangeItem},
			Actions:  portFix(b, c),
		})
	}
	return out
}

// portFix is the advice for a connecting side short of local ports:
// reuse first; then the range, sized as tune plan sizes it (the connect
// attempts a second × the time a port stays taken); then TIME_WAIT
// reuse.
func portFix(b *evidence.Bundle, c connects) []report.Action {
	last := &b.Snapshots[len(b.Snapshots)-1]
	fix := notes("reuse connections instead of opening one per request (HTTP keep-alive; nginx: an upstream block with `keepalive`, plus `proxy_http_version 1.1; proxy_set_header Connection \"\";` or `fastcgi_keep_conn on;`)")
	rate, life := c.attempts, c.hold
	reuse, _ := SysctlInt(last, "net.ipv4.tcp_tw_reuse")
	cur := 0
	if lo, hi, ok := portRange(last); ok {
		cur = hi - lo + 1
	}
	if need, lo, hi, widen := sizing.Ports(rate, life, cur); widen {
		why := fmt.Sprintf("%.0f new connections/s × %.0f s a port stays taken × %.2f = %d needed per destination", rate, life, sizing.Margin, need)
		if need <= sizing.DefaultPortWidth {
			why = fmt.Sprintf("the kernel default's width at least: %s", why)
		}
		if need > hi-lo+1 {
			why += "; the range alone cannot hold them: keeping connections open is the fix, the range is headroom"
		}
		fix = append(fix, report.Advise(fmt.Sprintf("widen the range to %d ports (%s)", hi-lo+1, why)),
			sysctlFix(b, "net.ipv4.ip_local_port_range", fmt.Sprintf("%d %d", lo, hi)))
	}
	if reuse != 1 && !c.reset {
		a := sysctlFix(b, "net.ipv4.tcp_tw_reuse", "1")
		fix = append(fix, a.Worded("on this connecting side only, let new connections reuse TIME_WAIT ports older than 1 s (needs tcp_timestamps=1): "+
			a.Command+" — the default 2 applies to loopback only"))
	}
	return fix
}
