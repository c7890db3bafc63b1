package lab

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// The token bucket of Shape, as tc's "burst 32kbit latency 50ms": tc
// reads a size's "kbit" as 1024 bits, so 32kbit is 4096 bytes.
const (
	tbfBurstBytes = 32 * 1024 / 8
	tbfLatency    = 50 * time.Millisecond
)

// tbf is what `tc qdisc … tbf rate R burst B latency L` asks the kernel
// for (struct tc_tbf_qopt), worked out as tc 6.1 works it out
// (iproute2's tc/q_tbf.c and tc/tc_core.c), so that the qdisc netlink
// makes is the one tc made.
type tbf struct {
	Rate uint64 // bytes per second
	// Limit is the bytes the queue holds: what the rate sends in the
	// latency, plus the burst.
	Limit uint32
	// Buffer is the burst as the time it takes to send at Rate, in the
	// packet scheduler's ticks (tickInUsec per microsecond, from
	// /proc/net/psched).
	Buffer uint32
}

func newTBF(rate uint64, burst uint32, latency time.Duration, tickInUsec float64) tbf {
	limit := float64(rate)*float64(latency.Microseconds())/1e6 + float64(burst)
	return tbf{Rate: rate, Limit: uint32(limit), Buffer: uint32(1e6 * float64(burst) / float64(rate) * tickInUsec)}
}

// rateUnits are tc's rate suffixes (iproute2 lib/utils.c get_rate64),
// in bits per second, compared without case as tc does: "mbit" is 10^6
// bits, "mibit" 2^20, "mbps" 10^6 bytes.
var rateUnits = map[string]float64{
	"bit": 1, "kibit": 1024, "kbit": 1000, "mibit": 1 << 20, "mbit": 1e6,
	"gibit": 1 << 30, "gbit": 1e9, "tibit": 1 << 40, "tbit": 1e12,
	"bps": 8, "kibps": 8 << 10, "kbps": 8e3, "mibps": 8 << 20, "mbps": 8e6,
	"gibps": 8 << 30, "gbps": 8e9, "tibps": 8 << 40, "tbps": 8e12,
}

// parseRate reads a rate in tc's syntax ("8mbit", "1500kbit", "100mbps",
// or a bare number of bits per second) as bytes per second.
func parseRate(s string) (uint64, error) {
	i := strings.IndexFunc(s, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
	if i < 0 {
		i = len(s)
	}
	n, err := strconv.ParseFloat(s[:i], 64)
	unit, ok := 1.0, true
	if i < len(s) {
		unit, ok = rateUnits[strings.ToLower(s[i:])]
	}
	if err != nil || !ok || n <= 0 {
		return 0, fmt.Errorf("rate %q: want a number and a unit as tc takes them (8mbit, 1500kbit, 100mbps)", s)
	}
	return uint64(n * unit / 8), nil
}
