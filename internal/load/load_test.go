package load

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/netdoctor/netdoctor/internal/poll"
)

// countingServer is an httptest server that counts requests and new
// connections, as an access log would.
type countingServer struct {
	*httptest.Server
	requests atomic.Int64
	conns    atomic.Int64
}

func newCounting(t *testing.T, h http.HandlerFunc) *countingServer {
	t.Helper()
	s := &countingServer{}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.requests.Add(1)
		if h != nil {
			h(w, r)
			return
		}
		io.WriteString(w, "hello\n")
	}))
	s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			s.conns.Add(1)
		}
	}
	s.Start()
	t.Cleanup(s.Close)
	return s
}

func mustRun(t *testing.T, o Options) *Result {
	t.Helper()
	res, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// TestRequestsExact: -n sends exactly n requests, all counted, over
// connections that are reused.
func TestRequestsExact(t *testing.T) {
	eachEngine(t, func(t *testing.T, eng Engine) {
		s := newCounting(t, nil)
		res := mustRun(t, Options{Engine: eng, URL: s.URL + "/x?y=1", Requests: 1000, Connections: 10, Threads: 2, Duration: 30 * time.Second})
		if res.Requests != 1000 || s.requests.Load() != 1000 || res.Status["2xx"] != 1000 {
			t.Errorf("requests: result %d, 2xx %d, server %d; want 1000 each", res.Requests, res.Status["2xx"], s.requests.Load())
		}
		if s.conns.Load() != 10 || res.ConnectionsOpened != 10 {
			t.Errorf("connections: server saw %d, result %d; want 10 reused ones", s.conns.Load(), res.ConnectionsOpened)
		}
		if res.Errors.Total() != 0 || res.Bytes == 0 || res.Latency.P50 <= 0 || res.Latency.Max < res.Latency.P99 {
			t.Errorf("errors %+v, bytes %d, latency %+v", res.Errors, res.Bytes, res.Latency)
		}
	})
}

// TestNoKeepAlive: one connection per request.
func TestNoKeepAlive(t *testing.T) {
	eachEngine(t, func(t *testing.T, eng Engine) {
		s := newCounting(t, nil)
		res := mustRun(t, Options{Engine: eng, URL: s.URL, Requests: 200, Connections: 5, Threads: 1, NoKeepAlive: true, Duration: 30 * time.Second})
		if res.Requests != 200 || s.requests.Load() != 200 || s.conns.Load() != 200 || res.ConnectionsOpened != 200 {
			t.Errorf("requests %d (server %d), connections server %d result %d; want 200 of each",
				res.Requests, s.requests.Load(), s.conns.Load(), res.ConnectionsOpened)
		}
	})
}

// TestRateHolds: open-loop mode sends at the asked rate.
func TestRateHolds(t *testing.T) {
	oneEngine(t, EngineIOUring, func(t *testing.T, eng Engine) {
		s := newCounting(t, nil)
		res := mustRun(t, Options{Engine: eng, URL: s.URL, Rate: 500, Duration: 3 * time.Second, Connections: 20, Threads: 2})
		if got := res.RPS; got < 490 || got > 510 {
			t.Errorf("rate %.1f req/s, want 500 ± 2%% (%d requests in %v)", got, res.Requests, res.Elapsed)
		}
		if len(res.Timeline) < 3 {
			t.Errorf("timeline has %d seconds, want 3", len(res.Timeline))
		}
	})
}

// stallServer answers at once except during one 1 s pause, when every
// request waits for the pause to end.
func stallServer(t *testing.T, at time.Duration) *countingServer {
	start := time.Now()
	return newCounting(t, func(w http.ResponseWriter, r *http.Request) {
		if since := time.Since(start); since >= at && since < at+time.Second {
			time.Sleep(at + time.Second - since) // the stall under test
		}
		io.WriteString(w, "ok\n")
	})
}

// TestRateShowsStall: a server pausing 1 s shows in the open-loop p99 (the
// requests that should have been sent during the pause wait), while the
// closed loop hides it (it just stops sending).
func TestRateShowsStall(t *testing.T) {
	eachEngine(t, func(t *testing.T, eng Engine) {
		open := mustRun(t, Options{Engine: eng, URL: stallServer(t, time.Second).URL, Rate: 200, Duration: 3 * time.Second, Connections: 10, Threads: 1})
		if open.Latency.P99 < 800*time.Millisecond || open.LatencyAll == nil || open.LatencyAll.P99 < 800*time.Millisecond {
			t.Errorf("open-loop p99 %v (every request's %+v) with a 1 s stall, want ≥ 800ms", open.Latency.P99, open.LatencyAll)
		}
		closed := mustRun(t, Options{Engine: eng, URL: stallServer(t, time.Second).URL, Duration: 3 * time.Second, Connections: 10, Threads: 1})
		if closed.Latency.P99 >= 500*time.Millisecond {
			t.Errorf("closed-loop p99 %v: the stall should hide from it (coordinated omission)", closed.Latency.P99)
		}
		if closed.Latency.Max < 800*time.Millisecond {
			t.Errorf("closed-loop max %v, want the stall (≈1s) as its max", closed.Latency.Max)
		}
	})
}

// fault starts a raw TCP server whose handler gets each connection.
func fault(t *testing.T, handle func(c net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				handle(c)
			}()
		}
	}()
	return "http://" + ln.Addr().String() + "/"
}

