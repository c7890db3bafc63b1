package lab

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/netdoctor/netdoctor/internal/poll"
)

// startScript runs one of the lab's Python servers on a free loopback
// port, as StartPython would in a namespace, and returns its address.
// It skips the test without python3.
func startScript(t *testing.T, script []byte, args ...string) string {
	t.Helper()
	bin, err := exec.LookPath("/usr/bin/python3")
	if err != nil {
		if bin, err = exec.LookPath("python3"); err != nil {
			t.Skip("python3 not installed (scripts/deps.sh installs it)")
		}
	}
	path := filepath.Join(t.TempDir(), "server.py")
	if err := os.WriteFile(path, script, 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin, append([]string{"-u", path, "--addr", "127.0.0.1:0"}, args...)...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	addr, ok := strings.CutPrefix(strings.TrimSpace(line), "ready ")
	if err != nil || !ok {
		t.Fatalf("%s did not print ready: %q, %v", path, line, err)
	}
	return addr
}

// TestPoolServesAtMostWorkers: with 2 workers and 1 s per request, 6
// requests on 6 connections take 3 rounds, and the 4 waiting ones sit
// unread in their sockets' receive queues; with 6 workers, one round.
// A round is long (the workers' sleep is the thing under test) so that
// what the machine adds to it, busy or not, cannot pass for a round.
func TestPoolServesAtMostWorkers(t *testing.T) {
	const sleep = time.Second
	for _, tt := range []struct {
		workers, rounds int
	}{{2, 3}, {6, 1}} {
		t.Run(strconv.Itoa(tt.workers), func(t *testing.T) {
			addr := startScript(t, poolPy, "--workers", strconv.Itoa(tt.workers), "--sleep", fmt.Sprint(sleep.Seconds()))
			var wg sync.WaitGroup
			start := time.Now()
			errs := make(chan error, 6)
			for range 6 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					errs <- getOnce(addr)
				}()
			}
			// In the first round, the requests that no worker took are
			// still in the kernel.
			want := 6 - tt.workers
			if !poll.Wait(time.Minute, func() bool { return unreadSockets(t, addr) == want }) {
				t.Errorf("%d workers: %d sockets with a request unread, want %d", tt.workers, unreadSockets(t, addr), want)
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				if err != nil {
					t.Fatal(err)
				}
			}
			took := time.Since(start)
			if min, max := time.Duration(tt.rounds)*sleep, time.Duration(tt.rounds)*sleep+sleep*9/10; took < min || took > max {
				t.Errorf("%d workers: 6 requests took %v, want %v to %v (%d rounds of %v)", tt.workers, took, min, max, tt.rounds, sleep)
			}
		})
	}
}

// getOnce sends one request on a new connection and checks the answer.
func getOnce(addr string) error {
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 30 * time.Second}
	resp, err := c.Get("http://" + addr + "/")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 || string(b) != "hello from the pool\n" {
		return fmt.Errorf("got %d %q, %v", resp.StatusCode, b, err)
	}
	return nil
}

// unreadSockets counts the server's established sockets on addr with
// bytes in their receive queue (/proc/net/tcp's rx_queue): requests no
// worker has read.
func unreadSockets(t *testing.T, addr string) int {
	t.Helper()
	_, port, _ := net.SplitHostPort(addr)
	p, _ := strconv.Atoi(port)
	b, err := os.ReadFile("/proc/net/tcp")
	if err != nil {
		t.Skip(err)
	}
	local := fmt.Sprintf(":%04X", p)
	n := 0
	for _, l := range strings.Split(string(b), "\n")[1:] {
		// sl local rem st tx_queue:rx_queue …; state 01 is ESTABLISHED.
		f := strings.Fields(l)
		if len(f) < 5 || !strings.HasSuffix(f[1], local) || f[3] != "01" {
			continue
		}
		if _, rx, _ := strings.Cut(f[4], ":"); strings.Trim(rx, "0") != "" {
			n++
		}
	}
	return n
}

// TestPoolKeepAlive: one connection serves request after request,
// pipelined ones too, and closes when the client asks.
func TestPoolKeepAlive(t *testing.T) {
	addr := startScript(t, poolPy, "--workers", "1", "--sleep", "0")
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	// Two requests in one write, then a third that closes.
	req := "GET / HTTP/1.1\r\nHost: x\r\n\r\n"
	if _, err := io.WriteString(c, req+req); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	for i := range 3 {
		if i == 2 {
			io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("response %d: %v", i+1, err)
		}
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 || string(b) != "hello from the pool\n" || resp.Close != (i == 2) {
			t.Errorf("response %d: %d %q, close %v", i+1, resp.StatusCode, b, resp.Close)
		}
	}
	if n, err := br.ReadByte(); err != io.EOF {
		t.Errorf("after Connection: close, read %q, %v; want EOF", n, err)
	}
}

// TestLookupResolvesPerRequest: the DNS scenario's service answers with
// the address it looked up, on a kept-alive connection, and 502 when
// the name does not resolve.
func TestLookupResolvesPerRequest(t *testing.T) {
	addr := startScript(t, lookupPy, "--name", "localhost")
	c := &http.Client{Timeout: 10 * time.Second}
	for i := range 2 {
		resp, err := c.Get("http://" + addr + "/")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.HasPrefix(string(b), "backend localhost at ") {
			t.Errorf("request %d: %d %q", i+1, resp.StatusCode, b)
		}
	}
	// "-" is no valid host name: glibc refuses it without sending a
	// query, so the test needs no resolver.
	addr = startScript(t, lookupPy, "--name=-")
	resp, err := c.Get("http://" + addr + "/")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadGateway || !strings.Contains(string(b), "cannot resolve") {
		t.Errorf("unresolvable name: %d %q, want 502", resp.StatusCode, b)
	}
}
