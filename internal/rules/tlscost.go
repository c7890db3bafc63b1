package rules

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/netdoctor/netdoctor/internal/app"
	"github.com/netdoctor/netdoctor/internal/cpuprof"
	"github.com/netdoctor/netdoctor/internal/evidence"
	"github.com/netdoctor/netdoctor/internal/report"
)

// TLSHandshakes: the server the load connects to spends most of its CPU
// in TLS (libssl/libcrypto) while the load opens a new connection for
// most requests: the work is handshakes.
const TLSHandshakes report.FindingID = "tls-handshakes"

var _ = define(Class{ID: TLSHandshakes,
	Meaning:    "the server spends most of its CPU on TLS handshakes: its clients open a new connection for most requests and each costs a full key exchange and signature (RSA keys cost most)",
	Active:     "in a run's on-CPU profile, ≥ 30 % of the front server's samples in TLS code (libssl/libcrypto by their dynamic symbols or the library itself, Go's crypto/tls) while the load opened a new connection for ≥ half of its ≥ 20 requests; in check's, ≥ 30 % of a listening server's while its listener accepted ≥ 20 connections whose bytes account for at most half that TLS CPU (warning)",
	LatentWhen: "—",
	Seed:       "issue 38 (one nginx worker doing RSA-4096 handshakes, a new connection per request)",
	ReportedBy: "`run`, `check`",
	Doc: `Rule ´tlscost´ (´tlscost.go´), in ´netdoctor run´ with its on-CPU profile. A frame in a shared
library is named from the library's symbols (.symtab, else .dynsym); OpenSSL's hottest code (its
assembler bignum routines) is local and stripped, so the frame is only ´[libcrypto.so.3]´: the library
then says the role (´cpuprof.ModuleMeaning´: libcrypto, libssl, GnuTLS and nettle are TLS; zlib, brotli
and zstd compression; PCRE regular expressions), beside what the functions' names say (´SSL_´, ´EVP_´,
´crypto/tls.´). **Active, warning** when at least 30 % of the samples of the server the load connects to
have TLS code on the stack and the load opened a new connection for at least half of its at least 20
requests: that CPU is the handshakes. Title: ´nginx on 10.0.0.1:443 spends 93% of its CPU on TLS
handshakes: 140 new connections/s, 6.6 ms of CPU each´: the rate is the load's connections opened over
its duration, the cost the server's TLS CPU in the profile over those connections (those opened while the profile ran). Evidence: the TLS
share and its functions or libraries, the load's connections and requests, and, when worker-saturated
names the same server, that its saturated workers spend their CPU on these handshakes (the two agree:
more workers is one fix, fewer or cheaper handshakes the other). Fix: keep connections open (HTTP
keep-alive in the clients, nginx ´keepalive_timeout´/´keepalive_requests´), resume sessions (session
tickets or a shared session cache: nginx ´ssl_session_cache shared:SSL:10m´, ´ssl_session_tickets on´),
an ECDSA P-256 certificate instead of RSA (a signature costs a fraction of RSA-2048's, far less than
RSA-4096's), and as many workers as CPUs. With keep-alive the same server's TLS work is encryption of
few handshakes: not named. Tested (TestTLSHandshakes; TestRunSaturatedWorker: one nginx worker, RSA
4096, ´--no-keepalive´: named with its rate and cost, about 5 ms each, beside worker-saturated when the host
has a CPU to spare; TestRunTLSHandshakesGo, the second kind of server: a Go crypto/tls server with
RSA-2048 under GOMAXPROCS=1, named from Go's functions, about 2 ms each; TestRunTLSKeepAlive: the
one-worker RSA-4096 nginx under a keep-alive load: not named).

In ´netdoctor check´, without a load, the servers behind the namespace's listeners are profiled during
the window (´--profile-hz´, as run's) and their profile is shown in the report. There the new
connections are each listener's own, from the kernel's per-connection accounting (the connections
looked at or whose end the kernel notified, by listening port: not the namespace's TcpPassiveOpens,
which other listeners share). The TLS work is handshakes where the bytes those connections carried
cannot account for it: encrypted at 100 MB/s, the slowest a CPU does it, they take at most half the
TLS CPU. Title as run's, the rate being the listener's accepted connections over the window; its
evidence says the bytes and the bound (TestCheckTLSHandshakes: the one-worker RSA-4096 nginx under
another client's new connection per request, named by check; under keep-alive, not).`,
})

var _ = register(Rule{Name: "tlscost", Order: 228, Scope: PerRun, IDs: []report.FindingID{TLSHandshakes},
	Checks: "the TLS work in the servers' profile against the load's new connections", Check: checkTLSHandshakes,
	Profiled: true})

// Thresholds of handshake-bound work: the TLS share of the server's
// samples, and the load's new connections per request from which the
// TLS work is the handshakes, not the encryption of long connections.
const (
	tlsMinShare       = 0.3
	tlsMinConnsPerReq = 0.5
	tlsMinConnsOpened = 20
)

