package lab

import (
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/vishvananda/netlink"

	"github.com/netdoctor/netdoctor/internal/netns"
)

// TestShapeAsTC: Shape's token bucket, made through netlink on the
// server's end of the veth, is the one `tc qdisc replace … tbf rate R
// burst 32kbit latency 50ms` made before on the client's end: the same
// parameters read back through netlink, and the same line in `tc -s
// qdisc` (rate, burst, latency; the handle aside). tc -d would differ in
// one word: tc says "linklayer ethernet", netlink.Tbf cannot, and the
// kernel treats the two alike (only ATM changes its arithmetic).
func TestShapeAsTC(t *testing.T) {
	skipUnlessRoot(t)
	tc, err := exec.LookPath("tc")
	if err != nil {
		t.Skip("needs tc(8) to compare with")
	}
	e := newEnv(t, "q"+strconv.Itoa(os.Getpid()%10000))
	for _, rate := range []string{"8mbit", "1500kbit", "333kbit", "1gbit", "40gbit"} {
		if err := e.Shape(e.ServerNS, e.ServerDev, rate); err != nil {
			t.Fatal(err)
		}
		if err := e.Exec(e.ClientNS, tc, "qdisc", "replace", "dev", e.ClientDev, "root", "tbf", "rate", rate, "burst", "32kbit", "latency", "50ms"); err != nil {
			t.Fatal(err)
		}
		ours, theirs := rootTBF(t, e.ServerNS, e.ServerDev), rootTBF(t, e.ClientNS, e.ClientDev)
		if diff := cmp.Diff(theirs, ours); diff != "" {
			t.Errorf("%s: netlink's tbf differs from tc's (-tc +netlink):\n%s", rate, diff)
		}
		ourLine, theirLine := tcShow(t, e.ServerNS, e.ServerDev), tcShow(t, e.ClientNS, e.ClientDev)
		if ourLine != theirLine || ourLine == "" {
			t.Errorf("%s: tc -s qdisc shows\n%s\nfor netlink's, and\n%s\nfor tc's", rate, ourLine, theirLine)
		}
		t.Logf("%s: %s (rate %d B/s, limit %d B, buffer %d ticks)", rate, ourLine, ours.Rate, ours.Limit, ours.Buffer)
	}
}

// rootTBF reads dev's root qdisc through netlink: the tbf's parameters.
func rootTBF(t *testing.T, ns netns.NS, dev string) netlink.Tbf {
	t.Helper()
	h, err := handleAt(ns)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	link, err := h.LinkByName(dev)
	if err != nil {
		t.Fatal(err)
	}
	qs, err := h.QdiscList(link)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range qs {
		if tbf, ok := q.(*netlink.Tbf); ok && tbf.Parent == netlink.HANDLE_ROOT {
			tbf.QdiscAttrs = netlink.QdiscAttrs{}
			return *tbf
		}
	}
	t.Fatalf("no root tbf on %s in %s: %v", dev, ns, qs)
	return netlink.Tbf{}
}

var tcHandle = regexp.MustCompile(`^qdisc tbf [0-9a-f]+: (?:dev \S+ )?(.*)`)

// tcShow is the tbf's line in `tc -s qdisc show dev DEV`, without its
// handle and device.
func tcShow(t *testing.T, ns netns.NS, dev string) string {
	t.Helper()
	out, err := exec.Command("ip", "netns", "exec", ns.Name, "tc", "-s", "qdisc", "show", "dev", dev).Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(out), "\n") {
		if m := tcHandle.FindStringSubmatch(l); m != nil {
			return m[1]
		}
	}
	return ""
}
