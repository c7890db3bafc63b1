package conntrack

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/mdlayher/netlink"
)

// ErrTruncated reports a message shorter than its netfilter header.
var ErrTruncated = errors.New("truncated ctnetlink message")

// ErrPermission reports that ctnetlink refused a request: every nfnetlink
// message needs CAP_NET_ADMIN in the user namespace owning the network
// namespace.
var ErrPermission = errors.New("conntrack statistics over netlink need CAP_NET_ADMIN")

// ErrNotSupported reports a system without ctnetlink (not Linux).
var ErrNotSupported = errors.New("ctnetlink not supported")

// nfgenmsgLen is sizeof(struct nfgenmsg), the header of every netfilter
// message: family, version and a big-endian res_id, which the per-CPU
// statistics set to the CPU.
const nfgenmsgLen = 4

// Attribute types from include/uapi/linux/netfilter/nfnetlink_conntrack.h.
const (
	ctaStatsGlobalEntries    = 1 // CTA_STATS_GLOBAL_ENTRIES
	ctaStatsGlobalMaxEntries = 2 // CTA_STATS_GLOBAL_MAX_ENTRIES (4.18+)
)

// cpuNames names the attributes of enum ctattr_stats_cpu after the
// columns of /proc/net/stat/nf_conntrack that show the same counter, so
// that evidence.Conntrack.Stats has one set of keys whichever way it was
// read. The procfs names are older than the counters some now show:
// CTA_STATS_ERROR is printed as icmp_error, CTA_STATS_CLASH_RESOLVE as
// clashres and CTA_STATS_CHAIN_TOOLONG as chainlength (see
// ct_cpu_seq_show in net/netfilter/nf_conntrack_standalone.c). The ones
// marked old are no longer sent since 4.x, where the kernel counted them.
var cpuNames = [...]string{
	1:  "searched", // old
	2:  "found",
	3:  "new", // old
	4:  "invalid",
	5:  "ignore",      // old
	6:  "delete",      // old
	7:  "delete_list", // old
	8:  "insert",
	9:  "insert_failed",
	10: "drop",
	11: "early_drop",
	12: "icmp_error",
	13: "search_restart",
	14: "clashres",
	15: "chainlength",
}

// expectNames names enum ctattr_expect_stats as the procfs columns do.
var expectNames = [...]string{
	1: "expect_new",
	2: "expect_create",
	3: "expect_delete",
}

// Global is the table's size as IPCTNL_MSG_CT_GET_STATS tells it.
type Global struct {
	Entries uint64
	// Max is 0 on kernels before 4.18, which do not send it.
	Max uint64
}

// DecodeGlobal reads the reply to IPCTNL_MSG_CT_GET_STATS, the payload
// of one netlink message.
func DecodeGlobal(b []byte) (Global, error) {
	var g Global
	err := attrs(b, func(typ uint16, v uint32) {
		switch typ {
		case ctaStatsGlobalEntries:
			g.Entries = uint64(v)
		case ctaStatsGlobalMaxEntries:
			g.Max = uint64(v)
		}
	})
	return g, err
}

// SumCPU adds the counters of one per-CPU statistics message (the reply
// to IPCTNL_MSG_CT_GET_STATS_CPU, or with expect true to
// IPCTNL_MSG_EXP_GET_STATS_CPU) into m, keyed by procfs column name.
// Attribute types it does not know are skipped, so a newer kernel's
// counters cost nothing.
func SumCPU(m map[string]uint64, b []byte, expect bool) error {
	names := cpuNames[:]
	if expect {
		names = expectNames[:]
	}
	return attrs(b, func(typ uint16, v uint32) {
		if int(typ) < len(names) && names[typ] != "" {
			m[names[typ]] += uint64(v)
		}
	})
}

// attrs calls fn with each 32-bit attribute after the nfgenmsg header.
// The kernel sends each counter as a big-endian u32 (nla_put_be32);
// attributes of another size are skipped. A malformed attribute list is
// an error; fn may have seen the attributes before the damage.
func attrs(b []byte, fn func(typ uint16, v uint32)) error {
	if len(b) < nfgenmsgLen {
		return fmt.Errorf("%w: %d bytes, want at least %d", ErrTruncated, len(b), nfgenmsgLen)
	}
	ad, err := netlink.NewAttributeDecoder(b[nfgenmsgLen:])
	if err != nil {
		return fmt.Errorf("decode ctnetlink attributes: %w", err)
	}
	for ad.Next() {
		if v := ad.Bytes(); len(v) == 4 {
			fn(ad.Type(), binary.BigEndian.Uint32(v))
		}
	}
	if err := ad.Err(); err != nil {
		return fmt.Errorf("decode ctnetlink attributes: %w", err)
	}
	return nil
}
