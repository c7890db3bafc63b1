package sockdiag

import (
	"encoding/binary"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/netdoctor/netdoctor/internal/evidence/kernel"
)

// decodeAll runs the whole decode path over raw dump datagrams.
func decodeAll(b []byte) (*kernel.Sockets, bool, error) {
	var s Summary
	s.PortLow, s.PortHigh = 32768, 60999
	var m InetDiagMsg
	done, _, err := Messages(b, func(p []byte) error {
		if err := DecodeInetDiagMsg(p, &m); err != nil {
			return err
		}
		s.AddInet(&m)
		return nil
	})
	return s.Sockets(), done, err
}

// The fixture is a real dump captured on Linux 6.18 (see
// TestCaptureFixture): a listener on 127.0.0.1:57775 with backlog 7 and 5
// connections waiting in its accept queue.
func TestDecodeFixture(t *testing.T) {
	b, err := os.ReadFile("testdata/tcp4_dump.bin")
	if err != nil {
		t.Fatal(err)
	}
	s, done, err := decodeAll(b)
	if err != nil || !done {
		t.Fatalf("decode: done=%v err=%v", done, err)
	}
	var got *kernel.Listener
	for i := range s.Listeners {
		if s.Listeners[i].Addr == "127.0.0.1:57775" {
			got = &s.Listeners[i]
		}
	}
	want := &kernel.Listener{Proto: "tcp", Addr: "127.0.0.1:57775", Port: 57775, RecvQ: 5, SendQ: 7, Inode: got.Inode, Established: 5}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("listener mismatch (-want +got):\n%s", diff)
	}
	var remote kernel.Remote
	for _, r := range s.Remotes {
		if r.Addr == "127.0.0.1:57775" {
			remote = r
		}
	}
	if diff := cmp.Diff(kernel.Remote{Addr: "127.0.0.1:57775", Established: 5, Ephemeral: 5}, remote); diff != "" {
		t.Errorf("remote mismatch (-want +got):\n%s", diff)
	}
	if s.TCP["ESTABLISHED"] < 10 || s.TCP["LISTEN"] < 1 {
		t.Errorf("states = %v, want at least 10 ESTABLISHED and 1 LISTEN", s.TCP)
	}
}

// The fixture is the LISTEN-only dump Collect makes, with
// INET_DIAG_SKMEMINFO, captured on Linux 6.18 in a namespace of its own
// (see TestCaptureListenFixture): 127.0.0.1:7001 with backlog 1, two
// connections queued and 4 SYNs dropped, and two listeners without drops.
func TestDecodeListenFixture(t *testing.T) {
	b, err := os.ReadFile("testdata/tcp_listen_meminfo.bin")
	if err != nil {
		t.Fatal(err)
	}
	s, done, err := decodeAll(b)
	if err != nil || !done {
		t.Fatalf("decode: done=%v err=%v", done, err)
	}
	for i := range s.Listeners {
		s.Listeners[i].Inode = 0
	}
	want := []kernel.Listener{
		{Proto: "tcp", Addr: "127.0.0.1:7001", Port: 7001, RecvQ: 2, SendQ: 1, Drops: 4},
		{Proto: "tcp", Addr: "127.0.0.1:7002", Port: 7002, SendQ: 5},
		{Proto: "tcp6", Addr: "[::1]:7003", Port: 7003, SendQ: 5},
	}
	if diff := cmp.Diff(want, s.Listeners); diff != "" {
		t.Errorf("listeners mismatch (-want +got):\n%s", diff)
	}
}

