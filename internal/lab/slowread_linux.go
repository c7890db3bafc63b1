package lab

import (
	"context"
	"fmt"
	"net/netip"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/netdoctor/netdoctor/internal/netns"
)

// AddClientAddrs gives the client's end of the veth n more addresses on
// the lab's subnet (.10 onwards) and returns them: clients bound to them
// are peers of their own to the server.
func (e *Env) AddClientAddrs(n int) ([]string, error) {
	base := netip.MustParseAddr(e.ClientIP).As4()
	if n < 1 || n > 200 {
		return nil, fmt.Errorf("%d client addresses: want 1 to 200", n)
	}
	var out []string
	for i := range n {
		a := base
		a[3] = byte(10 + i)
		ip := netip.AddrFrom4(a).String()
		if err := e.Exec(e.ClientNS, "ip", "addr", "add", ip+"/24", "dev", e.ClientDev); err != nil {
			return nil, err
		}
		out = append(out, ip)
	}
	return out, nil
}

// SlowReaders are clients that ask a server for a large answer and read
// it slowly into a small receive buffer: their windows close, the
// server's Send-Q stays full and it probes their zero windows.
type SlowReaders struct {
	// Conns are the connections' local addresses, "10.99.3.10:41000".
	Conns  []string
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex
	fds    []int
	read   int64
}

// SlowRead describes slow readers.
type SlowRead struct {
	// From are the local addresses, one connection each (round robin
	// when Conns is more); empty: the namespace's own choice.
	From  []string
	Conns int
	// Target is the server's "ip:port", Path what they GET.
	Target, Path string
	// RcvBuf is SO_RCVBUF, set before connecting (the kernel doubles
	// it); Rate the bytes each reads a second, in 1 KiB reads.
	RcvBuf, Rate int
}

// StartSlowReaders connects the readers from namespace ns and reads
// until Stop. Connections that fail to open fail it, the others closed.
func StartSlowReaders(ns netns.NS, o SlowRead) (*SlowReaders, error) {
	if o.Conns < 1 || o.Rate < 1 || o.RcvBuf < 1 {
		return nil, fmt.Errorf("slow readers: conns %d, rate %d, rcvbuf %d: want each at least 1", o.Conns, o.Rate, o.RcvBuf)
	}
	dst, err := netip.ParseAddrPort(o.Target)
	if err != nil || !dst.Addr().Is4() {
		return nil, fmt.Errorf("slow readers: target %q: want an IPv4 ip:port", o.Target)
	}
	ctx, cancel := context.WithCancel(context.Background())
	sr := &SlowReaders{cancel: cancel}
	for i := range o.Conns {
		var fd int
		err := ns.Do(func() error {
			var err error
			fd, err = unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
			if err != nil {
				return err
			}
			if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, o.RcvBuf); err != nil {
				unix.Close(fd)
				return err
			}
			if len(o.From) > 0 {
				a := netip.MustParseAddr(o.From[i%len(o.From)]).As4()
				if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: a}); err != nil {
					unix.Close(fd)
					return err
				}
			}
			if err := unix.Connect(fd, &unix.SockaddrInet4{Addr: dst.Addr().As4(), Port: int(dst.Port())}); err != nil {
				unix.Close(fd)
				return err
			}
			return nil
		})
		if err != nil {
			sr.Stop()
			return nil, fmt.Errorf("slow reader %d: %w", i, err)
		}
		sa, _ := unix.Getsockname(fd)
		if in, ok := sa.(*unix.SockaddrInet4); ok {
			sr.Conns = append(sr.Conns, netip.AddrPortFrom(netip.AddrFrom4(in.Addr), uint16(in.Port)).String())
		}
		sr.mu.Lock()
		sr.fds = append(sr.fds, fd)
		sr.mu.Unlock()
		req := fmt.Sprintf("GET %s HTTP/1.1\r\nHost: %s\r\n\r\n", o.Path, o.Target)
		if _, err := unix.Write(fd, []byte(req)); err != nil {
			sr.Stop()
			return nil, fmt.Errorf("slow reader %d: %w", i, err)
		}
		sr.wg.Add(1)
		go sr.readSlowly(ctx, fd, o.Rate)
	}
	return sr, nil
}

// readSlowly reads 1 KiB at a time, o.Rate bytes a second, until ctx
// ends or the server closes.
func (sr *SlowReaders) readSlowly(ctx context.Context, fd, rate int) {
	defer sr.wg.Done()
	const chunk = 1024
	tick := time.NewTicker(time.Duration(float64(time.Second) * chunk / float64(rate)))
	defer tick.Stop()
	buf := make([]byte, chunk)
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		n, err := unix.Read(fd, buf)
		if n <= 0 || err != nil {
			return
		}
		sr.mu.Lock()
		sr.read += int64(n)
		sr.mu.Unlock()
	}
}

// Read is the bytes they read so far.
func (sr *SlowReaders) Read() int64 {
	sr.mu.Lock()
	defer sr.mu.Unlock()
	return sr.read
}

// Stop closes every connection and waits for the readers.
func (sr *SlowReaders) Stop() {
	sr.cancel()
	sr.mu.Lock()
	fds := sr.fds
	sr.fds = nil
	sr.mu.Unlock()
	// A reader blocked in read(2) wakes when its socket is shut down;
	// closing it would not wake it.
	for _, fd := range fds {
		_ = unix.Shutdown(fd, unix.SHUT_RDWR)
	}
	sr.wg.Wait()
	for _, fd := range fds {
		unix.Close(fd)
	}
}
