package nftables

import (
	"strconv"

	gnft "github.com/google/nftables"

	"github.com/netdoctor/netdoctor/internal/evidence"
)

// discards reports whether a rule can discard a packet or hold a rate:
// its verdict drops or rejects, or it limits (an accept under a limit
// lets the rest fall to a later drop), or it drops at random.
func discards(d decoded) bool {
	if d.verdict == "drop" || d.verdict == "reject" || d.limit != "" {
		return true
	}
	for _, p := range d.nft {
		if len(p) > 9 && p[:9] == "statistic" || len(p) > 11 && p[:11] == "meta random" {
			return true
		}
	}
	return false
}

// add keeps a rule, up to evidence.MaxFirewallRules.
func addRule(fw *evidence.Firewall, r evidence.FirewallRule) {
	if len(fw.Rules) >= evidence.MaxFirewallRules {
		fw.Truncated++
		return
	}
	fw.Rules = append(fw.Rules, r)
}

// hookName is a base chain's hook as nft prints it, "" for a regular
// chain.
func hookName(fam byte, ch *gnft.Chain) string {
	if ch.Hooknum == nil {
		return ""
	}
	h := uint32(*ch.Hooknum)
	if fam == famNetdev {
		switch h {
		case 0:
			return "ingress"
		case 1:
			return "egress"
		}
		return strconv.Itoa(int(h))
	}
	names := []string{"prerouting", "input", "forward", "output", "postrouting", "ingress"}
	if int(h) < len(names) {
		return names[h]
	}
	return strconv.Itoa(int(h))
}

// iptablesTable reports whether a table is one iptables-nft makes: its
// rules are then named in iptables syntax too.
func iptablesTable(fam byte, name string) bool {
	if fam != famIPv4 && fam != famIPv6 {
		return false
	}
	switch name {
	case "filter", "nat", "mangle", "raw", "security":
		return true
	}
	return false
}
