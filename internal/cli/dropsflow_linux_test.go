package cli

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/netdoctor/netdoctor/internal/lab"
	"github.com/netdoctor/netdoctor/internal/lab/flowlab"
	"github.com/netdoctor/netdoctor/internal/netns"
	"github.com/netdoctor/netdoctor/internal/report"
)

// The acceptance of issue 36: every drop tied to its flow, across
// namespaces and NAT, and a path cause only where the drop monitor's
// ledger agrees. Each test builds one of the topologies
// (internal/lab/flowlab) with real traffic, on two kinds of server, and
// asserts what netdoctor says about the service, and what it does not.

// checkJSON runs `netdoctor check` on namespace ns for window and
// returns its findings (and logs them when ND_SHOW is set).
func checkJSON(t *testing.T, ns string, window time.Duration) []report.Finding {
	t.Helper()
	code, stdout, stderr := runCLI(t, "check", "--netns", ns, "--window", window.String(), "--no-dns", "--json", "-")
	var rep struct {
		Findings []report.Finding `json:"findings"`
	}
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("exit %d: %v\n%s\n%s", code, err, stdout, stderr)
	}
	if os.Getenv("ND_SHOW") != "" {
		showRun(t, &runJSON{Verdict: "check --netns " + ns, Findings: rep.Findings})
	}
	return rep.Findings
}

// activeIn is the first active finding of id in fs, or nil.
func activeIn(fs []report.Finding, id report.FindingID) *report.Finding {
	for i := range fs {
		if fs[i].ID == id && fs[i].Status == report.Active {
			return &fs[i]
		}
	}
	return nil
}

// noPathClaim fails the test on a finding that blames the path or the
// kernel's drops elsewhere, unless it is the consequence of cause.
func noPathClaim(t *testing.T, fs []report.Finding, cause report.FindingID) {
	t.Helper()
	for _, f := range fs {
		switch f.ID {
		case "path-mtu-blackhole", "packet-drops", "firewall-drop", "bandwidth-saturated":
			t.Errorf("a path or drop finding: %s", dump(&f))
		case "packet-loss":
			if f.Status == report.Active && (cause == "" || f.CausedBy != cause) {
				t.Errorf("retransmissions reported as a loss of their own: %s", dump(&f))
			}
		}
	}
}

// startNginx starts nginx in the lab's server namespace on addr, its
// page bodyBytes long (0: nginx's small default).
func startNginx(t *testing.T, e *lab.Env, addr string, bodyBytes int) {
	t.Helper()
	ctx := context.Background()
	p, err := e.StartNginx(ctx, &lab.Nginx{Listen: addr, BodyBytes: bodyBytes, Workers: 1})
	labMust(t, err)
	labMust(t, e.WaitListening(ctx, p, e.ServerNS, addr))
}

// testRunDNATOverflowRetransmits: issue 36's accept-queue overflow behind
// NAT. The client connects to a virtual IP that a router namespace DNATs
// to the server's :8080, whose accept queue (backlog 8) overflows under
// 400 connections. The server drops packets addressed to itself; the
// client retransmits to the VIP; the ledger (the router's conntrack)
// says they are the same connections: the overflow explains the
// clients' retransmissions, which are never a packet loss of their own.
// A Python server, then a Go one (net/http behind a slow accept loop).
func testRunDNATOverflowRetransmits(t *testing.T) {
	for _, kind := range []string{"python", "go"} {
		t.Run(kind, func(t *testing.T) {
			mon := monitorHere(t)
			d := flowlab.NewDNAT(t)
			switch kind {
			case "python":
				d.StartSlowServer(t, 8, 5*time.Millisecond)
			case "go":
				startServe(t, d.ServerNS.Name, "ND_SERVER=slow", "ND_ADDR="+d.Server)
			}
			r, text := runRemote(t, d.ClientNS.Name, "-c 400 -t 1 -d 2s --no-keepalive --baseline 1s --tail 1s --server-netns "+d.ServerNS.Name+" http://"+d.VIP+"/")
			showRun(t, r)
			q := findActive(r, "accept-queue-overflow")
			if q == nil || q.Subject != d.Server || q.Side != report.Server {
				t.Fatalf("no accept-queue-overflow on %s; findings %+v\n%s", d.Server, r.Findings, text)
			}
			noPathClaim(t, r.Findings, "accept-queue-overflow")
			loss := findActive(r, "packet-loss")
			if loss == nil {
				t.Logf("no retransmissions enough for packet-loss to weigh (ok: none of its own)")
				return
			}
			if !strings.Contains(loss.Title, "what the full queue of "+d.Server+" dropped, not a lossy path") || loss.CauseSubject != d.Server {
				t.Errorf("the clients' retransmissions not tied to the queue behind the router: %s", dump(loss))
			}
			if mon && !evidenceHas(loss, "followed through NAT: the client opened ") && !evidenceHas(loss, "TcpExtListenDrops") {
				t.Errorf("neither the ledger's flows through the router nor the listener's drops: %s", dump(loss))
			}
		})
	}
}

