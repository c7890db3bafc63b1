package rules

import (
	"cmp"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/netdoctor/netdoctor/internal/evidence"
	"github.com/netdoctor/netdoctor/internal/kmsg"
	"github.com/netdoctor/netdoctor/internal/report"
	"github.com/netdoctor/netdoctor/internal/sizing"
)

// SocketBufferLimit: socket buffers hit their limits.
const SocketBufferLimit report.FindingID = "socket-buffer-limit"

var _ = define(Class{ID: SocketBufferLimit,
	Tunables:    []Tunable{{Name: "net.core.rmem_max", Min: 4 << 20, Max: sizing.MaxRcvBuf, Why: "4 MiB, below which buffers' rule proposes 16 MiB (sizing.RcvBuf's floor), to 64 MiB"}},
	DropReasons: []string{"SOCKET_RCVBUFF", "SOCKET_BACKLOG", "PROTO_MEM", "TCP_OFOMERGE", "TCP_OFO_QUEUE_PRUNE"},
	Errors:      true, Delays: true,
	Meaning:    "data dropped because a socket buffer or TCP's global memory limit ran out",
	Active:     "a buffer or memory counter rose, or an \"out of memory\" / \"too many orphaned sockets\" kernel message (warning)",
	LatentWhen: "none",
	Seed:       "004 (buffer sysctls), 001 §2",
	ReportedBy: "`check`, `diagnose`",
	Doc: `Rule ´buffers´ (´buffers.go´). It needs two snapshots. It is **active, warning** when any of
´TcpExtTCPRcvQDrop´, ´TcpExtTCPBacklogDrop´, ´TcpExtPruneCalled´, ´TcpExtRcvPruned´,
´TcpExtTCPMemoryPressures´, ´TcpExtTCPAbortOnMemory´, ´UdpRcvbufErrors´, ´UdpSndbufErrors´ or
´Udp6RcvbufErrors´ rose. It also fires on a kernel message of class ´out-of-socket-memory´
(´TCP: out of memory -- consider tuning tcp_mem´) or ´too-many-orphans´. When sockstat has ´TCP.mem´
and ´net.ipv4.tcp_mem´ is known, the evidence adds ´TCP memory N pages; tcp_mem (min pressure max) =
…´. The fix suggests ´net.core.rmem_max´ of 16 MiB for UDP receivers while it is below 4 MiB.

**The socket itself.** Every UDP and TCP socket's own drop counter (´sk_drops´, sock_diag's
´SK_MEMINFO_DROPS´, as ´ss -m´ prints it ´d´) is read with its receive buffer (´SK_MEMINFO_RCVBUF´, the
´SO_RCVBUF´ the kernel granted, twice what was asked) and what it held (´SK_MEMINFO_RMEM_ALLOC´), and its
owner; a socket whose counter rose in the window makes the finding active by itself, and comes first in
its evidence: ´UDP receiver python3 (pid 4242) on 0.0.0.0:5000: 18000 dropped in 5s (3600.0/s) by the
socket itself (sk_drops); its receive buffer takes 4.5 KiB (SO_RCVBUF as the kernel counts it, twice what
was asked) and held 4.3 KiB when sampled: full´. The drop monitor's ´SOCKET_RCVBUFF´, ´SOCKET_BACKLOG´,
´PROTO_MEM´, ´TCP_OFOMERGE´ and ´TCP_OFO_QUEUE_PRUNE´ drops, with their ports, are added. netdoctor's own
sockets (its load's connections, which it owns, and a run's connections to its agents, owned or already
closed) are left out: what they drop is netdoctor reading late, never the service's buffer. When the
socket is a UDP receiver the title names it (´UDP receiver python3 (pid 4242) on 0.0.0.0:5000 drops
datagrams: its receive buffer (4.5 KiB) is full´), the subject is its address, and the fix is that
socket's: ´setsockopt(SO_RCVBUF, N)´ in the application, N sized by ´internal/sizing.RcvBuf´ on what
arrives (the namespace's UDP datagrams received and dropped a second, at least the socket's own drops):
200 ms of them at 2 KiB each (the kernel charges a datagram's whole buffer, its truesize), at least 4 MiB,
a power of two; ´net.core.rmem_max´ raised to N when it is lower (the kernel grants no more); and reading
faster (more readers, ´SO_REUSEPORT´), since a buffer only absorbs bursts. Tested by ´check´ against a
Python receiver with a 4 KiB ´SO_RCVBUF´ under a burst (TestCheckUDPReceiverDrops).`,
})

