package app

import (
	"bufio"
	"compress/gzip"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/netdoctor/netdoctor/internal/sockdiag"
)

// captured is one tcp_info of a recorded trace (testdata/exchange): at
// microseconds from its start, the front's end of a connection or the
// backend's (peer).
type captured struct {
	at   int64
	info sockdiag.TCPInfo
}

// readCaptured reads a trace recorded every 2 ms (see the files' first
// line): each connection's front and back ends, by connection.
func readCaptured(t *testing.T, name string) (front, back map[int][]captured) {
	t.Helper()
	f, err := os.Open("testdata/exchange/" + name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	z, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	front, back = map[int][]captured{}, map[int][]captured{}
	sc := bufio.NewScanner(z)
	var cols []string
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		if cols == nil {
			cols = strings.Split(line, ",")
			continue
		}
		f := strings.Split(line, ",")
		if len(f) != len(cols) {
			t.Fatalf("%s: %q", name, line)
		}
		n := map[string]uint64{}
		for i, c := range cols {
			if i != 1 {
				v, err := strconv.ParseUint(f[i], 10, 64)
				if err != nil {
					t.Fatalf("%s: %s %q", name, c, f[i])
				}
				n[c] = v
			}
		}
		ti := sockdiag.TCPInfo{Size: 280, DataSegsOut: uint32(n["DataSegsOut"]), DataSegsIn: uint32(n["DataSegsIn"]),
			BytesSent: n["BytesSent"], BytesReceived: n["BytesReceived"], BytesAcked: n["BytesAcked"],
			LastDataSent: uint32(n["LastDataSent"]), LastDataRecv: uint32(n["LastDataRecv"]), LastAckRecv: uint32(n["LastAckRecv"]),
			Unacked: uint32(n["Unacked"]), SegsOut: uint32(n["SegsOut"]), SegsIn: uint32(n["SegsIn"]), NotsentBytes: uint32(n["NotsentBytes"]),
			SndCwnd: uint32(n["SndCwnd"]), Ato: uint32(n["Ato"]), BusyTime: n["BusyTime"], MinRTT: uint32(n["MinRTT"]), RTT: uint32(n["RTT"])}
		c := captured{at: int64(n["t_us"]), info: ti}
		if f[1] == "front" {
			front[int(n["conn"])] = append(front[int(n["conn"])], c)
		} else {
			back[int(n["conn"])] = append(back[int(n["conn"])], c)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return front, back
}

// at is the last capture at or before us.
func at(cs []captured, us int64) *captured {
	i := sort.Search(len(cs), func(i int) bool { return cs[i].at > us }) - 1
	if i < 0 {
		return nil
	}
	return &cs[i]
}

// TestDependenciesCaptured replays real tcp_info traces (a Go front's
// and a Node.js front's pools of 4 to a backend writing its headers at
// once and its body 20 ms later, captured every 2 ms) through looks
// every 100 ms and their probes, as the tracer takes them, from several
// starting offsets: the pool reads busy, its time per round trip is the
// front's own within 5 %, and the Nagle stall is seen on the backend's
// end where Nagle was on.
func TestDependenciesCaptured(t *testing.T) {
	for _, tc := range []struct {
		file  string
		truth time.Duration // the front's own mean call
		held  bool
	}{
		{"go-nagle.csv.gz", 43907 * time.Microsecond, true},
		{"node-nodelay.csv.gz", 21466 * time.Microsecond, false},
	} {
		front, back := readCaptured(t, tc.file)
		for _, off := range []int64{0, 17, 43, 71, 96} {
			api := &Server{Kind: "api"}
			t0 := time.Unix(1000, 0)
			var conns []*connTrace
			for i := range len(front) {
				c := &connTrace{srv: api, dst: "backend:7300", noDelay: optOn}
				fr, bk := front[i], back[i]
				end := fr[len(fr)-1].at
				for k := 0; ; k++ {
					us := (off + int64(k)*100) * 1000
					if us > end {
						break
					}
					f := at(fr, us)
					if f == nil {
						continue
					}
					ti := f.info
					c.sample(t0.Add(time.Duration(us)*time.Microsecond), &ti, k, 10)
					if b := at(bk, us); b != nil {
						bi := b.info
						c.peerLook(&sockdiag.InetDiagMsg{Inode: 1}, &bi)
					}
					for !c.probeAt.IsZero() {
						p := int64(c.probeAt.Sub(t0) / time.Microsecond)
						if p >= us+100000 || p > end {
							break
						}
						pi := at(fr, p).info
						c.probe(t0.Add(time.Duration(p)*time.Microsecond), &pi)
					}
				}
				conns = append(conns, c)
			}
			d := dependencies(conns, nil)[api][0]
			e := float64(d.RoundTrip-tc.truth) / float64(tc.truth)
			t.Logf("%s +%d ms: busy %.2f, %v per round trip (%+.1f %%), nagle %+v", tc.file, off, d.Busy, d.RoundTrip, 100*e, d.Nagle)
			if d.Untimed != "" || d.Busy < 0.9 || e < -0.05 || e > 0.05 {
				t.Errorf("%s +%d ms: busy %.2f, %v per round trip (%q), want ≥ 0.9 and %v within 5 %%", tc.file, off, d.Busy, d.RoundTrip, d.Untimed, tc.truth)
			}
			if d.Nagle.StallsAnswers() != tc.held {
				t.Errorf("%s: answers held %v, want %v (%+v)", tc.file, d.Nagle.StallsAnswers(), tc.held, d.Nagle)
			}
		}
	}
}
