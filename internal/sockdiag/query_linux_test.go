package sockdiag

import (
	"encoding/binary"
	"net"
	"net/netip"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// pair returns a connected loopback pair: the client's end first.
func pair(t *testing.T) (net.Conn, net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	s, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(); s.Close() })
	return c, s
}

func idOf(c net.Conn) SockID {
	return SockID{Local: c.LocalAddr().(*net.TCPAddr).AddrPort(), Remote: c.RemoteAddr().(*net.TCPAddr).AddrPort()}
}

// TestQuery: three round trips on a loopback connection, then the
// client's tcp_info says it sent three data segments, received three,
// and received more recently than it sent.
func TestQuery(t *testing.T) {
	c, s := pair(t)
	buf := make([]byte, 16)
	for range 3 {
		c.Write([]byte("ping\n"))
		s.Read(buf)
		time.Sleep(5 * time.Millisecond) // the reply a few milliseconds later: what tcp_info's times show
		s.Write([]byte("pong\n"))
		c.Read(buf)
	}
	q, err := NewQuerier()
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	gone := SockID{Local: netip.MustParseAddrPort("127.0.0.1:1"), Remote: netip.MustParseAddrPort("127.0.0.1:2")}
	var got []TCPInfo
	var idx []int
	err = q.Query([]SockID{gone, idOf(c)}, func(i int, m *InetDiagMsg, ti *TCPInfo) {
		got, idx = append(got, *ti), append(idx, i)
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || idx[0] != 1 {
		t.Fatalf("answers %v for %v", idx, got)
	}
	ti := got[0]
	if ti.Size < tiBusyTime+8 || ti.DataSegsOut != 3 || ti.DataSegsIn != 3 || ti.BytesAcked != 16 || ti.BytesReceived != 15 {
		t.Errorf("tcp_info %+v", ti)
	}
	if ti.LastDataRecv > ti.LastDataSent {
		t.Errorf("last data received %d ms ago, sent %d ms ago: the reply came after the request", ti.LastDataRecv, ti.LastDataSent)
	}
	if os.Getenv("NETDOCTOR_CAPTURE") != "" {
		// The raw attribute, for the decoder's fixture.
		raw, err := captureInfo(idOf(c))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile("testdata/tcp_info.bin", raw, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// captureInfo returns one socket's INET_DIAG_INFO attribute payload.
func captureInfo(id SockID) ([]byte, error) {
	q, err := NewQuerier()
	if err != nil {
		return nil, err
	}
	defer q.Close()
	var out []byte
	msg := make([]byte, nlmsgHdrLen+56)
	binary.NativeEndian.PutUint32(msg, uint32(len(msg)))
	binary.NativeEndian.PutUint16(msg[4:], sockDiagByFamily)
	binary.NativeEndian.PutUint16(msg[6:], nlmFRequest)
	copy(msg[nlmsgHdrLen:], exactRequest(id, infoExt))
	if err := unix.Sendto(q.c.fd, msg, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return nil, err
	}
	n, err := readRaw(q.c, q.buf)
	if err != nil {
		return nil, err
	}
	eachReply(q.buf[:n], func(_ uint32, p []byte) {
		_ = walkAttrs(p[inetDiagMsgLen:], func(typ uint16, v []byte) {
			if typ == inetDiagInfo {
				out = append([]byte(nil), v...)
			}
		})
	})
	return out, nil
}

// TestListener: the exact lookup finds a listener on its address and one
// on the wildcard, and nothing on a port nobody listens on.
func TestListener(t *testing.T) {
	q, err := NewQuerier()
	if err != nil {
		t.Skip(err)
	}
	defer q.Close()
	for _, bind := range []string{"127.0.0.1:0", "0.0.0.0:0"} {
		ln, err := net.Listen("tcp4", bind)
		if err != nil {
			t.Fatal(err)
		}
		port := ln.Addr().(*net.TCPAddr).AddrPort().Port()
		dst := netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), port)
		l, ok, err := q.Listener(dst)
		if err != nil || !ok || l.Port != int(port) || l.Inode == 0 {
			t.Errorf("listener on %s: %+v %v %v", bind, l, ok, err)
		}
		ln.Close()
		if l, ok, err := q.Listener(dst); ok || err != nil {
			t.Errorf("closed listener %s still found: %+v %v", bind, l, err)
		}
	}
}
