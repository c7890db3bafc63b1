package rules

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/netdoctor/netdoctor/internal/app"
	"github.com/netdoctor/netdoctor/internal/evidence"
	"github.com/netdoctor/netdoctor/internal/load"
	"github.com/netdoctor/netdoctor/internal/report"
)

// DependencyPoolSaturated: a server's few connections to a dependency (a
// database, a cache, a backend) are busy all the time, and requests
// queue for one.
const DependencyPoolSaturated report.FindingID = "dependency-pool-saturated"

var _ = define(Class{ID: DependencyPoolSaturated,
	Is: LegWait, Resource: "dependency-pool",
	Critical: true,
	Delays:   true, Holds: true,
	Blocks: true, Waits: true, AtCapacity: true,
	Meaning:    "a server's few connections to a dependency (database, cache, backend) are busy all the time; requests queue for a connection",
	Active:     "in a run, a server's connections to one destination had a request outstanding ≥ 80 % of the time while the load's p50 was ≥ 3 × the dependency's time per request and ≥ 30 ms; without a load (`check`, the agent), ≥ 85 % over ≥ 50 round trips (critical)",
	LatentWhen: "—",
	Seed:       "any small client pool (the issue's API with 4 connections)",
	ReportedBy: "`run`, `check`, agent",
})

// DependencySlow: most of a request's time is a dependency's answer.
const DependencySlow report.FindingID = "dependency-slow"

var _ = define(Class{ID: DependencySlow,
	Is:     LegWait,
	Delays: true, Holds: true,
	Blocks: true, Waits: true,
	Meaning:    "most of a request's time is spent waiting for a dependency's answers",
	Active:     "in a run, the dependency's time per request (round trips per request × time per round trip) ≥ half the p50, p50 ≥ 30 ms; without a load, ≥ 100 ms per round trip on a pool ≥ 25 % busy; or a busy pipelined/multiplexed connection whose time cannot be measured (warning)",
	LatentWhen: "—",
	Seed:       "a slow backend behind a roomy pool",
	ReportedBy: "`run`, `check`, agent",
})

