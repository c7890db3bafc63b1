package lab

import (
	"fmt"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
	vnetns "github.com/vishvananda/netns"

	"github.com/netdoctor/netdoctor/internal/netns"
	"github.com/netdoctor/netdoctor/internal/sysctl"
)

// build makes the lab's network, as `ip` did before: the two namespaces,
// the veth between them, each end's address, and every link up (lo
// too). The veth is created with its ends already in their namespaces,
// so that a lab killed halfway leaves nothing in the host's namespace for
// `lab clean` to miss.
func (e *Env) build() error {
	srv, err := netns.Create(e.ServerNS.Name)
	if err != nil {
		return err
	}
	e.ServerNS = srv
	cli, err := netns.Create(e.ClientNS.Name)
	if err != nil {
		return err
	}
	e.ClientNS = cli
	srvFd, err := vnetns.GetFromPath(srv.Path)
	if err != nil {
		return fmt.Errorf("open %s: %w", srv, err)
	}
	defer srvFd.Close()
	ch, err := handleAt(cli)
	if err != nil {
		return err
	}
	defer ch.Close()
	veth := netlink.NewVeth(netlink.NewLinkAttrs()) // txqueuelen left to the kernel, as ip does
	veth.Name, veth.PeerName, veth.PeerNamespace = e.ClientDev, e.ServerDev, netlink.NsFd(srvFd)
	if err := ch.LinkAdd(veth); err != nil {
		return fmt.Errorf("add veth %s/%s: %w", e.ClientDev, e.ServerDev, err)
	}
	if err := linkUp(srv, e.ServerDev, e.ServerIP); err != nil {
		return err
	}
	return linkUp(cli, e.ClientDev, e.ClientIP)
}

// buildLinked makes the lab's network with a delay element between the
// client and the server: the namespace nd-ID-dly holds the far end of
// each one's veth (ndx-ID towards the client, ndy-ID towards the
// server), without addresses and without IPv6 (its own router
// solicitations would cross the element), and the element forwards
// between them.
func (e *Env) buildLinked(l Link) error {
	name := "nd-" + e.Name + "-dly"
	if err := e.record(change{Netns: name}); err != nil {
		return err
	}
	srv, err := netns.Create(e.ServerNS.Name)
	if err != nil {
		return err
	}
	e.ServerNS = srv
	cli, err := netns.Create(e.ClientNS.Name)
	if err != nil {
		return err
	}
	e.ClientNS = cli
	dly, err := netns.Create(name)
	if err != nil {
		return err
	}
	e.DelayNS = dly
	for _, k := range []string{"net.ipv6.conf.all.disable_ipv6", "net.ipv6.conf.default.disable_ipv6"} {
		if err := sysctl.Write(dly, k, "1"); err != nil {
			return err
		}
	}
	h, err := handleAt(dly)
	if err != nil {
		return err
	}
	defer h.Close()
	toCli, toSrv := "ndx-"+short(e.Name), "ndy-"+short(e.Name)
	for _, p := range []struct {
		ns       netns.NS
		dev, far string
	}{{cli, e.ClientDev, toCli}, {srv, e.ServerDev, toSrv}} {
		fd, err := vnetns.GetFromPath(p.ns.Path)
		if err != nil {
			return fmt.Errorf("open %s: %w", p.ns, err)
		}
		veth := netlink.NewVeth(netlink.NewLinkAttrs())
		veth.Name, veth.PeerName, veth.PeerNamespace = p.far, p.dev, netlink.NsFd(fd)
		err = h.LinkAdd(veth)
		fd.Close()
		if err != nil {
			return fmt.Errorf("add veth %s/%s: %w", p.far, p.dev, err)
		}
		link, err := h.LinkByName(p.far)
		if err != nil {
			return fmt.Errorf("%s in %s: %w", p.far, dly, err)
		}
		if err := h.LinkSetUp(link); err != nil {
			return fmt.Errorf("set %s up in %s: %w", p.far, dly, err)
		}
	}
	if err := linkUp(srv, e.ServerDev, e.ServerIP); err != nil {
		return err
	}
	if err := linkUp(cli, e.ClientDev, e.ClientIP); err != nil {
		return err
	}
	e.delay, err = StartDelay(dly, toCli, toSrv, l)
	return err
}

