package layer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/netdoctor/netdoctor/internal/lab"
	"github.com/netdoctor/netdoctor/internal/lab/labtest"
	"github.com/netdoctor/netdoctor/internal/netns"
)

const (
	labPort    = 9121
	iperf3Port = 5201
)

// iperf3 runs Debian's iperf3 client in the client namespace against
// the server's iperf3 and returns the receiver's bits per second.
func iperf3(t *testing.T, e *lab.Env, secs int, reverse bool) float64 {
	t.Helper()
	args := []string{"-c", e.ServerIP, "-p", strconv.Itoa(iperf3Port), "-t", strconv.Itoa(secs), "-J"}
	if reverse {
		args = append(args, "-R")
	}
	out := inClient(t, e, pinned(clientCPU, append([]string{"iperf3"}, args...)...)...)
	var r struct {
		End struct {
			SumReceived struct {
				BitsPerSecond float64 `json:"bits_per_second"`
			} `json:"sum_received"`
		} `json:"end"`
	}
	if err := json.Unmarshal(out, &r); err != nil || r.End.SumReceived.BitsPerSecond == 0 {
		t.Fatalf("iperf3's JSON: %v: %.300s", err, out)
	}
	return r.End.SumReceived.BitsPerSecond
}

// inClient runs a command in the client namespace and returns its
// stdout.
func inClient(t *testing.T, e *lab.Env, cmd ...string) []byte {
	name, args := cmd[0], cmd[1:]
	t.Helper()
	cli, err := netns.Resolve(e.ClientNS.Name)
	if err != nil {
		t.Fatal(err)
	}
	var out []byte
	err = cli.Do(func() error {
		var err error
		out, err = exec.Command(name, args...).Output()
		return err
	})
	if err != nil {
		var stderr []byte
		if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
			stderr = ee.Stderr
		}
		t.Fatalf("%s %v: %v: %s%s", name, args, err, out, stderr)
	}
	return out
}

func startIperf3(t *testing.T, e *lab.Env) {
	t.Helper()
	if _, err := exec.LookPath("iperf3"); err != nil {
		t.Skip("iperf3 is not installed: the reference of this test (apt-get install iperf3, or scripts/deps.sh lab)")
	}
	p, err := e.Start(e.ServerNS, "iperf3", pinned(serverCPU, "iperf3", "-s", "-p", strconv.Itoa(iperf3Port))...)
	labtest.Must(t, err)
	labtest.Must(t, e.WaitListening(context.Background(), p, e.ClientNS, net.JoinHostPort(e.ServerIP, strconv.Itoa(iperf3Port))))
}

// netdoctor is the binary as users run it, built from ./cmd/netdoctor as
// make build builds it (static, trimmed), with the agent's token file.
type netdoctor struct {
	bin, token string
}

