package conntrack

import (
	"errors"
	"fmt"
	"io/fs"
	"time"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// Netfilter subsystems and their messages, from
// include/uapi/linux/netfilter/nfnetlink.h and nfnetlink_conntrack.h.
const (
	nfnlSubsysCTNetlink    = 1
	nfnlSubsysCTNetlinkExp = 2

	ipctnlMsgCTGetStatsCPU  = 4
	ipctnlMsgCTGetStats     = 5
	ipctnlMsgExpGetStatsCPU = 3
)

// timeout bounds each request: the kernel answers in microseconds.
const timeout = 2 * time.Second

// Conn is a ctnetlink socket of the network namespace of the thread that
// opened it.
type Conn struct{ c *netlink.Conn }

// Dial opens the socket on the calling thread, with no netlink.Config
// NetNS: the socket then belongs to the thread's namespace, so a caller
// locked into another namespace reads that namespace's table. The first
// request may make the kernel load nf_conntrack_netlink; callers should
// ask only where nf_conntrack is already present, or the request would
// load it too.
func Dial() (*Conn, error) {
	c, err := netlink.Dial(unix.NETLINK_NETFILTER, nil)
	if err != nil {
		return nil, fmt.Errorf("open ctnetlink socket: %w", err)
	}
	return &Conn{c: c}, nil
}

// DialAt opens the socket in the network namespace of the file at path
// (/run/netns/NAME, /proc/PID/ns/net), from whichever thread calls it.
func DialAt(path string) (*Conn, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	defer unix.Close(fd)
	c, err := netlink.Dial(unix.NETLINK_NETFILTER, &netlink.Config{NetNS: fd})
	if err != nil {
		return nil, fmt.Errorf("open ctnetlink socket in %s: %w", path, err)
	}
	return &Conn{c: c}, nil
}

// Get looks up the entry with tuple t in either direction: the one whose
// Orig or Reply is t. It returns ErrNotFound when there is none.
func (c *Conn) Get(t Tuple) (Entry, error) {
	data, err := EncodeGet(t)
	if err != nil {
		return Entry{}, err
	}
	req := netlink.Message{
		// The entry comes flagged NLM_F_MULTI with no NLMSG_DONE after
		// it (ctnetlink_get_conntrack): the acknowledgement ends the
		// read, as for Global.
		Header: netlink.Header{Type: netlink.HeaderType(uint16(nfnlSubsysCTNetlink)<<8 | ipctnlMsgCTGet), Flags: netlink.Request | netlink.Acknowledge},
		Data:   data,
	}
	if err := c.c.SetDeadline(time.Now().Add(timeout)); err != nil {
		return Entry{}, fmt.Errorf("ctnetlink deadline: %w", err)
	}
	msgs, err := c.c.Execute(req)
	switch {
	case errors.Is(err, unix.ENOENT):
		return Entry{}, ErrNotFound
	case errors.Is(err, fs.ErrPermission):
		return Entry{}, fmt.Errorf("%w (%w)", ErrPermission, err)
	case err != nil:
		return Entry{}, fmt.Errorf("ctnetlink get: %w", err)
	case len(msgs) == 0:
		return Entry{}, fmt.Errorf("%w: no reply to IPCTNL_MSG_CT_GET", ErrTruncated)
	}
	return DecodeEntry(msgs[0].Data)
}

// Close closes the socket.
func (c *Conn) Close() error { return c.c.Close() }

// Global asks for the table's entry count and limit.
func (c *Conn) Global() (Global, error) {
	// Not a dump, but ctnetlink_stat_ct_fill_info flags its one reply
	// NLM_F_MULTI and no NLMSG_DONE follows: the acknowledgement is what
	// ends the read.
	msgs, err := c.query(nfnlSubsysCTNetlink, ipctnlMsgCTGetStats, netlink.Request|netlink.Acknowledge)
	if err != nil {
		return Global{}, err
	}
	if len(msgs) == 0 {
		return Global{}, fmt.Errorf("%w: no reply to IPCTNL_MSG_CT_GET_STATS", ErrTruncated)
	}
	return DecodeGlobal(msgs[0].Data)
}

// Stats dumps the per-CPU counters of the table and of its expectations
// and sums them over the CPUs, keyed by the column names of
// /proc/net/stat/nf_conntrack: "found", "insert", "insert_failed",
// "drop", "early_drop", "icmp_error", "search_restart"... The kernel
// walks the possible CPUs, as procfs does.
func (c *Conn) Stats() (map[string]uint64, error) {
	m := make(map[string]uint64, len(cpuNames)+len(expectNames))
	for _, q := range []struct {
		subsys uint8
		msg    uint8
		expect bool
	}{
		{nfnlSubsysCTNetlink, ipctnlMsgCTGetStatsCPU, false},
		{nfnlSubsysCTNetlinkExp, ipctnlMsgExpGetStatsCPU, true},
	} {
		msgs, err := c.query(q.subsys, q.msg, netlink.Request|netlink.Dump)
		if err != nil {
			return m, err
		}
		for _, msg := range msgs {
			if err := SumCPU(m, msg.Data, q.expect); err != nil {
				return m, err
			}
		}
	}
	return m, nil
}

func (c *Conn) query(subsys, msg uint8, flags netlink.HeaderFlags) ([]netlink.Message, error) {
	req := netlink.Message{
		Header: netlink.Header{Type: netlink.HeaderType(uint16(subsys)<<8 | uint16(msg)), Flags: flags},
		// struct nfgenmsg: AF_UNSPEC, NFNETLINK_V0, res_id 0.
		Data: make([]byte, nfgenmsgLen),
	}
	// A collector must not hang on a kernel that never answers.
	if err := c.c.SetDeadline(time.Now().Add(timeout)); err != nil {
		return nil, fmt.Errorf("ctnetlink deadline: %w", err)
	}
	msgs, err := c.c.Execute(req)
	if errors.Is(err, fs.ErrPermission) {
		return nil, fmt.Errorf("%w (%w)", ErrPermission, err)
	}
	if err != nil {
		return nil, fmt.Errorf("ctnetlink message %d/%d: %w", subsys, msg, err)
	}
	return msgs, nil
}
