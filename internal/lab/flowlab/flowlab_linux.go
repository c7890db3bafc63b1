//go:build linux

// Package flowlab builds the topologies of issue 36 for tests, with real
// traffic: a server behind a router namespace that DNATs a virtual IP;
// another service of the same host on the same port number, losing its
// network; slow receivers of a streaming server; endpoints on jumbo
// frames across a bridge port of 1500. Each builds on a lab (labtest.New:
// skipped when not root, everything removed when the test ends, `lab
// clean` after a kill) and returns what a test asserts on: its
// namespaces, addresses and devices. The drop monitor's tests assert on
// the evidence; the rules' tests can run netdoctor against the same.
package flowlab

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/netdoctor/netdoctor/internal/lab"
	"github.com/netdoctor/netdoctor/internal/lab/labtest"
	"github.com/netdoctor/netdoctor/internal/netns"
)

// The services the topologies run: Python scripts of the standard
// library, run by Debian's python3 in their namespaces.
var (
	//go:embed scripts/slowaccept.py
	slowAcceptPy []byte
	//go:embed scripts/stream.py
	streamPy []byte
	//go:embed scripts/slowread.py
	slowReadPy []byte
)

var labs atomic.Int64

// New makes a lab, a client and a server on one veth, with a name of its
// own: its namespaces are nd-ID-srv, nd-ID-cli and nd-ID-ROLE for those
// added.
func New(t testing.TB) *lab.Env { return newLab(t) }

func newLab(t testing.TB) *lab.Env {
	t.Helper()
	return labtest.New(t, fmt.Sprintf("f%d-%d", os.Getpid()%100000, labs.Add(1)))
}

// octet is a number of the lab's own (its server's subnet's), for the
// subnets the topologies add.
func octet(e *lab.Env) int {
	a := netip.MustParseAddr(e.ServerIP).As4()
	return int(a[2])
}

// must fails the test on an error, and skips it for a missing tool.
func must(t testing.TB, err error) {
	t.Helper()
	labtest.Must(t, err)
}

// DNAT is a client reaching a server through a router namespace that
// maps a virtual IP to it: client → router (DNAT VIP:80 → Server) →
// server. The client's connections are to VIP; the server's packets are
// addressed to Server; only the router's conntrack table knows both.
type DNAT struct {
	*lab.Env
	Router netns.NS
	// VIP is the address the client connects to, Server the one the
	// router maps it to, ClientIP the client's.
	VIP, Server string
	ClientIP    string
}

// NewDNAT builds the topology: the lab's client and server, no longer
// joined directly, each on a veth to the router, which forwards and
// DNATs VIP (10.95.N.80:80) to the server's :8080 (nftables, in the
// router's namespace only).
func NewDNAT(t testing.TB) *DNAT {
	t.Helper()
	e := newLab(t)
	n := octet(e)
	must(t, e.Unlink())
	router, err := e.AddNS("rtr")
	must(t, err)
	d := &DNAT{Env: e, Router: router,
		VIP: fmt.Sprintf("10.95.%d.80:80", n), Server: fmt.Sprintf("10.97.%d.2:8080", n), ClientIP: fmt.Sprintf("10.96.%d.2", n)}
	must(t, e.AddVeth(lab.End{NS: e.ClientNS, Dev: "ndc-" + suffix(e), Addr: d.ClientIP + "/24"},
		lab.End{NS: router, Dev: "ndrc-" + suffix(e), Addr: fmt.Sprintf("10.96.%d.1/24", n)}))
	must(t, e.AddVeth(lab.End{NS: router, Dev: "ndrs-" + suffix(e), Addr: fmt.Sprintf("10.97.%d.1/24", n)},
		lab.End{NS: e.ServerNS, Dev: "nds-" + suffix(e), Addr: fmt.Sprintf("10.97.%d.2/24", n)}))
	must(t, e.AddRoute(e.ClientNS, "default", fmt.Sprintf("10.96.%d.1", n)))
	must(t, e.AddRoute(e.ServerNS, "default", fmt.Sprintf("10.97.%d.1", n)))
	must(t, e.Sysctl(router, "net.ipv4.ip_forward", "1"))
	vip, _ := netip.ParseAddrPort(d.VIP)
	srv, _ := netip.ParseAddrPort(d.Server)
	nft(t, e, router, fmt.Sprintf(`table ip nd_dnat {
	chain prerouting {
		type nat hook prerouting priority dstnat; policy accept;
		ip daddr %s tcp dport %d dnat to %s
	}
}
`, vip.Addr(), vip.Port(), srv))
	return d
}