// TestRunNeighbourSamePort: issue 36's unrelated namespace. A healthy
// service on port 8080, and beside it on the same host another service
// on 8080 whose server loses its route while streaming to its clients:
// every segment it sends is dropped in its namespace (IP_OUTNOROUTES,
// its socket's port 8080). Nothing is reported about the healthy
// service: not in a run, not in check. A Go server and nginx, side by
// side: each case's neighbour is the other's too.
func TestRunNeighbourSamePort(t *testing.T) {
	var both []subtest
	for _, kind := range []string{"go", "nginx"} {
		both = append(both, subtest{kind, func(t *testing.T) {
			mon := monitorHere(t)
			e := newLab(t)
			addr := e.ServerIP + ":8080"
			switch kind {
			case "go":
				startServe(t, e.ServerNS.Name, "ND_SERVER=fast", "ND_ADDR="+addr)
			case "nginx":
				startNginx(t, e, addr, 0)
			}
			nb := flowlab.NewNeighbour(t, e, 8080)
			nb.Start(t, 16, 30*time.Second)
			nb.LoseRoute(t)
			if mon {
				// The neighbour's drops happen meanwhile: the test is the
				// scenario only if they do. Looked at first, while its
				// retransmissions are still frequent (a timeout's backoff
				// spaces them 3, 6, 12 s apart: a 2 s look after the run
				// missed them once in CI); the run's window still holds
				// those at 3 and 6 s.
				fs := checkJSON(t, nb.Server.Name, 2*time.Second)
				if f := activeIn(fs, "packet-drops"); f == nil || f.Subject != "IP_OUTNOROUTES" {
					t.Errorf("the neighbour's own namespace does not show its drops: %+v", fs)
				}
			}
			r, text := runRemote(t, e.ClientNS.Name, "-c 20 -t 1 -d 2s --no-keepalive --baseline 1s --tail 1s --server-netns "+e.ServerNS.Name+" http://"+addr+"/")
			showRun(t, r)
			if r.Load == nil || r.Load.Requests == 0 {
				t.Fatalf("no requests\n%s", text)
			}
			noDropFinding(t, r.Findings)
			noPathClaim(t, r.Findings, "")
			noDropFinding(t, checkJSON(t, e.ServerNS.Name, time.Second))
		}})
	}
	// Side by side: each is the other's neighbour on port 8080 too.
	runTogether(t, 2, both)
}