var _ = register(Rule{Name: "dependency", Order: 200, Scope: PerRun, IDs: []report.FindingID{DependencyPoolSaturated, DependencySlow}, Checks: "dependencies (databases, caches, backends)", Check: checkDependency, Traced: true, LooksIn: traced,
	Doc: `Rule ´dependency´ (´dependency.go´), in ´netdoctor run´. **The evidence** is each observed server's own
outbound TCP connections (those whose local port is no listener's: connections it opened, never the
load's, which arrive on a listener), found among its processes' descriptors once a second during the
load and, for at most 256 of them, their ´tcp_info´ every 100 ms through sock_diag exact lookups
(´INET_DIAG_INFO´; a hash lookup per connection, so the cost does not grow with the host's socket
table). Per destination (´Deps´ in the JSON, the "waits on" table under each server in the text
report): the connections that carried data (the pool) and how many were new, data segments and bytes
each way per second, the share of time each had a request outstanding, round trips per second, time
per round trip, the network RTT (the lowest RTT the kernel sampled on the pool's connections, the
handshake's among them: ´min_rtt´; the smoothed RTT, ´rtt´, is not the network's on a request/response
connection, where the dependency's ACK rides on its answer — it read 20.5 ms to a backend 170 µs away
that answers in 20 ms), and the process listening at the destination — that process is then
observed as a server of the run too (role ´dependency´: its threads, what they wait on), so the chain
goes on. Unix-socket connections are followed too (below). The owner is found in the server's namespace when the destination is one of its addresses
(or loopback); otherwise in the host's other network namespaces (those ´ip netns´ names, and the
distinct namespaces of processes through ´/proc/PID/ns/net´, one per inode): the one that has the
address on an interface and a listener a connection to it reaches (a sock_diag exact lookup from no
remote address, the kernel's own listener lookup), its owner among that namespace's processes, named
with the namespace (´redis-server (pid 812, netns cache)´; an unnamed one by its inode) and observed
from there. That search enters every namespace, so it runs once per destination per run, when its
first connection is found, never per sample. When every namespace was looked into and none listens
there, the table says "another host" and the finding "on another host"; when some could not be
entered (not root) the owner is left unknown. The same address in several namespaces (separate
networks reusing a subnet) names every candidate, none observed.

Through an agent (´run --server-agent´), the agent traces the watched servers the same way, on the
server's host: from the watch's opening, begun again when the run says its load starts and stopped
when it says the load ends (´watch/ID?load=start|end´, docs/agent.md), or when the watch finishes or
expires; the dependencies come back with the finished servers. An agent that predates this returns
none, and the run has no dependency table.

**The estimator** (´app/conntrace.go´). A request begins with a send after the previous answer
ended; the estimator finds those boundaries from the bytes and segments each way and the times of
´tcp_info´ across looks, so that answers of several segments and pauses inside an answer (a server that
flushes its headers first and its body later, an answer in several writes, one whose last part Nagle's
algorithm holds) count as busy, not idle. A look **decides busy** when a request is out with nothing of
its answer received: the connection sent data more recently than it received any
(´tcpi_last_data_sent´ < ´tcpi_last_data_recv´, in jiffies: 4 ms at HZ=250), or what it sent is
unacknowledged (´tcpi_unacked´: an answer would carry the ACK), or an ACK came after the last data
(´tcpi_last_ack_recv´: the peer's kernel acknowledged the request alone, its application not having
answered — a dependency whose workers are all busy leaves requests unread that long; within a second of
the send, as a delayed ACK and a round trip come: a keepalive probe's ACK also comes after the last data,
and read an idle pool connection, silent past Go's 15 s keepalive time, as busy), or it sent and
never received (a new connection's first request, sent in the jiffy its handshake ended). **Any other
look waits for the connection's next movement**: it received data since its last send, and cannot
tell by itself whether that answer is whole (idle) or only begun. More of the answer first: it was busy
(´part´); a request first: the answer was whole, it was idle; data, then the one request now outstanding:
busy. Probes soon after a waiting look (5, 15, 35 and 75 ms, not counted as looks; a quiet connection
gets none; 64 at most between two looks) catch that movement before the next request blurs it. In a saturated pool the answer's
rest, the next request and the first part of its answer come within microseconds of each other, between
two observations, and the order is lost; those looks are **placed by the connection's lattice**: on a
connection whose answers are all one size ´a´ and whose requests take as many data segments each,
´z´ = bytes received − ´a´ × data segments sent is one value ´z0´ whenever the last answer is whole,
´z0 − a´ while a request waits for its answer, and in between inside one. The size is searched among
those the first and last looks allow (the bytes and requests between them are off by at most one answer
at each end); with the right one, the looks at the same point of their answers share one ´z´, and each
byte off spreads them by a byte per request, so the size whose commonest ´z´ holds the most looks wins,
and that value must hold a third of them (answers whose sizes vary by a few bytes — a number's digits
— are no lattice). The decided looks anchor ´z0´ (a look waiting for its answer at ´z0 − a´, one whose
answer was whole at ´z0´, all agreeing); a connection whose counters begin with its first request (no
greeting) has ´z0 = 0´ when every ´z´ lies in ´[−a, 0]´. Answers of several sizes have no lattice: their
lost looks stay undecided, and **a pool whose looks stay undecided in more than 75 % is not timed**: the
row says "not timed (answers' ends not told apart from pauses in N% of looks …)", with no busy share,
no time and no finding. The busy share is over the decided looks (raised to ´tcpi_busy_time´'s share
when that is higher), a quiet connection's skipped ticks waiting with its last look; a connection whose
own looks stay undecided in more than 75 % gives only ´tcpi_busy_time´'s share, as a movement decides
busy looks more often than idle ones (four connections to a fast backend, each decided in 3 of 52
looks, read 100 % busy). Round trips are
´tcpi_data_segs_out´ deltas; time per round trip = busy time / round trips (Little's law per
connection); the dependency's time per request = round trips per request × time per round trip; the
pool serves at most connections / time per round trip. **Measured** (TestRunDependencyAnswerParts): a
Go front (´http.Transport´ limited to 4 connections) and a Node.js front (an ´http.Agent´ with
´maxSockets´ 4, one event loop) over an HTTP backend that writes its headers at once and its body 20 ms
later in three writes, under 50 connections: busy 0.94–1.00 and 20.8 ms per round trip against the
fronts' own 20.8–21.5 ms; with Nagle on the backend (its body waits for the front's delayed ACK of the
headers), 41.6–42.8 ms against 43.8 ms. The python3 chain (TestLight/RunDependencyChain) reads 0.98 and
77.7 ms (truth ~80), TestLight/CheckDependencyChain 1.00 and 82.2 ms, the 20 ms backends 20.2–21.2 ms,
TestLight/RunDependencyLong 400.5 ms. Before, the estimator timed segment exchanges: such a backend's pool read
mostly idle at a few milliseconds per round trip. Round trips longer than the 100 ms between looks are
timed one by one: a request's answer ends with the last data received before the next request, known
when nothing came between two observations (the answer was whole at the first), when everything that
came did so before the one request now outstanding, or, when that request and the last data received
share a jiffy, where the lattice puts the observation at the start of the new answer. tcp_info dates
sends and receives to the jiffy at every look, so the request already in flight when the trace began
is included. When such round trips are 80 % of the requests sent or more (and 3 at least), their mean
is the time per round trip (JSON ´round_trips_timed´): the ratio's edges (the first request's time
counted, not the request) read 2 s requests begun together 2.49 s over a 5 s trace; timed one by one,
2.00 s (TestDependenciesPaired), and 400 ms ones 400.5 ms (TestLight/RunDependencyLong). A
connection per request that closes before a look sees its answer is not timed this way (php-fpm in
ping-ptr-timeout). **Limits**: a request written in several segments counts as
several round trips (shorter times), unless all requests take as many; a pipelined or multiplexed connection (HTTP/2, Redis pipelines,
several requests outstanding) breaks the one-outstanding-request model, so when another request went
out before the previous answer in ≥ 10 % of the busy samples the table says "n/a" and the finding
says the time cannot be measured rather than give a number; answers of several sizes in a saturated
pool leave the looks whose order is lost undecided (no lattice), never busy ones; an owner is found on the server's host only (not on the load's host, nor across hosts:
a dependency on another host is named by its address). Tested with the backend in a third namespace
(reached through a veth of its own: 20.4 ms measured, owner named with its namespace) and through an
agent in the server's namespace (20.4 ms, traced over the 4 s load only).

**Unix sockets** (php-fpm on ´/run/php/php8.2-fpm.sock´, PostgreSQL on
´/var/run/postgresql/.s.PGSQL.5432´, Redis, gunicorn behind nginx). A server's unix stream socket is a
dependency when its peer is named (the peer of a client is the socket the listener accepted, which
carries the listener's path; the destination is ´unix:´ + that path, ´unix:@name´ for an abstract one).
Left out: a peer without a name (a socketpair, or the client's end of a connection the server accepted),
a socket named after one of the namespace's listeners (one the server accepted), descriptors 0–2
(stdio), and sockets that are no request's way out: ´/dev/log´ and ´/run/systemd/journal/*´ (systemd
connects every service's stdout and stderr to journald's stream socket: the server logs there, and
journald would be observed in every run) and the D-Bus system bus (a long-held control connection whose
owner is a broker, not what answers). The owner is the process holding the namespace's listening socket
of that path (a path socket bound in another network namespace and shared by a mount is not found:
owner unknown), observed as a server of the run (role ´dependency´, or ´upstream´ when the front
server's configuration names it: nginx's ´fastcgi_pass unix:…´), so its own findings (php-fpm's
´worker-pool-exhausted´) are in the report. **What is measured**: the kernel keeps no ´tcp_info´ for a
unix socket — no times of the last send and receive, no segment or byte counters — so there is no busy
share, no round trips, no time per round trip: the row says "not timed (unix socket: no tcp_info)" and
no ´dependency-*´ finding comes from it. Each connection is looked up by inode and cookie every 100 ms
(sock_diag ´unix_diag_get_exact´ with ´UDIAG_SHOW_NAME | UDIAG_SHOW_PEER | UDIAG_SHOW_RQLEN´; the
kernel walks the namespace's unix socket table for it, a few ns per socket), and the table gives the
connections open for two looks or more (whether each carried data is not known), those opened meanwhile,
and ´unread´: the share of looks in which what the server sent was still unread at the dependency's end
(the client's ´wqueue´, the buffers it wrote still charged to it until the peer reads them). A request
unread is outstanding, so that share is a lower bound on the busy share, printed as one ("≥ 62% (unread
there)"), never an estimate: a request read and being worked on looks idle. For a dependency that reads a
request whole before working on it, unread means waiting for a worker or for the accept; one that reads
lazily counts requests in service too (php-fpm's 100 % below, with 18 of 20 requests queued, suggests it
leaves part of a request unread while the script runs: not verified). Tested by
TestLight/RunDependencyUnix (a Go API with 4 connections to a backend on a socket file in a temporary
directory: ´unix:/…/backend.sock´, the backend's owner observed, 4 connections, unread 0 — the backend
reads each request at once) and TestLight/RunDependencyUnixPHP (nginx → php-fpm on a socket file with 2
workers of 100 ms, a FastCGI connection per request, 20 clients: php-fpm observed with its
´worker-pool-exhausted´, 54 connections seen over two looks, 80 new, unread 100 %).

**dependency-pool-saturated, critical**: the pool was busy ≥ 80 % and the load's p50 is ≥ 3 × the
dependency's time per request (and ≥ 30 ms): requests queue for a connection. Title: ´<server> waits on
<addr> (<owner>): N connections, each busy ~X %, ~T per round trip → at most ~R req/s; the p50 is Q ×
that´. Evidence: the table row, the latencies, the latency decomposition (p50 ≈ time in the dependency +
time waiting for a connection and the server's own work), the server's CPU, the requests in flight
against the connections (Little's law from the load: rate × mean latency; the others wait inside the
process — a Go ´http.Transport´'s or a Node ´http.Agent´'s queue — where the kernel shows none), and
the dependency's own threads when it is observed. Fix: a bigger pool (to the requests in flight, at
least twice the pool), named where the server's runtime sizes it (Node: the ´http.Agent´'s
´maxSockets´, undici, pg, mysql2; Go: ´MaxConnsPerHost´, ´SetMaxOpenConns´, go-redis ´PoolSize´; Java:
HikariCP, Apache HttpClient, OkHttp; Python: SQLAlchemy, requests, aiohttp, psycopg_pool), only when the dependency has spare capacity (the host's CPU under 70 %, its threads not mostly on
CPU, and no requests left unread in its connections or its accept queue in two or more sampled
seconds: its workers all taken); otherwise the dependency itself; in both cases caching or fewer round
trips per request. **The chain in the report**: when the dependency is observed and has a finding of
its own that makes its clients wait (its pool full — ´worker-pool-exhausted´, its accept queue
overflowing, ´app-slow´, or its own dependency), the client's ´dependency-pool-saturated´ or
´dependency-slow´ is marked its consequence (´caused_by´, ´cause_subject´) and listed after it: the
text says "a consequence of #N: worker-pool-exhausted (python3 10.0.0.1:7300)", the HTML links to it.
Tested by TestLight/RunDependencyChain: a Go API with 8 connections to a python3 backend with 2 worker
threads of 20 ms each.
**dependency-slow, warning**: the dependency's time per request is at least half the p50 (≥ 30 ms)
without a full pool: the time is the dependency's own; or a busy multiplexed connection. Both make
´app-slow´ stand down, unless the dependency is observed and its workers mostly wait on something that
names a cause (a file lock, a sleep, a peer, a lookup, the disk; not a futex, on which every Go, Java or
Node thread parks whether busy or not): then ´app-slow´ is about the dependency (nginx waits on php-fpm,
whose workers wait on a file lock) and the dependency finding is its consequence. Both explain a slow
tail for ´unexplained-distress´.

**Without a load: ´check´ and the agent** (´checkTraced´, in ´dependency.go´). They trace the same way,
under whatever traffic the host has, the servers behind the namespace's TCP listeners (the lowest 16
ports, one server per process, without reading their configuration; netdoctor's own process left out)
and the destinations found listening in the namespace. ´check´ traces for its whole ´--window´ (every
100 ms; 5 s by default) and prints the tables under "Dependencies" (JSON ´dependencies´: ´start´,
´seconds´, ´interval_ms´, ´followed´, ´servers´ with their ´dependencies´). The agent traces in bursts
of 3 s every ´--dependency-every´ (15 s; ´0´: never), keeps the last burst for its diagnosis and
´/metrics´ until the next (dropped when older than two periods), and serves it in ´/v1/findings´
(´check --agent´ prints the same tables). **The estimator without a load**: there is no client-side
p50 to compare with, so only the sockets speak, and only with enough evidence — at least 1 s, 10 looks
and 50 round trips on the destination; a quiet host (idle pools, no requests) makes no finding.
**dependency-pool-saturated, critical**: the pool's connections had a request outstanding ≥ 85 % of
the time: a request finds every connection taken nearly always, so requests wait for one, and the pool
caps the rate at connections / time per round trip ("at most R req/s through this pool"). Evidence: the
table row, how long and how many round trips it rests on, the host's CPU; fix: a bigger pool (about
twice) when the dependency has room, not when the host's CPU is ≥ 70 % busy; caching or fewer round
trips; ´netdoctor run´ to measure what the waiting costs. **dependency-slow, warning**: ≥ 100 ms per
round trip on a pool ≥ 25 % busy (its numbers in the title), or a pipelined/multiplexed pool busy ≥ 85 %,
whose time per request is not estimated ("cannot be measured", no number). Tested with ordinary Go HTTP
clients (32 at once, keep-alive) against the API with 4 connections to the 20 ms backend: ´check´
measured 20.5–20.9 ms per round trip, 97–100 % busy, at most ~195 req/s, in Go and python3; the agent's
burst 20.9 ms; an idle API and a fast backend made no finding. The fast backend's pool reads 97 % busy
at 146 µs per round trip (the round trip is the network's RTT and the API's own turnaround: the pool is
as busy as the client can keep it), so a pool under 1 ms per round trip is not judged without a load,
where a request waiting for a connection waits well under a millisecond per request ahead of it.
**The chain without a load**: ´check´, the agent and ´diagnose´ relate their findings as ´run´ does
(´CheckHost´): a traced server's own finding (its accept queue overflowing, its own pool saturated)
is the cause of its clients' ´dependency-*´ finding, over any number of servers, and a saturated
client pool whose dependency is itself at capacity is not advised a bigger pool ("not a bigger pool:
ADDR is itself at capacity (…); fix that first"); the same holds in ´run´ for a dependency whose pool is
full. Tested by TestLight/CheckDependencyChain: an API's 8 connections to a middle service whose 2
connections to the 20 ms backend are all taken (TestCheckHostChain is the unit case).
**Cost**: per looked-at connection one sock_diag exact lookup every 100 ms, plus once a second a read of
the followed servers' descriptor tables (each new socket inspected once per trace). The agent's 3 s
burst over the test's pool took 3.2 ms of CPU (´netdoctor_agent_dependency_trace_cpu_seconds´ reports
it per burst), about 0.02 % of a core at the default period. **Limits** (beyond the run's): a busy share
under 85 % is not judged, though requests may already queue at times; the tables are of the traffic
during the trace only (a 3 s burst misses what happens between bursts); connections opened and closed
between two looks are counted as new, not measured.`})

