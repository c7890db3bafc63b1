package collect

import (
	"bytes"
	"fmt"
	"net"
	"sync"
	"time"
	"unsafe"

	"github.com/vishvananda/netlink"
	vnetns "github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/netdoctor/netdoctor/internal/evidence"
	"github.com/netdoctor/netdoctor/internal/netns"
)

// What a device is: rtnetlink's kind (IFLA_LINKINFO), the device it is
// joined to (IFLA_LINK: a veth's peer, a vlan's or macvlan's lower
// device; IFLA_MASTER: its bridge or bond), its MTU and GSO limits, and
// for a physical NIC its driver (ethtool). A veth's peer may live in
// another namespace, which rtnetlink names by an id local to the asking
// namespace (IFLA_LINK_NETNSID): the host's namespaces are asked their
// id once (RTM_GETNSID, cached) to tell which it is, and the peer is
// read there.

// spacesEvery is how long the host's namespaces, and the ids the
// observed namespace gives them, are kept.
const spacesEvery = 10 * time.Second

// linkReader describes devices, keeping what it learnt of the host's
// namespaces between snapshots.
type linkReader struct {
	mu sync.Mutex
	// spaces are the host's namespaces by inode; listed when.
	spaces map[uint64]netns.Found
	listed time.Time
	// nsids are, for the namespace whose devices are described, its ids
	// of the others (by inode); 0 means none assigned.
	nsids map[int]uint64
}

func newLinkReader() *linkReader { return &linkReader{} }

// refresh lists the host's namespaces when the list is stale.
func (r *linkReader) refresh(force bool) {
	if !force && r.spaces != nil && time.Since(r.listed) < spacesEvery {
		return
	}
	r.spaces = map[uint64]netns.Found{}
	for _, f := range netns.All() {
		r.spaces[f.Inode] = f
	}
	r.listed = time.Now()
	r.nsids = nil
}