// TestCheckSlowReceiversNamed: issue 36's slow receivers. 16 clients with
// 8 KiB receive buffers read 8 KiB every 500 ms from a streaming server
// (Python) or a large file (nginx): the server retransmits full-size
// segments, which the receivers' sockets drop as data they already had.
// check on the server names the receivers, and claims neither a path MTU
// black hole nor a lossy path.
func TestCheckSlowReceiversNamed(t *testing.T) {
	t.Parallel() // beside the package's other parallel tests: they measure nothing
	if !monitorHere(t) {
		t.Skip("the drop monitor cannot run here: the receivers' drops are its ledger's")
	}
	for _, kind := range []string{"python", "nginx"} {
		t.Run(kind, func(t *testing.T) {
			e := newLab(t)
			addr := e.ServerIP + ":8080"
			readers := flowlab.Readers{Conns: 16, RcvBuf: 8192, Read: 8192, Every: 500 * time.Millisecond, For: 8 * time.Second}
			switch kind {
			case "python":
				flowlab.StartStream(t, e, e.ServerNS, addr)
			case "nginx":
				startNginx(t, e, addr, 8<<20)
				readers.Get = "/"
			}
			flowlab.StartSlowReaders(t, e, e.ClientNS, addr, readers)
			fs := checkJSON(t, e.ServerNS.Name, 5*time.Second)
			noPathClaim(t, fs, "receiver-window-limited")
			f := activeIn(fs, "receiver-window-limited")
			if f == nil {
				t.Fatalf("the slow receivers are not named: %+v", fs)
			}
			// One finding holds both accountings: the senders' time
			// (subject: the listener) and the ledger's segments (the
			// receiver named in its evidence).
			if !evidenceHas(f, "receiver "+e.ClientIP) || !evidenceHas(f, "reached their receivers") || !evidenceHas(f, "TCP_OLD_DATA") || f.About.Listen != addr {
				t.Errorf("the receivers: %s", dump(f))
			}
		})
	}
}

// TestCheckBridgeMTUMismatch: issue 36's layer-2 MTU mismatch. The server
// and its client on jumbo frames (9000), segmenting everything
// themselves (gso_max_segs 1: a virtual device passes a GSO packet of
// any size), across a bridge whose port to the client is 1500; no
// router, no ICMP. Small packets pass, large answers never arrive. check
// on the server names the mismatch with both MTUs and the port to
// change, not a path MTU black hole nor a NIC's ring. A Python streaming
// server, then nginx and a large file.
func TestCheckBridgeMTUMismatch(t *testing.T) {
	t.Parallel() // beside the package's other parallel tests: they measure nothing
	if !monitorHere(t) {
		t.Skip("the drop monitor cannot run here: the frames' sizes and places are its ledger's")
	}
	for _, kind := range []string{"python", "nginx"} {
		t.Run(kind, func(t *testing.T) {
			b := flowlab.NewBridge(t, 9000, 1500, 1)
			addr := b.ServerIP + ":8080"
			switch kind {
			case "python":
				flowlab.StartStream(t, b.Env, b.ServerNS, addr)
			case "nginx":
				startNginx(t, b.Env, addr, 1<<20)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := fetchUntil(ctx, b.ClientNS, addr)
			fs := checkJSON(t, b.ServerNS.Name, 3*time.Second)
			cancel()
			<-done
			f := activeIn(fs, "mtu-mismatch")
			if f == nil {
				t.Fatalf("no mtu-mismatch: %+v", fs)
			}
			if f.Subject != b.ClientPort || !strings.Contains(f.Title, "(MTU 1500)") || !strings.Contains(f.Title, "9000") {
				t.Errorf("the mismatch: %s", dump(f))
			}
			if !fixHas(f, "ip netns exec "+b.BridgeNS.Name+" ip link set dev "+b.ClientPort+" mtu 9000") ||
				!fixHas(f, "ip netns exec "+b.ServerNS.Name+" ip link set dev "+b.ServerDev+" mtu 1500") {
				t.Errorf("the side to change: %q", f.Fix)
			}
			for _, x := range fs {
				if x.ID == "path-mtu-blackhole" || x.ID == "packet-drops" {
					t.Errorf("the mismatch's drops named again: %s", dump(&x))
				}
				if x.ID == "nic-drops" && fixHas(&x, "ethtool -G") {
					t.Errorf("ring advice for a virtual device: %s", dump(&x))
				}
			}
		})
	}
}

// fetchUntil fetches from ns, one connection after the other, until ctx
// ends: each asks for the answer and waits a second for it.
func fetchUntil(ctx context.Context, ns netns.NS, addr string) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			flowlab.Fetch(ns, addr, time.Second)
		}
	}()
	return done
}
