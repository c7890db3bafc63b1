package sockdiag

import "github.com/netdoctor/netdoctor/internal/evidence/kernel"

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
}