// linkUp gives dev in ns the address ip/24, as `ip addr add IP/24 dev
// DEV` does, and sets dev and lo up.
func linkUp(ns netns.NS, dev, ip string) error {
	h, err := handleAt(ns)
	if err != nil {
		return err
	}
	defer h.Close()
	link, err := h.LinkByName(dev)
	if err != nil {
		return fmt.Errorf("%s in %s: %w", dev, ns, err)
	}
	// IPv4zero: no broadcast address. `ip addr add` sets none unless
	// asked; netlink would compute one.
	addr := &netlink.Addr{IPNet: &net.IPNet{IP: net.ParseIP(ip).To4(), Mask: net.CIDRMask(24, 32)}, Broadcast: net.IPv4zero}
	if err := h.AddrAdd(link, addr); err != nil {
		return fmt.Errorf("address %s/24 on %s in %s: %w", ip, dev, ns, err)
	}
	lo, err := h.LinkByName("lo")
	if err != nil {
		return fmt.Errorf("lo in %s: %w", ns, err)
	}
	for _, l := range []netlink.Link{link, lo} {
		if err := h.LinkSetUp(l); err != nil {
			return fmt.Errorf("set %s up in %s: %w", l.Attrs().Name, ns, err)
		}
	}
	return nil
}

// defaultRoute routes everything namespace ns sends through gw, as `ip
// route add default via GW` does (table main, protocol boot).
func (e *Env) defaultRoute(ns netns.NS, gw string) error {
	h, err := handleAt(ns)
	if err != nil {
		return err
	}
	defer h.Close()
	if err := h.RouteAdd(&netlink.Route{Gw: net.ParseIP(gw).To4()}); err != nil {
		return fmt.Errorf("default route via %s in %s: %w", gw, ns, err)
	}
	return nil
}

// handleAt opens a netlink handle whose sockets live in namespace ns:
// what it adds or changes is in ns, from whichever thread it is used.
// The caller must Close it.
func handleAt(ns netns.NS) (*netlink.Handle, error) {
	fd, err := vnetns.GetFromPath(ns.Path)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", ns, err)
	}
	defer fd.Close()
	h, err := netlink.NewHandleAt(fd)
	if err != nil {
		return nil, fmt.Errorf("netlink in %s: %w", ns, err)
	}
	return h, nil
}

// AddDepNS makes a third namespace, nd-ID-dep, for a dependency on
// another network than the server's: a veth joins it to the server's
// namespace on 10.98.N.0/24, the server's end .1 and its own .2, which
// it returns with the namespace. Close removes it as it does the others.
func (e *Env) AddDepNS() (dep netns.NS, ip string, err error) {
	name := "nd-" + e.Name + "-dep"
	srvIP := netip.MustParseAddr(e.ServerIP).As4()
	ip = fmt.Sprintf("10.98.%d.2", srvIP[2])
	if err := e.record(change{Netns: name}); err != nil {
		return netns.NS{}, "", err
	}
	dep, err = netns.Create(name)
	if err != nil {
		return netns.NS{}, "", err
	}
	srv := e.ServerNS
	srvFd, err := vnetns.GetFromPath(srv.Path)
	if err != nil {
		return netns.NS{}, "", fmt.Errorf("open %s: %w", srv, err)
	}
	defer srvFd.Close()
	h, err := handleAt(dep)
	if err != nil {
		return netns.NS{}, "", err
	}
	defer h.Close()
	depDev, srvDev := "ndp-"+short(e.Name), "ndd-"+short(e.Name)
	veth := netlink.NewVeth(netlink.NewLinkAttrs())
	veth.Name, veth.PeerName, veth.PeerNamespace = depDev, srvDev, netlink.NsFd(srvFd)
	if err := h.LinkAdd(veth); err != nil {
		return netns.NS{}, "", fmt.Errorf("add veth %s/%s: %w", depDev, srvDev, err)
	}
	if err := linkUp(srv, srvDev, fmt.Sprintf("10.98.%d.1", srvIP[2])); err != nil {
		return netns.NS{}, "", err
	}
	return dep, ip, linkUp(dep, depDev, ip)
}
