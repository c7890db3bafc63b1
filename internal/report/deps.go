package report

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/netdoctor/netdoctor/internal/app"
	"github.com/netdoctor/netdoctor/internal/evidence"

	"github.com/netdoctor/netdoctor/internal/printable"
)

// DepHeader are the columns of a dependency table, in the text and the
// HTML report alike.
var DepHeader = []string{"destination", "owner", "conns", "new seen", "busy", "round trips/s", "per round trip", "segs/s out/in", "bytes/s out/in"}

// writeTraced is the dependency tables of check and the agent.
func writeTraced(w io.Writer, t *evidence.Traced) {
	w = printable.NewWriter(w)
	if t == nil {
		return
	}
	fmt.Fprintf(w, "\nDependencies (the outbound connections of %d listening servers, each looked at every %d ms for %.1fs, under the traffic the host had; no load):\n", t.Followed, t.IntervalMS, t.Seconds)
	if len(t.Servers) == 0 {
		fmt.Fprintf(w, "  none carried requests\n")
		return
	}
	for _, s := range t.Servers {
		fmt.Fprintf(w, "  %s on %s (pid %d)\n", printable.String(s.Kind), printable.String(s.Addr), mainPID(s))
		writeDeps(w, s.Deps, "while traced")
	}
}

func mainPID(s *app.Server) int {
	if s.Master != 0 || len(s.PIDs) == 0 {
		return s.Master
	}
	return s.PIDs[0]
}

// writeDeps is a server's dependency table: each destination it sent
// requests to (during the load, or while traced), from its own
// connections. Its cells name other processes (owner): each is escaped,
// here and not in depCells, which the HTML page escapes its own way.
func writeDeps(w io.Writer, deps []app.Dependency, when string) {
	if len(deps) == 0 {
		return
	}
	fmt.Fprintf(w, "    waits on (its outbound connections, sampled every 100 ms %s):\n", when)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "      %s\n", strings.Join(DepHeader, "\t"))
	for _, d := range deps {
		cells := depCells(d)
		for i, c := range cells {
			cells[i] = printable.String(c)
		}
		fmt.Fprintf(tw, "      %s\n", strings.Join(cells, "\t"))
	}
	tw.Flush()
}

// depCells is one dependency's row, DepHeader's columns.
func depCells(d app.Dependency) []string {
	owner := d.Owner
	switch {
	case d.OtherHost:
		owner = "another host"
	case owner == "":
		owner = "-"
	case d.Observed:
		owner += " *"
	}
	if d.Untimed != "" {
		// A unix socket: where, who and how many, and how often a
		// request sat unread there (a lower bound on busy, so shown as
		// one); no time.
		conns, busy := "-", "-"
		if d.Conns > 0 {
			conns = fmt.Sprint(d.Conns)
		}
		if d.Unread > 0 {
			busy = fmt.Sprintf("≥ %.0f%% (unread there)", 100*d.Unread)
		}
		return []string{d.Addr, owner, conns, fmt.Sprint(d.New), busy, "-", "not timed (" + d.Untimed + ")", "-", "-"}
	}
	if d.Conns == 0 {
		// Only connections opened per request, each gone before its
		// second sample: where it goes and how many are known, their
		// time is not.
		return []string{d.Addr, owner, "-", fmt.Sprint(d.New), "-", "-", "a connection per request, too short to time", "-", "-"}
	}
	rt := d.RoundTrip.Round(100 * time.Microsecond).String()
	if d.Multiplexed() {
		rt = fmt.Sprintf("n/a (%.0f%% pipelined)", 100*d.Pipelined)
	}
	return []string{d.Addr, owner, fmt.Sprint(d.Conns), fmt.Sprint(d.New), fmt.Sprintf("%.0f%%", 100*d.Busy),
		fmt.Sprintf("%.0f", d.RoundTripsPerSec), rt, fmt.Sprintf("%.0f/%.0f", d.SegsOutPerSec, d.SegsInPerSec),
		Bytes(d.BytesOutPerSec) + "/" + Bytes(d.BytesInPerSec)}
}

// WaitTables are the servers' dependency tables for the HTML page.
func WaitTables(ss []*app.Server) []WaitTable {
	var out []WaitTable
	for _, s := range ss {
		if len(s.Deps) == 0 {
			continue
		}
		t := WaitTable{Server: s.Kind + " on " + s.Addr}
		for _, d := range s.Deps {
			t.Rows = append(t.Rows, depCells(d))
		}
		out = append(out, t)
	}
	return out
}

// Bytes is a byte count in IEC units, "2.0 KiB": the dependency table's
// and the dependency findings' rates alike.
func Bytes(b float64) string {
	switch {
	case b >= 1<<20:
		return fmt.Sprintf("%.1f MiB", b/(1<<20))
	case b >= 1<<10:
		return fmt.Sprintf("%.1f KiB", b/(1<<10))
	}
	return fmt.Sprintf("%.0f B", b)
}