// Thresholds of the dependency rule.
const (
	// depBusy is the pool's busy share from which it is full: requests
	// find every connection taken.
	depBusy = 0.8
	// depQueue is how many times the dependency's own time per request
	// the p50 must be for requests to be queueing for a connection.
	depQueue = 3.0
	// depShare is the share of the p50 a dependency must take to be
	// called the slow part.
	depShare = 0.5
)

// checkDependency reads each server's connections to what it depends on
// (app.Dependency, traced every 100 ms while the load ran) and says when
// the time is the dependency's: the pool is full and requests queue for
// a connection, or the dependency's answers are most of the p50.
func checkDependency(in *Input) []report.Finding {
	if in.Run == nil {
		return checkTraced(in.Traced, in.Bundle)
	}
	r := in.Run
	if r == nil || r.Load == nil || r.Load.Requests < 20 || r.Load.Latency.P50 < appSlowLatency {
		return nil
	}
	lr := r.Load
	secs := lr.DurationS
	if secs <= 0 {
		secs = r.LoadEnd.Sub(r.LoadStart).Seconds()
	}
	if secs <= 0 {
		return nil
	}
	rate := float64(lr.Requests) / secs
	cpu, cpuOK := hostBusy(serverBundle(r), r.LoadStart, r.LoadEnd)
	var out []report.Finding
	for _, s := range r.Servers {
		for i := range s.Deps {
			if f, ok := depFinding(r, s, &s.Deps[i], rate, cpu, cpuOK); ok {
				out = append(out, f)
			}
		}
	}
	return out
}