// suffix keeps the devices' names within IFNAMSIZ: the lab's name's end.
func suffix(e *lab.Env) string {
	s := e.Name
	if len(s) > 9 {
		s = s[len(s)-9:]
	}
	return s
}

// nft loads a ruleset in namespace ns; the namespace takes it with it.
func nft(t testing.TB, e *lab.Env, ns netns.NS, ruleset string) {
	t.Helper()
	path := filepath.Join(e.Dir, fmt.Sprintf("nft-%d.conf", time.Now().UnixNano()))
	must(t, os.WriteFile(path, []byte(ruleset), 0o600))
	must(t, e.Exec(ns, "nft", "-f", path))
}

// StartSlowServer starts the server: an HTTP service on Server whose
// listen backlog is backlog and which accepts one connection every
// every.
func (d *DNAT) StartSlowServer(t testing.TB, backlog int, every time.Duration) *lab.Proc {
	t.Helper()
	return StartSlowAccept(t, d.Env, d.ServerNS, d.Server, backlog, every)
}

// StartSlowAccept starts slowaccept.py in ns on addr.
func StartSlowAccept(t testing.TB, e *lab.Env, ns netns.NS, addr string, backlog int, every time.Duration) *lab.Proc {
	t.Helper()
	p, err := e.StartPython(context.Background(), ns, "slowaccept-"+strconv.Itoa(int(labs.Add(1))), slowAcceptPy, addr,
		"--addr", addr, "--backlog", strconv.Itoa(backlog), "--every", fmt.Sprint(every.Seconds()))
	must(t, err)
	return p
}

// Load is what Connections saw.
type Load struct {
	OK, Failed int
	// Locals are the client ends of the connections it opened.
	Locals map[string]bool
}

