package app

import (
	"testing"
	"time"

	"github.com/netdoctor/netdoctor/internal/sockdiag"
)

// TestObserveBusy: when a request is outstanding, from the ages tcp_info
// gives in ms (jiffies: equal ages are the same 4 ms tick).
func TestObserveBusy(t *testing.T) {
	for _, tc := range []struct {
		name                string
		sent, recv, ack, un uint32
		busy, undecided     bool
	}{
		{"sent after the last answer", 10, 50, 50, 0, true, false},
		{"answered after the request", 50, 10, 10, 0, false, false},
		{"sent in the answer's tick, not yet acknowledged", 20, 20, 20, 1, true, false},
		// A saturated pool to a dependency that queues: the next request
		// left in the answer's tick, and the peer's kernel acknowledged it
		// 40 ms later, its application not having answered.
		{"sent in the answer's tick, acknowledged alone since", 60, 60, 20, 0, true, false},
		// Request, answer and ACK in one tick: a fast dependency's answer
		// carrying the ACK, or a saturated pool's next request
		// acknowledged at once. The sample decides nothing.
		{"request, answer and ACK in one tick", 60, 60, 60, 0, false, true},
	} {
		c := &connTrace{}
		c.observe(time.Now(), &sockdiag.TCPInfo{LastDataSent: tc.sent, LastDataRecv: tc.recv, LastAckRecv: tc.ack, Unacked: tc.un})
		if got := c.busy == 1; got != tc.busy || (c.decided == 0) != tc.undecided {
			t.Errorf("%s: busy %v, decided %d, want busy %v, undecided %v", tc.name, got, c.decided, tc.busy, tc.undecided)
		}
	}
}
