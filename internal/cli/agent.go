package cli

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/prometheus/exporter-toolkit/web"
	"gopkg.in/yaml.v3"

	"github.com/netdoctor/netdoctor/internal/agent"
	"github.com/netdoctor/netdoctor/internal/agentapi"
	"github.com/netdoctor/netdoctor/internal/layer"
	"github.com/netdoctor/netdoctor/internal/netns"
	"github.com/netdoctor/netdoctor/internal/safepath"
)

// DefaultAgentAddr is where the agent listens unless told otherwise:
// loopback, so that nothing is exposed by accident.
const DefaultAgentAddr = "127.0.0.1:9120"

func runAgent(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("agent", stderr)
	listen := fs.String("listen", DefaultAgentAddr, "address to serve on; a non-loopback one needs --token-file")
	tokenFile := fs.String("token-file", "", "file holding the bearer token the evidence API requires (mode 0600; its first line)")
	certFile := fs.String("tls-cert", "", "serve HTTPS with this certificate (PEM), with --tls-key")
	keyFile := fs.String("tls-key", "", "the certificate's private key (PEM)")
	nsName := fs.String("netns", "", "observe this network namespace (a name from 'ip netns list' or a path such as /proc/PID/ns/net); the agent still listens in its own")
	var cfg agent.Config
	durationVar(fs, &cfg.Retain, "retain", 15*time.Minute, "how far back the rolling window of snapshots reaches")
	durationVar(fs, &cfg.Interval, "interval", time.Second, "time between snapshots")
	durationVar(fs, &cfg.Recent, "recent", 30*time.Second, "the window the current findings rest on: a counter must rise within it for a finding to be active")
	durationVar(fs, &cfg.DNSEvery, "dns-every", 5*time.Minute, "probe the resolvers this often (0: only when a run asks)")
	durationVar(fs, &cfg.DepEvery, "dependency-every", 15*time.Second, "trace the followed servers' outbound connections (their dependencies) for 3 s this often (0: never)")
	fs.StringVar(&cfg.Incidents, "incidents", "", "write an incident bundle into this directory (made private to root) whenever a finding turns active")
	durationVar(fs, &cfg.Before, "incident-before", 5*time.Minute, "an incident bundle's window before the finding turned active")
	durationVar(fs, &cfg.After, "incident-after", time.Minute, "and after it")
	metricsListen := fs.String("metrics-listen", "", "also serve /metrics (and /healthz) alone on this address, without the token: loopback, or protected by --web.config.file")
	webConfig := fs.String("web.config.file", "", "the Prometheus exporter-toolkit web configuration (TLS, basic auth) of the --metrics-listen listener")
	testEndpoint := fs.String("test-endpoint", "", "also serve layer tests (load tcp:// and udp://, run's path probe) on this address, TCP and UDP, e.g. :9121; needs --token-file")
	maxMiB := fs.Int64("incidents-max-mib", 100, "keep at most this many MiB of incidents; the oldest are removed first")
	pos, err := parse(fs, args, stdout)
	if err != nil {
		return err
	}
	switch {
	case len(pos) > 0:
		return badInput("agent takes no arguments, got %q", pos)
	case (*certFile == "") != (*keyFile == ""):
		return badInput("--tls-cert and --tls-key go together")
	case cfg.Interval < 100*time.Millisecond || cfg.Interval > time.Minute:
		return badInput("--interval %v: must be between 100ms and 1m", cfg.Interval)
	case cfg.Retain < 10*cfg.Interval || cfg.Retain > 24*time.Hour:
		return badInput("--retain %v: must be between ten intervals and 24h", cfg.Retain)
	case cfg.Recent < 2*cfg.Interval || cfg.Recent > cfg.Retain:
		return badInput("--recent %v: must be between two intervals and --retain", cfg.Recent)
	case cfg.Incidents != "" && cfg.Before+cfg.After > cfg.Retain:
		return badInput("--incident-before and --incident-after (%v) must fit in --retain (%v)", cfg.Before+cfg.After, cfg.Retain)
	case *maxMiB < 1:
		return badInput("--incidents-max-mib must be at least 1")
	case cfg.DNSEvery < 0:
		return badInput("--dns-every must not be negative")
	case cfg.DepEvery != 0 && (cfg.DepEvery < 3*time.Second || cfg.DepEvery > time.Hour):
		return badInput("--dependency-every %v: must be 0 (never) or between 3s and 1h", cfg.DepEvery)
	}
	if cfg.DNSEvery == 0 {
		cfg.DNSEvery = -1 // Config's zero is its default
	}
	if cfg.DepEvery == 0 {
		cfg.DepEvery = -1
	}
	cfg.IncidentBytes = *maxMiB << 20
	host, _, err := net.SplitHostPort(*listen)
	if err != nil {
		return badInput("--listen %q: want HOST:PORT, e.g. %s", *listen, DefaultAgentAddr)
	}
	var token []byte
	if *tokenFile != "" {
		if token, err = agentapi.ReadToken(*tokenFile); errors.Is(err, iofs.ErrNotExist) {
			// The first run: the .deb makes the token on install; a
			// binary copied by hand has none yet.
			return badInput("token file %s does not exist: make one first, readable by root only: install -d -m 0700 %s && (umask 077; head -c 24 /dev/urandom | base64 > %s); give the same file to run --server-agent and check --agent (--token-file)",
				*tokenFile, filepath.Dir(*tokenFile), *tokenFile)
		} else if err != nil {
			return usageError{err}
		}
	} else if !loopback(host) {
		return badInput("refusing to serve on %s without --token-file: anyone who can reach it would read this host's sockets, processes and configuration; listen on 127.0.0.1 or give a token", *listen)
	}
	if err := checkMetricsListen(*metricsListen, *webConfig); err != nil {
		return err
	}
	if *testEndpoint != "" && token == nil {
		return badInput("--test-endpoint needs --token-file: the endpoint admits only clients holding the token")
	}
	var tlsCfg *tls.Config
	if *certFile != "" {
		cert, err := tls.LoadX509KeyPair(*certFile, *keyFile)
		if err != nil {
			return usageError{fmt.Errorf("--tls-cert/--tls-key: %w", err)}
		}
		tlsCfg = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}
	if cfg.NetNS, err = netns.Resolve(*nsName); err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	cfg.Log, cfg.Version = log, Version
	var te *agent.TestEndpoint
	if *testEndpoint != "" {
		if te, err = agent.ListenTestEndpoint(*testEndpoint, token, log); err != nil {
			return err
		}
		defer te.Close()
		cfg.TestEndpoint = te.Addr()
	}
	a, err := agent.New(cfg)
	if err != nil {
		return err
	}
	defer a.Close()
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	srv := agent.Server(a.Handler(token))
	// The server's own complaints (a failed TLS handshake) in the log.
	srv.ErrorLog = slog.NewLogLogger(log.Handler(), slog.LevelWarn)
	scheme := "http"
	if tlsCfg != nil {
		srv.TLSConfig, scheme = tlsCfg, "https"
		ln = tls.NewListener(ln, tlsCfg)
	}
	h := a.Host()
	ns := "this namespace"
	if cfg.NetNS.String() != "" {
		ns = "netns " + cfg.NetNS.String()
	}
	log.Info("agent serving", "url", scheme+"://"+ln.Addr().String(), "observing", ns, "host", h.Hostname, "kernel", h.Kernel,
		"interval", cfg.Interval, "retain", cfg.Retain, "token", token != nil, "incidents", cfg.Incidents)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	if te != nil {
		log.Info("test endpoint serving", "addr", te.Addr(), "max_tests", layer.MaxTests, "max_duration", layer.MaxDuration)
		go func() {
			if err := te.Serve(ctx); err != nil {
				log.Error("test endpoint", "err", err)
			}
		}()
	}
	if *metricsListen != "" {
		mln, err := net.Listen("tcp", *metricsListen)
		if err != nil {
			cancel()
			<-done
			return fmt.Errorf("--metrics-listen: %w", err)
		}
		// Without a web configuration it is a loopback listener every
		// local user reaches: what they can read anyway.
		msrv := agent.Server(a.MetricsHandler(*webConfig == ""))
		msrv.ErrorLog = srv.ErrorLog
		log.Info("metrics serving", "addr", mln.Addr().String(), "web_config", *webConfig)
		go func() {
			flags := &web.FlagConfig{WebListenAddresses: &[]string{*metricsListen}, WebConfigFile: webConfig}
			err := agent.Serve(ctx, msrv, func() error { return web.Serve(mln, msrv, flags, log) })
			if err != nil && !errors.Is(err, net.ErrClosed) {
				log.Error("metrics listener", "err", err)
				cancel()
			}
		}()
	}
	err = agent.Serve(ctx, srv, func() error { return srv.Serve(ln) })
	cancel()
	<-done
	if err != nil && !errors.Is(err, net.ErrClosed) {
		return fmt.Errorf("serve: %w", err)
	}
	log.Info("agent stopped")
	return nil
}

