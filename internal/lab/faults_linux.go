package lab

import (
	"fmt"
	"os/exec"

	"github.com/vishvananda/netlink"

	"github.com/netdoctor/netdoctor/internal/netns"
)

// Shape caps what dev in namespace ns sends to rate (tc's syntax, e.g.
// "8mbit") with a token bucket: the saturated link of seed 001 §1. It is
// `tc qdisc replace dev DEV root tbf rate RATE burst 32kbit latency
// 50ms`, made through netlink with the numbers tc would send (newTBF).
// The namespace takes the qdisc with it.
func (e *Env) Shape(ns netns.NS, dev, rate string) error {
	bps, err := parseRate(rate)
	if err != nil {
		return err
	}
	h, err := handleAt(ns)
	if err != nil {
		return err
	}
	defer h.Close()
	link, err := h.LinkByName(dev)
	if err != nil {
		return fmt.Errorf("%s in %s: %w", dev, ns, err)
	}
	t := newTBF(bps, tbfBurstBytes, tbfLatency, netlink.TickInUsec())
	q := &netlink.Tbf{QdiscAttrs: netlink.QdiscAttrs{LinkIndex: link.Attrs().Index, Parent: netlink.HANDLE_ROOT},
		Rate: t.Rate, Limit: t.Limit, Buffer: t.Buffer}
	if err := h.QdiscReplace(q); err != nil {
		return fmt.Errorf("tbf rate %s on %s in %s: %w", rate, dev, ns, err)
	}
	return nil
}

// DropRandom drops about percent % of the TCP packets namespace ns
// receives, with an nftables rule: random loss without netem. Rules go
// through nft(8): no nftables library is among netdoctor's dependencies.
func (e *Env) DropRandom(ns netns.NS, percent int) error {
	nft, err := exec.LookPath("nft")
	if err != nil {
		return ErrMissing{[]string{"nft (nftables)"}}
	}
	return e.Exec(ns, nft, fmt.Sprintf("add table inet ndlab; add chain inet ndlab input { type filter hook input priority 0; }; add rule inet ndlab input meta l4proto tcp numgen random mod 100 < %d drop", percent))
}

// TrackConnections turns connection tracking on in namespace ns (any
// conntrack expression does), as a stateful firewall would: the table of
// seeds 000 and 002. With max > 0 it also sets the host-wide
// nf_conntrack_max, restored on Close.
func (e *Env) TrackConnections(ns netns.NS, max int) error {
	nft, err := exec.LookPath("nft")
	if err != nil {
		return ErrMissing{[]string{"nft (nftables)"}}
	}
	if err := e.Exec(ns, nft, "add table inet ndct; add chain inet ndct input { type filter hook input priority 0; }; add rule inet ndct input ct state established,related accept"); err != nil {
		return err
	}
	if max > 0 {
		return e.SetGlobal("net.netfilter.nf_conntrack_max", fmt.Sprint(max))
	}
	return nil
}

// DropUDP drops about percent % of the UDP datagrams to port that
// namespace ns receives, loopback included: a lossy path to a resolver
// (port 53), without netem. The answers, from that port, pass.
func (e *Env) DropUDP(ns netns.NS, port, percent int) error {
	nft, err := exec.LookPath("nft")
	if err != nil {
		return ErrMissing{[]string{"nft (nftables)"}}
	}
	return e.Exec(ns, nft, fmt.Sprintf("add table inet ndudp; add chain inet ndudp input { type filter hook input priority 0; }; add rule inet ndudp input udp dport %d numgen random mod 100 < %d drop", port, percent))
}

// DropUDPFrom drops about percent % of the UDP datagrams namespace ns
// receives from source port port: loss on the way back from a server.
// The table goes with the namespace.
func (e *Env) DropUDPFrom(ns netns.NS, port, percent int) error {
	nft, err := exec.LookPath("nft")
	if err != nil {
		return ErrMissing{[]string{"nft (nftables)"}}
	}
	return e.Exec(ns, nft, fmt.Sprintf("add table inet ndudpfrom; add chain inet ndudpfrom input { type filter hook input priority 0; }; add rule inet ndudpfrom input udp sport %d numgen random mod 100 < %d drop", port, percent))
}
