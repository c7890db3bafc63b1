package collect

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"

	"github.com/netdoctor/netdoctor/internal/conntrack"
	"github.com/netdoctor/netdoctor/internal/evidence"
	"github.com/netdoctor/netdoctor/internal/procnet"
)

// Where evidence.Conntrack's figures came from.
const (
	conntrackProcfs  = "procfs"
	conntrackNetlink = "netlink"
)

// conntrackCollector reads the connection-tracking table's size from the
// nf_conntrack sysctls and its per-CPU counters from
// /proc/net/stat/nf_conntrack. Kernels built without
// CONFIG_NF_CONNTRACK_PROCFS lack that file (node_exporter issues #1093,
// #3184), and older kernels hide the sysctls from a namespace owned by
// another user namespace: ctnetlink, which needs CAP_NET_ADMIN, then
// tells the same.
type conntrackCollector struct {
	p procnet.Proc
	// sys is the sysfs root: /sys/module/nf_conntrack tells whether the
	// module is in the kernel without asking netlink, whose request
	// would load it.
	sys fs.FS
	// dial opens the ctnetlink socket on the calling thread.
	dial func() (ctnetlink, error)
}

// ctnetlink is what the collector asks of a *conntrack.Conn.
type ctnetlink interface {
	Global() (conntrack.Global, error)
	Stats() (map[string]uint64, error)
	Close() error
}

func newConntrack(cfg Config, p procnet.Proc) *conntrackCollector {
	c := &conntrackCollector{p: p, sys: cfg.Sys, dial: func() (ctnetlink, error) { return conntrack.Dial() }}
	if c.sys == nil {
		c.sys = os.DirFS("/sys")
	}
	return c
}

func (c *conntrackCollector) Name() string { return "conntrack" }

func (c *conntrackCollector) Collect(_ context.Context, s *evidence.Snapshot) error {
	ct, err := c.collect()
	s.Conntrack = ct
	return err
}

func (c *conntrackCollector) collect() (*evidence.Conntrack, error) {
	max, err := c.p.Sysctl("net.netfilter.nf_conntrack_max")
	if errors.Is(err, fs.ErrNotExist) {
		return c.fromNetlink()
	}
	if err != nil {
		return nil, err
	}
	ct := &evidence.Conntrack{}
	ct.Max, _ = strconv.ParseUint(max, 10, 64)
	var errs []error
	for name, dst := range map[string]*uint64{"nf_conntrack_count": &ct.Count, "nf_conntrack_buckets": &ct.Buckets} {
		v, err := c.p.Sysctl("net.netfilter." + name)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		*dst, _ = strconv.ParseUint(v, 10, 64)
	}
	st, err := c.p.ConntrackStat()
	switch {
	case errors.Is(err, fs.ErrNotExist):
		st, err = c.netlinkStats()
		if err != nil {
			err = fmt.Errorf("no /proc/net/stat/nf_conntrack (CONFIG_NF_CONNTRACK_PROCFS off), and %w", err)
		} else {
			ct.Source = conntrackNetlink
		}
	case st != nil:
		ct.Source = conntrackProcfs
	}
	ct.Stats = st
	if err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return ct, partial{err}
	}
	return ct, nil
}

// fromNetlink reads everything over ctnetlink, for a namespace without
// the nf_conntrack sysctls. Buckets stays 0: netlink does not tell it.
func (c *conntrackCollector) fromNetlink() (*evidence.Conntrack, error) {
	if _, err := fs.Stat(c.sys, "module/nf_conntrack"); err != nil {
		return nil, fmt.Errorf("%w: no nf_conntrack in this kernel", ErrUnavailable)
	}
	n, err := c.dial()
	if err != nil {
		return nil, fmt.Errorf("%w: no nf_conntrack sysctls, and %w", ErrUnavailable, err)
	}
	defer n.Close()
	g, err := n.Global()
	if err != nil {
		return nil, fmt.Errorf("%w: no nf_conntrack sysctls, and %w", ErrUnavailable, err)
	}
	ct := &evidence.Conntrack{Count: g.Entries, Max: g.Max, Source: conntrackNetlink}
	st, err := n.Stats()
	if len(st) > 0 {
		st["entries"] = g.Entries
		ct.Stats = st
	}
	if err != nil {
		return ct, partial{fmt.Errorf("count from netlink, but per-CPU stats: %w", err)}
	}
	return ct, nil
}

// netlinkStats reads the per-CPU counters over ctnetlink, with
// "entries" as procfs shows it.
func (c *conntrackCollector) netlinkStats() (map[string]uint64, error) {
	n, err := c.dial()
	if err != nil {
		return nil, err
	}
	defer n.Close()
	st, err := n.Stats()
	if err != nil {
		return nil, err
	}
	g, err := n.Global()
	if err != nil {
		return nil, err
	}
	st["entries"] = g.Entries
	return st, nil
}
