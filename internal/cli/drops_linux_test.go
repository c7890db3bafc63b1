package cli

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/netdoctor/netdoctor/internal/dropmon"
	"github.com/netdoctor/netdoctor/internal/report"
)

// The acceptance of issue 28: where every packet dies. Each test makes
// one fault with real traffic in namespaces and asserts the finding, its
// drop reason when the drop monitor can run here, and the rule, socket,
// namespace or interface it names.

// monitorHere reports whether the drop monitor runs on this host (root,
// BTF, no lockdown): the reasons are then asserted too.
func monitorHere(t *testing.T) bool {
	t.Helper()
	m, release, err := dropmon.Shared()
	if err != nil {
		t.Logf("drop monitor unavailable here (%v): asserting the counters' evidence only", err)
		return false
	}
	_ = m
	release()
	return true
}

// show logs a report's text when ND_SHOW is set (go test -v): how each
// fault reads to a user.
func show(t *testing.T, text string) {
	if os.Getenv("ND_SHOW") != "" {
		t.Log("\n" + text)
	}
}

// showRun logs a run's findings as the text report lists them.
func showRun(t *testing.T, r *runJSON) {
	if os.Getenv("ND_SHOW") == "" {
		return
	}
	var b strings.Builder
	fmt.Fprintln(&b, r.Verdict)
	for _, f := range r.Findings {
		fmt.Fprintf(&b, "[%s %s] %s (%s, %s side)", f.Severity, f.Status, f.Title, f.ID, f.Side)
		if f.CausedBy != "" {
			fmt.Fprintf(&b, " ← %s", f.CausedBy)
		}
		fmt.Fprintln(&b)
		for _, it := range f.Evidence {
			fmt.Fprintln(&b, "  *", it.Text)
		}
		for _, l := range f.Fix {
			fmt.Fprintln(&b, "  fix:", l)
		}
	}
	t.Log("\n" + b.String())
}

func dump(f *report.Finding) string {
	b, _ := json.MarshalIndent(f, "", "  ")
	return string(b)
}

// noDropFinding fails the test on any finding the drop monitor and the
// firewall make: a healthy run has none, stray drops included.
func noDropFinding(t *testing.T, fs []report.Finding) {
	t.Helper()
	for _, f := range fs {
		switch f.ID {
		case "firewall-drop", "packet-drops", "path-mtu-blackhole":
			t.Errorf("a drop finding on a healthy run: %s", dump(&f))
		}
	}
}

// testRunFirewallRateLimit: the mitigation seed 001 §6 recommends
// against SYN floods — iptables accepting 20 new connections a second
// and dropping the rest — in front of a server whose clients open a
// connection per request. The run names the DROP rule whose counter
// moved, in iptables' and nft's syntax, with the limit in front of it,
// on the server's side, and the monitor's NETFILTER_DROP.
func testRunFirewallRateLimit(t *testing.T) {
	if _, err := exec.LookPath("iptables-nft"); err != nil {
		t.Skip("needs iptables-nft (Debian's iptables; scripts/deps.sh installs it)")
	}
	mon := monitorHere(t)
	e := newLab(t)
	addr := e.ServerIP + ":7700"
	startServe(t, e.ServerNS.Name, "ND_SERVER=fast", "ND_ADDR="+addr)
	// The namespace takes the rules with it.
	labMust(t, e.Exec(e.ServerNS, "iptables-nft", "-A", "INPUT", "-p", "tcp", "--syn", "--dport", "7700", "-m", "limit", "--limit", "20/s", "--limit-burst", "20", "-j", "ACCEPT"))
	labMust(t, e.Exec(e.ServerNS, "iptables-nft", "-A", "INPUT", "-p", "tcp", "--syn", "--dport", "7700", "-j", "DROP"))
	r, text := runRemote(t, e.ClientNS.Name, "-c 20 -t 1 -d 3s --no-keepalive --baseline 1s --tail 1s --server-netns "+e.ServerNS.Name+" http://"+addr+"/")
	showRun(t, r)
	everyActiveHasWindowEvidence(t, r)
	f := findActive(r, "firewall-drop")
	if f == nil {
		t.Fatalf("no firewall-drop; findings %+v\n%s", r.Findings, text)
	}
	if f.Side != "server" || f.Subject != "ip filter INPUT" {
		t.Errorf("side %q subject %q", f.Side, f.Subject)
	}
	for _, want := range []string{"`-A INPUT -p tcp --syn --dport 7700 -j DROP`", "`tcp flags syn / fin,syn,rst,ack tcp dport 7700 drop`",
		"its counter moved", "the rate limit in front of it", "--limit 20/s"} {
		if !evidenceHas(f, want) {
			t.Errorf("evidence lacks %q: %s", want, dump(f))
		}
	}
	if mon && !evidenceHas(f, "NETFILTER_DROP: ") {
		t.Errorf("the monitor's NETFILTER_DROP is not in the evidence: %s", dump(f))
	}
	if !fixHas(f, "the limit (20/second burst 20 packets) is below what the service receives") {
		t.Errorf("fix %q", f.Fix)
	}
	if d := findActive(r, "unexplained-distress"); d != nil {
		t.Errorf("the SYNs the rule dropped are still unexplained: %s", dump(d))
	}
}