// readRequest reads one request head.
func readRequest(c net.Conn) bool {
	buf := make([]byte, 4096)
	got := ""
	for !strings.Contains(got, "\r\n\r\n") {
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		n, err := c.Read(buf)
		if err != nil {
			return false
		}
		got += string(buf[:n])
	}
	return true
}

func TestErrorClasses(t *testing.T) {
	eachEngine(t, func(t *testing.T, eng Engine) {
		closedPort := func() string {
			ln, _ := net.Listen("tcp", "127.0.0.1:0")
			addr := ln.Addr().String()
			ln.Close()
			return "http://" + addr + "/"
		}()
		tests := []struct {
			name   string
			url    string
			check  func(r *Result) bool
			expect string
		}{
			{"refused", closedPort, func(r *Result) bool {
				return r.Errors.Connect > 0 && r.ErrorCauses["refused"] == r.Errors.Connect && r.Requests == 0
			}, "connect errors, cause refused"},
			{"reset mid-response", fault(t, func(c net.Conn) {
				if readRequest(c) {
					io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nabc")
					time.Sleep(10 * time.Millisecond) // the fault under test: a reset mid-response
					c.(*net.TCPConn).SetLinger(0)
				}
			}), func(r *Result) bool { return r.Errors.Read > 0 && r.Requests == 0 }, "read errors"},
			{"never answers", fault(t, func(c net.Conn) {
				readRequest(c)
				time.Sleep(2 * time.Second) // the fault under test: no answer
			}), func(r *Result) bool { return r.Errors.Timeout > 0 && r.Requests == 0 }, "timeouts"},
			{"slow body", fault(t, func(c net.Conn) {
				if readRequest(c) {
					io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n")
					for range 20 {
						if _, err := c.Write([]byte("x")); err != nil {
							return
						}
						time.Sleep(100 * time.Millisecond) // the fault under test: a byte at a time
					}
				}
			}), func(r *Result) bool { return r.Errors.Timeout > 0 && r.Requests == 0 }, "timeouts"},
			{"malformed", fault(t, func(c net.Conn) {
				if readRequest(c) {
					io.WriteString(c, "HTTP/1.1 abc\r\n\r\n")
					time.Sleep(100 * time.Millisecond) // the connection stays open: the malformed head is the error
				}
			}), func(r *Result) bool { return r.Errors.Read > 0 && r.ErrorCauses["malformed"] == r.Errors.Read }, "read errors, cause malformed"},
			{"5xx", newCounting(t, func(w http.ResponseWriter, _ *http.Request) {
				w.WriteHeader(http.StatusServiceUnavailable)
			}).URL, func(r *Result) bool {
				return r.Requests > 0 && r.Status["5xx"] == r.Requests && r.Errors.Total() == 0
			}, "all responses 5xx, no errors"},
		}
		// The faults run at the same time, each against its own server:
		// they wait on timeouts and sleeps, not on CPU, and one after
		// the other they took 9 s per engine.
		results := make([]*Result, len(tests))
		errs := make([]error, len(tests))
		var wg sync.WaitGroup
		for i, tt := range tests {
			wg.Add(1)
			go func() {
				defer wg.Done()
				results[i], errs[i] = Run(context.Background(), Options{Engine: eng, URL: tt.url, Connections: 2, Threads: 1, Duration: 1500 * time.Millisecond, Timeout: 300 * time.Millisecond}) // 1.2 s for a request to time out, however late it starts
			}()
		}
		wg.Wait()
		for i, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				res, err := results[i], errs[i]
				if err != nil {
					t.Fatal(err)
				}
				if !tt.check(res) {
					t.Errorf("want %s; got requests %d, errors %+v, causes %v, status %v", tt.expect, res.Requests, res.Errors, res.ErrorCauses, res.Status)
				}
			})
		}
	})
}