func depFinding(r *evidence.Run, s *app.Server, d *app.Dependency, rate, cpu float64, cpuOK bool) (report.Finding, bool) {
	lr := r.Load
	p50 := lr.Latency.P50
	// An untimed dependency (a unix socket) has no time to compare with
	// the p50: its owner, observed as a server of the run, speaks for it.
	if d.Untimed != "" || d.Conns == 0 || d.RoundTripsPerSec <= 0 || d.Seconds < 1 || rate <= 0 {
		return report.Finding{}, false
	}
	who := depName(d)
	subject := s.Kind + " " + s.Addr + " → " + d.Addr
	about := report.About{Server: s.Kind, Listen: s.Addr, Remotes: []string{d.Addr}}
	table := report.Item{Text: depRow(d), Source: "sock_diag tcp_info", Window: true}
	if d.Multiplexed() {
		if d.Busy < depShare || !cpuOK || cpu >= 0.7 {
			return report.Finding{}, false
		}
		return report.Finding{ID: DependencySlow, Severity: report.Warning, Status: report.Active, Subject: subject, About: about, Side: r.ServerSide(),
			Title: fmt.Sprintf("%s %s waits on %s over %d connections with several requests outstanding on each: the time per request cannot be measured from its connections", s.Kind, s.Addr, who, d.Conns),
			Evidence: []report.Item{table,
				{Text: fmt.Sprintf("in %.0f%% of the busy samples another request went out before the previous answer came (pipelined or multiplexed): round trips and pool size are not estimated", 100*d.Pipelined), Source: "sock_diag tcp_info", Window: true},
				latencyItem(lr)},
			Actions: notes("measure the dependency's own latency (its slow log, its metrics, a client-side histogram): on a multiplexed connection only the client knows which answer belongs to which request")}, true
	}
	perReq := d.RoundTripsPerSec / rate
	depTime := time.Duration(perReq * float64(d.RoundTrip))
	if depTime <= 0 {
		return report.Finding{}, false
	}
	q := float64(p50) / float64(depTime)
	maxRate := d.MaxRoundTripsPerSec() / perReq
	decomp := report.Item{Text: fmt.Sprintf("latency: p50 %s ≈ %s in %s (%.1f round trips per request × %s) + %s waiting for a connection and the server's own work",
		ms(p50), ms(depTime), d.Addr, perReq, ms(d.RoundTrip), ms(max(0, p50-depTime))), Source: "sock_diag tcp_info", Window: true}
	ev := []report.Item{table, latencyItem(lr), decomp}
	if cpuOK {
		ev = append(ev, report.Item{Text: fmt.Sprintf("server CPU %.0f%% busy over the load", 100*cpu), Source: "/proc/stat", Window: true})
	}
	if dep := depServer(r, d); dep != nil {
		if sh, total := waitShares(r.Samples(dep)); total > 0 {
			ev = append(ev, report.Item{Text: fmt.Sprintf("%s, observed as a server of this run, its threads sampled each second while busy: %s", who, describeWaits(sh, total)), Source: "wchan", Window: true})
		}
	}
	switch {
	case d.Busy >= depBusy && q >= depQueue:
		return report.Finding{ID: DependencyPoolSaturated, Severity: report.Critical, Status: report.Active, Subject: subject, About: about, Side: r.ServerSide(),
			Title: fmt.Sprintf("%s %s waits on %s: %d connections, each busy ~%.0f %%, ~%s per round trip → at most ~%.0f req/s; the p50 is %.0f × that: requests queue for a connection",
				s.Kind, s.Addr, who, d.Conns, 100*d.Busy, ms(d.RoundTrip), maxRate, q),
			Evidence: append(ev, inFlightItem(lr, rate, d.Conns)), Actions: depPoolFix(r, s, d, who, cpu, cpuOK, rate, depTime)}, true
	case float64(depTime) >= depShare*float64(p50):
		return report.Finding{ID: DependencySlow, Severity: report.Warning, Status: report.Active, Subject: subject, About: about, Side: r.ServerSide(),
			Title: fmt.Sprintf("%s %s waits on %s: ~%s per round trip, %.1f per request, %.0f%% of the p50 %s",
				s.Kind, s.Addr, who, ms(d.RoundTrip), perReq, 100*float64(depTime)/float64(p50), ms(p50)),
			Evidence: ev, Actions: notes(
				fmt.Sprintf("the time is %s's: diagnose it (its own findings in this report when netdoctor observes it, else its slow log and metrics)", who),
				"or ask it less: cache its answers, batch or pipeline the round trips a request makes")}, true
	}
	return report.Finding{}, false
}