// testRunQdiscDrops: a qdisc on the server's link that holds one packet
// (tbf, a gigabit, a limit of 1600 bytes) drops the bursts of a bulk
// response without the link ever being saturated: the kernel's
// QDISC_DROP, named with the interface and its qdisc.
func testRunQdiscDrops(t *testing.T) {
	if !monitorHere(t) {
		t.Skip("the drop monitor cannot run here: QDISC_DROP is its evidence")
	}
	if _, err := exec.LookPath("tc"); err != nil {
		t.Skip("needs tc(8) from iproute2")
	}
	e := newLab(t)
	addr := e.ServerIP + ":7710"
	startServe(t, e.ServerNS.Name, "ND_SERVER=bulk", "ND_ADDR="+addr)
	labMust(t, e.Exec(e.ServerNS, "tc", "qdisc", "add", "dev", e.ServerDev, "root", "tbf", "rate", "1gbit", "burst", "1600", "limit", "1600"))
	r, text := runRemote(t, e.ClientNS.Name, "-c 4 -t 1 -d 3s --baseline 1s --tail 1s --server-netns "+e.ServerNS.Name+" http://"+addr+"/")
	showRun(t, r)
	var f *report.Finding
	for i := range r.Findings {
		x := &r.Findings[i]
		if x.Status == report.Active && (x.ID == "packet-drops" && x.Subject == "QDISC_DROP" || x.ID == "bandwidth-saturated" && x.Subject == e.ServerDev) {
			f = x
		}
	}
	if f == nil {
		t.Fatalf("no QDISC_DROP finding; findings %+v\n%s", r.Findings, text)
	}
	if f.Side != "server" || !evidenceHas(f, "QDISC_DROP: ") || !evidenceHas(f, "on "+e.ServerDev) || f.ID == "packet-drops" && !evidenceHas(f, "qdisc tbf") {
		t.Errorf("want the server's QDISC_DROP on %s with its qdisc: %s", e.ServerDev, dump(f))
	}
	for _, x := range r.Findings {
		if x.ID == "path-mtu-blackhole" {
			t.Errorf("a qdisc's drops taken for an MTU: %s", dump(&x))
		}
		if x.ID == "packet-loss" && x.Side == "server" && x.CausedBy != f.ID {
			t.Errorf("the server's retransmissions are not the qdisc's consequence: %s", dump(&x))
		}
	}
}

// testRunAcceptOverflowRetransmits: an accept queue of 8 taken every
// 20 ms on a clean link. Its retransmissions are its consequence, never a
// packet loss of its own, and the monitor's count of the handshakes it
// dropped never exceeds ListenOverflows.
func testRunAcceptOverflowRetransmits(t *testing.T) {
	mon := monitorHere(t)
	e := newLab(t)
	addr := e.ServerIP + ":7720"
	startServe(t, e.ServerNS.Name, "ND_SERVER=slow", "ND_ADDR="+addr)
	r, text := runRemote(t, e.ClientNS.Name, "-c 100 -t 1 -d 3s --no-keepalive --baseline 1s --tail 1s --server-netns "+e.ServerNS.Name+" http://"+addr+"/")
	showRun(t, r)
	everyActiveHasWindowEvidence(t, r)
	q := findActive(r, "accept-queue-overflow")
	if q == nil || q.Subject != addr {
		t.Fatalf("no accept-queue-overflow on %s; findings %+v\n%s", addr, r.Findings, text)
	}
	for _, f := range r.Findings {
		if f.ID == "packet-loss" && f.CausedBy != "accept-queue-overflow" && f.CausedBy != "syn-queue-overflow" {
			t.Errorf("retransmissions reported as a loss of their own: %s", dump(&f))
		}
		if f.ID == "firewall-drop" || f.ID == "packet-drops" || f.ID == "path-mtu-blackhole" {
			t.Errorf("a drop finding on a clean link: %s", dump(&f))
		}
	}
	overflows := counterRise(q, "TcpExtListenOverflows +")
	if mon {
		if n := counterRise(q, "TCP_LISTEN_OVERFLOW: "); n > overflows {
			t.Errorf("the monitor counted %d TCP_LISTEN_OVERFLOW, more than the %d ListenOverflows", n, overflows)
		}
	}
}

