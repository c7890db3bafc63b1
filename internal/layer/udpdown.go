package layer

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// registerEvery is how often the client of a UDP download tells the
// endpoint where to send, until the first datagram arrives: the
// registration may be lost like any datagram.
const registerEvery = 100 * time.Millisecond

// runUDPDown runs a UDP download: the endpoint sends o.Rate datagrams a
// second of o.Size bytes for o.Duration to the address the client's
// first datagram came from, the client counts what arrives, and the
// endpoint's account says how many it sent.
func runUDPDown(ctx context.Context, o UDPOptions) (*UDPResult, error) {
	k, id, c, err := openUDP(ctx, o, Down)
	if err != nil {
		return nil, err
	}
	defer k.c.Close()
	defer c.Close()
	roomy(c)
	rc := &udpCounter{id: id, recv: newReceiver(packetBudget(o.Rate, o.Duration))}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); rc.read(c) }()
	start := time.Now()
	wait(ctx, rc, c, id, start.Add(o.Duration+drainUDP))
	c.SetReadDeadline(time.Now()) // ends the reader
	wg.Wait()
	f, err := k.finish(0)
	if err != nil {
		return nil, err
	}
	if f.UDP == nil {
		return nil, errors.New("the test endpoint's account has no UDP statistics")
	}
	res := &UDPResult{Dir: Down, Rate: o.Rate, Size: o.Size, Duration: o.Duration}
	res.UDPStats = *rc.recv.stats(f.UDP.Sent)
	res.SentRate = float64(f.UDP.Sent) / o.Duration.Seconds()
	return res, ctx.Err()
}

// wait registers the client with the endpoint until its first datagram
// arrives, then waits for the end (the download's and a drain).
func wait(ctx context.Context, rc *udpCounter, c net.Conn, id testID, end time.Time) {
	reg := make([]byte, MinPacketSize)
	for time.Now().Before(end) && ctx.Err() == nil {
		next := registerEvery
		if !rc.any.Load() {
			putDatagram(reg, id, 0, time.Now())
			c.Write(reg) // a refused one is sent again
		} else {
			next = time.Until(end)
		}
		select {
		case <-ctx.Done():
		case <-time.After(min(next, time.Until(end))):
		}
	}
}

// udpCounter counts the datagrams of one test a client receives.
type udpCounter struct {
	id   testID
	any  atomic.Bool
	recv *receiver // read's only, until it returns
}

// read counts datagrams until c fails (its deadline, its close).
func (rc *udpCounter) read(c net.Conn) {
	buf := make([]byte, 64<<10)
	for {
		n, err := c.Read(buf)
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				return
			}
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue // ECONNREFUSED from an ICMP error: go on reading
		}
		now := time.Now()
		id, seq, sent, ok := parseDatagram(buf[:n])
		if !ok || id != rc.id {
			continue
		}
		rc.recv.add(seq, sent, now)
		rc.any.Store(true)
	}
}
