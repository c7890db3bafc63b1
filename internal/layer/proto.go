package layer

import (
	"bufio"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"
)

// Version is the test protocol's version, the "v" of every hello.
const Version = 1

// Limits the test endpoint enforces; a client asking for more is told
// what it may have (Reply.Error) or is cut short.
const (
	MaxTests       = 4                // tests at once, all clients together
	MaxDuration    = 30 * time.Second // one test's length
	MaxStreams     = 16               // TCP streams of one test
	MaxBytes       = 16 << 30         // bytes the endpoint sends in one download test
	MaxRate        = 100_000          // UDP packets per second
	MaxPacketSize  = 8972             // UDP payload bytes (a 9000-byte MTU)
	MinPacketSize  = udpHeader        // room for the header
	maxLine        = 4096             // bytes of one JSON control message
	handshakeLimit = 5 * time.Second  // to send a hello and get a reply
	// joinWindow is how long after its hello a TCP test's streams may
	// join: a client joins them one after the other, and over a lossy
	// path a join's SYN is lost once or twice (1 s, then 2 s more).
	joinWindow = 10 * time.Second
	// grace is how long past its duration a test's connections may live:
	// the last segments in flight, the final statistics.
	grace = 5 * time.Second
)

// Directions of a test, from the client's point of view.
const (
	Up   = "up"   // client to endpoint
	Down = "down" // endpoint to client
)

// Hello opens a test on a control connection, or joins a TCP stream to
// one (Join set, nothing else).
type Hello struct {
	V     int    `json:"v"`
	Token string `json:"token,omitempty"`
	// Test is "tcp" or "udp".
	Test string `json:"test,omitempty"`
	// Dir is Up or Down.
	Dir      string `json:"dir,omitempty"`
	Streams  int    `json:"streams,omitempty"`
	Duration int64  `json:"duration_ms,omitempty"`
	// Rate and Size are a UDP test's packets per second and payload.
	Rate float64 `json:"rate,omitempty"`
	Size int     `json:"size,omitempty"`
	// Join is the id of the test a TCP stream belongs to, Stream its
	// index among the test's streams.
	Join   string `json:"join,omitempty"`
	Stream int    `json:"stream,omitempty"`
}

// Reply answers a Hello: the test's id, or why there is none.
type Reply struct {
	ID    string `json:"id,omitempty"`
	Error string `json:"error,omitempty"`
}

// Done is the client's last control message: the test is over, and for
// a UDP upload how many datagrams were sent.
type Done struct {
	Sent uint64 `json:"sent"`
}

// Final is the endpoint's account of a test: the sender's view of each
// TCP stream of a download, the receiver's statistics of a UDP upload.
type Final struct {
	Streams []StreamInfo `json:"streams,omitempty"`
	UDP     *UDPStats    `json:"udp,omitempty"`
	Error   string       `json:"error,omitempty"`
}

// StreamInfo is one TCP socket's TCP_INFO at the end of a test.
type StreamInfo struct {
	Retrans uint32        `json:"retrans"`
	RTT     time.Duration `json:"rtt_ns"`
	MinRTT  time.Duration `json:"min_rtt_ns"`
	// BytesAcked is what the peer acknowledged: the bytes it received.
	BytesAcked uint64 `json:"bytes_acked,omitempty"`
}

// writeMsg sends one control message as a JSON line.
func writeMsg(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// readMsg reads one control message of at most maxLine bytes.
func readMsg(r *bufio.Reader, v any) error {
	var line []byte
	for {
		part, more, err := r.ReadLine()
		if err != nil {
			return err
		}
		line = append(line, part...)
		if len(line) > maxLine {
			return fmt.Errorf("control message longer than %d bytes", maxLine)
		}
		if !more {
			break
		}
	}
	return json.Unmarshal(line, v)
}

// The UDP datagram: magic, test id, sequence number, send time (Unix ns),
// padding to the test's size. Big-endian.
const (
	udpMagic  = "NDU1"
	idLen     = 16
	udpHeader = 4 + idLen + 8 + 8
)

// testID is a test's id: 128 random bits, which a UDP datagram must
// carry to be counted and a TCP stream to join.
type testID [idLen]byte

func (id testID) String() string { return hex.EncodeToString(id[:]) }

func parseID(s string) (testID, error) {
	var id testID
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != idLen {
		return id, errors.New("malformed test id")
	}
	copy(id[:], b)
	return id, nil
}

// putDatagram writes the header into b (len(b) >= udpHeader).
func putDatagram(b []byte, id testID, seq uint64, sent time.Time) {
	copy(b, udpMagic)
	copy(b[4:], id[:])
	binary.BigEndian.PutUint64(b[4+idLen:], seq)
	binary.BigEndian.PutUint64(b[12+idLen:], uint64(sent.UnixNano()))
}

// parseDatagram reads a header; ok is false for anything else.
func parseDatagram(b []byte) (id testID, seq uint64, sentNs int64, ok bool) {
	if len(b) < udpHeader || string(b[:4]) != udpMagic {
		return id, 0, 0, false
	}
	copy(id[:], b[4:])
	return id, binary.BigEndian.Uint64(b[4+idLen:]), int64(binary.BigEndian.Uint64(b[12+idLen:])), true
}
