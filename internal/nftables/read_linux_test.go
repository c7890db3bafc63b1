package nftables

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"

	vnetlink "github.com/vishvananda/netlink"

	"github.com/netdoctor/netdoctor/internal/evidence"
	"github.com/netdoctor/netdoctor/internal/netns"
)

// TestRead reads a namespace's nft and iptables-nft rules: only those
// that discard or limit, named in both syntaxes, a drop policy, and a
// counter that moves with the packets it dropped.
func TestRead(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: creates a network namespace and nft tables")
	}
	if _, err := exec.LookPath("nft"); err != nil {
		t.Skip("needs nft(8)")
	}
	name := fmt.Sprintf("ndtest-nft-%d", os.Getpid())
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
	chain input {
		type filter hook input priority 0; policy accept;
		iifname "lo" udp dport 9 counter drop
		tcp dport 80 ct state new limit rate over 10/second counter drop
		tcp dport 22 accept
	}
	chain forward_f { type filter hook forward priority 0; policy drop; }
}`)
	if out, err := nft.CombinedOutput(); err != nil {
		t.Fatalf("nft: %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command("ip", "netns", "exec", name, "nft", "delete", "table", "inet", "ndtest").Run() })
	iptables := false
	if _, err := exec.LookPath("iptables-nft"); err == nil {
		out, err := exec.Command("ip", "netns", "exec", name, "iptables-nft", "-A", "INPUT", "-p", "tcp", "--syn", "--dport", "8080", "-j", "DROP").CombinedOutput()
		if err != nil {
			t.Fatalf("iptables-nft: %v: %s", err, out)
		}
		iptables = true
	}
	var before, after *evidence.Firewall
	if err := n.Do(func() error {
		lo, err := vnetlink.LinkByName("lo")
		if err != nil {
			return err
		}
		if err := vnetlink.LinkSetUp(lo); err != nil {
			return err
		}
		if before, err = Read(); err != nil {
			return err
		}
		c, err := net.Dial("udp", "127.0.0.1:9")
		if err != nil {
			return err
		}
		defer c.Close()
		for range 3 {
			c.Write([]byte("x"))
		}
		after, err = Read()
		return err
	}); err != nil {
		t.Fatal(err)
	}
	rule := func(fw *evidence.Firewall, text string) *evidence.FirewallRule {
		for i, r := range fw.Rules {
			if r.Text == text {
				return &fw.Rules[i]
			}
		}
		var all []string
		for _, r := range fw.Rules {
			all = append(all, r.Text)
		}
		t.Fatalf("no rule %q among %q", text, all)
		return nil
	}
	udp := `iifname "lo" udp dport 9 drop`
	if b, a := rule(before, udp), rule(after, udp); !a.Counted || a.Packets-b.Packets != 3 || a.Hook != "input" || a.Table != "ndtest" || a.Family != "inet" {
		t.Errorf("udp rule before %+v after %+v: want 3 packets counted in inet ndtest input", b, a)
	}
	if r := rule(after, "tcp dport 80 ct state new limit rate over 10/second drop"); r.Limit != "10/second" || !r.Over || r.Verdict != "drop" {
		t.Errorf("limit rule %+v", r)
	}
	if r := rule(after, "policy drop"); r.Chain != "forward_f" || r.Hook != "forward" {
		t.Errorf("policy %+v", r)
	}
	for _, r := range after.Rules {
		if strings.Contains(r.Text, "dport 22") {
			t.Errorf("an accept rule without limit is listed: %+v", r)
		}
	}
	if iptables {
		r := rule(after, "tcp flags syn / fin,syn,rst,ack tcp dport 8080 drop")
		if r.Iptables != "-A INPUT -p tcp --syn --dport 8080 -j DROP" || r.Table != "filter" || r.Family != "ip" {
			t.Errorf("iptables rule %+v", r)
		}
	}
}
