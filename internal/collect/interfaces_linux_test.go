package collect

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/netdoctor/netdoctor/internal/evidence"
	"github.com/netdoctor/netdoctor/internal/netns"
	"github.com/netdoctor/netdoctor/internal/report"
	"github.com/netdoctor/netdoctor/internal/rules"
)

func TestTCHandle(t *testing.T) {
	tests := []struct {
		h     uint32
		class bool
		want  string
	}{
		{netlink.HANDLE_ROOT, true, "root"},
		{netlink.HANDLE_INGRESS, true, "ingress"},
		{netlink.MakeHandle(1, 0), false, "1:"},
		{netlink.MakeHandle(0x8001, 0), false, "8001:"},
		{0, false, "0:"},
		{netlink.MakeHandle(1, 0x10), true, "1:10"},
		{netlink.MakeHandle(1, 0), true, "1:0"},
	}
	for _, tt := range tests {
		if got := tcHandle(tt.h, tt.class); got != tt.want {
			t.Errorf("tcHandle(%#x, %v) = %q, want %q", tt.h, tt.class, got, tt.want)
		}
	}
}

// TestTBFSaturated builds two namespaces joined by a veth, shapes one end
// with `tbf rate 8mbit`, pushes TCP through it for four seconds and
// samples the sender each second with the real collector. The tbf must
// show with its rate and rising counters, and the rules must call the
// interface saturated. The receiver's end carries an htb class, which
// must show with its rate and ceil.
func TestTBFSaturated(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: creates network namespaces, a veth pair and qdiscs")
	}
	for _, tool := range []string{"ip", "tc"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("needs %s(8) from iproute2 to build the namespaces and qdiscs", tool)
		}
	}
	pid := os.Getpid()
	nsA, nsB := fmt.Sprintf("ndbw-%d-a", pid), fmt.Sprintf("ndbw-%d-b", pid)
	vethA, vethB := fmt.Sprintf("ndbw%da", pid), fmt.Sprintf("ndbw%db", pid) // at most 15 bytes
	for _, ns := range []string{nsA, nsB} {
		tcExec(t, "ip", "netns", "add", ns)
		t.Cleanup(func() { exec.Command("ip", "netns", "del", ns).Run() })
	}
	tcExec(t, "ip", "link", "add", vethA, "type", "veth", "peer", "name", vethB)
	t.Cleanup(func() { exec.Command("ip", "link", "del", vethA).Run() }) // in case it never moved
	tcExec(t, "ip", "link", "set", vethA, "netns", nsA)
	tcExec(t, "ip", "link", "set", vethB, "netns", nsB)
	tcExec(t, "ip", "-n", nsA, "addr", "add", "10.78.0.1/24", "dev", vethA)
	tcExec(t, "ip", "-n", nsB, "addr", "add", "10.78.0.2/24", "dev", vethB)
	for _, l := range [][2]string{{nsA, vethA}, {nsB, vethB}, {nsA, "lo"}, {nsB, "lo"}} {
		tcExec(t, "ip", "-n", l[0], "link", "set", l[1], "up")
	}
	tcExec(t, "tc", "-n", nsA, "qdisc", "add", "dev", vethA, "root", "tbf", "rate", "8mbit", "burst", "32kbit", "latency", "50ms")
	tcExec(t, "tc", "-n", nsB, "qdisc", "add", "dev", vethB, "root", "handle", "1:", "htb", "default", "10")
	tcExec(t, "tc", "-n", nsB, "class", "add", "dev", vethB, "parent", "1:", "classid", "1:10", "htb", "rate", "2mbit", "ceil", "5mbit")

	// The load starts just after the first snapshot, so its slow start
	// (where the drops come from; then TCP keeps the queue below the
	// limit) falls inside the window.
	var stop func()
	sender := sample(t, nsA, 5, time.Second, func() { stop = pushTCP(t, nsA, nsB, 4) })
	receiver := sample(t, nsB, 2, 0, nil)
	stop()

	first, last := sender.Snapshots[0], sender.Snapshots[len(sender.Snapshots)-1]
	tbf0, tbf1 := rootQdisc(t, first, vethA), rootQdisc(t, last, vethA)
	if tbf1.Kind != "tbf" || tbf1.Parent != "root" {
		t.Fatalf("%s root qdisc = %+v, want tbf at root", vethA, tbf1)
	}
	if tbf1.RateBytesPerSec != 1_000_000 {
		t.Errorf("tbf rate = %d bytes/s, want 1000000 (8mbit)", tbf1.RateBytesPerSec)
	}
	// 32kbit is 4096 bytes to tc; the kernel keeps it as scheduler ticks.
	if tbf1.BurstBytes < 4000 || tbf1.BurstBytes > 4200 {
		t.Errorf("tbf burst = %d bytes, want about 4096", tbf1.BurstBytes)
	}
	// latency 50ms: limit = rate × latency + burst.
	if tbf1.LimitBytes < 50000 || tbf1.LimitBytes > 60000 {
		t.Errorf("tbf limit = %d bytes, want about 54096", tbf1.LimitBytes)
	}
	if ifc := findInterface(t, last, vethA); ifc.Qdisc != "tbf" || ifc.LinkKind != "veth" {
		t.Errorf("%s: Qdisc %q, LinkKind %q; want tbf, veth", vethA, ifc.Qdisc, ifc.LinkKind)
	}
	secs := last.Time.Sub(first.Time).Seconds()
	if sent := tbf1.Bytes - tbf0.Bytes; float64(sent) < 0.85*secs*1e6 {
		t.Errorf("tbf sent %d bytes in %.1fs, want near 1000000/s", sent, secs)
	}
	if tbf1.Overlimits <= tbf0.Overlimits || tbf1.Drops <= tbf0.Drops {
		t.Errorf("tbf overlimits %d→%d, drops %d→%d; want both to rise", tbf0.Overlimits, tbf1.Overlimits, tbf0.Drops, tbf1.Drops)
	}

	var found bool
	for _, f := range rules.Check(sender) {
		if f.ID == "bandwidth-saturated" && f.Subject == vethA && f.Status == report.Active {
			found = true
			t.Logf("%s %s: %s", f.Severity, f.Title, evidenceText(f))
		}
	}
	if !found {
		t.Errorf("rules found no active bandwidth-saturated on %s; tbf: %+v", vethA, tbf1)
	}

	class := findClass(t, receiver.Snapshots[len(receiver.Snapshots)-1], vethB, "1:10")
	if class.Kind != "htb" || class.Parent != "root" || class.RateBytesPerSec != 250_000 || class.CeilBytesPerSec != 625_000 || class.Bytes == 0 {
		t.Errorf("htb class 1:10 = %+v, want htb at root (directly under 1:), rate 250000, ceil 625000, with bytes (the ACKs)", class)
	}
}

