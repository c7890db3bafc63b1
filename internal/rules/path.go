package rules

import (
	"fmt"
	"time"

	"github.com/netdoctor/netdoctor/internal/evidence"
	"github.com/netdoctor/netdoctor/internal/report"
)

// pathSource is the Source of the items that rest on run's path probe.
const pathSource = "path probe"

// pathBandwidthItem sets the load's responses against what the path
// carried from the server to the client before the load, when run probed
// it (Run.Path): a path slower than the responses need is the limit,
// whatever the server does.
func pathBandwidthItem(in *Input) (report.Item, bool) {
	if in.Run == nil || !in.Run.Path.Ran() || in.Run.Path.DownBitsPerSecond <= 0 {
		return report.Item{}, false
	}
	p := in.Run.Path
	carries := fmt.Sprintf("the path carries %s from the server to the client (bulk TCP%s through the agent's test endpoint, measured before the load)",
		bitrate(p.DownBitsPerSecond/8), streams(p, " on %d streams, summed,"))
	if l := in.Run.Load; l != nil && l.BytesPerSec > 0 {
		return report.Item{Text: fmt.Sprintf("responses need %s, %s", bitrate(l.BytesPerSec), carries), Source: pathSource}, true
	}
	return report.Item{Text: carries, Source: pathSource}, true
}

// pathLossItem is the loss of the path itself, without the server's
// load: UDP datagrams lost, TCP retransmissions of the probe.
func pathLossItem(in *Input) (report.Item, bool) {
	if in.Run == nil || !in.Run.Path.Ran() {
		return report.Item{}, false
	}
	p := in.Run.Path
	var text string
	if p.UDPSent > 0 {
		text = fmt.Sprintf("%.1f %% loss on the path itself, measured without the server's load (%d UDP datagrams from the client to the server", p.UDPLossPercent, p.UDPSent)
		if p.UDPJitter > 0 {
			text += fmt.Sprintf(", jitter %v", p.UDPJitter.Round(time.Microsecond))
		}
		text += ")"
	}
	if p.UDPDownSent > 0 {
		if text != "" {
			text += "; "
		}
		text += fmt.Sprintf("%.1f %% of %d UDP datagrams from the server to the client", p.UDPDownLossPercent, p.UDPDownSent)
	}
	if p.DownBitsPerSecond > 0 {
		if text != "" {
			text += "; "
		}
		text += fmt.Sprintf("%d retransmissions in the probe's bulk TCP from the server%s", p.Retransmits, streams(p, " (%d streams)"))
	}
	return report.Item{Text: text, Source: pathSource}, true
}

// streams says, in format, how many parallel streams the probe's TCP
// sum is over; nothing for one (and for reports from before the probe
// had several).
func streams(p *evidence.PathProbe, format string) string {
	if n := len(p.TCPStreams); n > 1 {
		return fmt.Sprintf(format, n)
	}
	return ""
}