// TestHugeAndChunkedBodies: a 64 MiB body and a chunked one are read in
// full, counted, and do not break the connection.
func TestHugeAndChunkedBodies(t *testing.T) {
	eachEngine(t, func(t *testing.T, eng Engine) {
		const huge = 64 << 20
		s := newCounting(t, func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/chunked" {
				for range 10 {
					io.WriteString(w, strings.Repeat("c", 1000))
					w.(http.Flusher).Flush()
				}
				return
			}
			w.Header().Set("Content-Length", strconv.Itoa(huge))
			io.CopyN(w, zeros{}, huge)
		})
		res := mustRun(t, Options{Engine: eng, URL: s.URL + "/huge", Requests: 3, Connections: 1, Threads: 1, Timeout: 20 * time.Second, Duration: time.Minute})
		if res.Requests != 3 || res.Bytes < 3*huge || res.Errors.Total() != 0 || res.ConnectionsOpened != 1 {
			t.Errorf("huge: requests %d, bytes %d, errors %+v, conns %d", res.Requests, res.Bytes, res.Errors, res.ConnectionsOpened)
		}
		res = mustRun(t, Options{Engine: eng, URL: s.URL + "/chunked", Requests: 50, Connections: 2, Threads: 1, Duration: time.Minute})
		if res.Requests != 50 || res.Bytes < 50*10000 || res.Errors.Total() != 0 || res.ConnectionsOpened != 2 {
			t.Errorf("chunked: requests %d, bytes %d, errors %+v, conns %d", res.Requests, res.Bytes, res.Errors, res.ConnectionsOpened)
		}
	})
}

type zeros struct{}

func (zeros) Read(b []byte) (int, error) { clear(b); return len(b), nil }

func TestTLSAndIPv6(t *testing.T) {
	eachEngine(t, func(t *testing.T, eng Engine) {
		tlsSrv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "tls\n") }))
		defer tlsSrv.Close()
		res := mustRun(t, Options{Engine: eng, URL: tlsSrv.URL, Requests: 100, Connections: 4, Threads: 2, Duration: time.Minute})
		// Keep-alive over TLS: at most one connection per -c. Fewer when the
		// first connections finish all 100 requests before the last
		// handshakes complete, as on a busy machine.
		if res.Requests != 100 || res.Status["2xx"] != 100 || res.ConnectionsOpened == 0 || res.ConnectionsOpened > 4 {
			t.Errorf("https: requests %d, status %v, connections %d, errors %+v %v", res.Requests, res.Status, res.ConnectionsOpened, res.Errors, res.ErrorCauses)
		}
		ln, err := net.Listen("tcp6", "[::1]:0")
		if err != nil {
			t.Skipf("no IPv6 loopback: %v", err)
		}
		s6 := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "v6\n") })}
		go s6.Serve(ln)
		defer s6.Close()
		res = mustRun(t, Options{Engine: eng, URL: "http://" + ln.Addr().String() + "/", Requests: 100, Connections: 2, Threads: 1, Duration: time.Minute})
		if res.Requests != 100 || res.Status["2xx"] != 100 {
			t.Errorf("IPv6: requests %d, status %v, errors %v", res.Requests, res.Status, res.ErrorCauses)
		}
	})
}

