package resolver

import (
	"context"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"golang.org/x/net/dns/dnsmessage"

	"github.com/netdoctor/netdoctor/internal/evidence"
	"github.com/netdoctor/netdoctor/internal/poll"
)

// handler answers one query. It returns the replies to send, in order.
type handler func(q dnsmessage.Message) []dnsmessage.Message

// serve starts a UDP DNS server on 127.0.0.1 and returns its port. A nil
// handler makes a silent server that reads queries and never answers.
func serve(t *testing.T, h handler) int {
	t.Helper()
	port, stop, err := startServer(t, h)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	return port
}

// startServer is serve for callers that are not on the test goroutine.
// It opens the socket on the calling goroutine; stop closes it.
func startServer(t *testing.T, h handler) (port int, stop func(), err error) {
	conn, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		return 0, nil, err
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 1500)
		for {
			n, from, err := conn.ReadFromUDPAddrPort(buf)
			if err != nil {
				return
			}
			var q dnsmessage.Message
			if err := q.Unpack(buf[:n]); err != nil || h == nil {
				continue
			}
			// Answer each query on its own goroutine, so that a slow
			// answer does not hold up the next query.
			go func() {
				for _, r := range h(q) {
					b, err := r.Pack()
					if err != nil {
						t.Errorf("pack reply: %v", err)
						return
					}
					conn.WriteToUDPAddrPort(b, from)
				}
			}()
		}
	}()
	stop = func() {
		conn.Close()
		<-done
	}
	return conn.LocalAddr().(*net.UDPAddr).Port, stop, nil
}

// reply builds the reply to q with rcode and, for an A query, one address.
func reply(q dnsmessage.Message, rcode dnsmessage.RCode) dnsmessage.Message {
	r := dnsmessage.Message{
		Header:    dnsmessage.Header{ID: q.ID, Response: true, RecursionDesired: true, RecursionAvailable: true, RCode: rcode},
		Questions: q.Questions,
	}
	if rcode == dnsmessage.RCodeSuccess && q.Questions[0].Type == dnsmessage.TypeA {
		r.Answers = []dnsmessage.Resource{{
			Header: dnsmessage.ResourceHeader{Name: q.Questions[0].Name, Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET, TTL: 60},
			Body:   &dnsmessage.AResource{A: [4]byte{10, 77, 0, 2}},
		}}
	}
	return r
}

// responder answers A queries with 10.77.0.2 and PTR queries with NXDOMAIN.
func responder(q dnsmessage.Message) []dnsmessage.Message {
	if q.Questions[0].Type == dnsmessage.TypePTR {
		return []dnsmessage.Message{reply(q, dnsmessage.RCodeNameError)}
	}
	return []dnsmessage.Message{reply(q, dnsmessage.RCodeSuccess)}
}

// ignoreDuration compares probes without their Duration.
var ignoreDuration = cmpopts.IgnoreFields(evidence.DNSProbe{}, "Duration")

func TestProbeResponder(t *testing.T) {
	names := make(chan string, 2)
	port := serve(t, func(q dnsmessage.Message) []dnsmessage.Message {
		names <- q.Questions[0].Name.String()
		if !q.RecursionDesired {
			t.Errorf("query %v without RD", q.Questions[0])
		}
		return responder(q)
	})
	p := Prober{Timeout: 10 * time.Second, Port: port} // answered at once: the timeout only ends a broken test
	ctx := context.Background()

	got := []evidence.DNSProbe{
		p.Probe(ctx, "127.0.0.1", "A", "app.svc.test"),
		p.Probe(ctx, "127.0.0.1", "PTR", "10.77.0.1"),
	}
	want := []evidence.DNSProbe{
		{Server: "127.0.0.1", Type: "A", Name: "app.svc.test", Rcode: "NOERROR"},
		{Server: "127.0.0.1", Type: "PTR", Name: "10.77.0.1", Rcode: "NXDOMAIN"},
	}
	if diff := cmp.Diff(want, got, ignoreDuration); diff != "" {
		t.Errorf("Probe mismatch (-want +got):\n%s", diff)
	}
	for _, g := range got {
		if g.Duration <= 0 {
			t.Errorf("Probe %s %s: Duration = %v, want > 0", g.Type, g.Name, g.Duration)
		}
	}
	gotNames := []string{<-names, <-names}
	wantNames := []string{"app.svc.test.", "1.0.77.10.in-addr.arpa."}
	if diff := cmp.Diff(wantNames, gotNames); diff != "" {
		t.Errorf("query names mismatch (-want +got):\n%s", diff)
	}
}

func TestProbeSilent(t *testing.T) {
	port := serve(t, nil)
	p := Prober{Timeout: 200 * time.Millisecond, Port: port}
	got := p.Probe(context.Background(), "127.0.0.1", "PTR", "10.77.0.1")
	if got.Err != "timeout" || got.Rcode != "" {
		t.Errorf("Probe = %+v, want Err timeout and no Rcode", got)
	}
	// At least the timeout, and not the default's 2 s: the probe's own.
	if got.Duration < p.Timeout || got.Duration >= DefaultTimeout {
		t.Errorf("Duration = %v, want about %v", got.Duration, p.Timeout)
	}
}