var _ = register(Rule{Name: "buffers", Order: 120, Scope: PerSide, IDs: []report.FindingID{SocketBufferLimit}, Checks: "socket memory", Check: checkBuffers,
	Watches: bufferCounters})

// bufferCounters are the kernel's counters of data dropped for lack of
// buffer or memory.
var bufferCounters = []string{"TcpExtTCPRcvQDrop", "TcpExtTCPBacklogDrop", "TcpExtPruneCalled", "TcpExtRcvPruned",
	"TcpExtTCPMemoryPressures", "TcpExtTCPAbortOnMemory", "UdpRcvbufErrors", "UdpSndbufErrors", "Udp6RcvbufErrors"}

// checkBuffers finds data dropped because socket buffers or TCP's global
// memory limit ran out.
func checkBuffers(in *Input) []report.Finding {
	b := in.Bundle
	w, ok := b.Window()
	if !ok {
		return nil
	}
	var items []report.Item
	for _, c := range bufferCounters {
		if it, d := counterItem(w, c); d > 0 {
			items = append(items, it)
		}
	}
	for _, m := range b.Kmsg() {
		if m.Class == kmsg.ClassOutOfSocketMemory || m.Class == kmsg.ClassTooManyOrphans {
			items = append(items, report.Item{Text: "kernel: " + m.Text, Source: "kmsg", Window: true})
			break
		}
	}
	socks := slices.DeleteFunc(socketDropsIn(w), func(sd sockDrops) bool { return agentFlow(in, sd.SocketDrops) })
	if len(items) == 0 && len(socks) == 0 {
		return nil
	}
	// The sockets themselves first: which one drops, whose it is, and
	// its buffer.
	var sockItems []report.Item
	for i, sd := range socks {
		if i == 3 {
			break
		}
		sockItems = append(sockItems, report.Item{Text: socketDropText(sd, w), Source: "sockdiag", Window: true})
	}
	items = append(sockItems, items...)
	items = append(items, dropItems(in, "SOCKET_RCVBUFF", "SOCKET_BACKLOG", "PROTO_MEM", "TCP_OFOMERGE", "TCP_OFO_QUEUE_PRUNE")...)
	last := w.Last
	if mem, ok := last.Sockstat["TCP.mem"]; ok {
		if f := strings.Fields(last.Sysctls["net.ipv4.tcp_mem"]); len(f) == 3 {
			items = append(items, report.Item{Text: fmt.Sprintf("TCP memory %d pages; tcp_mem (min pressure max) = %s", mem, last.Sysctls["net.ipv4.tcp_mem"]), Source: "sockstat", Window: true})
		}
	}
	fix := notes(
		"a receiver that reads too slowly fills its buffer: find the slow reader first (Recv-Q in `ss -tn`)",
		"size tcp_rmem/tcp_wmem maxima by bandwidth × RTT and keep autotuning on (tcp_moderate_rcvbuf=1); do not set fixed SO_RCVBUF in applications",
	)
	title := "Data dropped for lack of socket buffer or TCP memory"
	subject := ""
	var about report.About
	if len(socks) > 0 && strings.HasPrefix(socks[0].Proto, "udp") {
		// A datagram receiver: its own buffer is the knob.
		sd := socks[0]
		title = fmt.Sprintf("%s drops datagrams: its receive buffer (%s) is full", receiverName(sd), kib(sd.RcvBuf))
		subject = sd.Local
		fix = udpFix(b, w, sd)
	} else if v := last.Sysctls["net.core.rmem_max"]; v != "" {
		if n, _ := strconv.Atoi(v); n < 4<<20 {
			a := sysctlFix(b, "net.core.rmem_max", strconv.Itoa(16<<20))
			fix = append(fix, a.Worded("UDP receivers: "+a.Command+" and a larger SO_RCVBUF in the application"))
		}
	}
	if len(socks) > 0 && !strings.HasPrefix(socks[0].Proto, "udp") {
		subject = socks[0].Local
		fix = append([]report.Action{report.Advise(fmt.Sprintf("%s dropped what it could not queue: its application reads too slowly, or its buffer (%s) is too small for its bandwidth × RTT", receiverName(socks[0]), kib(socks[0].RcvBuf)))}, fix...)
	}
	if len(socks) > 0 {
		about = report.About{Listen: socks[0].Local, Server: socks[0].Process}
		if len(socks[0].PIDs) > 0 {
			about.PID = socks[0].PIDs[0]
		}
	}
	return []report.Finding{{ID: SocketBufferLimit, Severity: report.Warning, Status: report.Active, Subject: subject, About: about,
		Title: title, Evidence: items, Actions: fix}}
}

// sockDrops is a socket whose drop counter rose in the window.
type sockDrops struct {
	evidence.SocketDrops
	rose uint64
}

