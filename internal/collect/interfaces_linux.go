package collect

import (
	"errors"
	"fmt"
	"unsafe"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/netdoctor/netdoctor/internal/evidence"
	"github.com/netdoctor/netdoctor/internal/procnet"
)

// interfaces merges /proc/net/dev counters with link attributes. Link state,
// MTU, kind and qdiscs come from rtnetlink and speed from ethtool rather than
// /sys/class/net: sysfs shows the namespace it was mounted in, not the one
// this thread entered, while netlink and ioctl sockets follow the thread.
//
// Each device is also described (evidence.Link: its kind, peer, bridge,
// ports, overhead, driver) by lr.
func interfaces(p procnet.Proc, lr *linkReader) ([]evidence.Interface, error) {
	ifs, devErr := p.Dev()
	h, err := netlink.NewHandle(unix.NETLINK_ROUTE)
	if err != nil {
		return ifs, errors.Join(devErr, fmt.Errorf("netlink: %w", err))
	}
	defer h.Close()
	links, err := h.LinkList()
	if err != nil {
		if devErr != nil {
			return ifs, errors.Join(devErr, err)
		}
		return ifs, partial{fmt.Errorf("list links: %w", err)}
	}
	byName := make(map[string]netlink.Link, len(links))
	for _, l := range links {
		byName[l.Attrs().Name] = l
	}
	qdiscs, qErr := linkQdiscs(links)
	described := lr.describe(h, links)
	fd, sockErr := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if sockErr == nil {
		defer unix.Close(fd)
	}
	for i := range ifs {
		l, ok := byName[ifs[i].Name]
		if !ok {
			continue
		}
		a := l.Attrs()
		ifs[i].OperState = a.OperState.String()
		ifs[i].MTU = a.MTU
		ifs[i].LinkKind = l.Type()
		ifs[i].Qdiscs = qdiscs[a.Index]
		ifs[i].Link = described[a.Index]
		for _, q := range ifs[i].Qdiscs {
			if !q.Class && q.Parent == "root" {
				ifs[i].Qdisc = q.Kind // the root qdisc names the discipline (tbf, htb, noqueue…)
			}
		}
		if sockErr == nil {
			ifs[i].SpeedMbps = ethtoolSpeed(fd, a.Name)
		}
	}
	if err := errors.Join(devErr, qErr); err != nil {
		return ifs, partial{err}
	}
	return ifs, nil
}

// linkQdiscs dumps the namespace's qdiscs once and, for each link with an
// htb qdisc, that link's classes (the kernel dumps classes per device
// only). It keeps, per link index, the root qdisc, every shaping qdisc and
// the htb classes; see evidence.Interface.Qdiscs. An interrupted dump
// still returns what it got, with an error.
func linkQdiscs(links []netlink.Link) (map[int][]evidence.Qdisc, error) {
	qs, err := netlink.QdiscList(nil)
	if err != nil && !errors.Is(err, netlink.ErrDumpInterrupted) {
		return nil, fmt.Errorf("list qdiscs: %w", err)
	}
	var errs []error
	if err != nil {
		errs = append(errs, fmt.Errorf("list qdiscs: %w", err))
	}
	out := map[int][]evidence.Qdisc{}
	withHTB := map[int]bool{}
	for _, q := range qs {
		a := q.Attrs()
		kind := q.Type()
		if a.Parent != netlink.HANDLE_ROOT && kind != "tbf" && kind != "htb" {
			continue
		}
		out[a.LinkIndex] = append(out[a.LinkIndex], qdiscEvidence(q))
		if kind == "htb" {
			withHTB[a.LinkIndex] = true
		}
	}
	for _, l := range links {
		idx := l.Attrs().Index
		if !withHTB[idx] {
			continue
		}
		cs, err := netlink.ClassList(l, 0)
		if err != nil {
			errs = append(errs, fmt.Errorf("list classes of %s: %w", l.Attrs().Name, err))
			if !errors.Is(err, netlink.ErrDumpInterrupted) {
				continue
			}
		}
		for _, c := range cs {
			if h, ok := c.(*netlink.HtbClass); ok {
				out[idx] = append(out[idx], htbClassEvidence(h))
			}
		}
	}
	return out, errors.Join(errs...)
}