// loopback reports whether every address host names is a loopback one:
// only then may the agent listen without a token.
func loopback(host string) bool {
	if host == "" {
		return false // all addresses
	}
	if ip := net.ParseIP(host); ip != nil {
		return ip.IsLoopback()
	}
	ips, err := net.LookupIP(host)
	if err != nil || len(ips) == 0 {
		return false
	}
	for _, ip := range ips {
		if !ip.IsLoopback() {
			return false
		}
	}
	return true
}

// checkMetricsListen refuses a metrics listener others could reach
// unprotected: a non-loopback address needs a web configuration that
// asks for basic auth or verified client certificates. The web
// configuration, read again on every connection, and the certificates
// and key it names, must be files only root or the caller can change,
// in directories no one else may write (safepath.CheckConfig). Client
// certificates verified without a CA file of its own would be verified
// against every public root CA: refused.
func checkMetricsListen(addr, webConfig string) error {
	if addr == "" {
		if webConfig != "" {
			return badInput("--web.config.file goes with --metrics-listen")
		}
		return nil
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return badInput("--metrics-listen %q: want HOST:PORT, e.g. 127.0.0.1:9122", addr)
	}
	if webConfig == "" {
		if !loopback(host) {
			return badInput("refusing to serve /metrics on %s without --web.config.file: its series name this host's listeners, processes and busiest destinations; listen on 127.0.0.1 or require basic auth or client certificates", addr)
		}
		return nil
	}
	if err := safepath.CheckConfig(webConfig); err != nil {
		return usageError{fmt.Errorf("--web.config.file: %w", err)}
	}
	b, err := os.ReadFile(webConfig)
	if err != nil {
		return usageError{err}
	}
	var c struct {
		TLS struct {
			Cert       string `yaml:"cert_file"`
			Key        string `yaml:"key_file"`
			ClientCA   string `yaml:"client_ca_file"`
			ClientAuth string `yaml:"client_auth_type"`
		} `yaml:"tls_server_config"`
		Users map[string]string `yaml:"basic_auth_users"`
	}
	if err := yaml.Unmarshal(b, &c); err != nil {
		return usageError{fmt.Errorf("--web.config.file %s: %w", webConfig, err)}
	}
	verify := c.TLS.ClientAuth == "RequireAndVerifyClientCert" || c.TLS.ClientAuth == "VerifyClientCertIfGiven"
	if verify && c.TLS.ClientCA == "" {
		return badInput("--web.config.file %s: client_auth_type: %s without client_ca_file would accept a certificate from any public CA: name the CA that signs your clients' certificates", webConfig, c.TLS.ClientAuth)
	}
	// The files it names, read again on every connection too; relative
	// to the configuration's directory, as the exporter-toolkit reads them.
	for _, f := range []string{c.TLS.Cert, c.TLS.Key, c.TLS.ClientCA} {
		if f == "" {
			continue
		}
		if !filepath.IsAbs(f) {
			f = filepath.Join(filepath.Dir(webConfig), f)
		}
		if err := safepath.CheckConfig(f); err != nil {
			return usageError{fmt.Errorf("--web.config.file %s: %w", webConfig, err)}
		}
	}
	if err := web.Validate(webConfig); err != nil {
		return usageError{fmt.Errorf("--web.config.file %s: %w", webConfig, err)}
	}
	if !loopback(host) && len(c.Users) == 0 && c.TLS.ClientAuth != "RequireAndVerifyClientCert" {
		return badInput("refusing to serve /metrics on %s: %s asks for neither basic_auth_users nor client_auth_type: RequireAndVerifyClientCert", addr, webConfig)
	}
	return nil
}