func tcExec(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// pushTCP sends over eight TCP connections from 10.78.0.1 in nsA to a sink
// at 10.78.0.2 in nsB for about secs seconds plus a margin. The returned
// stop ends the traffic and may be called more than once.
func pushTCP(t *testing.T, nsA, nsB string, secs int) (stop func()) {
	t.Helper()
	nsHA, err := netns.Resolve(nsA)
	if err != nil {
		t.Fatal(err)
	}
	nsHB, err := netns.Resolve(nsB)
	if err != nil {
		t.Fatal(err)
	}
	var ln net.Listener
	if err := nsHB.Do(func() (err error) { ln, err = net.Listen("tcp", "10.78.0.2:0"); return err }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(io.Discard, c); c.Close() }()
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(secs)*time.Second+1500*time.Millisecond)
	t.Cleanup(cancel)
	buf := make([]byte, 64<<10)
	for range 8 {
		c, err := nsHA.Dial(context.Background(), "tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		go func() {
			<-ctx.Done()
			c.SetWriteDeadline(time.Now())
		}()
		go func() {
			for ctx.Err() == nil {
				if _, err := c.Write(buf); err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
					return
				}
			}
		}()
	}
	return cancel
}

// sample takes n snapshots of ns, every apart, and calls after (if not
// nil) once the first is taken.
func sample(t *testing.T, ns string, n int, every time.Duration, after func()) *evidence.Bundle {
	t.Helper()
	nsh, err := netns.Resolve(ns)
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(Config{NetNS: nsh})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	b := &evidence.Bundle{Version: evidence.BundleVersion, Host: s.Host, Start: time.Now()}
	for k := range n {
		if k > 0 {
			time.Sleep(time.Until(b.Start.Add(time.Duration(k) * every))) // the sampling schedule under test
		}
		snap := s.Snapshot(context.Background())
		for _, st := range snap.Status {
			if st.Collector == "interfaces" && st.State != evidence.StateOK {
				t.Errorf("interfaces collector: %s %s", st.State, st.Error)
			}
		}
		b.Snapshots = append(b.Snapshots, snap)
		if k == 0 && after != nil {
			after()
		}
	}
	return b
}

func findInterface(t *testing.T, s evidence.Snapshot, name string) evidence.Interface {
	t.Helper()
	for _, i := range s.Interfaces {
		if i.Name == name {
			return i
		}
	}
	t.Fatalf("no interface %s in the snapshot", name)
	return evidence.Interface{}
}

func rootQdisc(t *testing.T, s evidence.Snapshot, name string) evidence.Qdisc {
	t.Helper()
	for _, q := range findInterface(t, s, name).Qdiscs {
		if !q.Class && q.Parent == "root" {
			return q
		}
	}
	t.Fatalf("%s has no root qdisc", name)
	return evidence.Qdisc{}
}

func findClass(t *testing.T, s evidence.Snapshot, name, handle string) evidence.Qdisc {
	t.Helper()
	ifc := findInterface(t, s, name)
	for _, q := range ifc.Qdiscs {
		if q.Class && q.Handle == handle {
			return q
		}
	}
	t.Fatalf("%s has no class %s: %+v", name, handle, ifc.Qdiscs)
	return evidence.Qdisc{}
}

func evidenceText(f report.Finding) string {
	var out []string
	for _, it := range f.Evidence {
		out = append(out, it.Text)
	}
	return strings.Join(out, "; ")
}
