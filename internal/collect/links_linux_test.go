package collect

import (
	"net"
	"testing"

	"github.com/vishvananda/netlink"
)

// TestOverhead: what each tunnel's outer headers add, over IPv4 and
// IPv6; 0 for a device that is not a tunnel.
func TestOverhead(t *testing.T) {
	v6 := net.ParseIP("fd00::1")
	for _, c := range []struct {
		l    netlink.Link
		want int
	}{
		{&netlink.Vxlan{}, 50},
		{&netlink.Vxlan{Group: v6}, 70},
		{&netlink.Geneve{Remote: net.ParseIP("10.0.0.1")}, 50},
		{&netlink.Iptun{}, 20},
		{&netlink.Sittun{}, 20},
		{&netlink.Ip6tnl{}, 40},
		{&netlink.Gretun{}, 24},
		{&netlink.Gretun{IFlags: 0x2000 | 0x1000}, 32},
		{&netlink.Gretap{Local: v6}, 58},
		{&netlink.Vlan{}, 4},
		{&netlink.Wireguard{}, 60},
		{&netlink.Veth{}, 0},
		{&netlink.Bridge{}, 0},
	} {
		if got := overhead(c.l); got != c.want {
			t.Errorf("overhead(%s %+v) = %d, want %d", c.l.Type(), c.l, got, c.want)
		}
	}
}

// TestLinkKind: rtnetlink's kind, tun and tap told apart, lo named.
func TestLinkKind(t *testing.T) {
	lo := &netlink.Device{LinkAttrs: netlink.LinkAttrs{Name: "lo", Flags: net.FlagLoopback | net.FlagUp}}
	for _, c := range []struct {
		l    netlink.Link
		want string
	}{
		{lo, "loopback"},
		{&netlink.Device{}, "device"},
		{&netlink.Tuntap{Mode: netlink.TUNTAP_MODE_TAP}, "tap"},
		{&netlink.Tuntap{Mode: netlink.TUNTAP_MODE_TUN}, "tun"},
		{&netlink.Veth{}, "veth"},
		{&netlink.Bridge{}, "bridge"},
		{&netlink.Macvlan{}, "macvlan"},
	} {
		if got := linkKind(c.l); got != c.want {
			t.Errorf("linkKind(%T) = %q, want %q", c.l, got, c.want)
		}
	}
}
