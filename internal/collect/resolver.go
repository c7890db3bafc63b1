package collect

import (
	"context"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/netdoctor/netdoctor/internal/evidence"
	"github.com/netdoctor/netdoctor/internal/resolver"
)

// resolverCollector reads the resolver configuration the observed
// namespace's programs use and, when enabled, probes each nameserver with
// an A and a PTR query.
type resolverCollector struct {
	cfg   Config
	calls int
	start time.Time
}

func newResolver(cfg Config) *resolverCollector {
	return &resolverCollector{cfg: cfg, start: time.Now()}
}

func (r *resolverCollector) Name() string { return "resolver" }

func (r *resolverCollector) Collect(ctx context.Context, s *evidence.Snapshot) error {
	path := r.cfg.NetNS.ResolvConf()
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	conf, err := resolver.ParseConf(f)
	conf.ConfPath = path
	s.Resolver = &conf
	if err != nil {
		return partial{fmt.Errorf("%s: %w", path, err)}
	}
	if time.Since(r.start) < r.cfg.DNSDelay {
		return nil
	}
	// Probing may wait on a condition (run: the server's workers seen
	// in a lookup); until it holds, this snapshot does not count.
	if r.cfg.DNSWhen != nil && !r.cfg.DNSWhen() {
		return nil
	}
	r.calls++
	every := max(r.cfg.DNSEvery, 1)
	if !r.cfg.DNS || (r.calls-1)%every != 0 || len(conf.Nameservers) == 0 {
		return nil
	}
	name := r.cfg.DNSName
	if name == "" {
		name, _ = os.Hostname()
	}
	conf.Probes = resolver.Prober{}.ProbeEach(ctx, conf, name, ptrTarget(), r.cfg.DNSRepeat)
	return nil
}

// ptrTarget picks the address whose reverse lookup a server here would
// most likely make: the first global IPv4 address of the namespace.
func ptrTarget() string {
	addrs, err := net.InterfaceAddrs()
	if err == nil {
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil && !ipn.IP.IsLoopback() {
				return ipn.IP.String()
			}
		}
	}
	return "127.0.0.1"
}