// biggerPool begins the advice to grow a client's pool, poolKnobs says
// where pools are sized; when the dependency is itself at capacity
// (relate: CauseAtCapacity) the report says not to in place of that
// advice, which biggerPoolFix tags (report.FixOf).
const (
	biggerPool = "a bigger pool"
	poolKnobs  = "where the client library sets it (Go database/sql SetMaxOpenConns, go-redis PoolSize, HikariCP maximumPoolSize, SQLAlchemy pool_size, a hand-made pool's size)"
)

// connKnobs are where a runtime's client libraries size their pools of
// connections, by runtime (runtimeOf).
var connKnobs = map[string]string{
	"node":   "where the client sets it (Node's http.Agent maxSockets — the default agent has no limit, so one was set —, undici's Pool connections, pg's Pool max, mysql2's connectionLimit)",
	"go":     "where the client sets it (Go's http.Transport MaxConnsPerHost, database/sql SetMaxOpenConns, go-redis PoolSize)",
	"java":   "where the client sets it (HikariCP maximumPoolSize, Apache HttpClient setMaxConnPerRoute and setMaxConnTotal, OkHttp's Dispatcher maxRequestsPerHost)",
	"python": "where the client sets it (SQLAlchemy pool_size and max_overflow, requests' HTTPAdapter pool_maxsize with pool_block, aiohttp's TCPConnector limit_per_host, psycopg_pool max_size)",
}

