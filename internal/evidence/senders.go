package evidence

import (
	"github.com/netdoctor/netdoctor/internal/evidence/kernel"
)

// What held each connection's sender, declared in package kernel for sockdiag, which makes it.
type (
	Senders        = kernel.Senders
	SenderGroup    = kernel.SenderGroup
	SenderCounters = kernel.SenderCounters
	SenderConn     = kernel.SenderConn
)

// Bounds of a snapshot's senders.
const (
	MaxSenderPeers = kernel.MaxSenderPeers
	MaxSenderConns = kernel.MaxSenderConns
)

// SenderDeltas returns, per listening port and per peer, what each
// group's counters rose by over the bundle, with its gauges at the end
// (kernel.SenderDeltas over its snapshots' senders). nil when no
// snapshot has senders.
func (b *Bundle) SenderDeltas() (listeners, peers []SenderGroup) {
	if len(b.Snapshots) == 0 {
		return nil, nil
	}
	series := make([]*Senders, len(b.Snapshots))
	for i := range b.Snapshots {
		series[i] = b.Snapshots[i].Senders
	}
	return kernel.SenderDeltas(b.Snapshots[0].Time, series)
}
