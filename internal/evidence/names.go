package evidence

import (
	"encoding/json"
	"strings"
)

// Counters holds a snapshot's SNMP and netstat counters. In memory they
// are keyed "Group.Name" ("TcpExt.ListenOverflows"), as the parsers and
// the rules name them; in JSON — bundles, the agent's snapshots — as
// nstat names them ("TcpExtListenOverflows"), the spelling users grep
// for (Nstat). A bundle written before version 2 has the dotted keys:
// both are read.
type Counters map[string]uint64

// MarshalJSON writes the counters under their nstat names.
func (c Counters) MarshalJSON() ([]byte, error) {
	if c == nil {
		return []byte("null"), nil
	}
	m := make(map[string]uint64, len(c))
	for k, v := range c {
		m[Nstat(k)] = v
	}
	return json.Marshal(m)
}

// UnmarshalJSON reads nstat names, and the dotted ones of version 1.
func (c *Counters) UnmarshalJSON(b []byte) error {
	var m map[string]uint64
	if err := json.Unmarshal(b, &m); err != nil {
		return err
	}
	if m == nil {
		*c = nil
		return nil
	}
	out := make(Counters, len(m))
	for k, v := range m {
		out[CounterKey(k)] = v
	}
	*c = out
	return nil
}

// counterGroups are the groups of /proc/net/snmp, netstat and snmp6,
// longest first: a name's group is the longest that starts it
// ("IcmpMsgInType3" is IcmpMsg's, not Icmp's; "TcpExtSyncookiesSent"
// TcpExt's, not Tcp's).
var counterGroups = []string{"UdpLite6", "MPTcpExt", "IcmpMsg", "UdpLite", "TcpExt", "Icmp6", "IpExt", "Udp6", "Icmp", "Ip6", "Tcp", "Udp", "Ip"}

// Nstat is a counter's name as nstat(8) prints it: "TcpExt.ListenOverflows"
// is "TcpExtListenOverflows", "Ip6.InReceives" "Ip6InReceives" (snmp6's
// own). node_exporter's metric adds an underscore instead
// (node_netstat_TcpExt_ListenOverflows). Other names are kept.
func Nstat(key string) string {
	g, n, ok := strings.Cut(key, ".")
	if !ok || !isGroup(g) {
		return key
	}
	return g + n
}

// CounterKey is the in-memory key of a counter named either way: nstat's
// name, or already "Group.Name". A name of no group netdoctor knows is
// kept as it is.
func CounterKey(name string) string {
	if strings.Contains(name, ".") {
		return name
	}
	for _, g := range counterGroups {
		if rest, ok := strings.CutPrefix(name, g); ok && rest != "" {
			return g + "." + rest
		}
	}
	return name
}

func isGroup(g string) bool {
	for _, k := range counterGroups {
		if k == g {
			return true
		}
	}
	return false
}