// runtimeOf names the runtime a server runs on: what the observer
// told (app.Runtime), else its process name: "java", "node", "python",
// or "" when that does not tell (a Go program is named after itself).
func runtimeOf(s *app.Server) string {
	if rt := s.Runtime; rt != nil {
		switch rt.Name {
		case app.RuntimeGunicorn, app.RuntimeUvicorn:
			return string(app.RuntimePython)
		case "":
		default:
			return string(rt.Name)
		}
	}
	switch k := s.Kind; {
	case k == "java":
		return "java"
	case k == "node" || k == "nodejs":
		return "node"
	case strings.HasPrefix(k, "python"):
		return "python"
	}
	return ""
}

// knobsOf is where a server's runtime sizes its connection pools.
func knobsOf(s *app.Server) string {
	if k, ok := connKnobs[runtimeOf(s)]; ok {
		return k
	}
	return poolKnobs
}

// depPoolFix says which side to change: a bigger pool only when the
// dependency has room for more requests at once.
func depPoolFix(r *evidence.Run, s *app.Server, d *app.Dependency, who string, cpu float64, cpuOK bool, rate float64, depTime time.Duration) []report.Action {
	want := int(math.Ceil(float64(r.Load.Connections) * float64(depTime) / float64(r.Load.Latency.P50) * depQueue))
	want = max(want, 2*d.Conns)
	if c := r.Load.Connections; c > 0 {
		want = min(want, c)
	}
	spare := cpuOK && cpu < 0.7
	why := "its CPU or workers are busy"
	if dep := depServer(r, d); dep != nil {
		if sh, total := waitShares(r.Samples(dep)); total > 0 && len(sh) > 0 && sh[0].class == app.WaitRunning && 2*sh[0].n >= total {
			spare, why = false, "its threads were mostly on the CPU"
		}
		// Requests waiting unread at the dependency: its workers are all
		// taken, and more connections would only queue there.
		if secs, peak := queuedRequests(r, serverBundle(r), dep.Addr); secs >= 2 {
			spare, why = false, fmt.Sprintf("up to %d requests waited unread in its connections, in %d sampled seconds", peak, secs)
		}
	}
	first := report.Advise(fmt.Sprintf("not a bigger pool: %s has no spare capacity (%s); make it faster or give it more workers first (its own findings, its slow log)", who, why))
	if spare {
		first = biggerPoolFix(fmt.Sprintf(biggerPool+": from %d to about %d connections, "+knobsOf(s)+"; %s has room for more requests at once (the CPU was %.0f%% busy and its threads mostly waited)", d.Conns, want, who, 100*cpu))
	}
	return []report.Action{first, report.Advise("or ask it less: cache its answers, batch or pipeline the round trips each request makes")}
}