func checkTLSHandshakes(in *Input) []report.Finding {
	if in.Run == nil {
		return hostTLSHandshakes(in)
	}
	r := in.Run
	if r == nil || r.Load == nil || r.Profile == nil || r.Load.Requests < minSplitRequests {
		return nil
	}
	lr := r.Load
	opened := lr.ConnectionsOpened
	if opened < tlsMinConnsOpened || float64(opened) < tlsMinConnsPerReq*float64(lr.Requests) || lr.Elapsed <= 0 {
		return nil
	}
	sum, err := cpuprof.Summarize(r.Profile)
	if err != nil || sum == nil {
		return nil
	}
	var out []report.Finding
	for _, ss := range sum.Servers {
		s := frontServer(r, ss.Server)
		if s == nil || ss.CPU <= 0 {
			continue
		}
		for _, act := range ss.Activities {
			if act.Kind == cpuprof.TLS && act.Share >= tlsMinShare {
				out = append(out, tlsHandshakes(r, s, ss, act))
			}
		}
	}
	return out
}

// frontServer is the server the load connects to whose profile label
// is name ("nginx 10.0.0.1:443"): only its handshakes are the load's
// new connections.
func frontServer(r *evidence.Run, name string) *app.Server {
	for _, s := range r.Servers {
		if s.Kind+" "+s.Addr == name && s.Role == "front" {
			return s
		}
	}
	return nil
}

func tlsHandshakes(r *evidence.Run, s *app.Server, ss cpuprof.ServerSummary, act cpuprof.Activity) report.Finding {
	lr := r.Load
	rate := float64(lr.ConnectionsOpened) / lr.Elapsed.Seconds()
	tlsCPU := time.Duration(act.Share * float64(ss.CPU))
	// The profile's TLS CPU is that of the connections opened while it
	// ran: all of the load's when it spans the load, as run takes it,
	// else the share of the load it overlapped.
	conns := float64(lr.ConnectionsOpened)
	if p := r.Profile; !p.Start.IsZero() && !r.LoadStart.IsZero() && r.LoadEnd.After(r.LoadStart) {
		from, to := later(p.Start, r.LoadStart), earlier(p.Start.Add(p.Duration), r.LoadEnd)
		conns *= min(1, max(0, float64(to.Sub(from))/float64(r.LoadEnd.Sub(r.LoadStart))))
	}
	if conns < 1 {
		conns = 1
	}
	each := time.Duration(float64(tlsCPU) / conns)
	ev := []report.Item{
		{Text: fmt.Sprintf("the on-CPU profile: %.0f%% of %s's %s of CPU in TLS code (%s)", 100*act.Share, s.Kind, report.Dur(ss.CPU), strings.Join(act.Funcs, ", ")), Source: "profile", Window: true},
		{Text: fmt.Sprintf("the load opened %d connections for %d requests over %s: %.0f new connections/s, each a full handshake", lr.ConnectionsOpened, lr.Requests, report.Dur(lr.Elapsed), rate), Source: "load", Window: true},
	}
	w := workerLoadOf(r, s)
	n, _ := parallelism(s, w)
	if saturated(w, n) {
		// worker-saturated names the same server: the two agree, the
		// workers are too few for the handshakes they do.
		what := fmt.Sprintf("its %d workers are", n)
		if n == 1 {
			what = "its one worker is"
		}
		ev = append(ev, report.Item{Text: fmt.Sprintf("%s saturated while the host's CPUs idle %.1f of %d: these handshakes are what it spends its CPU on", what, w.idleCPUs, w.cpus), Source: "schedstat", Window: true})
	}
	return report.Finding{ID: TLSHandshakes, Severity: report.Warning, Status: report.Active, Side: r.ServerSide(),
		Subject: s.Kind + " " + s.Addr, About: report.About{Server: s.Kind, Listen: s.Addr},
		Title: fmt.Sprintf("%s on %s spends %.0f%% of its CPU on TLS handshakes: %.0f new connections/s, %s of CPU each",
			s.Kind, s.Addr, 100*act.Share, rate, msEach(each)),
		Evidence: ev, Actions: tlsFix(s)}
}

// tlsFix is what makes handshakes fewer or cheaper, and spreads them.
func tlsFix(s *app.Server) []report.Action {
	fix := notes(
		"keep connections open: HTTP keep-alive in the clients (nginx `keepalive_timeout`, `keepalive_requests`), so a handshake serves many requests",
		"resume sessions: TLS session tickets or a shared session cache (nginx `ssl_session_cache shared:SSL:10m;` and `ssl_session_tickets on;`): a resumed handshake skips the key exchange and signature",
		"use an ECDSA P-256 certificate instead of RSA: its signature costs a fraction of an RSA key's (RSA-4096 is several times RSA-2048)",
	)
	if s.Nginx != nil {
		fix = append(fix, notes(fmt.Sprintf("run a worker per CPU (`worker_processes auto;` at %s) so handshakes use every CPU", orDefault(s.Nginx.WorkerProcesses.Source)))...)
	} else {
		fix = append(fix, notes("run as many workers or threads as CPUs, so handshakes use every CPU")...)
	}
	return fix
}

