package cli

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/netdoctor/netdoctor/internal/lab"
	"github.com/netdoctor/netdoctor/internal/poll"
)

// TestMain lets the test binary double as the helper process that owns
// sockets inside a test namespace: with ND_HELPER set it runs that role
// instead of the tests.
func TestMain(m *testing.M) {
	if fakeMain() {
		os.Exit(0)
	}
	switch os.Getenv("ND_HELPER") {
	case "":
		// The lab starts netdoctor (its run, its built-in servers) as
		// this binary in the "cli" role.
		lab.Self = func() (string, []string) { return os.Args[0], []string{"ND_HELPER=cli"} }
		workerSelf = lab.Self // capacity --workers's workers too
		os.Exit(m.Run())
	case "cli":
		// netdoctor itself, as cmd/netdoctor runs it.
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		code := Run(ctx, os.Args[1:], os.Stdout, os.Stderr)
		stop()
		if f := os.Getenv("ND_PEAK_FILE"); f != "" {
			writePeak(f)
		}
		os.Exit(code)
	case "sockets":
		helperSockets()
	case "noaccept":
		helperNoAccept()
	case "udprecv":
		helperUDPRecv()
	case "udpburst":
		helperUDPBurst()
	case "depbackend", "depapi":
		helperDeps(os.Getenv("ND_HELPER"))
	case "httpbackend":
		helperHTTPBackend()
	case "httpfront":
		helperHTTPFront()
	case "serve":
		// A server for a run from another namespace: ND_SERVER as for
		// "run", listening on ND_ADDR; prints "ready" and serves until
		// stdin closes.
		serveAt(os.Getenv("ND_SERVER"), os.Getenv("ND_ADDR"))
		fmt.Println("ready")
		bufio.NewReader(os.Stdin).ReadString('\n')
	case "spin":
		// A busy neighbour: one thread on CPU until stdin closes.
		go func() {
			runtime.LockOSThread()
			for x := uint64(1); ; x = x*6364136223846793005 + 1 {
			}
		}()
		fmt.Println("ready")
		bufio.NewReader(os.Stdin).ReadString('\n')
	case "runremote":
		args := strings.Fields(os.Getenv("ND_RUN_ARGS"))
		os.Exit(Run(context.Background(), args, os.Stdout, os.Stderr))
	case "run":
		// Run netdoctor run inside the namespace against a server there:
		// ND_SERVER=slow listens with backlog 8 and accepts a connection
		// every 20 ms; otherwise a plain Go server.
		url := serveForRun(os.Getenv("ND_SERVER"))
		args := append(strings.Fields(os.Getenv("ND_RUN_ARGS")), url)
		os.Exit(Run(context.Background(), args, os.Stdout, os.Stderr))
	case "load":
		// Run netdoctor load inside the namespace against a server there.
		s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok\n") }))
		defer s.Close()
		args := append(strings.Fields(os.Getenv("ND_LOAD_ARGS")), s.URL)
		os.Exit(Run(context.Background(), args, os.Stdout, os.Stderr))
	}
	os.Exit(0)
}

// listenFD opens a listener with an exact listen() backlog.
func listenFD(family int, addr string, port, backlog int) int {
	fd, err := syscall.Socket(family, syscall.SOCK_STREAM, 0)
	must(err)
	must(syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_REUSEADDR, 1))
	if family == syscall.AF_INET6 {
		must(syscall.Bind(fd, &syscall.SockaddrInet6{Port: port, Addr: [16]byte{15: 1}}))
	} else {
		ip := net.ParseIP(addr).To4()
		must(syscall.Bind(fd, &syscall.SockaddrInet4{Port: port, Addr: [4]byte(ip)}))
	}
	must(syscall.Listen(fd, backlog))
	return fd
}

func must(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		os.Exit(3)
	}
}

// helperSockets builds a known socket table: three listeners that never
// accept (backlogs 5, 3, 7), three connections waiting in the first one's
// queue, one pair in CLOSE_WAIT/FIN_WAIT2 and four client TIME_WAITs.
func helperSockets() {
	listenFD(syscall.AF_INET, "127.0.0.1", 7001, 5)
	listenFD(syscall.AF_INET6, "::1", 7002, 3)
	listenFD(syscall.AF_INET, "127.0.0.2", 7003, 7)
	var keep []net.Conn
	for range 3 {
		c, err := net.Dial("tcp", "127.0.0.1:7001")
		must(err)
		keep = append(keep, c)
	}
	// A server that accepts and closes: the client keeps its end open, so
	// the client sits in CLOSE_WAIT and the server in FIN_WAIT2.
	ln, err := net.Listen("tcp", "127.0.0.1:7004")
	must(err)
	c, err := net.Dial("tcp", "127.0.0.1:7004")
	must(err)
	keep = append(keep, c)
	s, err := ln.Accept()
	must(err)
	s.Close()
	// Four connections the client closes first: TIME_WAIT on the client
	// side; the server side closes on EOF and is gone after the last ACK.
	for range 4 {
		c, err := net.Dial("tcp", "127.0.0.1:7004")
		must(err)
		s, err := ln.Accept()
		must(err)
		c.Close()
		buf := make([]byte, 1)
		s.Read(buf)
		s.Close()
	}
	ln.Close()
	// The last ACKs land: the four client ends in TIME_WAIT, no server
	// end left closing.
	if !poll.Wait(time.Minute, func() bool {
		st := tcpStates()
		return st["06"] == 4 && st["04"]+st["09"]+st["0B"] == 0
	}) {
		fmt.Fprintln(os.Stderr, "helper: sockets still closing:", tcpStates())
		os.Exit(3)
	}
	fmt.Println("ready")
	bufio.NewReader(os.Stdin).ReadString('\n')
	_ = keep
}