// qdiscEvidence converts one qdisc, with its rate where it has one.
func qdiscEvidence(q netlink.Qdisc) evidence.Qdisc {
	a := q.Attrs()
	e := evidence.Qdisc{Kind: q.Type(), Handle: tcHandle(a.Handle, false), Parent: tcHandle(a.Parent, true)}
	if t, ok := q.(*netlink.Tbf); ok {
		e.RateBytesPerSec = t.Rate
		e.LimitBytes = uint64(t.Limit)
		// Buffer is the bucket in scheduler ticks; tc prints it as bytes.
		e.BurstBytes = uint64(netlink.Xmitsize(t.Rate, t.Buffer))
	}
	if a.Statistics != nil {
		tcStats(&e, a.Statistics.Basic, a.Statistics.Queue)
	}
	return e
}

// htbClassEvidence converts one htb class.
func htbClassEvidence(c *netlink.HtbClass) evidence.Qdisc {
	a := c.Attrs()
	e := evidence.Qdisc{Class: true, Kind: c.Type(), Handle: tcHandle(a.Handle, true), Parent: tcHandle(a.Parent, true),
		RateBytesPerSec: c.Rate, CeilBytesPerSec: c.Ceil}
	if a.Statistics != nil {
		tcStats(&e, a.Statistics.Basic, a.Statistics.Queue)
	}
	return e
}

// tcStats copies gnet_stats_basic and gnet_stats_queue; either may be nil.
func tcStats(e *evidence.Qdisc, b *netlink.GnetStatsBasic, q *netlink.GnetStatsQueue) {
	if b != nil {
		e.Bytes, e.Packets = b.Bytes, uint64(b.Packets)
	}
	if q != nil {
		e.Drops, e.Overlimits, e.Requeues = uint64(q.Drops), uint64(q.Overlimits), uint64(q.Requeues)
		e.BacklogBytes, e.Qlen = uint64(q.Backlog), uint64(q.Qlen)
	}
}

// tcHandle formats a handle as tc does: "root", "ingress", "1:" for a
// qdisc handle and "1:10" for a class (minor numbers are hex).
func tcHandle(h uint32, class bool) string {
	switch h {
	case netlink.HANDLE_ROOT:
		return "root"
	case netlink.HANDLE_INGRESS:
		return "ingress"
	}
	major, minor := h>>16, h&0xffff
	if minor == 0 && !class {
		return fmt.Sprintf("%x:", major)
	}
	return fmt.Sprintf("%x:%x", major, minor)
}

// ethtoolSpeed asks the driver for the link speed with ETHTOOL_GSET
// (struct ethtool_cmd, include/uapi/linux/ethtool.h). It returns 0 when
// the driver has no speed (loopback) or reports it unknown.
func ethtoolSpeed(fd int, name string) int {
	const ethtoolGSET = 0x1
	var cmd [44]byte
	*(*uint32)(unsafe.Pointer(&cmd[0])) = ethtoolGSET
	var ifr struct {
		name [unix.IFNAMSIZ]byte
		data uintptr
		_    [16]byte
	}
	copy(ifr.name[:], name)
	ifr.data = uintptr(unsafe.Pointer(&cmd[0]))
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SIOCETHTOOL, uintptr(unsafe.Pointer(&ifr)))
	if errno != 0 {
		return 0
	}
	speed := uint32(*(*uint16)(unsafe.Pointer(&cmd[12]))) | uint32(*(*uint16)(unsafe.Pointer(&cmd[24])))<<16
	if speed == 0 || speed == 0xffff || speed == 0xffffffff {
		return 0
	}
	return int(speed)
}