// TestDecodeSKMemInfo: SK_MEMINFO_DROPS is read only when the attribute
// holds it, and an attribute that does not parse costs its value, never
// the socket.
func TestDecodeSKMemInfo(t *testing.T) {
	fixed := make([]byte, inetDiagMsgLen)
	fixed[1] = stateListen
	binary.BigEndian.PutUint16(fixed[4:], 80)
	meminfo := func(n int, drops uint32) []byte {
		v := make([]byte, 4*n)
		if n > skMemInfoDrops {
			binary.NativeEndian.PutUint32(v[4*skMemInfoDrops:], drops)
		}
		return v
	}
	with := func(attrs ...[]byte) []byte {
		b := append([]byte(nil), fixed...)
		for _, a := range attrs {
			b = append(b, a...)
		}
		return b
	}
	attr := func(typ uint16, v []byte) []byte { return appendAttr(nil, typ, v) }
	bad := attr(inetDiagSKMemInfo, meminfo(9, 7))
	binary.NativeEndian.PutUint16(bad, 200) // longer than what is left
	tests := []struct {
		name  string
		b     []byte
		drops uint32
		has   bool
	}{
		{"none", with(), 0, false},
		{"nine entries", with(attr(inetDiagSKMemInfo, meminfo(9, 7))), 7, true},
		{"more entries, a newer kernel", with(attr(inetDiagSKMemInfo, meminfo(12, 9))), 9, true},
		{"after other attributes", with(attr(8, []byte{0}), attr(inetDiagSKMemInfo, meminfo(9, 3))), 3, true},
		{"eight entries, before 3.19", with(attr(inetDiagSKMemInfo, meminfo(8, 0))), 0, false},
		{"INET_DIAG_CONG is not it", with(attr(4, []byte("bbr\x00"))), 0, false},
		{"length past the end", with(bad), 0, false},
		{"a cut header", with([]byte{40, 0}), 0, false},
	}
	for _, tt := range tests {
		// One message reused, as the dump does: nothing may stay from
		// the previous socket.
		m := InetDiagMsg{Drops: 99, HasDrops: true}
		if err := DecodeInetDiagMsg(tt.b, &m); err != nil {
			t.Errorf("%s: %v", tt.name, err)
			continue
		}
		if m.Drops != tt.drops || m.HasDrops != tt.has || m.SPort != 80 {
			t.Errorf("%s: drops %d (has %v), port %d; want %d (has %v), port 80", tt.name, m.Drops, m.HasDrops, m.SPort, tt.drops, tt.has)
		}
	}
}

func TestDecodeTruncated(t *testing.T) {
	b, err := os.ReadFile("testdata/tcp4_dump.bin")
	if err != nil {
		t.Fatal(err)
	}
	full, _, _ := decodeAll(b)
	// Cut inside the third message: the first two still count.
	l := int(binary.NativeEndian.Uint32(b))
	cut := b[:2*l+30]
	s, done, err := decodeAll(cut)
	if !errors.Is(err, ErrTruncated) || done {
		t.Fatalf("decode truncated: done=%v err=%v, want ErrTruncated", done, err)
	}
	n := 0
	for _, c := range s.TCP {
		n += c
	}
	total := 0
	for _, c := range full.TCP {
		total += c
	}
	if n != 2 || total <= 2 {
		t.Errorf("truncated dump counted %d sockets (full %d), want 2", n, total)
	}
	// A payload shorter than inet_diag_msg is an error, not a panic.
	var m InetDiagMsg
	if err := DecodeInetDiagMsg(make([]byte, 71), &m); !errors.Is(err, ErrTruncated) {
		t.Errorf("short payload: err = %v, want ErrTruncated", err)
	}
}

func TestMessagesError(t *testing.T) {
	msg := make([]byte, 20)
	binary.NativeEndian.PutUint32(msg, 20)
	binary.NativeEndian.PutUint16(msg[4:], nlmsgError)
	binary.NativeEndian.PutUint32(msg[16:], uint32(0xffffffff-1)) // -2 = ENOENT
	_, _, err := Messages(msg, func([]byte) error { return nil })
	var e Errno
	if !errors.As(err, &e) || e != 2 {
		t.Errorf("err = %v, want Errno 2", err)
	}
}

func TestDecodeUnix(t *testing.T) {
	// unix_diag_msg + UNIX_DIAG_NAME "@abs" + UNIX_DIAG_RQLEN {3, 128}.
	b := make([]byte, 16, 40)
	b[0], b[1], b[2] = 1, 1, 10
	binary.NativeEndian.PutUint32(b[4:], 4242)
	b = appendAttr(b, unixDiagName, []byte("\x00abs"))
	rq := make([]byte, 8)
	binary.NativeEndian.PutUint32(rq, 3)
	binary.NativeEndian.PutUint32(rq[4:], 128)
	b = appendAttr(b, unixDiagRQLen, rq)
	var m UnixDiagMsg
	if err := DecodeUnixDiagMsg(b, &m); err != nil {
		t.Fatal(err)
	}
	want := UnixDiagMsg{Family: 1, Type: 1, State: 10, Inode: 4242, Name: "@abs", RQueue: 3, WQueue: 128, HasRQ: true}
	if diff := cmp.Diff(want, m); diff != "" {
		t.Errorf("DecodeUnixDiagMsg() mismatch (-want +got):\n%s", diff)
	}
}

