package rules

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/netdoctor/netdoctor/internal/kmsg"
	"github.com/netdoctor/netdoctor/internal/report"
)

// SocketBufferLimit: socket buffers hit their limits.
const SocketBufferLimit report.FindingID = "socket-buffer-limit"

var _ = define(Class{ID: SocketBufferLimit,
	Errors: true, Delays: true,
	Meaning:    "data dropped because a socket buffer or TCP's global memory limit ran out",
	Active:     "a buffer or memory counter rose, or an \"out of memory\" / \"too many orphaned sockets\" kernel message (warning)",
	LatentWhen: "none",
	Seed:       "004 (buffer sysctls), 001 §2",
	ReportedBy: "`check`, `diagnose`",
})

// checkBuffers finds data dropped because socket buffers or TCP's global
// memory limit ran out.
func checkBuffers(in *Input) []report.Finding {
	b := in.Bundle
	w, ok := b.Window()
	if !ok {
		return nil
	}
	var items []report.Item
	for _, c := range []string{"TcpExtTCPRcvQDrop", "TcpExtTCPBacklogDrop", "TcpExtPruneCalled", "TcpExtRcvPruned",
		"TcpExtTCPMemoryPressures", "TcpExtTCPAbortOnMemory", "UdpRcvbufErrors", "UdpSndbufErrors", "Udp6RcvbufErrors"} {
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
	if len(items) == 0 {
		return nil
	}
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
	if v := last.Sysctls["net.core.rmem_max"]; v != "" {
		if n, _ := strconv.Atoi(v); n < 4<<20 {
			a := sysctlFix(b, "net.core.rmem_max", strconv.Itoa(16<<20))
			fix = append(fix, a.Worded("UDP receivers: "+a.Command+" and a larger SO_RCVBUF in the application"))
		}
	}
	return []report.Finding{{ID: SocketBufferLimit, Severity: report.Warning, Status: report.Active,
		Title:    "Data dropped for lack of socket buffer or TCP memory",
		Evidence: items, Actions: fix}}
}
