package dropmon

import (
	"fmt"
	"strings"
)

// reasonPrefix is what every name of enum skb_drop_reason begins with.
const reasonPrefix = "SKB_DROP_REASON_"

// subsysShift is where a reason's subsystem begins (since 6.4: the high
// 16 bits name a subsystem such as mac80211 or openvswitch, whose own
// enums name the low bits).
const subsysShift = 16

// Reasons names the drop reasons of one kernel.
type Reasons map[uint32]string

// newReasons names the values of enum skb_drop_reason, as the kernel's
// BTF gives them: SKB_DROP_REASON_NETFILTER_DROP = 12 on one kernel may
// be 13 on the next.
func newReasons(values map[string]uint64) Reasons {
	r := make(Reasons, len(values))
	for name, v := range values {
		if !strings.HasPrefix(name, reasonPrefix) || v > 0xffffffff {
			continue
		}
		name = strings.TrimPrefix(name, reasonPrefix)
		if name == "MAX" || strings.HasPrefix(name, "SUBSYS_") {
			continue
		}
		r[uint32(v)] = name
	}
	return r
}

// Name is a reason's name: "NETFILTER_DROP", or for a number this
// kernel's enum does not hold, "subsystem 3 reason 7" or "reason 140".
func (r Reasons) Name(v uint32) string {
	if n, ok := r[v]; ok {
		return n
	}
	if s := v >> subsysShift; s != 0 {
		return fmt.Sprintf("subsystem %d reason %d", s, v&(1<<subsysShift-1))
	}
	return fmt.Sprintf("reason %d", v)
}
