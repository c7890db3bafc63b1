package lab

import (
	"fmt"
	"os/exec"
)

// Shape caps what dev in namespace ns sends to rate (tc's syntax, e.g.
// "8mbit") with a token bucket: the saturated link of seed 001 §1. The
// namespace takes the qdisc with it.
func (e *Env) Shape(ns, dev, rate string) error {
	return e.Exec(ns, "tc", "qdisc", "replace", "dev", dev, "root", "tbf", "rate", rate, "burst", "32kbit", "latency", "50ms")
}

// DropRandom drops about percent % of the TCP packets namespace ns
// receives, with an nftables rule: random loss without netem.
func (e *Env) DropRandom(ns string, percent int) error {
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
func (e *Env) TrackConnections(ns string, max int) error {
	nft, err := exec.LookPath("nft")
	if err != nil {
		return ErrMissing{[]string{"nft (nftables)"}}
	}
	if err := e.Exec(ns, nft, "add table inet ndct; add chain inet ndct input { type filter hook input priority 0; }; add rule inet ndct input ct state established,related accept"); err != nil {
		return err
	}
	if max > 0 {
		return e.SetGlobal("/proc/sys/net/netfilter/nf_conntrack_max", fmt.Sprint(max))
	}
	return nil
}
