package layer

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"
)

// UDPOptions is one UDP test: datagrams of Size bytes at Rate per second
// for Duration, from the client to the test endpoint (Dir Up, the
// default) or from the endpoint to the client (Down).
type UDPOptions struct {
	Addr     string
	Token    []byte
	Dir      string
	Rate     float64
	Size     int
	Duration time.Duration
	Dial     Dialer
}

// UDPResult is a UDP test: what the sender sent, what the receiver
// received.
type UDPResult struct {
	Dir      string        `json:"dir"`
	Rate     float64       `json:"rate"` // asked for, packets per second
	Size     int           `json:"size"`
	Duration time.Duration `json:"duration_ns"`
	// SendErrors counts datagrams the client's kernel refused (ENOBUFS,
	// ECONNREFUSED after an ICMP error); they are not in Sent.
	SendErrors uint64 `json:"send_errors,omitempty"`
	// SentRate is the datagrams per second the sender managed.
	SentRate float64 `json:"sent_rate"`
	UDPStats
}

// udpReadBuffer is the receive buffer of the sockets that count a UDP
// test's datagrams: 8 MiB, seconds of a test at a few thousand datagrams
// a second, 80 ms at MaxRate.
const udpReadBuffer = 8 << 20

// drainUDP is how long the client waits after its last datagram before
// it asks for the account: the ones in flight still count.
const drainUDP = 300 * time.Millisecond

// RunUDP runs a UDP test against the test endpoint at o.Addr.
func RunUDP(ctx context.Context, o UDPOptions) (*UDPResult, error) {
	switch {
	case o.Token == nil:
		return nil, errors.New("a UDP test needs the test endpoint (netdoctor agent --test-endpoint) and its token")
	case o.Rate <= 0 || o.Rate > MaxRate:
		return nil, fmt.Errorf("rate %g: 1 to %d packets per second", o.Rate, MaxRate)
	case o.Size < MinPacketSize || o.Size > MaxPacketSize:
		return nil, fmt.Errorf("size %d: %d to %d bytes", o.Size, MinPacketSize, MaxPacketSize)
	case o.Duration <= 0 || o.Duration > MaxDuration:
		return nil, fmt.Errorf("duration %v: at most %v", o.Duration, MaxDuration)
	case o.Dir == Down:
		return runUDPDown(ctx, o)
	case o.Dir != "" && o.Dir != Up:
		return nil, fmt.Errorf("direction %q: up or down", o.Dir)
	}
	k, id, c, err := openUDP(ctx, o, Up)
	if err != nil {
		return nil, err
	}
	defer k.c.Close()
	defer c.Close()
	res := &UDPResult{Dir: Up, Rate: o.Rate, Size: o.Size}
	buf := make([]byte, o.Size)
	start := time.Now()
	end := start.Add(o.Duration)
	if d, ok := ctx.Deadline(); ok && d.Before(end) {
		end = d
	}
	interval := time.Duration(float64(time.Second) / o.Rate)
	var seq uint64
	for {
		now := time.Now()
		if !now.Before(end) || ctx.Err() != nil {
			break
		}
		// Every datagram whose time has come goes now; then sleep until
		// the next one's.
		due := uint64(now.Sub(start)/interval) + 1
		for ; seq < due; seq++ {
			putDatagram(buf, id, seq, time.Now())
			if _, err := c.Write(buf); err != nil {
				res.SendErrors++
			}
		}
		time.Sleep(time.Until(start.Add(time.Duration(due) * interval)))
	}
	res.Duration = time.Since(start)
	sent := seq - res.SendErrors // the refused ones never left
	res.SentRate = float64(sent) / res.Duration.Seconds()
	time.Sleep(drainUDP)
	f, err := k.finish(sent)
	if err != nil {
		return nil, err
	}
	if f.UDP == nil {
		return nil, errors.New("the test endpoint's account has no UDP statistics")
	}
	res.UDPStats = *f.UDP
	return res, ctx.Err()
}

// openUDP opens a UDP test in direction dir: the control connection
// that announces it, the test's id, and the datagram socket.
func openUDP(ctx context.Context, o UDPOptions, dir string) (*control, testID, net.Conn, error) {
	dial := o.Dial.orDefault()
	k, err := open(ctx, dial, o.Addr, Hello{Token: string(o.Token), Test: "udp", Dir: dir, Rate: o.Rate, Size: o.Size, Duration: o.Duration.Milliseconds()})
	if err != nil {
		return nil, testID{}, nil, err
	}
	id, err := parseID(k.id)
	if err == nil {
		var c net.Conn
		if c, err = dial(ctx, "udp", o.Addr); err == nil {
			return k, id, c, nil
		}
	}
	k.c.Close()
	return nil, testID{}, nil, err
}
