package lab

import (
	"fmt"
	"net"

	"github.com/vishvananda/netlink"
	vnetns "github.com/vishvananda/netns"

	"github.com/netdoctor/netdoctor/internal/netns"
)

// The lab's topologies beyond a client and a server on one veth: a
// router namespace between them, a bridge, another service's namespaces
// on the same host. Each namespace is journaled before it is made, as
// the lab's own, so that Close and `lab clean` remove it.

// AddNS makes a namespace nd-ID-ROLE with lo up.
func (e *Env) AddNS(role string) (netns.NS, error) {
	name := "nd-" + e.Name + "-" + role
	if err := e.record(change{Netns: name}); err != nil {
		return netns.NS{}, err
	}
	ns, err := netns.Create(name)
	if err != nil {
		return netns.NS{}, err
	}
	h, err := handleAt(ns)
	if err != nil {
		return netns.NS{}, err
	}
	defer h.Close()
	lo, err := h.LinkByName("lo")
	if err != nil {
		return netns.NS{}, fmt.Errorf("lo in %s: %w", ns, err)
	}
	if err := h.LinkSetUp(lo); err != nil {
		return netns.NS{}, fmt.Errorf("set lo up in %s: %w", ns, err)
	}
	return ns, nil
}

// End is one end of a veth pair: its namespace, its name, its address
// ("10.96.3.1/24", or "" for none: a bridge's port) and its MTU (0: the
// kernel's 1500).
type End struct {
	NS   netns.NS
	Dev  string
	Addr string
	MTU  int
}

// AddVeth joins two namespaces with a veth pair, each end set up as End
// says, both up.
func (e *Env) AddVeth(a, b End) error {
	bFd, err := vnetns.GetFromPath(b.NS.Path)
	if err != nil {
		return fmt.Errorf("open %s: %w", b.NS, err)
	}
	defer bFd.Close()
	h, err := handleAt(a.NS)
	if err != nil {
		return err
	}
	defer h.Close()
	veth := netlink.NewVeth(netlink.NewLinkAttrs())
	veth.Name, veth.PeerName, veth.PeerNamespace = a.Dev, b.Dev, netlink.NsFd(bFd)
	if err := h.LinkAdd(veth); err != nil {
		return fmt.Errorf("add veth %s/%s: %w", a.Dev, b.Dev, err)
	}
	for _, end := range []End{a, b} {
		if err := setEnd(end); err != nil {
			return err
		}
	}
	return nil
}

// setEnd gives a device its MTU and address and sets it up.
func setEnd(end End) error {
	h, err := handleAt(end.NS)
	if err != nil {
		return err
	}
	defer h.Close()
	l, err := h.LinkByName(end.Dev)
	if err != nil {
		return fmt.Errorf("%s in %s: %w", end.Dev, end.NS, err)
	}
	if end.MTU != 0 {
		if err := h.LinkSetMTU(l, end.MTU); err != nil {
			return fmt.Errorf("mtu %d on %s in %s: %w", end.MTU, end.Dev, end.NS, err)
		}
	}
	if end.Addr != "" {
		ip, n, err := net.ParseCIDR(end.Addr)
		if err != nil {
			return err
		}
		n.IP = ip
		if err := h.AddrAdd(l, &netlink.Addr{IPNet: n, Broadcast: net.IPv4zero}); err != nil {
			return fmt.Errorf("address %s on %s in %s: %w", end.Addr, end.Dev, end.NS, err)
		}
	}
	if err := h.LinkSetUp(l); err != nil {
		return fmt.Errorf("set %s up in %s: %w", end.Dev, end.NS, err)
	}
	return nil
}

// SetMTU sets a device's MTU.
func (e *Env) SetMTU(ns netns.NS, dev string, mtu int) error {
	return setEnd(End{NS: ns, Dev: dev, MTU: mtu})
}