// msEach is a per-handshake CPU time in milliseconds, as the title
// says it.
func msEach(d time.Duration) string {
	return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond))
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func earlier(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// tlsBulkRate is a low bound of how fast one CPU encrypts and decrypts
// a TLS stream (AES-GCM runs at gigabytes a second with AES-NI, ChaCha20
// near one; software AES near 100 MB/s): at most bytes / tlsBulkRate of
// a server's TLS CPU is its connections' encryption, the rest their
// handshakes.
const tlsBulkRate = 100e6

// hostTLSHandshakes is the same judgement in check, without a load: the
// servers' TLS work in the window's profile against the new
// connections each listener accepted meanwhile, from the kernel's
// per-connection accounting (evidence.Senders: every connection looked
// at or whose end the kernel notified, by listening port). The TLS CPU
// the listener's bytes cannot account for, even encrypted at the slowest
// rate, is handshakes.
func hostTLSHandshakes(in *Input) []report.Finding {
	p, b := in.Profile, in.Bundle
	if p == nil || p.Profile == nil || b == nil || len(b.Snapshots) < 2 {
		return nil
	}
	window := b.Snapshots[len(b.Snapshots)-1].Time.Sub(b.Snapshots[0].Time)
	sum, err := cpuprof.Summarize(p.Profile)
	if err != nil || sum == nil || window <= 0 {
		return nil
	}
	listeners, _ := b.SenderDeltas()
	var out []report.Finding
	for _, ss := range sum.Servers {
		s := profiledServer(p, ss.Server)
		if s == nil || s.Port() == 0 || ss.CPU <= 0 {
			continue
		}
		i := slices.IndexFunc(listeners, func(g evidence.SenderGroup) bool { return g.Port == s.Port() })
		if i < 0 {
			continue
		}
		g := listeners[i]
		for _, act := range ss.Activities {
			if act.Kind != cpuprof.TLS || act.Share < tlsMinShare || g.Conns < tlsMinConnsOpened {
				continue
			}
			tlsCPU := time.Duration(act.Share * float64(ss.CPU))
			bytes := g.BytesSent + g.BytesReceived
			bulk := time.Duration(float64(bytes) / tlsBulkRate * float64(time.Second))
			if 2*bulk > tlsCPU {
				continue // the TLS work may be the streams' encryption
			}
			out = append(out, hostHandshakes(s, ss, act, g, window, tlsCPU, bulk))
		}
	}
	return out
}

// profiledServer is the server of check's profile whose label is name
// ("nginx 0.0.0.0:443").
func profiledServer(p *evidence.HostProfile, name string) *app.Server {
	for _, s := range p.Servers {
		if s.Kind+" "+s.Addr == name {
			return s
		}
	}
	return nil
}

func hostHandshakes(s *app.Server, ss cpuprof.ServerSummary, act cpuprof.Activity, g evidence.SenderGroup, window, tlsCPU, bulk time.Duration) report.Finding {
	rate := float64(g.Conns) / window.Seconds()
	// The connections the profile saw opened are the window's: both
	// span it.
	each := time.Duration(float64(tlsCPU) / float64(g.Conns))
	ev := []report.Item{
		{Text: fmt.Sprintf("the on-CPU profile: %.0f%% of %s's %s of CPU in TLS code (%s)", 100*act.Share, s.Kind, report.Dur(ss.CPU), strings.Join(act.Funcs, ", ")), Source: "profile", Window: true},
		{Text: fmt.Sprintf("%s accepted %d connections over %s: %.0f new connections/s; they carried %s, whose encryption takes %s of CPU at most (at %s/s): the rest of the TLS CPU is their handshakes",
			s.Addr, g.Conns, report.Dur(window), rate, report.Bytes(float64(g.BytesSent+g.BytesReceived)), report.Dur(bulk), report.Bytes(tlsBulkRate)), Source: "sock_diag", Window: true},
	}
	return report.Finding{ID: TLSHandshakes, Severity: report.Warning, Status: report.Active,
		Subject: s.Kind + " " + s.Addr, About: report.About{Server: s.Kind, Listen: s.Addr},
		Title: fmt.Sprintf("%s on %s spends %.0f%% of its CPU on TLS handshakes: %.0f new connections/s, %s of CPU each",
			s.Kind, s.Addr, 100*act.Share, rate, msEach(each)),
		Evidence: ev, Actions: tlsFix(s)}
}
