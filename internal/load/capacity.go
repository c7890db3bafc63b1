package load

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Capacity says, before a load starts, how many of conns connections
// this host can open to one destination: the descriptors RLIMIT_NOFILE
// allows once raised to its hard limit (the load runs with no more),
// and the local ports ip_local_port_range gives one destination (beyond
// them connects fail with no-local-port). n is the connections the load
// will run; notes say each limit conns exceeds, in one line each, so
// that `-c 100000` is told what it gets up front rather than after the
// whole run.
func Capacity(conns int) (n int, notes []string) {
	n, note := raiseNofile(conns)
	if note != "" {
		notes = append(notes, note)
	}
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			lo, err1 := strconv.Atoi(f[0])
			hi, err2 := strconv.Atoi(f[1])
			if width := hi - lo + 1; err1 == nil && err2 == nil && width > 0 && n > width {
				notes = append(notes, fmt.Sprintf("-c %d exceeds the local ports one destination can take (ip_local_port_range %d–%d: %d): at most %d connections open at once, the others' connects fail (no-local-port)",
					n, lo, hi, width, width))
			}
		}
	}
	return n, notes
}

// ErrUnreachable is a target no connection can reach: nothing listens on
// its port, or no route leads to it.
var ErrUnreachable = errors.New("target unreachable")

// Probe checks a load's options as Run would (the URL, the request) and
// opens one connection to the target before the load, so that a closed
// port is one line at once, not a run of refusals. A connect that only
// times out (a firewall dropping, a full conntrack table) is left to the
// load to measure: that is what the load is for.
func Probe(ctx context.Context, o Options) error {
	t, err := parseTarget(o.URL)
	if err != nil {
		return err
	}
	if err := defaults(&o); err != nil {
		return err
	}
	if _, _, err := choose(o.Engine); err != nil {
		return err
	}
	if o.Script == nil {
		if _, err := buildRequest(o, t); err != nil {
			return err
		}
	}
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	ips, err := net.DefaultResolver.LookupIP(rctx, "ip", t.hostname)
	if err != nil || len(ips) == 0 {
		return fmt.Errorf("%w %q: %v", ErrResolve, t.hostname, err)
	}
	ip := ips[0]
	for _, a := range ips { // the address Run connects to
		if a.To4() != nil {
			ip = a
			break
		}
	}
	addr := net.JoinHostPort(ip.String(), t.port)
	d := net.Dialer{Timeout: o.Timeout}
	c, err := d.DialContext(ctx, "tcp", addr)
	switch {
	case err == nil:
		c.Close()
		return nil
	case errors.Is(err, syscall.ECONNREFUSED):
		return fmt.Errorf("%w: nothing accepts connections on %s (connection refused): start the server, or check the URL's port", ErrUnreachable, addr)
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return fmt.Errorf("%w: no route to %s (%v)", ErrUnreachable, addr, errors.Unwrap(err))
	}
	return nil
}
