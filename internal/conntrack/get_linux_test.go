package conntrack

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	vnetlink "github.com/vishvananda/netlink"

	"github.com/netdoctor/netdoctor/internal/netns"
)

// TestGet makes a namespace whose nftables DNAT a UDP port, sends one
// datagram through it, and finds the entry by either of its tuples,
// from this thread in the caller's namespace (DialAt).
func TestGet(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: it creates a network namespace")
	}
	if _, err := exec.LookPath("nft"); err != nil {
		t.Skip("needs nft(8)")
	}
	name := fmt.Sprintf("ndtest-ct-%d", os.Getpid())
	ns, err := netns.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { netns.Delete(name) })
	rules := filepath.Join(t.TempDir(), "nft.conf")
	os.WriteFile(rules, []byte("table ip t {\n\tchain out {\n\t\ttype nat hook output priority -100;\n\t\tudp dport 9999 dnat to 127.0.0.1:9998\n\t}\n}\n"), 0o600)
	var local netip.AddrPort
	err = ns.Do(func() error {
		lo, err := vnetlink.LinkByName("lo")
		if err != nil {
			return err
		}
		if err := vnetlink.LinkSetUp(lo); err != nil {
			return err
		}
		if out, err := exec.Command("nft", "-f", rules).CombinedOutput(); err != nil {
			return fmt.Errorf("nft: %v: %s", err, out)
		}
		c, err := net.DialUDP("udp4", nil, &net.UDPAddr{IP: net.IPv4(127, 0, 0, 2), Port: 9999})
		if err != nil {
			return err
		}
		defer c.Close()
		local = c.LocalAddr().(*net.UDPAddr).AddrPort()
		_, err = c.Write([]byte("x"))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	c, err := DialAt(ns.Path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	orig := Tuple{Proto: 17, Src: local, Dst: netip.MustParseAddrPort("127.0.0.2:9999")}
	reply := Tuple{Proto: 17, Src: netip.MustParseAddrPort("127.0.0.1:9998"), Dst: local}
	for _, q := range []Tuple{orig, reply} {
		e, err := c.Get(q)
		if err != nil {
			t.Fatalf("Get(%v): %v", q, err)
		}
		if e.Orig != orig || e.Reply != reply || !e.NAT() {
			t.Errorf("Get(%v) = %+v, want orig %v reply %v", q, e, orig, reply)
		}
	}
	if _, err := c.Get(orig.Reverse()); !errors.Is(err, ErrNotFound) {
		t.Errorf("Get of a tuple no entry has: %v, want ErrNotFound", err)
	}
}