// counterRise is the number after prefix in a finding's evidence.
func counterRise(f *report.Finding, prefix string) uint64 {
	for _, it := range f.Evidence {
		if _, rest, ok := strings.Cut(it.Text, prefix); ok {
			n, _ := strconv.ParseUint(strings.Fields(rest)[0], 10, 64)
			return n
		}
	}
	return 0
}

// testRunPathMTUBlackhole: client — router — server, the router's link to
// the client with an MTU of 1280 (the client's end keeps 1500, so its
// MSS lets the server send full 1500-byte packets), and the router's ICMP
// "fragmentation needed" dropped on its way out. The server's large
// responses die at the router; small requests pass.
func testRunPathMTUBlackhole(t *testing.T) {
	if !monitorHere(t) {
		t.Skip("the drop monitor cannot run here: the segments' sizes are its evidence")
	}
	if _, err := exec.LookPath("nft"); err != nil {
		t.Skip("needs nft(8)")
	}
	cli, rtr, srv := testNetns(t), testNetns(t), testNetns(t)
	id := strconv.Itoa(os.Getpid() % 100000)
	rc, cr, rs, sr := "ndrc"+id, "ndcr"+id, "ndrs"+id, "ndsr"+id
	mustExec(t, "ip", "-n", rtr, "link", "add", rc, "type", "veth", "peer", "name", cr, "netns", cli)
	mustExec(t, "ip", "-n", rtr, "link", "add", rs, "type", "veth", "peer", "name", sr, "netns", srv)
	mustExec(t, "ip", "-n", rtr, "link", "set", rc, "mtu", "1280")
	for _, c := range [][]string{
		{rtr, rc, "10.201.1.1/24"}, {cli, cr, "10.201.1.2/24"}, {rtr, rs, "10.201.2.1/24"}, {srv, sr, "10.201.2.2/24"},
	} {
		mustExec(t, "ip", "-n", c[0], "addr", "add", c[2], "dev", c[1])
		mustExec(t, "ip", "-n", c[0], "link", "set", c[1], "up")
	}
	mustExec(t, "ip", "-n", cli, "route", "add", "default", "via", "10.201.1.1")
	mustExec(t, "ip", "-n", srv, "route", "add", "default", "via", "10.201.2.1")
	mustExec(t, "ip", "netns", "exec", rtr, "sysctl", "-qw", "net.ipv4.ip_forward=1")
	mustExec(t, "ip", "netns", "exec", rtr, "nft", "add table inet ndmtu; add chain inet ndmtu out { type filter hook output priority 0; }; add rule inet ndmtu out icmp type destination-unreachable drop")
	addr := "10.201.2.2:7730"
	startServe(t, srv, "ND_SERVER=bulk", "ND_ADDR="+addr)
	r, text := runRemote(t, cli, "-c 8 -t 1 -d 3s --timeout 5s --baseline 1s --tail 1s --server-netns "+srv+" http://"+addr+"/")
	showRun(t, r)
	f := findActive(r, "path-mtu-blackhole")
	if f == nil {
		t.Fatalf("no path-mtu-blackhole; findings %+v\n%s", r.Findings, text)
	}
	if f.Side != "server" || f.Subject != "10.201.1.2" {
		t.Errorf("side %q subject %q", f.Side, f.Subject)
	}
	for _, want := range []string{"full-size", "PKT_TOO_BIG: ", "in network namespace " + rtr, "IcmpMsg.InType3"} {
		if !evidenceHas(f, want) {
			t.Errorf("evidence lacks %q: %s", want, dump(f))
		}
	}
	for _, want := range []string{"net.ipv4.tcp_mtu_probing=1", "ip netns exec " + rtr + " nft add rule inet filter forward tcp flags syn tcp option maxseg size set rt mtu", "type 3 code 4"} {
		if !fixHas(f, want) {
			t.Errorf("fix lacks %q: %q", want, f.Fix)
		}
	}
	for _, x := range r.Findings {
		if x.ID == "path-mtu-blackhole" && x.Side != "server" {
			t.Errorf("the black hole named twice: %s", dump(&x))
		}
		if x.ID == "packet-loss" && x.Side == "server" && x.CausedBy != "path-mtu-blackhole" && !evidenceHas(&x, "PKT_TOO_BIG") {
			t.Errorf("the server's loss does not say where its packets die: %s", dump(&x))
		}
	}
}

