package lab

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/netdoctor/netdoctor/internal/poll"
)

// backend is a keep-alive HTTP server on loopback that never closes a
// connection first unless told to, and records each connection: how
// many requests it carried and whether the peer (the proxy) closed it.
type backend struct {
	ln net.Listener
	// closeAfter, when > 0, makes the backend close each connection
	// after that many requests, as a server's keep-alive limit would.
	closeAfter int

	mu       sync.Mutex
	conns    []*backendStat
	requests []*http.Request
}

type backendStat struct {
	requests     int
	closedByPeer bool
	closed       bool // the connection is closed, by either side
}

func newBackend(t *testing.T, closeAfter int) *backend {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &backend{ln: ln, closeAfter: closeAfter}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go b.serve(c)
		}
	}()
	return b
}

func (b *backend) serve(c net.Conn) {
	st := &backendStat{}
	defer func() {
		c.Close()
		b.mu.Lock()
		st.closed = true
		b.mu.Unlock()
	}()
	b.mu.Lock()
	b.conns = append(b.conns, st)
	b.mu.Unlock()
	br := bufio.NewReader(c)
	for {
		req, err := http.ReadRequest(br)
		if err != nil {
			b.mu.Lock()
			st.closedByPeer = errors.Is(err, io.EOF)
			b.mu.Unlock()
			return
		}
		io.Copy(io.Discard, req.Body)
		b.mu.Lock()
		st.requests++
		b.requests = append(b.requests, req)
		n := st.requests
		b.mu.Unlock()
		io.WriteString(c, "HTTP/1.1 201 Created\r\nX-Backend: yes\r\nContent-Length: 6\r\n\r\nhello\n")
		if b.closeAfter > 0 && n >= b.closeAfter {
			return
		}
	}
}

// closed waits until n connections were closed, by either side.
func (b *backend) closed(t *testing.T, n int) {
	t.Helper()
	poll.True(t, time.Minute, fmt.Sprintf("%d backend connections closed", n), func() bool {
		k := 0
		for _, s := range b.stats() {
			if s.closed {
				k++
			}
		}
		return k >= n
	})
}

func (b *backend) stats() []backendStat {
	b.mu.Lock()
	defer b.mu.Unlock()
	var s []backendStat
	for _, c := range b.conns {
		s = append(s, *c)
	}
	return s
}

// startProxy serves p on a free loopback port until the test ends.
func startProxy(t *testing.T, p Proxy) (url string, errs *syncBuffer) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p.Listen = ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithCancel(context.Background())
	var out syncBuffer
	errs = &syncBuffer{}
	done := make(chan error, 1)
	go func() { done <- ServeProxy(ctx, p, &out, errs) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("ServeProxy: %v", err)
		}
	})
	poll.True(t, time.Minute, "proxy ready", func() bool { return strings.Contains(out.String(), "ready") })
	return "http://" + p.Listen + "/", errs
}

// syncBuffer is a bytes.Buffer safe for a server's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// getN sends n requests on one client connection and checks each answer
// is the backend's, passed through.
func getN(t *testing.T, url string, n int) {
	t.Helper()
	c := &http.Client{Timeout: 5 * time.Second}
	for i := range n {
		resp, err := c.Get(url + "?i=" + string(rune('a'+i)))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusCreated || string(b) != "hello\n" || resp.Header.Get("X-Backend") != "yes" {
			t.Fatalf("request %d: %d %q %v", i+1, resp.StatusCode, b, resp.Header)
		}
	}
}

// TestProxyChurn: without keepalive, a backend connection per request,
// closed by the proxy (so its TIME_WAIT stays on the proxy's side), and
// no "Connection: close" asked of the backend, which would close first.
func TestProxyChurn(t *testing.T) {
	be := newBackend(t, 0)
	url, _ := startProxy(t, Proxy{Backend: be.ln.Addr().String()})
	getN(t, url, 5)
	// The last close reaches the backend just after the response.
	be.closed(t, 5)
	st := be.stats()
	if len(st) != 5 {
		t.Fatalf("%d backend connections for 5 requests, want 5: %+v", len(st), st)
	}
	for i, s := range st {
		if s.requests != 1 || !s.closedByPeer {
			t.Errorf("connection %d: %d requests, closed by the proxy %v; want 1, true", i+1, s.requests, s.closedByPeer)
		}
	}
	be.mu.Lock()
	defer be.mu.Unlock()
	for _, r := range be.requests {
		if r.Close || r.Header.Get("Connection") != "" {
			t.Errorf("the proxy asked the backend to close: %v", r.Header)
		}
		if !strings.HasPrefix(r.URL.RawQuery, "i=") {
			t.Errorf("query lost: %q", r.URL)
		}
	}
}

// TestProxyKeepalive: with keepalive, sequential requests share one
// backend connection.
func TestProxyKeepalive(t *testing.T) {
	be := newBackend(t, 0)
	url, _ := startProxy(t, Proxy{Backend: be.ln.Addr().String(), Keepalive: true})
	getN(t, url, 5)
	if st := be.stats(); len(st) != 1 || st[0].requests != 5 {
		t.Errorf("backend connections %+v, want one with 5 requests", st)
	}
}

// TestProxyKeepaliveRetries: a pooled connection the backend closed
// meanwhile costs the client nothing: the proxy dials again.
func TestProxyKeepaliveRetries(t *testing.T) {
	be := newBackend(t, 1)
	url, errs := startProxy(t, Proxy{Backend: be.ln.Addr().String(), Keepalive: true})
	for i := range 3 {
		getN(t, url, 1)
		// The backend closed the pooled connection before the next request.
		be.closed(t, i+1)
	}
	if st := be.stats(); len(st) != 3 {
		t.Errorf("backend connections %+v, want 3 of one request each", st)
	}
	if e := errs.String(); e != "" {
		t.Errorf("proxy errors: %s", e)
	}
}

// TestProxyBadGateway: when the backend cannot be reached the client
// gets a 502 and the proxy logs why, as it does when connect finds no
// free local port.
func TestProxyBadGateway(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // Nothing listens there now: connect is refused.
	url, errs := startProxy(t, Proxy{Backend: addr})
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadGateway || !strings.Contains(string(b), "connect") {
		t.Errorf("got %d %q, want 502 naming the connect error", resp.StatusCode, b)
	}
	if !strings.Contains(errs.String(), "http: proxy error: dial tcp "+addr) {
		t.Errorf("proxy log %q names no dial error", errs.String())
	}
}