// Unlink deletes the veth between the client and the server, for a
// topology that joins them otherwise (through a router, a bridge).
func (e *Env) Unlink() error {
	h, err := handleAt(e.ClientNS)
	if err != nil {
		return err
	}
	defer h.Close()
	l, err := h.LinkByName(e.ClientDev)
	if err != nil {
		return fmt.Errorf("%s in %s: %w", e.ClientDev, e.ClientNS, err)
	}
	if err := h.LinkDel(l); err != nil {
		return fmt.Errorf("delete %s in %s: %w", e.ClientDev, e.ClientNS, err)
	}
	return nil
}

// AddRoute routes dst ("default", or a prefix as "10.95.3.0/24") through
// gw in namespace ns.
func (e *Env) AddRoute(ns netns.NS, dst, gw string) error {
	h, err := handleAt(ns)
	if err != nil {
		return err
	}
	defer h.Close()
	r := &netlink.Route{Gw: net.ParseIP(gw)}
	if dst != "default" {
		_, n, err := net.ParseCIDR(dst)
		if err != nil {
			return err
		}
		r.Dst = n
	}
	if err := h.RouteAdd(r); err != nil {
		return fmt.Errorf("route %s via %s in %s: %w", dst, gw, ns, err)
	}
	return nil
}

// DelRoutes removes every route of namespace ns to dst (a prefix), as a
// service being torn down loses its network.
func (e *Env) DelRoutes(ns netns.NS, dst string) error {
	h, err := handleAt(ns)
	if err != nil {
		return err
	}
	defer h.Close()
	_, n, err := net.ParseCIDR(dst)
	if err != nil {
		return err
	}
	rs, err := h.RouteListFiltered(netlink.FAMILY_ALL, &netlink.Route{Dst: n}, netlink.RT_FILTER_DST)
	if err != nil {
		return fmt.Errorf("routes to %s in %s: %w", dst, ns, err)
	}
	for _, r := range rs {
		if err := h.RouteDel(&r); err != nil {
			return fmt.Errorf("delete route to %s in %s: %w", dst, ns, err)
		}
	}
	return nil
}

// AddBridge makes a bridge in namespace ns with the MTU given (0: the
// kernel's choice, the smallest of its ports') and the devices named
// as its ports, all up.
func (e *Env) AddBridge(ns netns.NS, name string, mtu int, ports ...string) error {
	h, err := handleAt(ns)
	if err != nil {
		return err
	}
	defer h.Close()
	attrs := netlink.NewLinkAttrs()
	attrs.Name = name
	if err := h.LinkAdd(&netlink.Bridge{LinkAttrs: attrs}); err != nil {
		return fmt.Errorf("add bridge %s in %s: %w", name, ns, err)
	}
	br, err := h.LinkByName(name)
	if err != nil {
		return err
	}
	for _, p := range ports {
		l, err := h.LinkByName(p)
		if err != nil {
			return fmt.Errorf("%s in %s: %w", p, ns, err)
		}
		if err := h.LinkSetMaster(l, br); err != nil {
			return fmt.Errorf("%s into %s in %s: %w", p, name, ns, err)
		}
	}
	if mtu != 0 {
		if err := h.LinkSetMTU(br, mtu); err != nil {
			return fmt.Errorf("mtu %d on %s in %s: %w", mtu, name, ns, err)
		}
	}
	return h.LinkSetUp(br)
}

// SetGSOMaxSegs sets a device's gso_max_segs, as `ip link set DEV
// gso_max_segs N` does: 1 makes the stack segment every packet itself,
// as for a NIC without TSO, so that a virtual device (which passes GSO
// packets of any size) sees frames of its MTU at most.
func (e *Env) SetGSOMaxSegs(ns netns.NS, dev string, segs uint32) error {
	h, err := handleAt(ns)
	if err != nil {
		return err
	}
	defer h.Close()
	l, err := h.LinkByName(dev)
	if err != nil {
		return fmt.Errorf("%s in %s: %w", dev, ns, err)
	}
	if err := h.LinkSetGSOMaxSegs(l, int(segs)); err != nil {
		return fmt.Errorf("gso_max_segs %d on %s in %s: %w", segs, dev, ns, err)
	}
	return nil
}