func appendAttr(b []byte, typ uint16, v []byte) []byte {
	h := make([]byte, 4)
	binary.NativeEndian.PutUint16(h, uint16(4+len(v)))
	binary.NativeEndian.PutUint16(h[2:], typ)
	b = append(append(b, h...), v...)
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	return b
}

// FuzzMessages feeds arbitrary datagrams through the whole decode path:
// it must never panic, and never count more sockets than messages fit.
func FuzzMessages(f *testing.F) {
	for _, name := range []string{"testdata/tcp4_dump.bin", "testdata/tcp_listen_meminfo.bin"} {
		if b, err := os.ReadFile(name); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte{})
	f.Add(make([]byte, 16))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, _, _ := decodeAll(b)
		n := 0
		for _, c := range s.TCP {
			n += c
		}
		if n > len(b)/(nlmsgHdrLen+inetDiagMsgLen) {
			t.Fatalf("counted %d sockets in %d bytes", n, len(b))
		}
		var u UnixDiagMsg
		_ = DecodeUnixDiagMsg(b, &u)
	})
}

// TestDecodeTCPInfo decodes tcp_info as kernel 6.18 sent it for a
// client that made three 5-byte round trips (testdata/tcp_info.bin,
// captured by NETDOCTOR_CAPTURE=1 go test -run TestQuery), then the same
// cut to the sizes older kernels send.
func TestDecodeTCPInfo(t *testing.T) {
	b, err := os.ReadFile("testdata/tcp_info.bin")
	if err != nil {
		t.Fatal(err)
	}
	var ti TCPInfo
	if err := DecodeTCPInfo(b, &ti); err != nil {
		t.Fatal(err)
	}
	if ti.State != 1 || ti.DataSegsOut != 3 || ti.DataSegsIn != 3 || ti.BytesReceived != 15 || ti.BytesAcked != 16 || !ti.HasBusyTime() || ti.RTT == 0 {
		t.Errorf("6.18 tcp_info: %+v", ti)
	}
	// What Nagle's algorithm meeting delayed ACKs is read from: the
	// delayed-ACK timeout (40 ms), the window, bytes written and not
	// sent; and the payload sent (the SYN not counted, unlike acked).
	if ti.Ato != 40000 || ti.SndCwnd != 13 || !ti.HasNotsent() || ti.NotsentBytes != 0 || ti.BytesSent != 15 || ti.SndMSS == 0 {
		t.Errorf("6.18 tcp_info: ato %d cwnd %d notsent %d (%v) sent %d mss %d", ti.Ato, ti.SndCwnd, ti.NotsentBytes, ti.HasNotsent(), ti.BytesSent, ti.SndMSS)
	}
	// Over loopback: 9 µs at the least, 1.2 ms smoothed (ACKs delayed or
	// riding on answers).
	if m, ok := ti.MinRTTOK(); !ok || m != 9*time.Microsecond || ti.SRTT() != 1234*time.Microsecond {
		t.Errorf("min RTT %v %v, smoothed %v", m, ok, ti.SRTT())
	}
	// Linux 4.2 (up to tcpi_segs_in): no data segment counts.
	if err := DecodeTCPInfo(b[:144], &ti); err != nil || ti.HasDataSegs() || ti.HasNotsent() || ti.DataSegsOut != 0 || ti.SegsOut == 0 || ti.BytesReceived != 15 || ti.BytesSent != 0 {
		t.Errorf("4.2 tcp_info: %+v %v", ti, err)
	}
	if _, ok := ti.MinRTTOK(); ok {
		t.Error("a min RTT from 4.2's tcp_info")
	}
	// Linux 3.x: the times and the RTT, nothing counted.
	if err := DecodeTCPInfo(b[:104], &ti); err != nil || ti.RTT == 0 || ti.BytesReceived != 0 {
		t.Errorf("3.x tcp_info: %+v %v", ti, err)
	}
	if err := DecodeTCPInfo(b[:100], &ti); !errors.Is(err, ErrTruncated) {
		t.Errorf("100 bytes: %v, want ErrTruncated", err)
	}
}

func FuzzDecodeInetDiagInfo(f *testing.F) {
	info, err := os.ReadFile("testdata/tcp_info.bin")
	if err != nil {
		f.Fatal(err)
	}
	msg := make([]byte, inetDiagMsgLen+4+len(info))
	binary.NativeEndian.PutUint16(msg[inetDiagMsgLen:], uint16(4+len(info)))
	binary.NativeEndian.PutUint16(msg[inetDiagMsgLen+2:], inetDiagInfo)
	copy(msg[inetDiagMsgLen+4:], info)
	f.Add(msg)
	f.Add(msg[:inetDiagMsgLen+4+50])
	f.Fuzz(func(t *testing.T, b []byte) {
		var m InetDiagMsg
		var ti TCPInfo
		ok, err := DecodeInetDiagInfo(b, &m, &ti)
		if ok && (err != nil || ti.Size < tcpInfoMinLen) {
			t.Fatalf("ok with %v, size %d", err, ti.Size)
		}
	})
}