// Connections opens connections from namespace ns to addr for d, from
// workers goroutines each opening the next when the last ended: one
// HTTP/1.0 request on each, its answer read to the end. Each connection
// is bounded by timeout.
func Connections(ns netns.NS, addr string, workers int, d, timeout time.Duration) Load {
	var mu sync.Mutex
	l := Load{Locals: map[string]bool{}}
	until := time.Now().Add(d)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(until) {
				local, err := request(ns, addr, timeout)
				mu.Lock()
				if local != "" {
					l.Locals[local] = true
				}
				if err != nil {
					l.Failed++
				} else {
					l.OK++
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return l
}

// request makes one request on a connection of its own.
func request(ns netns.NS, addr string, timeout time.Duration) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	c, err := ns.Dial(ctx, "tcp", addr)
	if err != nil {
		return "", err
	}
	defer c.Close()
	local := c.LocalAddr().String()
	c.SetDeadline(time.Now().Add(timeout))
	if _, err := io.WriteString(c, "GET / HTTP/1.0\r\nHost: lab\r\n\r\n"); err != nil {
		return local, err
	}
	b, err := io.ReadAll(c)
	if err != nil {
		return local, err
	}
	if len(b) == 0 {
		return local, errors.New("no answer")
	}
	return local, nil
}

// Neighbour is a second service on the host, in two namespaces of its
// own, on the same port number as the lab's: its server streams into
// its client's connections until the server's namespace loses its route
// back (LoseRoute), as a service being torn down does, after which
// every segment it sends is dropped there (IP_OUTNOROUTES).
type Neighbour struct {
	Client, Server netns.NS
	// Addr is its server's address, ClientIP its client's; Subnet is
	// theirs.
	Addr, ClientIP, Subnet string
	env                    *lab.Env
}

// NewNeighbour builds the neighbour beside lab e, its server on port.
func NewNeighbour(t testing.TB, e *lab.Env, port int) *Neighbour {
	t.Helper()
	n := octet(e)
	cli, err := e.AddNS("ncli")
	must(t, err)
	srv, err := e.AddNS("nsrv")
	must(t, err)
	nb := &Neighbour{Client: cli, Server: srv, Addr: fmt.Sprintf("10.94.%d.1:%d", n, port), ClientIP: fmt.Sprintf("10.94.%d.2", n),
		Subnet: fmt.Sprintf("10.94.%d.0/24", n), env: e}
	must(t, e.AddVeth(lab.End{NS: srv, Dev: "nbs-" + suffix(e), Addr: fmt.Sprintf("10.94.%d.1/24", n)},
		lab.End{NS: cli, Dev: "nbc-" + suffix(e), Addr: nb.ClientIP + "/24"}))
	// Its connections are orphaned when the lab kills its processes,
	// and go on retrying (for minutes, keeping the deleted namespace
	// alive in the kernel): once is enough here.
	for _, ns := range []netns.NS{cli, srv} {
		must(t, e.Sysctl(ns, "net.ipv4.tcp_orphan_retries", "1"))
	}
	// Once its route is gone its server retransmits at most every
	// second (tcp_rto_max_ms, the least it takes), not after a backoff
	// that soon leaves minutes between drops: a namespace that drops
	// packets on the port all along, as on a container host.
	must(t, e.Sysctl(srv, "net.ipv4.tcp_rto_max_ms", "1000"))
	return nb
}

// Start starts the neighbour's streaming server and conns clients
// reading what it sends for d, and waits until they are connected.
func (nb *Neighbour) Start(t testing.TB, conns int, d time.Duration) {
	t.Helper()
	StartStream(t, nb.env, nb.Server, nb.Addr)
	p := StartSlowReaders(t, nb.env, nb.Client, nb.Addr, Readers{Conns: conns, RcvBuf: 1 << 20, Read: 1 << 16, Every: time.Millisecond, For: d})
	waitOutput(t, p, "connected")
}

// LoseRoute removes the server's route to its client's subnet: what it
// sends from then on is dropped for want of a route.
func (nb *Neighbour) LoseRoute(t testing.TB) {
	t.Helper()
	must(t, nb.env.DelRoutes(nb.Server, nb.Subnet))
}

// StartStream starts stream.py in ns on addr.
func StartStream(t testing.TB, e *lab.Env, ns netns.NS, addr string) *lab.Proc {
	t.Helper()
	p, err := e.StartPython(context.Background(), ns, "stream-"+strconv.Itoa(int(labs.Add(1))), streamPy, addr, "--addr", addr)
	must(t, err)
	return p
}

// Readers is a set of receiving clients: Conns connections with a
// receive buffer of RcvBuf bytes each reading Read bytes every Every,
// for For. With Get, each asks for that path first (HTTP/1.0), for a
// server that answers requests (nginx and a large file).
type Readers struct {
	Conns, RcvBuf, Read int
	Every, For          time.Duration
	Get                 string
}

// StartSlowReaders starts slowread.py in ns, connecting to addr.
func StartSlowReaders(t testing.TB, e *lab.Env, ns netns.NS, addr string, r Readers) *lab.Proc {
	t.Helper()
	name := "slowread-" + strconv.Itoa(int(labs.Add(1)))
	path := filepath.Join(e.Dir, name+".py")
	must(t, os.WriteFile(path, slowReadPy, 0o644))
	args := []string{"python3", "-u", path, "--to", addr, "--conns", strconv.Itoa(r.Conns),
		"--rcvbuf", strconv.Itoa(r.RcvBuf), "--read", strconv.Itoa(r.Read), "--every", fmt.Sprint(r.Every.Seconds()),
		"--for", fmt.Sprint(r.For.Seconds())}
	if r.Get != "" {
		args = append(args, "--get", r.Get)
	}
	p, err := e.Start(ns, name, args...)
	must(t, err)
	return p
}

// waitOutput waits until a process's log holds want, or it exits, or
// 20 s pass.
func waitOutput(t testing.TB, p *lab.Proc, want string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		b, _ := os.ReadFile(p.Log)
		if containsLine(string(b), want) {
			return
		}
		if p.Exited() || time.Now().After(deadline) {
			t.Fatalf("%s: no %q in its output: %s", p.Name, want, b)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func containsLine(s, prefix string) bool {
	for _, line := range strings.Split(s, "\n") {
		if strings.HasPrefix(line, prefix) {
			return true
		}
	}
	return false
}

// Bridge is two endpoints on one layer-2 segment: the lab's server and
// client, each on a veth into a bridge namespace whose bridge joins
// them; no router, so no ICMP tells a sender its frames are too big.
type Bridge struct {
	*lab.Env
	BridgeNS netns.NS
	// ServerIP and ClientIP are the endpoints' addresses; ServerDev and
	// ClientDev their devices; ServerPort and ClientPort their peers,
	// the bridge's ports; BridgeDev the bridge.
	ServerIP, ClientIP                string
	ServerDev, ClientDev              string
	ServerPort, ClientPort, BridgeDev string
}

// NewBridge builds the segment: both endpoints and the server's port at
// endpointMTU, the client's port at portMTU; the bridge takes the
// smaller. With segs > 0 the endpoints' gso_max_segs is set to it (1:
// the stack segments everything, so that frames are of the MTU: a
// virtual device passes a GSO packet of any size).
func NewBridge(t testing.TB, endpointMTU, portMTU int, segs uint32) *Bridge {
	t.Helper()
	e := newLab(t)
	n := octet(e)
	must(t, e.Unlink())
	br, err := e.AddNS("br")
	must(t, err)
	s := suffix(e)
	b := &Bridge{Env: e, BridgeNS: br, ServerIP: fmt.Sprintf("10.93.%d.1", n), ClientIP: fmt.Sprintf("10.93.%d.2", n),
		ServerDev: "nds-" + s, ClientDev: "ndc-" + s, ServerPort: "ndps-" + s, ClientPort: "ndpc-" + s, BridgeDev: "ndbr-" + s}
	must(t, e.AddVeth(lab.End{NS: e.ServerNS, Dev: b.ServerDev, Addr: b.ServerIP + "/24", MTU: endpointMTU},
		lab.End{NS: br, Dev: b.ServerPort, MTU: endpointMTU}))
	must(t, e.AddVeth(lab.End{NS: e.ClientNS, Dev: b.ClientDev, Addr: b.ClientIP + "/24", MTU: endpointMTU},
		lab.End{NS: br, Dev: b.ClientPort, MTU: portMTU}))
	must(t, e.AddBridge(br, b.BridgeDev, 0, b.ServerPort, b.ClientPort))
	if segs > 0 {
		must(t, e.SetGSOMaxSegs(e.ServerNS, b.ServerDev, segs))
		must(t, e.SetGSOMaxSegs(e.ClientNS, b.ClientDev, segs))
	}
	return b
}

// Fetch connects from ns to addr, sends a request line and reads what
// comes back for at most timeout: how many bytes arrived.
func Fetch(ns netns.NS, addr string, timeout time.Duration) (int64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	c, err := ns.Dial(ctx, "tcp", addr)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(timeout))
	if _, err := io.WriteString(c, "GET / HTTP/1.0\r\n\r\n"); err != nil {
		return 0, err
	}
	n, err := io.Copy(io.Discard, c)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		err = nil
	}
	return n, err
}
