package evidence

import "github.com/netdoctor/netdoctor/internal/evidence/kernel"

// The kernel's records, declared in package kernel for the readers below
// the evidence model that make them (procnet, sockdiag, app), are the
// evidence's own: the same types under the names every reader of the
// evidence uses.
type (
	Softnet     = kernel.Softnet
	CPU         = kernel.CPU
	Interface   = kernel.Interface
	Qdisc       = kernel.Qdisc
	Link        = kernel.Link
	LinkRef     = kernel.LinkRef
	Sockets     = kernel.Sockets
	SocketDrops = kernel.SocketDrops
	Listener    = kernel.Listener
	Remote      = kernel.Remote
	Process     = kernel.Process
)

// Bounds of a snapshot's socket lists.
const (
	MaxSocketDrops = kernel.MaxSocketDrops
	MaxRemotes     = kernel.MaxRemotes
)

// TCPStates are the TCP states as the kernel numbers them.
var TCPStates = kernel.TCPStates