// decodeUnixReplies decodes the answers to exact unix lookups in raw
// datagrams, by the index their sequence number gives.
func decodeUnixReplies(b []byte) map[int]UnixDiagMsg {
	got := map[int]UnixDiagMsg{}
	eachReply(b, func(seq uint32, p []byte) {
		var m UnixDiagMsg
		if DecodeUnixDiagMsg(p, &m) == nil {
			got[int(seq)-1] = m
		}
	})
	return got
}

// TestDecodeUnixFixture decodes the answers Linux 6.18 sent to exact
// lookups (testdata/unix_exact.bin, captured by NETDOCTOR_CAPTURE=1 go
// test -run TestQueryUnix): a client connected to a listener on a
// socket file that wrote 5 bytes the server did not read, the accepted
// socket, the listener, and an inode that does not exist (NLMSG_ERROR).
func TestDecodeUnixFixture(t *testing.T) {
	b, err := os.ReadFile("testdata/unix_exact.bin")
	if err != nil {
		t.Fatal(err)
	}
	got := decodeUnixReplies(b)
	if len(got) != 3 {
		t.Fatalf("%d sockets, want 3: %+v", len(got), got)
	}
	c, a, l := got[0], got[1], got[2]
	if !strings.HasSuffix(a.Name, "/dep.sock") || l.Name != a.Name {
		t.Fatalf("accepted socket %q, listener %q: want the listener's path on both", a.Name, l.Name)
	}
	checkUnixExact(t, got, a.Name, l.Inode, c.Inode, a.Inode)
}

// checkUnixExact checks the answers to the lookups of the client, the
// accepted socket, the listener and a missing inode, by index.
func checkUnixExact(t *testing.T, got map[int]UnixDiagMsg, path string, ln, client, accepted uint32) {
	t.Helper()
	if len(got) != 3 {
		t.Fatalf("%d sockets found, want 3 (the missing one skipped): %+v", len(got), got)
	}
	c, a, l := got[0], got[1], got[2]
	if c.Inode != client || c.Type != 1 || c.State != stateEstablished || c.Name != "" || !c.HasPeer || c.Peer != accepted || !c.HasRQ || c.RQueue != 0 || c.WQueue == 0 || c.Cookie == 0 {
		t.Errorf("client %+v: want unnamed, peer %d, nothing to read, its 5 bytes unread there (wqueue > 0)", c, accepted)
	}
	if a.Inode != accepted || a.Name != path || a.Peer != client || a.RQueue != 5 || a.WQueue != 0 {
		t.Errorf("accepted %+v: want named %s, peer %d, 5 bytes unread", a, path, client)
	}
	if l.Inode != ln || l.State != stateListen || l.Name != path || l.HasPeer {
		t.Errorf("listener %+v", l)
	}
}

// FuzzDecodeUnixDiagMsg feeds arbitrary answers through the exact
// lookups' decode path: never a panic, never a socket per fewer bytes
// than a message holds, and the fields an attribute did not carry stay
// zero.
func FuzzDecodeUnixDiagMsg(f *testing.F) {
	if b, err := os.ReadFile("testdata/unix_exact.bin"); err == nil {
		f.Add(b)
		f.Add(b[:len(b)/2])
	}
	f.Add([]byte{})
	f.Add(make([]byte, nlmsgHdrLen+unixDiagMsgLen))
	f.Fuzz(func(t *testing.T, b []byte) {
		got := decodeUnixReplies(b)
		if len(got) > len(b)/(nlmsgHdrLen+unixDiagMsgLen) {
			t.Fatalf("%d sockets in %d bytes", len(got), len(b))
		}
		for _, m := range got {
			if !m.HasPeer && m.Peer != 0 || !m.HasRQ && (m.RQueue != 0 || m.WQueue != 0) {
				t.Fatalf("a value without its attribute: %+v", m)
			}
		}
		var m UnixDiagMsg
		_ = DecodeUnixDiagMsg(b, &m)
	})
}