// TestCancel: Ctrl-C ends a long run at once with what was measured.
func TestCancel(t *testing.T) {
	eachEngine(t, func(t *testing.T, eng Engine) {
		s := newCounting(t, nil)
		ctx, cancel := context.WithCancel(context.Background())
		var cancelled atomic.Int64
		go func() {
			// Once requests flow, as a user's Ctrl-C comes mid-run.
			poll.Wait(time.Minute, func() bool { return s.requests.Load() >= 100 })
			cancelled.Store(time.Now().UnixNano())
			cancel()
		}()
		res, err := Run(ctx, Options{Engine: eng, URL: s.URL, Duration: time.Minute, Connections: 4, Threads: 2})
		if err != nil {
			t.Fatal(err)
		}
		// At once: well before the run's minute, however busy the machine.
		if took := time.Since(time.Unix(0, cancelled.Load())); took > 20*time.Second || !res.Interrupted || res.Requests == 0 {
			t.Errorf("cancelled run ended %v after the cancel, interrupted %v, requests %d", took, res.Interrupted, res.Requests)
		}
	})
}

func TestBadOptions(t *testing.T) {
	for _, o := range []Options{
		{URL: "ftp://127.0.0.1/"}, {URL: "127.0.0.1:80"}, {URL: "http://"}, {URL: "http://[::1"},
		{URL: "http://127.0.0.1/", Connections: -1}, {URL: "http://127.0.0.1/", Header: []string{"NoColon"}},
	} {
		if _, err := Run(context.Background(), o); !errors.Is(err, ErrInvalid) {
			t.Errorf("Run(%+v) = %v, want ErrInvalid", o, err)
		}
	}
	if _, err := Run(context.Background(), Options{URL: "http://no-such-host.invalid/"}); !errors.Is(err, ErrResolve) {
		t.Errorf("unresolvable host: %v, want ErrResolve", err)
	}
}

// TestReqPerSec: wrk's Req/Sec, each thread's rate sampled every 100 ms,
// averages about the whole rate shared among the threads; the latency's
// spread has its share within one deviation.
func TestReqPerSec(t *testing.T) {
	oneEngine(t, EngineEpoll, func(t *testing.T, eng Engine) {
		s := newCounting(t, nil)
		res := mustRun(t, Options{Engine: eng, URL: s.URL, Connections: 4, Threads: 2, Duration: time.Second})
		r := res.ReqPerSec
		// About ten samples per thread over a second, the last partial one
		// perhaps dropped.
		if r.Samples < 12 || r.Samples > 22 {
			t.Errorf("%d rate samples from 2 threads over 1 s, want about 20", r.Samples)
		}
		if perThread := res.RPS / 2; r.Mean < perThread/2 || r.Mean > perThread*2 || r.Max < r.Mean || r.WithinStdev <= 0 || r.WithinStdev > 100 {
			t.Errorf("Req/Sec %+v, for %.0f req/s over 2 threads", r, res.RPS)
		}
		l := res.LatencySpread
		if l.Samples != int64(res.Requests) || l.Mean <= 0 || l.Max < l.Mean || l.WithinStdev <= 0 || l.WithinStdev > 100 {
			t.Errorf("latency spread %+v over %d requests", l, res.Requests)
		}
	})
}

// TestLatencyAll: three requests in four are never answered and time
// out. The answered requests' latency hides them; the latency of every
// request counts each timeout at the time it timed out, and the success
// share counts them failed.
func TestLatencyAll(t *testing.T) {
	eachEngine(t, func(t *testing.T, eng Engine) {
		var n atomic.Int64
		url := fault(t, func(c net.Conn) {
			for readRequest(c) {
				if n.Add(1)%4 != 0 {
					readRequest(c) // never answered: the client times out and closes
					return
				}
				io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nok\n")
			}
		})
		const timeout = 300 * time.Millisecond
		res := mustRun(t, Options{Engine: eng, URL: url, Connections: 4, Threads: 1, Duration: 1500 * time.Millisecond, Timeout: timeout})
		if res.Requests == 0 || res.Errors.Timeout == 0 || res.LatencyAll == nil {
			t.Fatalf("requests %d, errors %+v, latency_all %v: want answers and timeouts", res.Requests, res.Errors, res.LatencyAll)
		}
		if res.Latency.Max >= timeout {
			t.Errorf("answered requests' max %v: none can take the timeout", res.Latency.Max)
		}
		if res.LatencyAll.P50 < timeout || res.LatencyAll.Max < res.LatencyAll.P50 || res.LatencyAll.Min > res.Latency.Min {
			t.Errorf("every request's latency %+v: want p50 at least the timeout %v (3 in 4 timed out), min the answered ones' %v", *res.LatencyAll, timeout, res.Latency.Min)
		}
		if s := res.SuccessShare(); s <= 0 || s >= 0.5 {
			t.Errorf("success share %.2f: want about a quarter (%d answered, %d timed out)", s, res.Requests, res.Errors.Timeout)
		}
	})
}

