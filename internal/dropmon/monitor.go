package dropmon

import (
	"bytes"
	"errors"
	"strings"
	"sync"
	"time"
)

// Stats slots, as bpf/dropmon.c numbers them.
const (
	statDrops = iota
	statDropsOverflow
	statRetrans
	statRetransOverflow
	statMax
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
	// of them to ports (the busiest, as the kernel's LRU keeps them).
	Drops []RawDrop
	Ports []RawDrop
	Flows []RawFlow
	Stats [statMax]uint64
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
