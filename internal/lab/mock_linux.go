package lab

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

// Mock is seed 003's service: a fixed pool of worker threads (Tomcat's
// model: one thread per connection) that each take a connection from the
// listen queue, spend Sleep on the request, optionally append a line to
// a shared log under an exclusive file lock held for LogHold, answer and
// close. No real server shows that accept-queue overflow and then that
// lock contention on demand, hence a built-in one.
type Mock struct {
	Addr    string // "ip:port"
	Backlog int    // listen(2) backlog: the seed's 50
	Workers int
	Sleep   time.Duration
	LogFile string // empty: no log
	LogHold time.Duration
}

// ServeMock serves until ctx ends, printing "ready" to out once listening.
func ServeMock(ctx context.Context, m Mock, out io.Writer) error {
	ln, err := listenBacklog(m.Addr, m.Backlog)
	if err != nil {
		return err
	}
	// Each worker opens the log itself, as threads of the seed's logger
	// or separate processes would: flock locks belong to an open file
	// description, so workers sharing one would never wait on each other.
	logs := make([]*os.File, max(m.Workers, 1))
	if m.LogFile != "" {
		for i := range logs {
			if logs[i], err = os.OpenFile(m.LogFile, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644); err != nil {
				ln.Close()
				return err
			}
			defer logs[i].Close()
		}
	}
	fmt.Fprintln(out, "ready")
	go func() { <-ctx.Done(); ln.Close() }()
	var wg sync.WaitGroup
	for _, log := range logs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Blocking calls (flock, sleep via the thread) keep a
			// thread per worker, as in the seed's Java service.
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				m.serve(c, log)
			}
		}()
	}
	wg.Wait()
	return nil
}

func (m Mock) serve(c net.Conn, log *os.File) {
	defer c.Close()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	req, err := http.ReadRequest(bufio.NewReader(c))
	if err != nil {
		return
	}
	time.Sleep(m.Sleep)
	if log != nil {
		fd := int(log.Fd())
		syscall.Flock(fd, syscall.LOCK_EX)
		fmt.Fprintf(log, "%s %s %s served\n", time.Now().Format(time.RFC3339Nano), req.Method, req.URL.Path)
		// The seed's logger wrote synchronously while holding its lock.
		time.Sleep(m.LogHold)
		syscall.Flock(fd, syscall.LOCK_UN)
	}
	body := "hello from the mock\n"
	io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nConnection: close\r\nContent-Length: "+strconv.Itoa(len(body))+"\r\n\r\n"+body)
}

// listenBacklog listens on addr with an exact listen(2) backlog: Go's
// net.Listen always asks for somaxconn.
func listenBacklog(addr string, backlog int) (net.Listener, error) {
	ap, err := net.ResolveTCPAddr("tcp4", addr)
	if err != nil {
		return nil, err
	}
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	sa := &syscall.SockaddrInet4{Port: ap.Port}
	copy(sa.Addr[:], ap.IP.To4())
	if err := syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_REUSEADDR, 1); err != nil {
		syscall.Close(fd)
		return nil, err
	}
	if err := syscall.Bind(fd, sa); err != nil {
		syscall.Close(fd)
		return nil, fmt.Errorf("bind %s: %w", addr, err)
	}
	if err := syscall.Listen(fd, backlog); err != nil {
		syscall.Close(fd)
		return nil, err
	}
	f := os.NewFile(uintptr(fd), "listener")
	defer f.Close()
	return net.FileListener(f)
}

// Relay is a DNS forwarder standing in for a far or broken resolver
// (there is no netem here to delay packets): it holds every query for
// Delay before passing it to Upstream, and never answers reverse (PTR)
// queries when DropPTR is set — seed 001 §5's resolver that let ping
// wait 11 s.
type Relay struct {
	Listen   string // "ip:53"
	Upstream string // "ip:53"
	Delay    time.Duration
	DropPTR  bool
}

// ServeRelay relays until ctx ends, printing "ready" to out once bound.
func ServeRelay(ctx context.Context, r Relay, out io.Writer) error {
	pc, err := net.ListenPacket("udp4", r.Listen)
	if err != nil {
		return err
	}
	up, err := net.ResolveUDPAddr("udp4", r.Upstream)
	if err != nil {
		pc.Close()
		return err
	}
	fmt.Fprintln(out, "ready")
	go func() { <-ctx.Done(); pc.Close() }()
	buf := make([]byte, 4096)
	for {
		n, from, err := pc.ReadFrom(buf)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		q := append([]byte(nil), buf[:n]...)
		if r.DropPTR && isPTR(q) {
			continue
		}
		go func() {
			time.Sleep(r.Delay)
			c, err := net.DialUDP("udp4", nil, up)
			if err != nil {
				return
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(5 * time.Second))
			if _, err := c.Write(q); err != nil {
				return
			}
			b := make([]byte, 4096)
			m, err := c.Read(b)
			if err != nil {
				return
			}
			pc.WriteTo(b[:m], from)
		}()
	}
}

func isPTR(msg []byte) bool {
	var p dnsmessage.Parser
	if _, err := p.Start(msg); err != nil {
		return false
	}
	q, err := p.Question()
	return err == nil && q.Type == dnsmessage.TypePTR
}