func TestProbeContextDeadline(t *testing.T) {
	port := serve(t, nil)
	p := Prober{Timeout: 5 * time.Second, Port: port}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	got := p.Probe(ctx, "127.0.0.1", "A", "app.svc.test")
	// The context's deadline ends it, not the prober's 5 s.
	if got.Err != "timeout" || got.Duration >= p.Timeout {
		t.Errorf("Probe = %+v, want Err timeout after about 100ms", got)
	}
}

func TestProbeCancel(t *testing.T) {
	port := serve(t, nil)
	p := Prober{Timeout: 5 * time.Second, Port: port}
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	got := p.Probe(ctx, "127.0.0.1", "A", "app.svc.test")
	// Cancelled, not timed out after the prober's 5 s.
	if got.Err != context.Canceled.Error() || got.Duration >= p.Timeout {
		t.Errorf("Probe = %+v, want Err %q soon", got, context.Canceled)
	}
}

func TestProbeDoneContext(t *testing.T) {
	port := serve(t, responder)
	p := Prober{Timeout: 10 * time.Second, Port: port} // answered at once: the timeout only ends a broken test
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	got := p.ProbeAll(ctx, evidence.Resolver{Nameservers: []string{"127.0.0.1"}}, "app.svc.test", "10.77.0.1")
	for _, g := range got {
		if g.Err != context.Canceled.Error() {
			t.Errorf("probe %+v: want Err %q", g, context.Canceled)
		}
	}
}

func TestProbeConnectionRefused(t *testing.T) {
	// Take a free port and close it again.
	conn, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	port := conn.LocalAddr().(*net.UDPAddr).Port
	conn.Close()

	p := Prober{Timeout: 30 * time.Second, Port: port}
	got := p.Probe(context.Background(), "127.0.0.1", "A", "app.svc.test")
	if got.Err != "connection refused" || got.Rcode != "" {
		t.Errorf("Probe = %+v, want Err connection refused", got)
	}
	if got.Duration >= p.Timeout {
		t.Errorf("Duration = %v, want well under the timeout", got.Duration)
	}
}

func TestProbeWrongReplyFirst(t *testing.T) {
	port := serve(t, func(q dnsmessage.Message) []dnsmessage.Message {
		wrongID := reply(q, dnsmessage.RCodeServerFailure)
		wrongID.ID ^= 0x5555
		wrongName := reply(q, dnsmessage.RCodeServerFailure)
		wrongName.Questions = []dnsmessage.Question{{
			Name: dnsmessage.MustNewName("other.test."), Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET,
		}}
		notResponse := reply(q, dnsmessage.RCodeServerFailure)
		notResponse.Response = false
		return []dnsmessage.Message{wrongID, wrongName, notResponse, reply(q, dnsmessage.RCodeSuccess)}
	})
	p := Prober{Timeout: 10 * time.Second, Port: port} // answered at once: the timeout only ends a broken test
	got := p.Probe(context.Background(), "127.0.0.1", "A", "App.Svc.Test")
	if got.Rcode != "NOERROR" || got.Err != "" {
		t.Errorf("Probe = %+v, want Rcode NOERROR from the matching reply", got)
	}
}

func TestProbeTruncated(t *testing.T) {
	port := serve(t, func(q dnsmessage.Message) []dnsmessage.Message {
		r := reply(q, dnsmessage.RCodeSuccess)
		r.Truncated = true
		r.Answers = nil
		return []dnsmessage.Message{r}
	})
	p := Prober{Timeout: 10 * time.Second, Port: port} // answered at once: the timeout only ends a broken test
	got := p.Probe(context.Background(), "127.0.0.1", "A", "big.svc.test")
	if got.Rcode != "NOERROR" || got.Err != "" {
		t.Errorf("Probe = %+v, want the truncated reply to count as NOERROR", got)
	}
}

func TestProbeDelayed(t *testing.T) {
	port := serve(t, func(q dnsmessage.Message) []dnsmessage.Message {
		time.Sleep(100 * time.Millisecond) // a slow server: the thing under test
		return responder(q)
	})
	p := Prober{Timeout: 30 * time.Second, Port: port}
	got := p.Probe(context.Background(), "127.0.0.1", "A", "slow.svc.test")
	if got.Rcode != "NOERROR" {
		t.Errorf("Probe = %+v, want Rcode NOERROR", got)
	}
	if got.Duration < 100*time.Millisecond {
		t.Errorf("Duration = %v, want at least 100ms", got.Duration)
	}
}

