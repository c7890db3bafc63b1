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
// MTU and qdisc come from rtnetlink and speed from ethtool rather than
// /sys/class/net: sysfs shows the namespace it was mounted in, not the one
// this thread entered, while netlink and ioctl sockets follow the thread.
func interfaces(p procnet.Proc) ([]evidence.Interface, error) {
	ifs, devErr := p.Dev()
	links, err := netlink.LinkList()
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
	// The root qdisc names the queueing discipline (tbf, htb, noqueue…).
	rootQdisc := map[int]string{}
	if qs, err := netlink.QdiscList(nil); err == nil {
		for _, q := range qs {
			if q.Attrs().Parent == netlink.HANDLE_ROOT {
				rootQdisc[q.Attrs().LinkIndex] = q.Type()
			}
		}
	}
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
		ifs[i].Qdisc = rootQdisc[a.Index]
		if sockErr == nil {
			ifs[i].SpeedMbps = ethtoolSpeed(fd, a.Name)
		}
	}
	if devErr != nil {
		return ifs, partial{devErr}
	}
	return ifs, nil
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