// startAgent builds netdoctor and starts `netdoctor agent
// --test-endpoint` in the server namespace: a process of its own, as
// iperf3 -s is, not the test's goroutines (which would share the test's
// Go runtime with the client's).
func startAgent(t *testing.T, e *lab.Env) (netdoctor, string) {
	t.Helper()
	dir := t.TempDir()
	nd := netdoctor{bin: filepath.Join(dir, "netdoctor"), token: filepath.Join(dir, "agent.token")}
	build := exec.Command("go", "build", "-trimpath", "-o", nd.bin, "../../cmd/netdoctor")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	if err := os.WriteFile(nd.token, append(testToken, '\n'), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := net.JoinHostPort(e.ServerIP, strconv.Itoa(labPort))
	p, err := e.Start(e.ServerNS, "agent", pinned(serverCPU, nd.bin, "agent", "--token-file", nd.token, "--test-endpoint", addr)...)
	labtest.Must(t, err)
	labtest.Must(t, e.WaitListening(context.Background(), p, e.ClientNS, addr))
	return nd, addr
}

// load runs `netdoctor load tcp://addr` in the client namespace, both
// directions for secs each, and returns each one's bits per second. What
// it counts received is held to what crossed the veth meanwhile (the
// kernel's counters of the client's end, headers and the other
// direction's acknowledgements included): a byte counted twice shows
// there, whatever the CPUs let either tool reach.
func (nd netdoctor) load(t *testing.T, e *lab.Env, addr string, secs int) (up, down float64) {
	t.Helper()
	tx0, rx0 := linkBytes(t, e)
	out := inClient(t, e, pinned(clientCPU, nd.bin, "load", "-d", strconv.Itoa(secs)+"s", "--token-file", nd.token, "--json", "-", "tcp://"+addr)...)
	tx1, rx1 := linkBytes(t, e)
	var r struct {
		TCP []TCPResult `json:"tcp"`
	}
	if err := json.Unmarshal(out, &r); err != nil || len(r.TCP) != 2 || r.TCP[0].Dir != Up || r.TCP[1].Dir != Down {
		t.Fatalf("netdoctor load's JSON: %v: %.300s", err, out)
	}
	if u, d := r.TCP[0].Bytes, r.TCP[1].Bytes; u > tx1-tx0 || d > rx1-rx0 {
		t.Errorf("netdoctor load counted %d bytes up and %d down, the veth carried %d and %d", u, d, tx1-tx0, rx1-rx0)
	}
	return r.TCP[0].BitsPerSecond, r.TCP[1].BitsPerSecond
}

// linkBytes is what the client's end of the veth has sent and received,
// from the kernel's counters.
func linkBytes(t *testing.T, e *lab.Env) (tx, rx uint64) {
	t.Helper()
	out := inClient(t, e, "ip", "-s", "-j", "link", "show", "dev", e.ClientDev)
	var links []struct {
		Stats64 struct {
			RX struct {
				Bytes uint64 `json:"bytes"`
			} `json:"rx"`
			TX struct {
				Bytes uint64 `json:"bytes"`
			} `json:"tx"`
		} `json:"stats64"`
	}
	if err := json.Unmarshal(out, &links); err != nil || len(links) != 1 {
		t.Fatalf("ip -s -j link show dev %s: %v: %.300s", e.ClientDev, err, out)
	}
	return links[0].Stats64.TX.Bytes, links[0].Stats64.RX.Bytes
}

// The CPUs each side of a comparison runs on, both tools alike: the
// client's programs on clientCPU, the servers' on serverCPU. Unpinned,
// where the scheduler puts sender and receiver on 2 cores moves either
// tool by up to a third from run to run, and a comparison of medians
// measured the placements as much as the tools (TestLabTCPAgreesWithIperf3).
const clientCPU, serverCPU = "0", "1"

// canPin reports whether pinned pins: two CPUs and taskset (util-linux).
func canPin() bool {
	_, err := exec.LookPath("taskset")
	return err == nil && runtime.NumCPU() >= 2
}

// pinned runs cmd on cpu when it can, else as it is.
func pinned(cpu string, cmd ...string) []string {
	if !canPin() {
		return cmd
	}
	return append([]string{"taskset", "-c", cpu}, cmd...)
}

func mbit(bps float64) string { return fmt.Sprintf("%.1f Mbit/s", bps/1e6) }

func median(v []float64) float64 {
	s := slices.Sorted(slices.Values(v))
	if len(s)%2 == 0 {
		return (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return s[len(s)/2]
}

func mbits(bps []float64) string {
	s := make([]string, len(bps))
	for i, b := range bps {
		s[i] = fmt.Sprintf("%.1f", b/1e6)
	}
	return strings.Join(s, ", ")
}

// TestLabTCPAgreesWithIperf3 compares load tcp:// with iperf3 on the
// same veth the way users run both: `netdoctor agent --test-endpoint`
// in the server namespace and `netdoctor load tcp://` in the client's,
// each a process of its own as iperf3 -s and iperf3 -c are. Rounds
// alternate the two (netdoctor first in every other one), so that both
// see the same noise; the medians of each direction's runs are compared.
//
// Where a tbf is the limit they must agree within 10 % (0.92 to 1.004
// so far), and neither reads more than the tbf's rate. The limit is the
// tbf's where iperf3 reads at least 85 % of its rate (a TCP payload is
// 95.6 % of the frames the tbf counts): 50 Mbit/s always here. A gigabit
// tbf is the limit only on a faster host: on these 2 CPUs iperf3 reads
// 769 to 862 Mbit/s through it on a quiet machine and 165 to 470 while
// others compiled, when netdoctor read 1.2 to 2.0 times that (and 1.24
// to 1.72 times iperf3's 3 to 5 Gbit/s on the unshaped veth, 14 to 18
// on a quiet machine). There, as on the unshaped veth, what the CPUs can copy
// sets both tools' rates, and how they compare is a benchmark's question
// (none yet beside iperf3): the test holds what a count can get wrong.
// Bytes lost: below half of iperf3's. Bytes counted twice: more than
// crossed the veth (see load), or than the tbf lets through.
//
// Unshaped, the veth carries what the 2 cores can copy, so the tools'
// own cost per byte shows. netdoctor's streams do what iperf3's do, 128
// KiB writes and reads with Nagle's algorithm on (see bulk in tcp.go):
// with Go's defaults (TCP_NODELAY, 8 KiB reads) netdoctor read 1.3 to
// 1.7 times iperf3's. Both tools run pinned alike, clients on CPU 0 and
// servers on CPU 1 (pinned): unpinned, where the scheduler put sender
// and receiver moved either tool by up to a third from run to run (13
// against 17 Gbit/s), and the medians' ratio wandered from 0.80 to 0.99
// with the same code. Pinned, netdoctor reads 0.95 to 1.0 of iperf3
// (2026-11-24: 0.959 and 0.954, 0.954 and 0.998 up and down). What is
// left is Go's poller and scheduler (a fifth more context switches than
// iperf3's blocking calls for a 2 s download). Reading 1 MiB at a time
// instead of 128 KiB changed nothing measurable (0.909 to 0.944 in two
// runs). Blocking system calls on the streams' descriptors, as iperf3
// makes, were tried unpinned: download 0.99 and upload 0.83 in one run
// against 0.88 and 0.89 through the poller in the same hour: no better
// overall, for a thread held per stream, so left out.
func TestLabTCPAgreesWithIperf3(t *testing.T) {
	e := labtest.New(t, "layertcp")
	startIperf3(t, e)
	nd, addr := startAgent(t, e)
	// compare runs the rounds through a tbf of rate bits per second (0:
	// unshaped) and holds the medians to low and high of iperf3's where
	// the tbf limits them.
	compare := func(name string, rounds, secs int, rate, low, high float64) {
		t.Helper()
		var refUp, refDown, up, down []float64
		for i := range rounds {
			if i%2 == 1 {
				u, d := nd.load(t, e, addr, secs)
				up, down = append(up, u), append(down, d)
			}
			refUp = append(refUp, iperf3(t, e, secs, false))
			refDown = append(refDown, iperf3(t, e, secs, true))
			if i%2 == 0 {
				u, d := nd.load(t, e, addr, secs)
				up, down = append(up, u), append(down, d)
			}
		}
		for _, c := range []struct {
			dir       string
			ref, ours []float64
		}{{Up, refUp, up}, {Down, refDown, down}} {
			r, o := median(c.ref), median(c.ours)
			// Where the CPUs limit both, the veth's counters and the
			// tbf's rate bound netdoctor's from above (see load).
			lo, hi, limit := cpusLow, math.Inf(1), "the CPUs"
			if rate > 0 && r >= shaperLimits*rate {
				lo, hi, limit = low, high, "the tbf"
			}
			t.Logf("%s %s: iperf3 %s; netdoctor %s: medians %s and %s, ratio %.3f; limited by %s", name, c.dir, mbits(c.ref), mbits(c.ours), mbit(r), mbit(o), o/r, limit)
			if o < lo*r || o > hi*r {
				t.Errorf("%s %s: netdoctor %s, iperf3 %s: ratio %.3f, want %.2f to %.2f where %s limit both", name, c.dir, mbit(o), mbit(r), o/r, lo, hi, limit)
			}
			if rate > 0 && o > rate {
				t.Errorf("%s %s: netdoctor read %s through a tbf of %s", name, c.dir, mbit(o), mbit(rate))
			}
		}
	}
	if !canPin() {
		t.Logf("not pinned (%d CPUs)", runtime.NumCPU())
	}
	// Unshaped, one second of iperf3 alone moves by a fifth on a quiet
	// machine (14.4 to 18.3 Gbit/s in five rounds of one run) and from
	// 1.8 to 4.2 Gbit/s in three while others compiled: three rounds'
	// medians, held only to what a count can get wrong.
	compare("veth", 3, 1, 0, 0, 0)
	labtest.Must(t, e.Shape(e.ClientNS, e.ClientDev, "1gbit"))
	labtest.Must(t, e.Shape(e.ServerNS, e.ServerDev, "1gbit"))
	compare("tbf 1gbit", 3, 1, 1e9, 0.85, 1.15)
	labtest.Must(t, e.Shape(e.ClientNS, e.ClientDev, "50mbit"))
	labtest.Must(t, e.Shape(e.ServerNS, e.ServerDev, "50mbit"))
	// Three rounds: on a machine whose CPUs others take, the sender of
	// one round fell behind the tbf (34.5 Mbit/s up, iperf3 47.4).
	compare("tbf 50mbit", 3, 1, 50e6, 0.9, 1.1)
}

const (
	// shaperLimits is the share of a tbf's rate from which iperf3's
	// reading says the tbf, not the CPUs, set it.
	shaperLimits = 0.85
	// cpusLow is, where the CPUs limit both tools, the share of
	// iperf3's below which netdoctor lost bytes.
	cpusLow = 0.5
)

// udp runs `netdoctor load udp://addr` in the client namespace, 5000
// datagrams/s of 1200 bytes for 4 s, up or (down) from the endpoint,
// and returns its result.
func (nd netdoctor) udp(t *testing.T, e *lab.Env, addr string, down bool) *UDPResult {
	t.Helper()
	args := []string{nd.bin, "load", "-d", "4s", "-R", "5000", "--size", "1200", "--token-file", nd.token, "--json", "-"}
	if down {
		args = append(args, "--reverse")
	}
	out := inClient(t, e, append(args, "udp://"+addr)...)
	var r struct {
		UDP *UDPResult `json:"udp"`
	}
	if err := json.Unmarshal(out, &r); err != nil || r.UDP == nil {
		t.Fatalf("netdoctor load's JSON: %v: %.300s", err, out)
	}
	return r.UDP
}

// TestLabUDPLoss measures a 5 % loss nft injects on the server's input,
// with the binaries as users run them: `netdoctor agent --test-endpoint`
// in the server namespace, `netdoctor load udp://` in the client's.
func TestLabUDPLoss(t *testing.T) {
	e := labtest.New(t, "layerudp")
	nd, addr := startAgent(t, e)
	labtest.Must(t, e.DropUDP(e.ServerNS, labPort, 5))
	res := nd.udp(t, e, addr, false)
	t.Logf("sent %d, received %d, loss %.2f %%, jitter %v, reordered %d", res.Sent, res.Received, res.LossPercent, res.Jitter, res.Reordered)
	if res.Dir != Up || res.Sent < 19000 || res.Sent > 20100 {
		t.Errorf("dir %s, sent %d, want about 20000 up", res.Dir, res.Sent)
	}
	if res.LossPercent < 4 || res.LossPercent > 6 {
		t.Errorf("loss %.2f %%, want 5 ± 1", res.LossPercent)
	}
}

// TestLabUDPLossDown measures a 5 % loss nft injects on the client's
// input, in a UDP download: the endpoint sends, the client counts.
func TestLabUDPLossDown(t *testing.T) {
	e := labtest.New(t, "layerudpd")
	nd, addr := startAgent(t, e)
	labtest.Must(t, e.DropUDPFrom(e.ClientNS, labPort, 5))
	res := nd.udp(t, e, addr, true)
	t.Logf("sent %d (%.0f/s), received %d, loss %.2f %%, jitter %v, reordered %d", res.Sent, res.SentRate, res.Received, res.LossPercent, res.Jitter, res.Reordered)
	if res.Dir != Down || res.Sent < 19000 || res.Sent > 20100 {
		t.Errorf("dir %s, the endpoint sent %d, want about 20000 down", res.Dir, res.Sent)
	}
	if res.LossPercent < 4 || res.LossPercent > 6 {
		t.Errorf("loss %.2f %%, want 5 ± 1", res.LossPercent)
	}
}

// TestLabTCPSlowJoins: a download whose streams take long to join (each
// after the first dialed 150 ms late, as four joins over a path of
// 100 ms take half a second) reads no more than the path carries: the
// endpoint sends on each stream from its join, and what the sockets
// held when the window opened, after the last join, is not counted.
// Counted, it read an 8 Mbit/s tbf at 9.2 here (8.5 in a run whose
// joins took a tenth of a second on a busy host).
func TestLabTCPSlowJoins(t *testing.T) {
	e := labtest.New(t, "layerjoin")
	srv, err := NewServer(testToken, nil)
	if err != nil {
		t.Fatal(err)
	}
	addr := net.JoinHostPort(e.ServerIP, strconv.Itoa(labPort))
	var ln net.Listener
	if err := e.ServerNS.Do(func() (err error) { ln, err = net.Listen("tcp", addr); return err }); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln, nil) }()
	t.Cleanup(func() { cancel(); <-done })
	labtest.Must(t, e.Shape(e.ServerNS, e.ServerDev, "8mbit"))
	dials := 0
	dial := func(ctx context.Context, network, a string) (c net.Conn, err error) {
		if dials++; dials > 2 { // the control connection, then the first stream
			time.Sleep(150 * time.Millisecond) // the fault under test: a slow join
		}
		err = e.ClientNS.Do(func() (err error) {
			c, err = (&net.Dialer{}).DialContext(ctx, network, a)
			return err
		})
		return c, err
	}
	start := time.Now()
	res, err := RunTCP(context.Background(), TCPOptions{Addr: addr, Token: testToken, Dir: Down, Streams: 4, Duration: 1500 * time.Millisecond, Dial: dial})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%.2f Mbit/s over %v, %d bytes, %d dials, %v in all", res.BitsPerSecond/1e6, res.Duration, res.Bytes, dials, time.Since(start))
	for i, s := range res.Streams {
		t.Logf("stream %d: %d bytes", i, s.Bytes)
	}
	// Never more than the tbf. Less, as the streams joined late start
	// slowly and the first one's window was closed meanwhile (4.7 to
	// 6.8 measured, in-process; 6 with the joins at once).
	if res.BitsPerSecond > 8.2e6 || res.BitsPerSecond < 3e6 {
		t.Errorf("%.2f Mbit/s through an 8 Mbit/s tbf, want 3 to 8.2", res.BitsPerSecond/1e6)
	}
}
