package layer

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os/exec"
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

// labEndpoint builds a lab and serves a test endpoint in its server
// namespace; the dialer dials from the client namespace.
func labEndpoint(t *testing.T, id string) (*lab.Env, string, Dialer) {
	t.Helper()
	e := labtest.New(t, id)
	srv, err := netns.Resolve(e.ServerNS)
	if err != nil {
		t.Fatal(err)
	}
	cli, err := netns.Resolve(e.ClientNS)
	if err != nil {
		t.Fatal(err)
	}
	addr := net.JoinHostPort(e.ServerIP, strconv.Itoa(labPort))
	var ln net.Listener
	var pc net.PacketConn
	if err := srv.Do(func() error {
		var err error
		if ln, err = net.Listen("tcp", addr); err != nil {
			return err
		}
		pc, err = net.ListenPacket("udp", addr)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	s, err := NewServer(testToken, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln, pc) }()
	t.Cleanup(func() { cancel(); <-done })
	return e, addr, cli.Dial
}

// iperf3 runs Debian's iperf3 client in the client namespace against
// the server's iperf3 and returns the receiver's bits per second.
func iperf3(t *testing.T, e *lab.Env, secs int, reverse bool) float64 {
	t.Helper()
	cli, err := netns.Resolve(e.ClientNS)
	if err != nil {
		t.Fatal(err)
	}
	args := []string{"-c", e.ServerIP, "-p", strconv.Itoa(iperf3Port), "-t", strconv.Itoa(secs), "-J"}
	if reverse {
		args = append(args, "-R")
	}
	var out []byte
	err = cli.Do(func() error {
		var err error
		out, err = exec.Command("iperf3", args...).Output()
		return err
	})
	if err != nil {
		t.Fatalf("iperf3 %v: %v: %s", args, err, out)
	}
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

func startIperf3(t *testing.T, e *lab.Env) {
	t.Helper()
	if _, err := exec.LookPath("iperf3"); err != nil {
		t.Skip("iperf3 is not installed: the reference of this test (apt-get install iperf3, or scripts/deps.sh lab)")
	}
	p, err := e.Start(e.ServerNS, "iperf3", "iperf3", "-s", "-p", strconv.Itoa(iperf3Port))
	labtest.Must(t, err)
	labtest.Must(t, e.WaitListening(context.Background(), p, e.ClientNS, net.JoinHostPort(e.ServerIP, strconv.Itoa(iperf3Port))))
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
// same veth, alternating the two so that both see the same noise, in
// each direction: at 1 Gbit/s and 50 Mbit/s (tbf), where the medians of
// their runs must agree within 10 % (they agree within 1 % in every run
// so far), and unshaped. Unshaped, a veth carries what the CPU can copy
// (12 to 22 Gbit/s on this 2-core machine): the medians' ratio has
// ranged from 0.88 to 1.43 between runs (netdoctor's download copies
// faster than iperf3 -R's when the CPU is the limit), so there the two
// are held to the same order — netdoctor at least 0.65 and at most twice
// iperf3's — and the figures are logged: at that rate either tool
// measures the CPU, not the path. The shaped cases hold the measurement
// itself to 10 %.
func TestLabTCPAgreesWithIperf3(t *testing.T) {
	e, addr, dial := labEndpoint(t, "layertcp")
	startIperf3(t, e)
	compare := func(name string, reverse bool, runs, secs int, low, high float64) {
		t.Helper()
		dir := Up
		if reverse {
			dir = Down
		}
		var ref, ours []float64
		for range runs {
			ref = append(ref, iperf3(t, e, secs, reverse))
			res, err := RunTCP(context.Background(), TCPOptions{Addr: addr, Token: testToken, Dir: dir, Streams: 1, Duration: time.Duration(secs) * time.Second, Dial: dial})
			if err != nil {
				t.Fatal(err)
			}
			ours = append(ours, res.BitsPerSecond)
		}
		r, o := median(ref), median(ours)
		t.Logf("%s %s: iperf3 %s; netdoctor %s: medians %s and %s, ratio %.3f", name, dir, mbits(ref), mbits(ours), mbit(r), mbit(o), o/r)
		if o < low*r || o > high*r {
			t.Errorf("%s %s: netdoctor %s, iperf3 %s: ratio %.3f, want %.2f to %.2f", name, dir, mbit(o), mbit(r), o/r, low, high)
		}
	}
	compare("veth", false, 3, 1, 0.65, 2)
	compare("veth", true, 3, 1, 0.65, 2)
	for _, rate := range []string{"1gbit", "50mbit"} {
		labtest.Must(t, e.Shape(e.ClientNS, e.ClientDev, rate))
		labtest.Must(t, e.Shape(e.ServerNS, e.ServerDev, rate))
		compare("tbf "+rate, false, 2, 2, 0.9, 1.1)
		compare("tbf "+rate, true, 2, 2, 0.9, 1.1)
	}
}

// TestLabUDPLoss measures a 5 % loss nft injects on the server's input.
func TestLabUDPLoss(t *testing.T) {
	e, addr, dial := labEndpoint(t, "layerudp")
	labtest.Must(t, e.DropUDP(e.ServerNS, labPort, 5))
	res, err := RunUDP(context.Background(), UDPOptions{Addr: addr, Token: testToken, Rate: 5000, Size: 1200, Duration: 4 * time.Second, Dial: dial})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("sent %d, received %d, loss %.2f %%, jitter %v, reordered %d", res.Sent, res.Received, res.LossPercent, res.Jitter, res.Reordered)
	if res.LossPercent < 4 || res.LossPercent > 6 {
		t.Errorf("loss %.2f %%, want 5 ± 1", res.LossPercent)
	}
}

// TestLabUDPLossDown measures a 5 % loss nft injects on the client's
// input, in a UDP download: the endpoint sends, the client counts.
func TestLabUDPLossDown(t *testing.T) {
	e, addr, dial := labEndpoint(t, "layerudpd")
	labtest.Must(t, e.DropUDPFrom(e.ClientNS, labPort, 5))
	res, err := RunUDP(context.Background(), UDPOptions{Addr: addr, Token: testToken, Dir: Down, Rate: 5000, Size: 1200, Duration: 4 * time.Second, Dial: dial})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("sent %d (%.0f/s), received %d, loss %.2f %%, jitter %v, reordered %d", res.Sent, res.SentRate, res.Received, res.LossPercent, res.Jitter, res.Reordered)
	if res.Dir != Down || res.Sent < 19000 || res.Sent > 20100 {
		t.Errorf("dir %s, the endpoint sent %d, want about 20000 down", res.Dir, res.Sent)
	}
	if res.LossPercent < 4 || res.LossPercent > 6 {
		t.Errorf("loss %.2f %%, want 5 ± 1", res.LossPercent)
	}
}
