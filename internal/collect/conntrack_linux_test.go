package collect

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"

	vnetlink "github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/netdoctor/netdoctor/internal/conntrack"
	"github.com/netdoctor/netdoctor/internal/evidence"
	"github.com/netdoctor/netdoctor/internal/netns"
	"github.com/netdoctor/netdoctor/internal/procnet"
)

// hideFS is an fs.FS in which some files do not exist, as on a kernel
// built without them.
type hideFS struct {
	fs.FS
	hidden []string
}

func (h hideFS) Open(name string) (fs.File, error) {
	if slices.Contains(h.hidden, name) {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	}
	return h.FS.Open(name)
}

// ReadFile keeps os.DirFS's: without it fs.ReadFile reads a file of size
// 0 a byte first, and a numeric sysctl read at an offset past 0 ends
// there ("262144" comes back as "2").
func (h hideFS) ReadFile(name string) ([]byte, error) {
	if slices.Contains(h.hidden, name) {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	}
	return fs.ReadFile(h.FS, name)
}

// procHiding is the production procfs without the files named.
func procHiding(names ...string) procnet.Proc {
	p := procnet.Default()
	p.FS = hideFS{p.FS, names}
	return p
}

const statFile = "thread-self/net/stat/nf_conntrack"

// conntrackNetns makes a namespace in which conntrack tracks: an nft
// table with a `ct state` rule, and conns TCP connections over lo, held
// open till the test ends. Everything goes with the test, on failure too.
func conntrackNetns(t *testing.T, conns int) netns.NS {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: creates a network namespace and an nft table")
	}
	for _, tool := range []string{"ip", "nft"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("needs %s(8)", tool)
		}
	}
	name := fmt.Sprintf("ndtest-ct-%d", os.Getpid())
	n, err := netns.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := netns.Delete(name); err != nil && !errors.Is(err, netns.ErrNotFound) {
			t.Error(err)
		}
	})
	nft := exec.Command("ip", "netns", "exec", name, "nft", "-f", "-")
	nft.Stdin = strings.NewReader(`table inet ndtest {
	chain in { type filter hook input priority 0; ct state established,related accept; }
}`)
	if out, err := nft.CombinedOutput(); err != nil {
		t.Fatalf("nft: %v: %s", err, out)
	}
	// The namespace's end takes the table with it; deleting it first
	// leaves nothing behind should the namespace outlive the test.
	t.Cleanup(func() { exec.Command("ip", "netns", "exec", name, "nft", "delete", "table", "inet", "ndtest").Run() })
	if err := n.Do(func() error {
		lo, err := vnetlink.LinkByName("lo")
		if err != nil {
			return err
		}
		if err := vnetlink.LinkSetUp(lo); err != nil {
			return err
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		t.Cleanup(func() { ln.Close() })
		for range conns {
			c, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				return err
			}
			t.Cleanup(func() { c.Close() })
			s, err := ln.Accept()
			if err != nil {
				return err
			}
			t.Cleanup(func() { s.Close() })
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return n
}

func sysctlUint(t *testing.T, p procnet.Proc, name string) uint64 {
	t.Helper()
	v, err := p.Sysctl(name)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestConntrackNetlinkMatchesProcfs reads the table of a namespace with
// a few tracked connections both ways, from a thread inside it: netlink
// must agree with procfs, and the collector must fall back to netlink
// when procfs lacks the file, or the sysctls.
func TestConntrackNetlinkMatchesProcfs(t *testing.T) {
	const conns = 5
	n := conntrackNetns(t, conns)
	home := procnet.Default()
	homeCount := sysctlUint(t, home, "net.netfilter.nf_conntrack_count")
	err := n.Do(func() error {
		// Since 5.x or so a confirmed connection no longer counts in
		// insert or found; a TCP packet with SYN and FIN set still
		// counts in invalid.
		if err := sendSynFin(3); err != nil {
			return err
		}
		p := procnet.Default()
		count := sysctlUint(t, p, "net.netfilter.nf_conntrack_count")
		max := sysctlUint(t, p, "net.netfilter.nf_conntrack_max")
		proc, err := p.ConntrackStat()
		if err != nil {
			return err
		}
		c, err := conntrack.Dial()
		if err != nil {
			return err
		}
		defer c.Close()
		nl, err := c.Stats()
		if err != nil {
			return err
		}
		g, err := c.Global()
		if err != nil {
			return err
		}
		t.Logf("namespace: count %d, procfs %v; netlink %+v %v; home count %d", count, proc, g, nl, homeCount)
		// Each connection is one entry, in this namespace's table only.
		if count < conns || g.Entries != count || proc["entries"] != count || g.Max != max {
			t.Errorf("entries: sysctl %d, procfs %d, netlink %d (max %d, sysctl %d); want the same, at least %d",
				count, proc["entries"], g.Entries, g.Max, max, conns)
		}
		// Nothing moves in the namespace between the reads.
		for _, k := range []string{"drop", "early_drop", "insert_failed", "invalid", "icmp_error", "search_restart", "clashres", "chainlength", "expect_new"} {
			if nl[k] != proc[k] {
				t.Errorf("%s: netlink %d, procfs %d", k, nl[k], proc[k])
			}
		}
		for _, k := range []string{"found", "insert"} {
			if d := int64(nl[k]) - int64(proc[k]); d < -2 || d > 2 {
				t.Errorf("%s: netlink %d, procfs %d", k, nl[k], proc[k])
			}
		}
		if proc["invalid"] == 0 {
			t.Errorf("invalid = 0, want the SYN+FIN packets counted: is conntrack tracking?")
		}

		col := newConntrack(Config{}, p)
		got, err := col.collect()
		if err != nil || got.Source != "procfs" || got.Count != count || got.Stats["insert"] != proc["insert"] {
			t.Errorf("with procfs: %+v, %v; want source procfs, count %d", got, err, count)
		}

		col = newConntrack(Config{}, procHiding(statFile))
		got, err = col.collect()
		if err != nil || got.Source != "netlink" || got.Count != count || got.Max != max || got.Buckets == 0 ||
			got.Stats["entries"] != count || got.Stats["invalid"] != proc["invalid"] {
			t.Errorf("without %s: %+v, %v; want source netlink, count %d", statFile, got, err, count)
		}

		col = newConntrack(Config{}, procHiding(statFile, "sys/net/netfilter/nf_conntrack_max"))
		got, err = col.collect()
		if err != nil || got.Source != "netlink" || got.Count != count || got.Max != max || got.Buckets != 0 ||
			got.Stats["invalid"] != proc["invalid"] {
			t.Errorf("without the sysctls: %+v, %v; want everything from netlink, count %d", got, err, count)
		}

		// Without nf_conntrack in /sys/module, netlink is not asked: its
		// request would load the module.
		col = newConntrack(Config{Sys: fstest.MapFS{}}, procHiding(statFile, "sys/net/netfilter/nf_conntrack_max"))
		col.dial = func() (ctnetlink, error) { t.Error("netlink asked without nf_conntrack"); return nil, errors.New("no") }
		if got, err := col.collect(); !errors.Is(err, ErrUnavailable) || got != nil {
			t.Errorf("without nf_conntrack: %+v, %v; want ErrUnavailable", got, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestConntrackNoCapNetAdmin: without CAP_NET_ADMIN ctnetlink refuses,
// and the collector, on a kernel without the procfs file, reports the
// sysctls it could read, partial, with a one-line reason. As root the
// capability is dropped from one thread, which then ends.
func TestConntrackNoCapNetAdmin(t *testing.T) {
	p := procnet.Default()
	if _, err := p.Sysctl("net.netfilter.nf_conntrack_max"); err != nil {
		t.Skipf("no nf_conntrack: %v", err)
	}
	type result struct {
		ct  *evidence.Conntrack
		st  evidence.Status
		err error
	}
	done := make(chan result, 1)
	go func() {
		// Never unlocked: the thread, without its capability, ends
		// with the goroutine.
		runtime.LockOSThread()
		if err := dropCap(unix.CAP_NET_ADMIN); err != nil {
			done <- result{err: err}
			return
		}
		var s evidence.Snapshot
		col := newConntrack(Config{}, procHiding(statFile))
		err := col.Collect(t.Context(), &s)
		done <- result{ct: s.Conntrack, st: status(col.Name(), err, 0)}
	}()
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	t.Logf("status: %+v", r.st)
	if r.st.State != evidence.StatePartial || !strings.Contains(r.st.Error, "CAP_NET_ADMIN") || strings.Contains(r.st.Error, "\n") {
		t.Errorf("status = %+v, want partial with a one-line reason naming CAP_NET_ADMIN", r.st)
	}
	if r.ct == nil || r.ct.Max == 0 || r.ct.Source != "" || r.ct.Stats != nil {
		t.Errorf("conntrack = %+v, want the sysctls without stats", r.ct)
	}
}

// sendSynFin sends n TCP segments with SYN and FIN set to 127.0.0.1:9
// over a raw socket of the calling thread's namespace: a flag
// combination conntrack's TCP tracker calls invalid.
func sendSynFin(n int) error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.IPPROTO_TCP)
	if err != nil {
		return fmt.Errorf("raw socket: %w", err)
	}
	defer unix.Close(fd)
	seg := make([]byte, 20)
	seg[1], seg[3] = 99, 9 // source port 99, destination 9
	seg[12] = 5 << 4       // data offset: 5 words, no options
	seg[13] = 0x03         // FIN|SYN
	seg[15] = 0xff         // window
	for range n {
		if err := unix.Sendto(fd, seg, 0, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
			return fmt.Errorf("send: %w", err)
		}
	}
	return nil
}

// dropCap removes a capability from the calling thread's effective set.
func dropCap(c int) error {
	h := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var d [2]unix.CapUserData
	if err := unix.Capget(&h, &d[0]); err != nil {
		return fmt.Errorf("capget: %w", err)
	}
	d[c/32].Effective &^= 1 << (c % 32)
	if err := unix.Capset(&h, &d[0]); err != nil {
		return fmt.Errorf("capset: %w", err)
	}
	return nil
}
