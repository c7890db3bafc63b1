package layer

import (
	"math"
	"time"
)

// UDPStats is what the receiver of a UDP test saw.
type UDPStats struct {
	Sent     uint64 `json:"sent"`
	Received uint64 `json:"received"` // distinct datagrams
	Lost     uint64 `json:"lost"`
	// LossPercent is Lost of Sent, in percent.
	LossPercent float64 `json:"loss_percent"`
	Duplicates  uint64  `json:"duplicates"`
	// Reordered counts datagrams that arrived after one with a higher
	// sequence number.
	Reordered uint64 `json:"reordered"`
	// Jitter is RFC 3550's interarrival jitter (section 6.4.1): the
	// smoothed mean deviation of the transit time between consecutive
	// datagrams. Clock offset between the hosts cancels out.
	Jitter time.Duration `json:"jitter_ns"`
	// OverBudget counts datagrams past the test's packet budget, not
	// counted otherwise.
	OverBudget uint64 `json:"over_budget,omitempty"`
}

// receiver accumulates UDPStats from datagrams as they arrive. Not safe
// for concurrent use.
type receiver struct {
	seen     []uint64 // bitmap of sequence numbers, the packet budget
	received uint64
	dups     uint64
	reorder  uint64
	over     uint64
	maxSeq   uint64
	any      bool
	// RFC 3550: the previous datagram's transit time and the jitter,
	// in nanoseconds.
	lastTransit int64
	jitter      float64
}

func newReceiver(budget uint64) *receiver {
	return &receiver{seen: make([]uint64, (budget+63)/64)}
}

// add counts one datagram sent at sentNs and received at now.
func (r *receiver) add(seq uint64, sentNs int64, now time.Time) {
	if seq/64 >= uint64(len(r.seen)) {
		r.over++
		return
	}
	bit := uint64(1) << (seq % 64)
	if r.seen[seq/64]&bit != 0 {
		r.dups++
		return
	}
	r.seen[seq/64] |= bit
	r.received++
	transit := now.UnixNano() - sentNs
	if r.any {
		if seq < r.maxSeq {
			r.reorder++
		}
		d := math.Abs(float64(transit - r.lastTransit))
		r.jitter += (d - r.jitter) / 16
	}
	r.maxSeq = max(r.maxSeq, seq)
	r.lastTransit, r.any = transit, true
}

// stats closes the account: sent is what the sender says it sent.
func (r *receiver) stats(sent uint64) *UDPStats {
	s := &UDPStats{Sent: sent, Received: r.received, Duplicates: r.dups, Reordered: r.reorder,
		Jitter: time.Duration(r.jitter), OverBudget: r.over}
	if sent > r.received {
		s.Lost = sent - r.received
	}
	if sent > 0 {
		s.LossPercent = 100 * float64(s.Lost) / float64(sent)
	}
	return s
}

// packetBudget is the most datagrams a UDP test of rate and duration may
// count: what it asked for with a tenth to spare.
func packetBudget(rate float64, d time.Duration) uint64 {
	return uint64(rate*d.Seconds()*1.1) + 1000
}
