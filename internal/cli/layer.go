package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/netdoctor/netdoctor/internal/agentapi"
	"github.com/netdoctor/netdoctor/internal/layer"
)

// layerOpts are the flags only `load tcp://` and `load udp://` read.
type layerOpts struct {
	reverse   bool
	size      int
	tokenFile string
}

func layerFlags(fs *flag.FlagSet) *layerOpts {
	l := &layerOpts{}
	fs.BoolVar(&l.reverse, "reverse", false, "with --token-file: only the download (endpoint to client); by default tcp:// runs both directions, upload first, and udp:// the upload")
	fs.IntVar(&l.size, "size", 1200, "udp://: datagram payload in bytes")
	fs.StringVar(&l.tokenFile, "token-file", "", "tcp:// and udp://: the agent's token file; the target is then its test endpoint (netdoctor agent --test-endpoint)")
	return l
}

// isLayerURL reports a target of a layer test rather than HTTP.
func isLayerURL(s string) bool {
	return strings.HasPrefix(s, "tcp://") || strings.HasPrefix(s, "udp://")
}

// runLayer is `load tcp://HOST:PORT` and `load udp://HOST:PORT`.
func runLayer(ctx context.Context, lo *loadOpts, l *layerOpts, set map[string]bool, target string, stdout, stderr io.Writer) error {
	u, err := url.Parse(target)
	if err != nil || u.Host == "" || u.Port() == "" || (u.Path != "" && u.Path != "/") {
		return badInput("%s: want tcp://HOST:PORT or udp://HOST:PORT", target)
	}
	for long, short := range longNames {
		set[short] = set[short] || set[long]
	}
	set["R"] = set["R"] || set["rate"]
	set["m"] = set["m"] || set["method"]
	for _, f := range []string{"n", "t", "H", "m", "body", "body-file", "ramp", "no-keepalive", "latency"} {
		if set[f] {
			return badInput("-%s is an HTTP flag: %s takes -c, -d, -R, --size, --reverse and --token-file", f, u.Scheme)
		}
	}
	d := lo.o.Duration
	if !set["d"] {
		d = 10 * time.Second
	}
	var token []byte
	if l.tokenFile != "" {
		if token, err = agentapi.ReadToken(l.tokenFile); err != nil {
			return usageError{err}
		}
		if d > layer.MaxDuration {
			return badInput("-d %v: the test endpoint allows at most %v a test", d, layer.MaxDuration)
		}
	}
	rep := &layer.Report{Target: u.Scheme + "://" + u.Host}
	text := stdout
	if lo.jsonOut == "-" {
		text = stderr
	}
	if u.Scheme == "udp" {
		if !set["R"] {
			return badInput("udp:// needs -R, the datagrams per second")
		}
		if token == nil {
			return badInput("udp:// needs the agent's test endpoint and --token-file: a UDP sink cannot tell what it received")
		}
		dir, way := layer.Up, "client to endpoint"
		if l.reverse {
			dir, way = layer.Down, "endpoint to client"
		}
		fmt.Fprintf(text, "UDP test of %s: %g datagrams/s of %d bytes for %v, %s\n", u.Host, lo.o.Rate, l.size, d, way)
		rep.UDP, err = layer.RunUDP(ctx, layer.UDPOptions{Addr: u.Host, Token: token, Dir: dir, Rate: lo.o.Rate, Size: l.size, Duration: d})
		if err != nil {
			return layerErr(err)
		}
		writeUDP(text, rep.UDP)
	} else {
		if set["R"] || set["size"] {
			return badInput("-R and --size are udp://'s")
		}
		streams := 1
		if set["c"] {
			streams = lo.o.Connections
		}
		dirs := []string{layer.Up}
		switch {
		case l.reverse && token == nil:
			return badInput("--reverse needs the agent's test endpoint and --token-file: a discard server sends nothing")
		case l.reverse:
			dirs = []string{layer.Down}
		case token != nil:
			dirs = []string{layer.Up, layer.Down}
		}
		fmt.Fprintf(text, "TCP test of %s: %d stream(s), %v each way\n", u.Host, streams, d)
		for _, dir := range dirs {
			r, err := layer.RunTCP(ctx, layer.TCPOptions{Addr: u.Host, Token: token, Dir: dir, Streams: streams, Duration: d})
			if err != nil {
				return layerErr(err)
			}
			writeTCP(text, r)
			rep.TCP = append(rep.TCP, r)
		}
	}
	if lo.jsonOut != "" {
		return writeOut(lo.jsonOut, stdout, "result", indentedJSON(rep))
	}
	return nil
}

// layerErr makes a refusal or an unreachable target a usage error.
func layerErr(err error) error {
	var oe *net.OpError
	if errors.Is(err, layer.ErrRefused) || errors.As(err, &oe) && oe.Op == "dial" {
		return usageError{err}
	}
	return err
}

func mbits(bps float64) string { return fmt.Sprintf("%.1f Mbit/s", bps/1e6) }

func ms(d time.Duration) string {
	if d < time.Millisecond {
		return fmt.Sprintf("%d µs", d.Microseconds())
	}
	return fmt.Sprintf("%.2f ms", float64(d)/1e6)
}

func writeTCP(w io.Writer, r *layer.TCPResult) {
	name := map[string]string{layer.Up: "upload", layer.Down: "download"}[r.Dir]
	fmt.Fprintf(w, "  %-8s %12s  %d bytes in %.2fs", name, mbits(r.BitsPerSecond), r.Bytes, r.Duration.Seconds())
	if r.InfoFrom != "" {
		var srtt time.Duration
		for _, s := range r.Streams {
			srtt += s.RTT / time.Duration(len(r.Streams))
		}
		fmt.Fprintf(w, "  retransmits %d, RTT min %s, smoothed %s (the %s's sockets)", r.Retrans, ms(r.MinRTT()), ms(srtt), r.InfoFrom)
	}
	fmt.Fprintln(w)
	if len(r.Streams) < 2 {
		return
	}
	for i, s := range r.Streams {
		fmt.Fprintf(w, "    stream %-3d %12s  retransmits %d, RTT %s, min %s\n", i, mbits(s.BitsPerSecond), s.Retrans, ms(s.RTT), ms(s.MinRTT))
	}
}

func writeUDP(w io.Writer, r *layer.UDPResult) {
	fmt.Fprintf(w, "  sent      %d (%.0f/s)", r.Sent, r.SentRate)
	if r.SendErrors > 0 {
		fmt.Fprintf(w, ", %d refused by the client's kernel", r.SendErrors)
	}
	fmt.Fprintf(w, "\n  received  %d\n  lost      %d (%.2f %%)\n  jitter    %s (RFC 3550)\n  reordered %d, duplicates %d\n",
		r.Received, r.Lost, r.LossPercent, ms(r.Jitter), r.Reordered, r.Duplicates)
}