func TestProbeInvalid(t *testing.T) {
	bad := Prober{Port: 70000}
	if got := bad.Probe(context.Background(), "127.0.0.1", "A", "app.svc.test"); got.Err != "invalid port 70000" {
		t.Errorf("Probe with port 70000 = %+v, want Err invalid port 70000", got)
	}
	p := Prober{Timeout: 200 * time.Millisecond, Port: 1}
	for _, tt := range []struct{ server, typ, name string }{
		{"not-an-ip", "A", "app.svc.test"},
		{"127.0.0.1", "BOGUS", "app.svc.test"},
		{"127.0.0.1", "PTR", "app.svc.test"},
		{"127.0.0.1", "A", "a..b"},
		{"127.0.0.1", "A", strings.Repeat("a", 64) + ".test"},
	} {
		got := p.Probe(context.Background(), tt.server, tt.typ, tt.name)
		if got.Err == "" || got.Rcode != "" {
			t.Errorf("Probe(%q, %q, %q) = %+v, want an Err", tt.server, tt.typ, tt.name, got)
		}
	}
}

// TestProbeAll: the queries of every nameserver run at once. The server
// answers none until all four of its queries have arrived (for at most
// 10 s), so probes run in a row would see it answer late and the test
// fail, however fast or slow the machine.
func TestProbeAll(t *testing.T) {
	var arrived, together atomic.Int32
	port := serve(t, func(q dnsmessage.Message) []dnsmessage.Message {
		arrived.Add(1)
		if poll.Wait(10*time.Second, func() bool { return arrived.Load() >= 4 }) {
			together.Add(1)
		}
		return responder(q)
	})
	conf := evidence.Resolver{Nameservers: []string{"127.0.0.1", "::1x", "127.0.0.1"}}
	p := Prober{Timeout: 30 * time.Second, Port: port}
	got := p.ProbeAll(context.Background(), conf, "app.svc.test", "10.77.0.1")
	want := []evidence.DNSProbe{
		{Server: "127.0.0.1", Type: "A", Name: "app.svc.test", Rcode: "NOERROR"},
		{Server: "127.0.0.1", Type: "PTR", Name: "10.77.0.1", Rcode: "NXDOMAIN"},
		{Server: "::1x", Type: "A", Name: "app.svc.test", Err: `invalid server address "::1x"`},
		{Server: "::1x", Type: "PTR", Name: "10.77.0.1", Err: `invalid server address "::1x"`},
		{Server: "127.0.0.1", Type: "A", Name: "app.svc.test", Rcode: "NOERROR"},
		{Server: "127.0.0.1", Type: "PTR", Name: "10.77.0.1", Rcode: "NXDOMAIN"},
	}
	if diff := cmp.Diff(want, got, ignoreDuration); diff != "" {
		t.Errorf("ProbeAll mismatch (-want +got):\n%s", diff)
	}
	if n := together.Load(); n != 4 {
		t.Errorf("%d of the 4 queries were waiting together for an answer, want all: the probes do not run concurrently", n)
	}
}

// TestProbeAllSilent: a silent server times every query out, and the
// timeouts run at once: the six queries all reach it within one
// timeout (1 s) of the first, where in a row they would be a timeout
// apart each.
func TestProbeAllSilent(t *testing.T) {
	var mu sync.Mutex
	var arrivals []time.Time
	port := serve(t, func(dnsmessage.Message) []dnsmessage.Message {
		mu.Lock()
		arrivals = append(arrivals, time.Now())
		mu.Unlock()
		return nil
	})
	conf := evidence.Resolver{Nameservers: []string{"127.0.0.1", "127.0.0.1", "127.0.0.1"}}
	p := Prober{Timeout: time.Second, Port: port}
	got := p.ProbeAll(context.Background(), conf, "app.svc.test", "10.77.0.1")
	if len(got) != 6 {
		t.Fatalf("ProbeAll returned %d probes, want 6: %+v", len(got), got)
	}
	for _, g := range got {
		if g.Err != "timeout" {
			t.Errorf("probe %+v: want Err timeout", g)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(arrivals) != 6 {
		t.Fatalf("%d queries reached the server, want 6", len(arrivals))
	}
	if spread := arrivals[5].Sub(arrivals[0]); spread >= p.Timeout {
		t.Errorf("the six queries reached the server over %v, want within one timeout (%v): they wait for each other", spread, p.Timeout)
	}
}

func TestReverseName(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"10.77.0.1", "1.0.77.10.in-addr.arpa."},
		{"::ffff:10.77.0.1", "1.0.77.10.in-addr.arpa."},
		{"2001:db8::567:89ab", "b.a.9.8.7.6.5.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.8.b.d.0.1.0.0.2.ip6.arpa."},
		{"::1", "1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.ip6.arpa."},
	} {
		got, err := reverseName(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("reverseName(%q) = %q, %v, want %q", tt.in, got, err, tt.want)
		}
		if _, err := dnsmessage.NewName(got); err != nil {
			t.Errorf("reverseName(%q) = %q is not a valid name: %v", tt.in, got, err)
		}
	}
	if _, err := reverseName("app.svc.test"); err == nil {
		t.Error("reverseName(app.svc.test) succeeded, want an error")
	}
}

func TestRcodeName(t *testing.T) {
	for c, want := range map[dnsmessage.RCode]string{
		0: "NOERROR", 2: "SERVFAIL", 3: "NXDOMAIN", 5: "REFUSED", 15: "RCODE15",
	} {
		if got := rcodeName(c); got != want {
			t.Errorf("rcodeName(%d) = %q, want %q", c, got, want)
		}
	}
}