// TestDecodeTCPInfoLengths decodes 6.18's tcp_info cut to every length
// from 0 to past its end: below the oldest struct an error, and above it
// each field either as 6.18 sent it, when the cut holds all its bytes,
// or zero; the Has methods agree.
func TestDecodeTCPInfoLengths(t *testing.T) {
	b, err := os.ReadFile("testdata/tcp_info.bin")
	if err != nil {
		t.Fatal(err)
	}
	// A connection's fields made distinct, so that a field read from
	// the wrong offset shows.
	full := make([]byte, len(b)+24)
	copy(full, b)
	for off := 104; off < len(b); off++ {
		full[off] = byte(off)
	}
	var all TCPInfo
	if err := DecodeTCPInfo(full[:len(b)], &all); err != nil {
		t.Fatal(err)
	}
	fields := []struct {
		name    string
		off, n  int
		get     func(*TCPInfo) uint64
		has     func(*TCPInfo) bool
		wantAll uint64
	}{
		{"busy_time", tiBusyTime, 8, func(x *TCPInfo) uint64 { return x.BusyTime }, (*TCPInfo).HasBusyTime, 0},
		{"rwnd_limited", tiRwndLimited, 8, func(x *TCPInfo) uint64 { return x.RwndLimited }, nil, 0},
		{"sndbuf_limited", tiSndbufLimit, 8, func(x *TCPInfo) uint64 { return x.SndbufLimited }, (*TCPInfo).HasLimited, 0},
		{"delivery_rate", tiDeliveryRate, 8, func(x *TCPInfo) uint64 { return x.DeliveryRate }, (*TCPInfo).HasDeliveryRate, 0},
		{"bytes_retrans", tiBytesRetrans, 8, func(x *TCPInfo) uint64 { return x.BytesRetrans }, (*TCPInfo).HasBytesRetrans, 0},
		{"snd_wnd", tiSndWnd, 4, func(x *TCPInfo) uint64 { return uint64(x.SndWnd) }, (*TCPInfo).HasSndWnd, 0},
		{"rcv_wnd", tiRcvWnd, 4, func(x *TCPInfo) uint64 { return uint64(x.RcvWnd) }, (*TCPInfo).HasRcvWnd, 0},
		{"total_rto", tiTotalRTO, 2, func(x *TCPInfo) uint64 { return uint64(x.TotalRTO) }, nil, 0},
		{"total_rto_recoveries", tiTotalRTORec, 2, func(x *TCPInfo) uint64 { return uint64(x.TotalRTORecoveries) }, nil, 0},
		{"total_rto_time", tiTotalRTOTime, 4, func(x *TCPInfo) uint64 { return uint64(x.TotalRTOTime) }, (*TCPInfo).HasTotalRTO, 0},
		{"min_rtt", tiMinRTT, 4, func(x *TCPInfo) uint64 { return uint64(x.MinRTT) }, nil, 0},
		{"notsent", tiNotsent, 4, func(x *TCPInfo) uint64 { return uint64(x.NotsentBytes) }, (*TCPInfo).HasNotsent, 0},
	}
	for i := range fields {
		fields[i].wantAll = fields[i].get(&all)
		if fields[i].wantAll == 0 {
			t.Fatalf("%s is 0 in the marked struct", fields[i].name)
		}
	}
	if all.SndWnd != 0xe7e6e5e4 || all.TotalRTO != 0xf1f0 || all.TotalRTOTime != 0xf7f6f5f4 {
		t.Errorf("offsets: snd_wnd %#x total_rto %#x total_rto_time %#x", all.SndWnd, all.TotalRTO, all.TotalRTOTime)
	}
	for n := 0; n <= len(full); n++ {
		var ti TCPInfo
		err := DecodeTCPInfo(full[:n], &ti)
		if n < tcpInfoMinLen {
			if !errors.Is(err, ErrTruncated) {
				t.Errorf("%d bytes: %v, want ErrTruncated", n, err)
			}
			continue
		}
		if err != nil || ti.Size != n || ti.RTO != all.RTO || ti.SndCwnd != all.SndCwnd {
			t.Errorf("%d bytes: %v, size %d", n, err, ti.Size)
		}
		for _, f := range fields {
			want := uint64(0)
			if n >= f.off+f.n {
				want = f.wantAll
			}
			if got := f.get(&ti); got != want {
				t.Errorf("%d bytes: %s = %d, want %d", n, f.name, got, want)
			}
			if f.has != nil && f.has(&ti) != (n >= f.off+f.n) {
				t.Errorf("%d bytes: Has for %s = %v", n, f.name, f.has(&ti))
			}
		}
	}
}

