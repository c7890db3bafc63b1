package layer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// TCPOptions is one bulk TCP test.
type TCPOptions struct {
	// Addr is HOST:PORT of a test endpoint or, without Token, of any
	// server that reads and discards (upload only).
	Addr  string
	Token []byte
	// Dir is Up (client to server) or Down (needs the test endpoint).
	Dir      string
	Streams  int
	Duration time.Duration
	Dial     Dialer
}

// TCPResult is the throughput of one direction.
type TCPResult struct {
	Dir      string        `json:"dir"`
	Duration time.Duration `json:"duration_ns"`
	// Bytes is what the receiver got within Duration: for an upload the
	// bytes the server acknowledged (TCP_INFO's tcpi_bytes_acked), for a
	// download the bytes read.
	Bytes         uint64      `json:"bytes"`
	BitsPerSecond float64     `json:"bits_per_second"`
	Retrans       uint64      `json:"retransmits"`
	Streams       []TCPStream `json:"streams"`
	// InfoFrom says whose sockets the retransmissions and RTTs are
	// from: "client" (the sender of an upload), "server" (the sender of
	// a download) or "" (none known).
	InfoFrom string `json:"info_from,omitempty"`
}

// TCPStream is one stream of a TCP test.
type TCPStream struct {
	Bytes         uint64  `json:"bytes"`
	BitsPerSecond float64 `json:"bits_per_second"`
	StreamInfo
}

// RunTCP runs one direction of a bulk TCP test for o.Duration.
func RunTCP(ctx context.Context, o TCPOptions) (*TCPResult, error) {
	dial := o.Dial.orDefault()
	switch {
	case o.Streams < 1 || o.Duration <= 0:
		return nil, errors.New("need at least one stream and a positive duration")
	case o.Dir == Down && o.Token == nil:
		return nil, errors.New("a download needs the test endpoint (netdoctor agent --test-endpoint) and its token")
	case o.Token != nil && (o.Streams > MaxStreams || o.Duration > MaxDuration):
		return nil, fmt.Errorf("the test endpoint takes at most %d streams for %v", MaxStreams, MaxDuration)
	}
	var k *control
	if o.Token != nil {
		var err error
		k, err = open(ctx, dial, o.Addr, Hello{Token: string(o.Token), Test: "tcp", Dir: o.Dir, Streams: o.Streams, Duration: o.Duration.Milliseconds()})
		if err != nil {
			return nil, err
		}
		defer k.c.Close()
	}
	conns := make([]net.Conn, 0, o.Streams)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for i := range o.Streams {
		c, err := joinStream(ctx, dial, o.Addr, k, i)
		if err != nil {
			return nil, err
		}
		conns = append(conns, c)
	}
	res := &TCPResult{Dir: o.Dir, Duration: o.Duration, Streams: make([]TCPStream, o.Streams)}
	end := time.Now().Add(o.Duration)
	if d, ok := ctx.Deadline(); ok && d.Before(end) {
		end = d
	}
	start := time.Now()
	// A download's streams receive from their join, and what came
	// before the test's window opened, after the last join, is not the
	// window's: what the sockets hold unread now is left out. Counted,
	// it read an 8 Mbit/s tbf at 8.5 when the joins took a tenth of a
	// second (a busy host; four joins over a path of 100 ms take half a
	// second).
	early := make([]uint64, len(conns))
	if o.Dir == Down {
		for i, c := range conns {
			early[i] = unread(c)
		}
	}
	errs := make([]error, len(conns))
	var wg sync.WaitGroup
	for i, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if o.Dir == Down {
				res.Streams[i], errs[i] = receive(ctx, c, end)
				res.Streams[i].Bytes -= min(early[i], res.Streams[i].Bytes)
			} else {
				res.Streams[i], errs[i] = send(ctx, c, end)
			}
		}()
	}
	wg.Wait()
	if ctx.Err() != nil {
		res.Duration = time.Since(start)
	}
	for i, err := range errs {
		if err != nil {
			return nil, fmt.Errorf("stream %d ended after %d bytes, before the test did (with no --token-file the target must read and discard; the agent's test endpoint needs the token): %w", i, res.Streams[i].Bytes, err)
		}
	}
	for _, c := range conns {
		c.Close()
	}
	conns = nil
	if k != nil {
		f, err := k.finish(0)
		if err != nil {
			return nil, err
		}
		if o.Dir == Down && len(f.Streams) == len(res.Streams) {
			for i := range res.Streams {
				res.Streams[i].StreamInfo = f.Streams[i]
				res.Streams[i].BytesAcked = 0 // the server's, past the end
			}
			res.InfoFrom = "server"
		}
	}
	if o.Dir == Up {
		res.InfoFrom = "client"
	}
	res.sum()
	return res, ctx.Err()
}

