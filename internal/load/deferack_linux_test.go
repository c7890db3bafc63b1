package load

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// segsServer answers each connection's one request and closes, noting
// for each the segments its socket had received when the request was
// read: SYN, then the handshake's ACK and the request, in one segment
// or in two.
type segsServer struct {
	ln   net.Listener
	mu   sync.Mutex
	segs []uint32
	wg   sync.WaitGroup
}

func newSegsServer(t *testing.T) *segsServer {
	t.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &segsServer{ln: ln}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				s.serve(c.(*net.TCPConn))
			}()
		}
	}()
	t.Cleanup(func() { ln.Close(); s.wg.Wait() })
	return s
}

func (s *segsServer) serve(c *net.TCPConn) {
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	r := bufio.NewReader(c)
	for {
		l, err := r.ReadString('\n')
		if err != nil {
			return
		}
		if l == "\r\n" {
			break
		}
	}
	rc, err := c.SyscallConn()
	if err != nil {
		return
	}
	var info *unix.TCPInfo
	rc.Control(func(fd uintptr) { info, err = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO) })
	if err == nil {
		s.mu.Lock()
		s.segs = append(s.segs, info.Segs_in)
		s.mu.Unlock()
	}
	c.Write([]byte("HTTP/1.1 200 OK\r\nContent-Length: 3\r\nConnection: close\r\n\r\nok\n"))
}

// TestHandshakeAckRidesOnRequest: a client that speaks first has the
// kernel hold the handshake's last ACK until its request carries it
// (TCP_DEFER_ACCEPT on the connecting socket), on either engine: the
// server's socket has received two segments when the request is read
// (the SYN; the ACK with the request), not three.
func TestHandshakeAckRidesOnRequest(t *testing.T) {
	eachEngine(t, func(t *testing.T, eng Engine) {
		for _, keep := range []bool{false, true} {
			s := newSegsServer(t)
			o := Options{Engine: eng, URL: "http://" + s.ln.Addr().String() + "/", Requests: 20, Connections: 2, Threads: 1, NoKeepAlive: !keep, Duration: 30 * time.Second}
			res := mustRun(t, o)
			if res.Status["2xx"] != 20 {
				t.Fatalf("keep-alive %v: %v answered, errors %+v", keep, res.Status, res.Errors)
			}
			s.ln.Close()
			s.wg.Wait()
			// Most, not all: a loop that stalls longer than the
			// kernel holds the ACK (200 ms, on a busy machine) lets it
			// go alone; none, where nothing holds it.
			var bad []string
			for _, n := range s.segs {
				if n != 2 {
					bad = append(bad, fmt.Sprintf("segs_in %d", n))
				}
			}
			if len(s.segs) != 20 || len(bad) > 5 {
				t.Errorf("keep-alive %v: %d requests read, %s: want (nearly) each read with 2 segments in", keep, len(s.segs), strings.Join(bad, ", "))
			}
		}
	})
}

// TestSpeaksFirst: the ACK is held only where the first bytes go out
// the moment the connection is up; not for a connection opened ahead of
// a paced schedule (it waits idle), nor under a script, whose delay()
// may hold the request (the server would wait up to 200 ms for the
// handshake's end).
func TestSpeaksFirst(t *testing.T) {
	lt := &luaThread{}
	for _, tc := range []struct {
		name     string
		w        *worker
		reserved bool
		want     bool
	}{
		{"closed loop", &worker{}, false, true},
		{"paced, its request waiting", &worker{rate: true}, true, true},
		{"paced, opened ahead", &worker{rate: true}, false, false},
		{"script", &worker{lt: lt}, true, false},
		{"TLS", &worker{tlsCfg: &tls.Config{}}, false, true},
		{"TLS, paced, opened ahead", &worker{tlsCfg: &tls.Config{}, rate: true}, false, true},
	} {
		c := &conn{reserved: tc.reserved}
		if got := tc.w.speaksFirst(c); got != tc.want {
			t.Errorf("%s: speaksFirst %v, want %v", tc.name, got, tc.want)
		}
	}
}
