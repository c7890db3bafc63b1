package sockdiag

import (
	"time"

	"github.com/netdoctor/netdoctor/internal/evidence/kernel"
)

// Options selects what Collect dumps.
type Options struct {
	// PortLow and PortHigh are net.ipv4.ip_local_port_range, used to count
	// ephemeral ports in use per remote. Zero disables that count.
	PortLow, PortHigh uint16
	// Unix adds unix stream sockets (state counts and listeners).
	Unix bool
	// CurrEstab is Tcp.CurrEstab of the namespace (ESTABLISHED plus
	// CLOSE_WAIT), if known. When it exceeds MaxEstablishedDetail the
	// ESTABLISHED sockets are not dumped; their count is derived from it
	// and per-remote counts cover the other states only.
	CurrEstab            uint64
	HaveCurrEstab        bool
	MaxEstablishedDetail int
	// Listeners, if set, receives the listening sockets as soon as they
	// are known, before the slower walk of the other states, so a caller
	// can resolve their owners meanwhile. It must not keep the slice.
	Listeners func([]kernel.Listener)
	// Senders, when set, looks at every connection of the dump for the
	// accounting of what held its sender (CollectSenders), SendersAt
	// being the snapshot's time and SlowStartAfterIdle the namespace's
	// net.ipv4.tcp_slow_start_after_idle (-1: not known).
	Senders            *Senders
	SendersAt          time.Time
	SlowStartAfterIdle int
}