// socketDropsIn are the sockets whose own drop counter rose in the
// window, most first. A socket absent from the first snapshot's list
// had dropped nothing then (the list holds every socket that had, up to
// its bound): all of its drops are the window's.
func socketDropsIn(w evidence.Window) []sockDrops {
	if w.Last.Sockets == nil || w.First.Sockets == nil {
		return nil
	}
	before := map[uint64]uint64{}
	for _, d := range w.First.Sockets.Drops {
		before[d.Inode] = d.Drops
	}
	var out []sockDrops
	for _, d := range w.Last.Sockets.Drops {
		if was := before[d.Inode]; d.Drops > was {
			out = append(out, sockDrops{d, d.Drops - was})
		}
	}
	slices.SortStableFunc(out, func(a, b sockDrops) int { return cmp.Compare(b.rose, a.rose) })
	return out
}

// agentFlow is a connection between the run and one of its agents:
// netdoctor's own, whichever side dropped on it (data an agent sent
// after the run closed the connection, a response read late), never the
// measured service's. The collector leaves out the sockets netdoctor
// owns; one already closed has no owner left to show.
func agentFlow(in *Input, sd evidence.SocketDrops) bool {
	if in.Run == nil {
		return false
	}
	for _, s := range in.Run.Sides {
		if s == nil || s.Agent == "" {
			continue
		}
		u, err := url.Parse(s.Agent)
		if err != nil || u.Host == "" {
			continue
		}
		if sd.Remote == u.Host || sd.Local == u.Host {
			return true
		}
	}
	return false
}

// receiverName names a socket with its owner: "UDP receiver python3
// (pid 4242) on 0.0.0.0:5000".
func receiverName(sd sockDrops) string {
	kind := "TCP connection"
	if strings.HasPrefix(sd.Proto, "udp") {
		kind = "UDP receiver"
	}
	owner := ""
	if sd.Process != "" && len(sd.PIDs) > 0 {
		owner = fmt.Sprintf(" %s (pid %d)", sd.Process, sd.PIDs[0])
	}
	s := kind + owner + " on " + sd.Local
	if sd.Remote != "" && kind == "TCP connection" {
		s += " from " + sd.Remote
	}
	return s
}

// socketDropText is the evidence of one socket's drops.
func socketDropText(sd sockDrops, w evidence.Window) string {
	t := fmt.Sprintf("%s: %d dropped in %s (%.1f/s) by the socket itself (sk_drops); its receive buffer takes %s (SO_RCVBUF as the kernel counts it, twice what was asked)",
		receiverName(sd), sd.rose, round(w), float64(sd.rose)/max(w.Duration().Seconds(), 0.001), kib(sd.RcvBuf))
	if sd.RmemAlloc > 0 {
		t += fmt.Sprintf(" and held %s when sampled", kib(sd.RmemAlloc))
		if sd.RcvBuf > 0 && uint64(sd.RmemAlloc)*10 >= uint64(sd.RcvBuf)*9 {
			t += ": full"
		}
	}
	return t
}

func kib(n uint32) string {
	if n >= 1<<20 {
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%.1f KiB", float64(n)/1024)
}

// udpFix is the fix for one datagram receiver: a bigger SO_RCVBUF, and
// net.core.rmem_max high enough for the kernel to grant it, sized on
// what arrives (datagrams received and dropped a second).
func udpFix(b *evidence.Bundle, w evidence.Window, sd sockDrops) []report.Action {
	in := w.Rate("Udp.InDatagrams") + w.Rate("Udp6.InDatagrams") + w.Rate("Udp.RcvbufErrors") + w.Rate("Udp6.RcvbufErrors")
	in = max(in, float64(sd.rose)/max(w.Duration().Seconds(), 0.001))
	want := sizing.RcvBuf(in)
	fix := []report.Action{report.Advise(fmt.Sprintf("give %s a receive buffer of %d bytes: setsockopt(SO_RCVBUF, %d) where it opens the socket (%s); the kernel grants at most net.core.rmem_max (SO_RCVBUFFORCE ignores it, as root)",
		receiverName(sd), want, want, sizing.RcvBufWhy(in)))}
	if cur, ok := SysctlInt(w.Last, "net.core.rmem_max"); !ok || cur < int64(want) {
		fix = append(fix, sysctlFix(b, "net.core.rmem_max", strconv.Itoa(want)))
	}
	fix = append(fix, report.Advise("and read faster: more reader threads or sockets (SO_REUSEPORT spreads datagrams over them), less work per datagram before the next recvmsg(); a buffer only absorbs bursts"))
	return fix
}