func FuzzDecodeTCPInfo(f *testing.F) {
	b, err := os.ReadFile("testdata/tcp_info.bin")
	if err != nil {
		f.Fatal(err)
	}
	for _, n := range []int{0, 103, 104, 160, 192, 232, 248, 279, 280} {
		f.Add(b[:n])
	}
	f.Add(append(b, 1, 2, 3, 4, 5))
	f.Fuzz(func(t *testing.T, b []byte) {
		var ti TCPInfo
		err := DecodeTCPInfo(b, &ti)
		if (err == nil) != (len(b) >= tcpInfoMinLen) {
			t.Fatalf("%d bytes: %v", len(b), err)
		}
		if err == nil && (ti.HasTotalRTO() != (len(b) >= tiTotalRTOTime+4) || ti.HasLimited() != (len(b) >= tiSndbufLimit+8)) {
			t.Fatalf("%d bytes: Has disagrees with the length", len(b))
		}
		if err == nil && len(b) < tiSndWnd+4 && ti.SndWnd != 0 {
			t.Fatalf("%d bytes: snd_wnd %d read past the end", len(b), ti.SndWnd)
		}
	})
}

// TestDecodeConnFixture decodes a dump as CollectSenders asks for it
// (INET_DIAG_INFO, INET_DIAG_CONG, INET_DIAG_SKMEMINFO) and the notices
// of two connections' ends, from Linux 6.18 (testdata/tcp_senders_dump.bin
// and tcp_ends.bin, captured by NETDOCTOR_CAPTURE=1 go test -run
// TestCollectSenders): the server's end of a connection whose reader
// reads nothing, its window closed and its send queue full; the ends of
// a 200 KiB answer, read and closed.
func TestDecodeConnFixture(t *testing.T) {
	b, err := os.ReadFile("testdata/tcp_senders_dump.bin")
	if err != nil {
		t.Fatal(err)
	}
	var stuck *ConnInfo
	var m InetDiagMsg
	n := 0
	if _, _, err := Messages(b, func(p []byte) error {
		var c ConnInfo
		if err := DecodeConn(p, &m, &c); err != nil {
			return err
		}
		n++
		if m.SPort == 7010 && m.State == stateEstablished {
			stuck = &c
		}
		return nil
	}); err != nil || stuck == nil {
		t.Fatalf("%d sockets, %v, none from port 7010", n, err)
	}
	ti := &stuck.Info
	if !stuck.HasInfo || stuck.Cong != "cubic" || stuck.SndBuf == 0 || !stuck.SndbufFull() || ti.SndWnd != 0 || ti.NotsentBytes == 0 || ti.RwndLimited == 0 || ti.BusyTime < ti.RwndLimited {
		t.Errorf("the stuck sender: %+v", stuck)
	}
	b, err = os.ReadFile("testdata/tcp_ends.bin")
	if err != nil {
		t.Fatal(err)
	}
	var ends []TCPInfo
	var ports []uint16
	if _, _, err := Messages(b, func(p []byte) error {
		var ti TCPInfo
		if ok, err := DecodeInetDiagInfo(p, &m, &ti); !ok || err != nil {
			t.Errorf("a notice without tcp_info: %v", err)
		}
		ends, ports = append(ends, ti), append(ports, m.SPort)
		return nil
	}); err != nil || len(ends) != 2 {
		t.Fatalf("%d notices, %v", len(ends), err)
	}
	for i, e := range ends {
		if e.State != 7 || (ports[i] == 7010) != (e.BytesSent == 200<<10) {
			t.Errorf("notice from port %d: state %d, sent %d", ports[i], e.State, e.BytesSent)
		}
	}
}

func FuzzDecodeConn(f *testing.F) {
	b, err := os.ReadFile("testdata/tcp_senders_dump.bin")
	if err != nil {
		f.Fatal(err)
	}
	_, _, _ = Messages(b, func(p []byte) error { f.Add(p); return nil })
	f.Fuzz(func(t *testing.T, b []byte) {
		var m InetDiagMsg
		var c ConnInfo
		if err := DecodeConn(b, &m, &c); err != nil {
			return
		}
		if c.HasInfo && c.Info.Size < tcpInfoMinLen || len(c.Cong) > maxCongName {
			t.Fatalf("info %d bytes, cong %q", c.Info.Size, c.Cong)
		}
		s := NewSenders()
		r := s.Begin(time.Time{}, nil, 1)
		r.Look(&m, &c)
		r.Finish(true, "")
	})
}
