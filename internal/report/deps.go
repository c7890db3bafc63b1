package report

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/netdoctor/netdoctor/internal/app"
)

// writeDeps is a server's dependency table: each destination it sent
// requests to during the load, from its own connections.
func writeDeps(w io.Writer, deps []app.Dependency) {
	if len(deps) == 0 {
		return
	}
	fmt.Fprintf(w, "    waits on (its outbound connections, sampled every 100 ms during the load):\n")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "      destination\towner\tconns\tnew\tbusy\tround trips/s\tper round trip\tsegs/s out/in\tbytes/s out/in\n")
	for _, d := range deps {
		owner := d.Owner
		switch {
		case d.OtherHost:
			owner = "another host"
		case owner == "":
			owner = "-"
		case d.Observed:
			owner += " *"
		}
		rt := d.RoundTrip.Round(100 * time.Microsecond).String()
		if d.Multiplexed() {
			rt = fmt.Sprintf("n/a (%.0f%% pipelined)", 100*d.Pipelined)
		}
		fmt.Fprintf(tw, "      %s\t%s\t%d\t%d\t%.0f%%\t%.0f\t%s\t%.0f/%.0f\t%s/%s\n", d.Addr, owner, d.Conns, d.New, 100*d.Busy,
			d.RoundTripsPerSec, rt, d.SegsOutPerSec, d.SegsInPerSec, depBytes(d.BytesOutPerSec), depBytes(d.BytesInPerSec))
	}
	tw.Flush()
}

func depBytes(b float64) string {
	switch {
	case b >= 1<<20:
		return fmt.Sprintf("%.1fMi", b/(1<<20))
	case b >= 1<<10:
		return fmt.Sprintf("%.1fKi", b/(1<<10))
	}
	return fmt.Sprintf("%.0f", b)
}
