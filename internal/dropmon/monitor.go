package dropmon

import (
	"bytes"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/netdoctor/netdoctor/internal/conntrack"
)

// Stats slots, as bpf/dropmon.c numbers them.
const (
	statDrops = iota
	statDropsOverflow
	statRetrans
	statRetransOverflow
	statLedgerNew
	statLedgerOverflow
	statRetransNew
	statMax
)

// The per-flow tables' sizes, as bpf/dropmon.c sets them (LEDGER_ENTRIES,
// RETRANS_ENTRIES): a key of the ledger is 104 bytes and its value 24,
// some 3 MiB of kernel memory with the hash's own; the retransmissions'
// table about 1 MiB.
const (
	LedgerEntries  = 16384
	RetransEntries = 8192
)

// Unavailable is why the monitor cannot run on this host.
type Unavailable struct {
	Why string
	Err error
}

func (u *Unavailable) Error() string {
	if u.Err == nil {
		return "drop monitor unavailable: " + u.Why
	}
	return "drop monitor unavailable: " + u.Why + ": " + u.Err.Error()
}

func (u *Unavailable) Unwrap() error { return u.Err }

func unavailable(why string, err error) error { return &Unavailable{Why: why, Err: err} }

// Why is the reason a Start error gives, for a report: the Unavailable's
// words when it is one, else the error.
func Why(err error) string {
	var u *Unavailable
	if errors.As(err, &u) {
		return u.Why
	}
	return err.Error()
}

// Counts is everything the monitor counted, host-wide, at Time.
type Counts struct {
	Time time.Time
	// Drops are every drop, exactly, with Port 0; Ports attribute some
	// of them to ports, summed from the Ledger's flows (the busiest, as
	// the kernel's LRU keeps them).
	Drops  []RawDrop
	Ports  []RawDrop
	Ledger []RawLedger
	Flows  []RawFlow
	Stats  [statMax]uint64
	// LedgerSize and RetransSize are the tables' sizes.
	LedgerSize, RetransSize int
	// Joins are the flows found in the conntrack tables of the host's
	// namespaces, by the tuple looked up (a ledger row's Flow without
	// CT, a retransmitting connection's); JoinStatus says how far the
	// search went. Set by the monitor when it names the counts.
	Joins      map[conntrack.Tuple]Join
	JoinStatus JoinStatus
	// Funcs name the ledger's locations (Drops and Ports have theirs in
	// each row); set when the monitor names the counts.
	Funcs map[uint64]string
}

// RawLedger is one key of the ledger with its count: a drop's place and
// its flow.
type RawLedger struct {
	NetNS     uint32
	Reason    uint32
	Name      string // the reason's name
	Location  uint64
	Func      string // the function at Location
	Ifindex   int32
	Iface     string // the device's name, from the drops' table
	Ethertype uint16 // as RawDrop's
	IPProto   uint8
	// Flow is the packet's flow when it was dropped: its protocol,
	// source and destination; or, FromSock, its socket's (the local end
	// as Src) when its headers were not readable.
	Flow     conntrack.Tuple
	FromSock bool
	// SockPort is the port of the local socket that owned it or was to
	// receive it, 0 for none.
	SockPort uint16
	// CT is conntrack's original tuple of the packet's own entry (HasCT),
	// CTReply when the packet went that entry's reply way.
	CT      conntrack.Tuple
	HasCT   bool
	CTReply bool
	Packets uint64
	Bytes   uint64
	MaxLen  uint32
}

// Join is a flow found in a conntrack table: the entry's original tuple
// (the flow as its client opened it, before NAT), whether the tuple
// looked up went the entry's reply way, and the namespace whose table
// held it.
type Join struct {
	Orig  conntrack.Tuple
	Reply bool
	NetNS uint64
}

// JoinStatus is how far one search of the conntrack tables went.
type JoinStatus struct {
	// Namespaces are those whose tables were searched: created by the
	// host's root, with entries.
	Namespaces int
	// Lookups were made in this search; Pending tuples are left for the
	// next one (each search is bounded).
	Lookups, Pending int
	// Errors says what could not be read, "" when everything was.
	Errors string
}

// RawDrop is one key of the drops map with its count.
type RawDrop struct {
	NetNS     uint32
	Reason    uint32
	Name      string // the reason's name
	Location  uint64
	Func      string // the function at Location
	Ifindex   int32
	Iface     string
	Ethertype uint16
	IPProto   uint8
	Port      uint16
	Socket    bool
	SrcPort   bool // Port is the packet's source port
	Packets   uint64
	Bytes     uint64
}

// RawFlow is one key of the retransmissions map with its count.
type RawFlow struct {
	NetNS        uint32
	Family       uint16
	Sport, Dport uint16
	Saddr, Daddr [16]byte
	Skbs, Bytes  uint64
	Full         uint64
	MaxLen, MSS  uint32
}

// parseLockdown reads /sys/kernel/security/lockdown: "none [integrity]
// confidentiality" is in integrity mode.
func parseLockdown(s string) string {
	i := strings.IndexByte(s, '[')
	j := strings.IndexByte(s, ']')
	if i < 0 || j < i {
		return ""
	}
	return s[i+1 : j]
}

// cString is a NUL-terminated C string.
func cString(b []int8) string {
	u := make([]byte, len(b))
	for i, c := range b {
		u[i] = byte(c)
	}
	if i := bytes.IndexByte(u, 0); i >= 0 {
		u = u[:i]
	}
	return string(u)
}

// shared is the process's monitor: one set of programs, however many
// namespaces are observed.
var shared struct {
	sync.Mutex
	m    *Monitor
	refs int
}

// Shared returns the process's monitor, started by the first caller;
// each caller calls release when done, and the last one closes it. A
// failure to start is returned to each caller that asks (each may retry:
// the reason may be passing, as a lock held by another loader).
func Shared() (m *Monitor, release func(), err error) {
	shared.Lock()
	defer shared.Unlock()
	if shared.m == nil {
		if shared.m, err = Start(); err != nil {
			shared.m = nil
			return nil, nil, err
		}
	}
	shared.refs++
	m = shared.m
	return m, sync.OnceFunc(func() {
		shared.Lock()
		defer shared.Unlock()
		if shared.refs--; shared.refs == 0 {
			shared.m.Close()
			shared.m = nil
		}
	}), nil
}