// TestCheckUDPReceiverDrops: a UDP receiver with a 2 KiB SO_RCVBUF (4
// KiB as the kernel counts it) that reads a datagram every 10 ms, under a
// sender's bursts. check, with no load of its own, names the socket, its
// process and its buffer, and the fix for that socket.
func TestCheckUDPReceiverDrops(t *testing.T) {
	mon := monitorHere(t)
	ns := testNetns(t)
	recv := startHelper(t, ns, "udprecv", "ND_ADDR=127.0.0.1:7740")
	_ = recv
	send := startHelper(t, ns, "udpburst", "ND_ADDR=127.0.0.1:7740")
	_ = send
	code, stdout, stderr := runCLI(t, "check", "--netns", ns, "--window", "2s", "--no-dns", "--json", "-")
	if os.Getenv("ND_SHOW") != "" {
		_, text, _ := runCLI(t, "check", "--netns", ns, "--window", "2s", "--no-dns")
		show(t, text)
	}
	var rep struct {
		Findings []report.Finding `json:"findings"`
	}
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("exit %d: %v\n%s\n%s", code, err, stdout, stderr)
	}
	var f *report.Finding
	for i := range rep.Findings {
		if rep.Findings[i].ID == "socket-buffer-limit" && rep.Findings[i].Status == report.Active {
			f = &rep.Findings[i]
		}
	}
	if f == nil {
		t.Fatalf("no socket-buffer-limit; findings %+v\n%s", rep.Findings, stderr)
	}
	self := ownName()
	// SO_RCVBUF 2048, doubled by the kernel.
	if f.Subject != "127.0.0.1:7740" || !strings.Contains(f.Title, "UDP receiver "+self) || !strings.Contains(f.Title, "its receive buffer (4.0 KiB) is full") {
		t.Errorf("subject %q title %q", f.Subject, f.Title)
	}
	if !evidenceHas(f, "dropped in") || !evidenceHas(f, "by the socket itself (sk_drops)") || !evidenceHas(f, "UdpRcvbufErrors +") {
		t.Errorf("evidence: %s", dump(f))
	}
	if mon && !evidenceHas(f, "SOCKET_RCVBUFF: ") {
		t.Errorf("the monitor's SOCKET_RCVBUFF is not in the evidence: %s", dump(f))
	}
	if !fixHas(f, "setsockopt(SO_RCVBUF, ") || !fixHas(f, "net.core.rmem_max") {
		t.Errorf("fix %q", f.Fix)
	}
}

// ownName is this test binary's command name, as /proc shows it.
func ownName() string {
	b, _ := os.ReadFile("/proc/self/comm")
	return strings.TrimSpace(string(b))
}

// TestRunHealthyNoDrops: a healthy run on a lab's two namespaces makes no
// drop finding, whatever stray drops (NO_SOCKET after a close, a closing
// socket's purged queue) the monitor counts.
func TestRunHealthyNoDrops(t *testing.T) {
	e := newLab(t)
	addr := e.ServerIP + ":7750"
	startServe(t, e.ServerNS.Name, "ND_SERVER=fast", "ND_ADDR="+addr)
	r, text := runRemote(t, e.ClientNS.Name, "-c 20 -t 1 -d 3s --no-keepalive --baseline 1s --tail 1s --server-netns "+e.ServerNS.Name+" http://"+addr+"/")
	if r.Load.Requests == 0 {
		t.Fatalf("no requests\n%s", text)
	}
	noDropFinding(t, r.Findings)
	code, stdout, stderr := runCLI(t, "check", "--netns", e.ServerNS.Name, "--window", "1s", "--no-dns", "--json", "-")
	var rep struct {
		Findings []report.Finding `json:"findings"`
	}
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("exit %d: %v\n%s", code, err, stderr)
	}
	noDropFinding(t, rep.Findings)
}

// helperUDPRecv receives on ND_ADDR with a 2 KiB SO_RCVBUF, one datagram
// every 10 ms: a receiver slower than what it is sent.
func helperUDPRecv() {
	c, err := net.ListenPacket("udp4", os.Getenv("ND_ADDR"))
	must(err)
	must(c.(*net.UDPConn).SetReadBuffer(2048))
	fmt.Println("ready")
	go func() {
		buf := make([]byte, 2048)
		for {
			if _, _, err := c.ReadFrom(buf); err != nil {
				return
			}
			time.Sleep(10 * time.Millisecond) // the slow receiver under test
		}
	}()
	bufio.NewReader(os.Stdin).ReadString('\n')
}

// helperUDPBurst sends bursts of 200 datagrams of 100 bytes to ND_ADDR
// every 20 ms until stdin closes: about 10 000 a second.
func helperUDPBurst() {
	c, err := net.Dial("udp4", os.Getenv("ND_ADDR"))
	must(err)
	fmt.Println("ready")
	done := make(chan struct{})
	go func() {
		bufio.NewReader(os.Stdin).ReadString('\n')
		close(done)
	}()
	msg := make([]byte, 100)
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for {
		for range 200 {
			c.Write(msg) // a refused send (the receiver gone) is no matter
		}
		select {
		case <-done:
			return
		case <-t.C:
		}
	}
}

// serveBulk answers every request with 256 KiB: responses of many
// full-size segments.
func serveBulk(ln net.Listener) {
	body := strings.Repeat("x", 256<<10)
	http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, body) }))
}