// biggerPoolFix is the advice to grow a client's pool, tagged so that
// relate finds it.
func biggerPoolFix(text string) report.Action {
	a := report.Advise(text)
	a.Tag = report.TagBiggerPool
	return a
}

// inFlightItem is Little's law on the load: requests in flight at once,
// against the pool's connections.
func inFlightItem(lr *load.Result, rate float64, conns int) report.Item {
	in := rate * lr.Latency.Mean.Seconds()
	return report.Item{Text: fmt.Sprintf("in flight: %.0f requests/s × %s mean latency ≈ %.0f requests at once (Little's law) for %d connections: the others waited for one, inside the process where the kernel shows no queue", rate, ms(lr.Latency.Mean), in, conns), Source: "load", Window: true}
}

// depServer is the run's server listening at the dependency's address.
func depServer(r *evidence.Run, d *app.Dependency) *app.Server {
	for _, s := range r.Servers {
		if s.Addr == d.Addr || (s.Role == "dependency" && sameAddr(s.Addr, d.Addr)) {
			return s
		}
	}
	return nil
}

// depName is the dependency's address and, when known, its owner.
func depName(d *app.Dependency) string {
	if d.OtherHost {
		return d.Addr + " (on another host: no namespace of this one listens there)"
	}
	if d.Owner == "" {
		return d.Addr
	}
	return d.Addr + " (" + d.Owner + ")"
}

// depRow is one line of the dependency table.
func depRow(d *app.Dependency) string {
	return fmt.Sprintf("%s: %d connections (%d new), each busy %.0f%%, %.0f round trips/s, %s per round trip (%s), %.0f/%.0f segments/s and %s/%s per second out/in",
		depName(d), d.Conns, d.New, 100*d.Busy, d.RoundTripsPerSec, ms(d.RoundTrip), rttText(d), d.SegsOutPerSec, d.SegsInPerSec, report.Bytes(d.BytesOutPerSec), report.Bytes(d.BytesInPerSec))
}

// rttText is the network's share of a round trip: the lowest RTT the
// kernel sampled. The smoothed RTT is no measure of the network where
// ACKs ride on answers (it was 20.5 ms to a backend 170 µs away that
// answers in 20 ms), so it is named for what it is when it is all there
// is.
func rttText(d *app.Dependency) string {
	if d.MinRTT > 0 {
		return "network RTT " + d.MinRTT.Round(time.Microsecond).String()
	}
	return "smoothed RTT " + d.RTT.Round(time.Microsecond).String() + ", answers' time included"
}

func latencyItem(lr *load.Result) report.Item {
	return report.Item{Text: fmt.Sprintf("responses took p50 %s, p99 %s over %d requests at %d connections", ms(lr.Latency.P50), ms(lr.Latency.P99), lr.Requests, lr.Connections), Source: "load", Window: true}
}

func ms(d time.Duration) string { return d.Round(100 * time.Microsecond).String() }

// Thresholds of the dependency rule without a load (check, the agent):
// no client-side latency to compare with, so only the sockets speak.
const (
	// tracedBusy is the pool's busy share from which it is saturated:
	// a request finds every connection taken most of the time, so
	// requests wait for one.
	tracedBusy = 0.85
	// tracedSlow is the time per round trip from which a dependency is
	// slow in itself, whatever the requests that wait for it.
	tracedSlow = 100 * time.Millisecond
	// tracedSlowBusy is the busy share a slow dependency must also have:
	// an occasional slow call on an idle pool is not what the host's
	// requests wait on.
	tracedSlowBusy = 0.25
	// tracedRoundTrips and tracedSamples are the least evidence for a
	// finding: never a handful of requests or of looks.
	tracedRoundTrips = 50
	tracedSamples    = 10
	// tracedMinRoundTrip is the time per round trip below which a busy
	// pool is not judged without a load. A backend that answers at once
	// keeps its pool as busy as the client can send: the round trip is
	// the network's RTT and the client's own turnaround (its CPU, its
	// scheduler), measured 146 µs at 97 % busy under 32 clients on this
	// host, and a request waiting for a connection waits well under a
	// millisecond per request ahead of it. run measures what it costs.
	tracedMinRoundTrip = time.Millisecond
)

// checkTraced reads the dependencies check and the agent traced under
// the host's own traffic (evidence.Traced) and says which of them hold the
// servers' requests: a pool whose connections are busy nearly all the
// time (requests wait for one: the pool caps the rate at connections /
// time per round trip), or a dependency whose round trips are long. b is
// the window's snapshots, for the host's CPU. Rule `dependency`'s
// findings, made without a load.
func checkTraced(t *evidence.Traced, b *evidence.Bundle) []report.Finding {
	if t == nil {
		return nil
	}
	var out []report.Finding
	for _, s := range t.Servers {
		for i := range s.Deps {
			if f, ok := tracedFinding(t, b, s, &s.Deps[i]); ok {
				out = append(out, f)
			}
		}
	}
	return out
}