// TestRateQueuedUnsent: an open loop at 50 requests/s on one connection
// to a server that takes 100 ms a request: most requests wait in the
// generator for the connection (Queued), those still waiting at the end
// are Unsent and failed in the success share, and the measured part
// after the warm-up counts only what ended in it.
func TestRateQueuedUnsent(t *testing.T) {
	oneEngine(t, EngineIOUring, func(t *testing.T, eng Engine) {
		s := newCounting(t, func(w http.ResponseWriter, _ *http.Request) {
			time.Sleep(100 * time.Millisecond) // the server's service time under test
			io.WriteString(w, "ok\n")
		})
		res := mustRun(t, Options{Engine: eng, URL: s.URL, Rate: 50, Connections: 1, Threads: 1, Duration: 1500 * time.Millisecond, Measure: 500 * time.Millisecond, Timeout: 5 * time.Second})
		if res.Queued == 0 || res.Unsent == 0 {
			t.Errorf("queued %d, unsent %d: want requests waiting for the one connection", res.Queued, res.Unsent)
		}
		if share := res.SuccessShare(); share >= 0.5 || float64(res.Good())/float64(res.Good()+res.Unsent) != share {
			t.Errorf("success share %.2f with %d answered and %d never sent", share, res.Good(), res.Unsent)
		}
		m := res.Measured
		if m == nil {
			t.Fatal("no measured part")
		}
		if m.Requests == 0 || m.Requests >= res.Requests || m.Unsent != res.Unsent || m.Seconds <= 0.9 || m.Seconds > res.DurationS {
			t.Errorf("measured %+v of %d responses, %d unsent, %.2f s", *m, res.Requests, res.Unsent, res.DurationS)
		}
		if p := m.Percentile(99); p != m.LatencyAll.P99 || p < m.Latency.P50 || m.Ended() != m.Requests+m.Unsent {
			t.Errorf("measured p99 of every request %v (summary %v), answered p50 %v; ended %d", p, m.LatencyAll.P99, m.Latency.P50, m.Ended())
		}
	})
}

// TestRateGrow: an open loop with Grow opens connections as requests
// need them: at 100 requests/s to a server that takes 20 ms, about two
// are in flight, far from the 50 allowed, and none waits in the
// generator.
func TestRateGrow(t *testing.T) {
	oneEngine(t, EngineEpoll, func(t *testing.T, eng Engine) {
		s := newCounting(t, func(w http.ResponseWriter, _ *http.Request) {
			time.Sleep(20 * time.Millisecond) // the server's service time under test
			io.WriteString(w, "ok\n")
		})
		res := mustRun(t, Options{Engine: eng, URL: s.URL, Rate: 100, Connections: 50, Grow: true, Threads: 1, Duration: 2 * time.Second})
		if res.Requests < 150 || res.Errors.Total() != 0 {
			t.Fatalf("requests %d, errors %+v", res.Requests, res.Errors)
		}
		if res.ConnectionsOpened >= 50 || s.conns.Load() != int64(res.ConnectionsOpened) || res.Queued != 0 || res.Unsent != 0 {
			t.Errorf("opened %d (server saw %d), queued %d, unsent %d: want the few connections the requests needed", res.ConnectionsOpened, s.conns.Load(), res.Queued, res.Unsent)
		}
	})
}
