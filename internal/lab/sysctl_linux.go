package lab

import (
	"fmt"

	"github.com/vishvananda/netlink"

	"github.com/netdoctor/netdoctor/internal/netns"
	"github.com/netdoctor/netdoctor/internal/sysctl"
)

// Sysctl sets a namespace's own sysctl (net.core.somaxconn,
// net.ipv4.ip_local_port_range… are per namespace) and reads it back;
// the namespace takes it with it when it is deleted.
func (e *Env) Sysctl(ns netns.NS, key, value string) error {
	return sysctl.Write(ns, key, value)
}

// SetGlobal sets a host-wide sysctl (net.netfilter.nf_conntrack_max is
// one: read-only inside a namespace) in the initial namespace, and
// restores its old value on Close. The old value is journaled first.
// While several labs change the same setting, the value to come back to
// is the one from before the first of them, and the last lab out
// restores it.
func (e *Env) SetGlobal(name, value string) error {
	unlock, err := lockState()
	if err != nil {
		return err
	}
	defer unlock()
	host, err := netns.Initial()
	if err != nil {
		return err
	}
	g := &global{Sysctl: name}
	if g.Old, err = sysctl.Read(host, name); err != nil {
		return err
	}
	// Another live lab may have changed it already: the value to come
	// back to is the one from before the first of them.
	if o, ok := otherLabs(e.state.path)[g.file()]; ok {
		g.Old = o
	}
	if err := e.record(change{Global: g}); err != nil {
		return err
	}
	if err := sysctl.Write(host, name, value); err != nil {
		return fmt.Errorf("set %s: %w", name, err)
	}
	return nil
}

// Congestion makes the connections on dev's routes in namespace ns use
// the congestion control cong (RTAX_CC_ALGO, as `ip route replace …
// congctl CONG` sets it), whatever the namespace's default: outside the
// host's namespace, net.ipv4.tcp_congestion_control may only name a
// control of the host's tcp_allowed_congestion_control, a host-wide
// setting, and a route's may name any the kernel has.
func (e *Env) Congestion(ns netns.NS, dev, cong string) error {
	h, err := handleAt(ns)
	if err != nil {
		return err
	}
	defer h.Close()
	link, err := h.LinkByName(dev)
	if err != nil {
		return fmt.Errorf("%s in %s: %w", dev, ns, err)
	}
	routes, err := h.RouteList(link, netlink.FAMILY_V4)
	if err != nil {
		return fmt.Errorf("routes of %s in %s: %w", dev, ns, err)
	}
	if len(routes) == 0 {
		return fmt.Errorf("no route on %s in %s", dev, ns)
	}
	for _, r := range routes {
		r.Congctl = cong
		if err := h.RouteReplace(&r); err != nil {
			return fmt.Errorf("congestion control %s on %s in %s: %w", cong, r.Dst, ns, err)
		}
	}
	return nil
}