// helperNoAccept listens with backlog 128 on 127.0.0.1:7100 and never
// accepts; on a "go" line it opens connections to itself without waiting
// for them, overflowing the queue: 50 at once ("sent"), then 5 more
// every 10 ms until its next line, so that the queue overflows all
// through whatever window a test observes, however late it starts. The
// oldest client sockets are closed to stay within 200 descriptors.
func helperNoAccept() {
	listenFD(syscall.AF_INET, "127.0.0.1", 7100, 128)
	fmt.Println("ready")
	r := bufio.NewReader(os.Stdin)
	line, _ := r.ReadString('\n')
	if strings.TrimSpace(line) != "go" {
		return
	}
	var fds []int
	connect := func(n int) {
		for range n {
			fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_NONBLOCK, 0)
			must(err)
			syscall.Connect(fd, &syscall.SockaddrInet4{Port: 7100, Addr: [4]byte{127, 0, 0, 1}}) // EINPROGRESS
			fds = append(fds, fd)
		}
		for len(fds) > 200 {
			syscall.Close(fds[0])
			fds = fds[1:]
		}
	}
	connect(50)
	fmt.Println("sent")
	stop := make(chan struct{})
	go func() { r.ReadString('\n'); close(stop) }()
	for {
		select {
		case <-stop:
			return
		case <-time.After(10 * time.Millisecond):
			connect(5)
		}
	}
}

// testNetns creates a named namespace with loopback up and removes it
// when the test ends.
func testNetns(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to create network namespaces")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("needs ip(8) from iproute2 to create network namespaces")
	}
	name := fmt.Sprintf("ndtest-%d-%d", os.Getpid(), netnsTurn.Add(1))
	mustExec(t, "ip", "netns", "add", name)
	t.Cleanup(func() { exec.Command("ip", "netns", "del", name).Run() })
	mustExec(t, "ip", "-n", name, "link", "set", "lo", "up")
	mustExec(t, "ip", "-n", name, "addr", "add", "127.0.0.2/8", "dev", "lo")
	return name
}

var netnsTurn atomic.Int64

func mustExec(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// helper starts the test binary as a helper inside the namespace and
// waits for its "ready" line.
type helperProc struct {
	cmd   *exec.Cmd
	stdin interface{ Write([]byte) (int, error) }
	out   *bufio.Reader
}

func startHelper(t *testing.T, ns, role string, env ...string) *helperProc {
	t.Helper()
	cmd := exec.Command("ip", "netns", "exec", ns, os.Args[0])
	cmd.Env = append(append(os.Environ(), "ND_HELPER="+role), env...)
	return startReady(t, cmd)
}

// startReady starts cmd and waits for its "ready" line; it is killed
// when the test ends.
func startReady(t *testing.T, cmd *exec.Cmd) *helperProc {
	t.Helper()
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stdin.Close(); cmd.Process.Kill(); cmd.Wait() })
	h := &helperProc{cmd: cmd, stdin: stdin, out: bufio.NewReader(stdout)}
	h.expect(t, "ready")
	return h
}

func (h *helperProc) expect(t *testing.T, want string) {
	t.Helper()
	line, err := h.out.ReadString('\n')
	if strings.TrimSpace(line) != want {
		t.Fatalf("%s said %q (%v), want %q", h.cmd.Args, line, err, want)
	}
}

// serveForRun starts the server a run helper loads, in this process.
func serveForRun(kind string) string {
	if kind != "slow" {
		s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok\n") }))
		return s.URL
	}
	serveAt(kind, "127.0.0.1:7200")
	return "http://127.0.0.1:7200/"
}