// joinStream opens stream i: with a test endpoint, a Join hello first.
func joinStream(ctx context.Context, dial Dialer, addr string, k *control, i int) (net.Conn, error) {
	dctx, cancel := context.WithTimeout(ctx, handshakeLimit)
	defer cancel()
	c, err := dial(dctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	if k != nil {
		b, _ := json.Marshal(Hello{V: Version, Join: k.id, Stream: i})
		if _, err := c.Write(append(b, '\n')); err != nil {
			c.Close()
			return nil, err
		}
	}
	return c, nil
}

// send writes to c until end; what counts is what the peer acknowledged.
// The error is the one that ended it before end.
func send(ctx context.Context, c net.Conn, end time.Time) (TCPStream, error) {
	bulk(c)
	before, _ := tcpInfo(c) // the join hello, already acknowledged or not
	buf := make([]byte, blockSize)
	c.SetWriteDeadline(end)
	// Ctrl-C ends the stream now, not at end.
	stop := context.AfterFunc(ctx, func() { c.SetDeadline(time.Now()) })
	defer stop()
	var written uint64
	var err error
	for time.Now().Before(end) {
		var n int
		n, err = c.Write(buf)
		written += uint64(n)
		if err != nil {
			break
		}
	}
	s := TCPStream{Bytes: written}
	if ti, ok := tcpInfo(c); ok {
		s.StreamInfo = ti
		s.Bytes = ti.BytesAcked - min(before.BytesAcked, ti.BytesAcked)
	}
	return s, early(err, end)
}

// receive reads c until end.
func receive(ctx context.Context, c net.Conn, end time.Time) (TCPStream, error) {
	bulk(c)
	c.SetReadDeadline(end)
	stop := context.AfterFunc(ctx, func() { c.SetDeadline(time.Now()) })
	defer stop()
	n, err := discard(c)
	if err == nil {
		err = io.ErrUnexpectedEOF // the endpoint sends until after end
	}
	return TCPStream{Bytes: uint64(n)}, early(err, end)
}

// blockSize is what a stream writes, and reads, at a time: iperf3's
// default (its -l for TCP), so that the two make the same system calls.
// Where the CPU is the bottleneck (an unshaped veth) the size of the
// reads alone moved the result by 10 %.
const blockSize = 128 << 10

// bulk sets a stream's socket as iperf3 sets its own without -N: Nagle's
// algorithm on. Go turns it off on every TCP connection (TCP_NODELAY),
// which on an unshaped veth, where the CPU is the limit, made netdoctor
// read a third more than iperf3 (iperf3 -N read as much): the two would
// not measure the same thing. Where the path is the limit it changes
// nothing: 128 KiB writes fill whole segments either way.
func bulk(c net.Conn) {
	if tc, ok := c.(interface{ SetNoDelay(bool) error }); ok {
		tc.SetNoDelay(false)
	}
}

// discard reads r to its end in blockSize reads, as iperf3's receiver
// reads: io.Copy to io.Discard would read 8 KiB at a time. A clean end
// (EOF) returns nil, as io.Copy does.
func discard(r io.Reader) (int64, error) {
	buf := make([]byte, blockSize)
	var n int64
	for {
		m, err := r.Read(buf)
		n += int64(m)
		if errors.Is(err, io.EOF) {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
}

// early returns err when it ended a stream well before end: not the
// deadline, nor the peer's close in the test's last moments.
func early(err error, end time.Time) error {
	var ne net.Error
	if err == nil || errors.As(err, &ne) && ne.Timeout() || time.Until(end) < 100*time.Millisecond {
		return nil
	}
	return err
}

func (r *TCPResult) sum() {
	secs := r.Duration.Seconds()
	for i := range r.Streams {
		s := &r.Streams[i]
		r.Bytes += s.Bytes
		r.Retrans += uint64(s.Retrans)
		if secs > 0 {
			s.BitsPerSecond = 8 * float64(s.Bytes) / secs
		}
	}
	if secs > 0 {
		r.BitsPerSecond = 8 * float64(r.Bytes) / secs
	}
}

// MinRTT is the lowest of the streams' minimum RTTs, 0 when none is
// known.
func (r *TCPResult) MinRTT() time.Duration {
	var m time.Duration
	for _, s := range r.Streams {
		if s.MinRTT > 0 && (m == 0 || s.MinRTT < m) {
			m = s.MinRTT
		}
	}
	return m
}