func tracedFinding(t *evidence.Traced, b *evidence.Bundle, s *app.Server, d *app.Dependency) (report.Finding, bool) {
	if !tracedEnough(d) {
		return report.Finding{}, false
	}
	who := depName(d)
	subject := s.Kind + " " + s.Addr + " → " + d.Addr
	about := report.About{Server: s.Kind, Listen: s.Addr, Remotes: []string{d.Addr}}
	table := report.Item{Text: depRow(d), Source: "sock_diag tcp_info", Window: true}
	traced := report.Item{Text: fmt.Sprintf("its %d connections looked at every %d ms for %.1fs under the host's own traffic (no load): %.0f round trips", d.Conns, t.IntervalMS, d.Seconds, d.RoundTripsPerSec*d.Seconds), Source: "sock_diag tcp_info", Window: true}
	ev := []report.Item{table, traced}
	end := t.Start.Add(time.Duration(t.Seconds * float64(time.Second)))
	cpu, cpuOK := hostBusy(b, t.Start, end)
	if cpuOK {
		ev = append(ev, report.Item{Text: fmt.Sprintf("host CPU %.0f%% busy over the window", 100*cpu), Source: "/proc/stat", Window: true})
	}
	if d.Multiplexed() {
		if d.Busy < tracedBusy {
			return report.Finding{}, false
		}
		return report.Finding{ID: DependencySlow, Severity: report.Warning, Status: report.Active, Subject: subject, About: about,
			Title:    fmt.Sprintf("%s %s waits on %s over %d connections, busy %.0f %% with several requests outstanding on each: the time per request and the pool's capacity cannot be measured from its connections", s.Kind, s.Addr, who, d.Conns, 100*d.Busy),
			Evidence: append(ev, report.Item{Text: fmt.Sprintf("in %.0f%% of the busy samples another request went out before the previous answer came (pipelined or multiplexed): round trips and pool size are not estimated", 100*d.Pipelined), Source: "sock_diag tcp_info", Window: true}),
			Actions:  notes("measure the dependency's own latency (its slow log, its metrics, a client-side histogram): on a multiplexed connection only the client knows which answer belongs to which request")}, true
	}
	switch {
	case d.Busy >= tracedBusy && d.RoundTrip >= tracedMinRoundTrip:
		maxRate := d.MaxRoundTripsPerSec()
		first := biggerPoolFix(fmt.Sprintf(biggerPool+", about twice the %d connections, "+poolKnobs+", when %s has room for more requests at once (its CPU and its workers not busy); otherwise make it faster first (its own findings, its slow log)", d.Conns, who))
		if cpuOK && cpu >= 0.7 {
			// Still advice on the pool's size: a dependency known to be
			// at capacity replaces it too (CauseAtCapacity).
			first = biggerPoolFix(fmt.Sprintf("not a bigger pool yet: the host's CPU is %.0f%% busy, %s may have no spare capacity; make it faster first (its own findings, its slow log)", 100*cpu, who))
		}
		fix := append([]report.Action{first}, notes("or ask it less: cache its answers, batch or pipeline the round trips each request makes",
			"to measure what the waiting costs the server's requests: netdoctor run against the server")...)
		return report.Finding{ID: DependencyPoolSaturated, Severity: report.Critical, Status: report.Active, Subject: subject, About: about,
			Title: fmt.Sprintf("%s %s waits on %s: %d connections, each busy ~%.0f %%, ~%s per round trip → at most ~%.0f req/s through this pool; requests wait for a connection",
				s.Kind, s.Addr, who, d.Conns, 100*d.Busy, ms(d.RoundTrip), maxRate),
			Evidence: ev, Actions: fix}, true
	case d.RoundTrip >= tracedSlow && d.Busy >= tracedSlowBusy:
		return report.Finding{ID: DependencySlow, Severity: report.Warning, Status: report.Active, Subject: subject, About: about,
			Title: fmt.Sprintf("%s %s waits on %s: ~%s per round trip, %.0f round trips/s, its %d connections busy ~%.0f %%",
				s.Kind, s.Addr, who, ms(d.RoundTrip), d.RoundTripsPerSec, d.Conns, 100*d.Busy),
			Evidence: ev, Actions: notes(
				fmt.Sprintf("the time is %s's: diagnose it (netdoctor check where it runs, its slow log and metrics)", who),
				"or ask it less: cache its answers, batch or pipeline the round trips a request makes")}, true
	}
	return report.Finding{}, false
}

// tracedEnough says whether a dependency was seen long and busy enough
// to be judged: a connection that carried a handful of requests, or
// was looked at a few times, says nothing about a pool.
func tracedEnough(d *app.Dependency) bool {
	return d.Untimed == "" && d.Conns > 0 && d.Seconds >= 1 && d.Samples >= tracedSamples && d.RoundTripsPerSec*d.Seconds >= tracedRoundTrips
}