// space is the namespace of id nsid as h's namespace names it.
func (r *linkReader) space(h *netlink.Handle, nsid int) (netns.Found, bool) {
	for attempt := range 2 {
		r.refresh(attempt > 0)
		if r.nsids == nil {
			r.nsids = map[int]uint64{}
			for ino, f := range r.spaces {
				fd, err := unix.Open(f.Path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
				if err != nil {
					continue
				}
				id, err := h.GetNetNsIdByFd(fd)
				unix.Close(fd)
				if err == nil && id >= 0 {
					r.nsids[id] = ino
				}
			}
		}
		if ino, ok := r.nsids[nsid]; ok {
			return r.spaces[ino], true
		}
	}
	return netns.Found{}, false
}

// at opens a netlink handle in namespace f.
func at(f netns.Found) (*netlink.Handle, error) {
	fd, err := vnetns.GetFromPath(f.Path)
	if err != nil {
		return nil, err
	}
	defer fd.Close()
	return netlink.NewHandleAt(fd, unix.NETLINK_ROUTE)
}

// describe says what each of links (the devices of h's namespace) is,
// by index.
func (r *linkReader) describe(h *netlink.Handle, links []netlink.Link) map[int]*evidence.Link {
	r.mu.Lock()
	defer r.mu.Unlock()
	byIndex := make(map[int]netlink.Link, len(links))
	for _, l := range links {
		byIndex[l.Attrs().Index] = l
	}
	fd, sockErr := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if sockErr == nil {
		defer unix.Close(fd)
	}
	out := make(map[int]*evidence.Link, len(links))
	for _, l := range links {
		a := l.Attrs()
		e := &evidence.Link{Name: a.Name, Index: a.Index, MTU: a.MTU, Kind: linkKind(l),
			GSOMaxSize: a.GSOMaxSize, GSOMaxSegs: a.GSOMaxSegs, GROMaxSize: a.GROMaxSize}
		switch v := l.(type) {
		case *netlink.Veth:
			e.Peer = r.peer(h, a, byIndex)
		case *netlink.Bond:
			e.Mode = v.Mode.String()
		case *netlink.Macvlan:
			e.Mode = macvlanMode(v.Mode)
		}
		if a.MasterIndex != 0 {
			e.Master = ref(byIndex[a.MasterIndex], a.MasterIndex)
		}
		if e.Kind == "bridge" || e.Kind == "bond" {
			for _, p := range links {
				if p.Attrs().MasterIndex == a.Index {
					e.Ports = append(e.Ports, *ref(p, p.Attrs().Index))
				}
			}
		}
		if lower := lowerIndex(l); lower != 0 && e.Peer == nil {
			if a.NetNsID >= 0 {
				e.Lower = &evidence.LinkRef{Index: lower, Unread: "in another namespace"}
			} else {
				e.Lower = ref(byIndex[lower], lower)
			}
		}
		e.Overhead = overhead(l)
		if e.Kind == "device" && sockErr == nil {
			e.Driver = ethtoolDriver(fd, a.Name)
		}
		out[a.Index] = e
	}
	return out
}

// peer reads a veth's other end: in this namespace, or in the one the
// veth's IFLA_LINK_NETNSID names.
func (r *linkReader) peer(h *netlink.Handle, a *netlink.LinkAttrs, here map[int]netlink.Link) *evidence.LinkRef {
	if a.ParentIndex == 0 {
		return nil
	}
	if a.NetNsID < 0 {
		return ref(here[a.ParentIndex], a.ParentIndex)
	}
	f, ok := r.space(h, a.NetNsID)
	if !ok {
		return &evidence.LinkRef{Index: a.ParentIndex, Unread: fmt.Sprintf("its namespace (id %d here) is not among the host's", a.NetNsID)}
	}
	ph, err := at(f)
	if err != nil {
		return &evidence.LinkRef{Index: a.ParentIndex, NetNS: f.Inode, NetNSName: f.Name, Unread: err.Error()}
	}
	defer ph.Close()
	p, err := ph.LinkByIndex(a.ParentIndex)
	if err != nil {
		return &evidence.LinkRef{Index: a.ParentIndex, NetNS: f.Inode, NetNSName: f.Name, Unread: err.Error()}
	}
	out := ref(p, a.ParentIndex)
	out.NetNS, out.NetNSName = f.Inode, f.Name
	if m := p.Attrs().MasterIndex; m != 0 {
		if ml, err := ph.LinkByIndex(m); err == nil {
			out.Master = ml.Attrs().Name
		}
	}
	return out
}

// elsewhere describes devices of other namespaces, by (inode, index):
// the devices where the drops of another namespace happened. A bridge
// or bond comes with its ports, a port with its bridge.
func (r *linkReader) elsewhere(devs map[uint64][]int) []evidence.Link {
	r.mu.Lock()
	r.refresh(false)
	spaces := r.spaces
	r.mu.Unlock()
	var out []evidence.Link
	for ino, idxs := range devs {
		f, ok := spaces[ino]
		if !ok {
			continue
		}
		h, err := at(f)
		if err != nil {
			continue
		}
		links, err := h.LinkList()
		if err != nil {
			h.Close()
			continue
		}
		described := r.describe(h, links)
		h.Close()
		want := map[int]bool{}
		for _, i := range idxs {
			want[i] = true
			if d := described[i]; d != nil && d.Master != nil {
				want[d.Master.Index] = true
			}
		}
		for _, l := range links {
			d := described[l.Attrs().Index]
			if !want[d.Index] {
				continue
			}
			d.NetNS, d.NetNSName = ino, f.Name
			out = append(out, *d)
		}
	}
	return out
}

// ref is a short reference to a device of the same namespace.
func ref(l netlink.Link, index int) *evidence.LinkRef {
	if l == nil {
		return &evidence.LinkRef{Index: index, Unread: "not found"}
	}
	a := l.Attrs()
	return &evidence.LinkRef{Name: a.Name, Index: a.Index, MTU: a.MTU, Kind: linkKind(l)}
}

// linkKind is rtnetlink's kind of the device, "tun" or "tap" for a
// tuntap, "loopback" for lo, "device" for one without a kind.
func linkKind(l netlink.Link) string {
	a := l.Attrs()
	if a.Flags&net.FlagLoopback != 0 {
		return "loopback"
	}
	if t, ok := l.(*netlink.Tuntap); ok {
		if t.Mode == netlink.TUNTAP_MODE_TAP {
			return "tap"
		}
		return "tun"
	}
	return l.Type()
}

// lowerIndex is the device a vlan, macvlan, ipvlan or tunnel sends
// through, 0 for none.
func lowerIndex(l netlink.Link) int {
	switch v := l.(type) {
	case *netlink.Vxlan:
		return v.VtepDevIndex
	case *netlink.Vlan, *netlink.Macvlan, *netlink.Macvtap, *netlink.IPVlan, *netlink.IPVtap:
		return l.Attrs().ParentIndex
	case *netlink.Geneve:
		return int(v.Link)
	case *netlink.Iptun:
		return int(v.Link)
	case *netlink.Ip6tnl:
		return int(v.Link)
	case *netlink.Sittun:
		return int(v.Link)
	case *netlink.Gretun:
		return int(v.Link)
	case *netlink.Gretap:
		return int(v.Link)
	}
	return 0
}

// overhead is what a tunnel adds to each packet, its outer headers:
// 0 for a device that is not one. An encapsulation over IPv6 costs 20
// bytes more than over IPv4; where the outer family is not set (a
// flow-based device), IPv4's is given.
func overhead(l netlink.Link) int {
	v6 := func(ips ...net.IP) bool {
		for _, ip := range ips {
			if ip != nil && ip.To4() == nil {
				return true
			}
		}
		return false
	}
	outer := func(v4, v6bytes int, six bool) int {
		if six {
			return v6bytes
		}
		return v4
	}
	switch v := l.(type) {
	case *netlink.Vxlan:
		// Ethernet inside, VXLAN, UDP, IP.
		return outer(50, 70, v6(v.Group, v.SrcAddr))
	case *netlink.Geneve:
		// Without options.
		return outer(50, 70, v6(v.Remote))
	case *netlink.Iptun, *netlink.Sittun:
		return 20
	case *netlink.Ip6tnl:
		return 40
	case *netlink.Gretun:
		return outer(24, 44, v6(v.Local, v.Remote)) + greOptions(v.IFlags)
	case *netlink.Gretap:
		return outer(38, 58, v6(v.Local, v.Remote)) + greOptions(v.IFlags)
	case *netlink.Vlan:
		return 4
	case *netlink.Wireguard:
		// Its own header and tag, UDP, IP; the outer family is its
		// peers', which rtnetlink does not tell.
		return 60
	}
	return 0
}

// greOptions is what a GRE key, checksum and sequence number add.
func greOptions(flags uint16) int {
	const (
		greCsum = 0x8000
		greKey  = 0x2000
		greSeq  = 0x1000
	)
	n := 0
	for _, f := range []uint16{greCsum, greKey, greSeq} {
		if flags&f != 0 {
			n += 4
		}
	}
	return n
}

// macvlanMode names a macvlan's mode as ip(8) does.
func macvlanMode(m netlink.MacvlanMode) string {
	switch m {
	case netlink.MACVLAN_MODE_PRIVATE:
		return "private"
	case netlink.MACVLAN_MODE_VEPA:
		return "vepa"
	case netlink.MACVLAN_MODE_BRIDGE:
		return "bridge"
	case netlink.MACVLAN_MODE_PASSTHRU:
		return "passthru"
	case netlink.MACVLAN_MODE_SOURCE:
		return "source"
	}
	return ""
}

// ethtoolDriver asks a device for its driver (ETHTOOL_GDRVINFO, struct
// ethtool_drvinfo): "" when it has none to tell.
func ethtoolDriver(fd int, name string) string {
	const ethtoolGDRVINFO = 0x3
	var info [196]byte // struct ethtool_drvinfo
	*(*uint32)(unsafe.Pointer(&info[0])) = ethtoolGDRVINFO
	var ifr struct {
		name [unix.IFNAMSIZ]byte
		data uintptr
		_    [16]byte
	}
	copy(ifr.name[:], name)
	ifr.data = uintptr(unsafe.Pointer(&info[0]))
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SIOCETHTOOL, uintptr(unsafe.Pointer(&ifr)))
	if errno != 0 {
		return ""
	}
	driver := info[4:36]
	if i := bytes.IndexByte(driver, 0); i >= 0 {
		driver = driver[:i]
	}
	return string(driver)
}