// serveAt serves on addr: "slow" with backlog 8 and one accept every
// 20 ms; "goslow" as slow, but listening as Go programs do (net.Listen,
// whose backlog is net.core.somaxconn); else with backlog 4096 and no
// delay.
//
// With ND_EXIT_AFTER=N the process exits once it has answered N
// requests: a server that dies in the middle of a load, whenever the
// load begins.
func serveAt(kind, addr string) {
	exitAfter, _ := strconv.ParseInt(os.Getenv("ND_EXIT_AFTER"), 10, 64)
	var served atomic.Int64
	h := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		io.WriteString(w, "ok\n")
		if n := served.Add(1); exitAfter > 0 && n >= exitAfter {
			os.Exit(0)
		}
	})
	host, port, _ := net.SplitHostPort(addr)
	p, _ := strconv.Atoi(port)
	backlog, pause := 4096, time.Duration(0)
	switch kind {
	case "slow":
		backlog, pause = 8, 20*time.Millisecond
	case "slowbig", "goslow": // asks for a large backlog; somaxconn decides
		pause = 20 * time.Millisecond
	}
	if kind == "goslow" {
		ln, err := net.Listen("tcp", addr)
		must(err)
		go acceptSlowly(ln, h, pause)
		return
	}
	fd := listenFD(syscall.AF_INET, host, p, backlog)
	if kind == "burn" {
		// A CPU-bound server: each request hashes for about 2 ms in
		// burnRequest, the function its profile must name.
		ln, err := net.FileListener(os.NewFile(uintptr(fd), "listener"))
		must(err)
		go http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			fmt.Fprintf(w, "%x\n", burnRequest(400000))
		}))
		return
	}
	if kind == "tls" {
		// An HTTPS server with a fresh RSA-2048 key: under a load that
		// opens a connection per request, its CPU is the handshakes in
		// crypto/tls, the second kind of server for tls-handshakes.
		ln, err := net.FileListener(os.NewFile(uintptr(fd), "listener"))
		must(err)
		go http.Serve(tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{rsaSelfSigned()}}), h)
		return
	}
	if kind == "stalllog" {
		// Every tenth request held 2 s, each hold written to the
		// server's own log (ND_LOG, opened for appending as loggers do):
		// a fault netdoctor has no rule for, in words only the server
		// knows.
		logf, err := os.OpenFile(os.Getenv("ND_LOG"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		must(err)
		logger := log.New(logf, "", log.LstdFlags|log.Lmicroseconds)
		ln, err := net.FileListener(os.NewFile(uintptr(fd), "listener"))
		must(err)
		go http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			if n := served.Add(1); n%10 == 0 {
				logger.Printf("WARN upstream inventory-svc did not answer in %dms, request %d held", 2000+n%7, n)
				time.Sleep(2 * time.Second) // the fault under test
			}
			io.WriteString(w, "ok\n")
		}))
		return
	}
	if kind == "bulk" {
		ln, err := net.FileListener(os.NewFile(uintptr(fd), "listener"))
		must(err)
		go serveBulk(ln)
		return
	}
	if kind == "nagle" {
		ln, err := net.FileListener(os.NewFile(uintptr(fd), "listener"))
		must(err)
		go serveNagle(ln)
		return
	}
	ln, err := net.FileListener(os.NewFile(uintptr(fd), "listener"))
	must(err)
	go acceptSlowly(ln, h, pause)
}

// acceptSlowly serves each connection ln accepts with h, pausing after
// each accept: an accept loop slower than the load.
func acceptSlowly(ln net.Listener, h http.Handler, pause time.Duration) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go http.Serve(&oneConn{c: c}, h)
		time.Sleep(pause) // the slow accept loop under test
	}
}

// burnRequest is the CPU a "burn" server spends on a request: a hash
// over n rounds, never inlined, so that a profile names it.
//
//go:noinline
func burnRequest(n int) uint64 {
	h := uint64(14695981039346656037)
	for i := range n {
		h ^= uint64(i)
		h *= 1099511628211
	}
	return h
}

// tcpStates counts this namespace's TCP sockets, IPv4 and IPv6, by
// /proc/net/tcp's hexadecimal state ("06" is TIME_WAIT).
func tcpStates() map[string]int {
	n := map[string]int{}
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, err := os.ReadFile(f)
		must(err)
		for _, l := range strings.Split(string(b), "\n")[1:] {
			if f := strings.Fields(l); len(f) > 3 {
				n[f[3]]++
			}
		}
	}
	return n
}

// oneConn is a listener that yields one connection, so a slow accept loop
// can hand each accepted connection to net/http.
type oneConn struct {
	c    net.Conn
	done bool
}

func (o *oneConn) Accept() (net.Conn, error) {
	if o.done {
		select {} // net/http stops serving when Accept fails; keep it serving c
	}
	o.done = true
	return o.c, nil
}
func (o *oneConn) Close() error   { return nil }
func (o *oneConn) Addr() net.Addr { return o.c.LocalAddr() }

// serveNagle answers each request with two small writes (headers, then
// body) on a socket with Nagle on: the write-write-read pattern of seed
// 001 §7 (nginx with tcp_nodelay off).
func serveNagle(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		c.(*net.TCPConn).SetNoDelay(false)
		go func() {
			defer c.Close()
			r := bufio.NewReader(c)
			for {
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					if line == "\r\n" {
						break
					}
				}
				io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n")
				io.WriteString(c, strings.Repeat("x", 100))
			}
		}()
	}
}

// rsaSelfSigned is a certificate for 127.0.0.0/8 and the lab's addresses
// with a new RSA-2048 key.
func rsaSelfSigned() tls.Certificate {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	must(err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "netdoctor test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	must(err)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}
