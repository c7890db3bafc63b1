package loadtest

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// NginxConfig describes the nginx that StartNginx runs. Its zero value is
// one worker pinned to CPU 0 on a free port of 127.0.0.1 that answers
// every request with 200 "hello\n" and logs nothing.
type NginxConfig struct {
	// Workers is worker_processes; default 1.
	Workers int
	// Listen is the address to listen on; default "127.0.0.1:0". Port 0
	// picks a free port, and another one if nginx then cannot bind it.
	Listen string
	// Backlog is the listen backlog; 0 leaves nginx's default (511).
	Backlog int
	// KeepaliveRequests is keepalive_requests; 0 leaves nginx's default
	// (1000). Load tests want a large value such as 1000000, so that
	// nginx never closes a connection the generator reuses.
	KeepaliveRequests int
	// Body is what `location / { return 200 "Body"; }` answers; default
	// "hello\n". It is an nginx string: variables such as
	// $connection_requests are expanded.
	Body string
	// Extra holds directives added inside server {}, such as more
	// locations.
	Extra string
	// CPU, if >= 0, pins the single worker to this CPU with
	// worker_cpu_affinity; -1 leaves scheduling to the kernel. A CPU >= 0
	// with more than one worker is an error.
	CPU int
	// AccessLog turns the access log on, in Nginx.AccessLog, one line per
	// request: "$status $request_length $body_bytes_sent $connection
	// $connection_requests". It is off by default, as benchmarks want.
	AccessLog bool
}

// AccessLogFormat is the format of access log lines when
// NginxConfig.AccessLog is set.
const AccessLogFormat = "$status $request_length $body_bytes_sent $connection $connection_requests"

// withDefaults fills in defaults and checks the fields.
func (c NginxConfig) withDefaults() (NginxConfig, error) {
	if c.Workers == 0 {
		c.Workers = 1
	}
	if c.Listen == "" {
		c.Listen = "127.0.0.1:0"
	}
	if c.Body == "" {
		c.Body = "hello\n"
	}
	switch {
	case c.Workers < 0:
		return c, fmt.Errorf("nginx config: workers %d: want >= 1", c.Workers)
	case c.Backlog < 0 || c.KeepaliveRequests < 0:
		return c, errors.New("nginx config: backlog and keepalive requests must not be negative")
	case c.CPU >= 0 && c.Workers > 1:
		return c, fmt.Errorf("nginx config: CPU %d pins a single worker, not %d: set CPU to -1", c.CPU, c.Workers)
	}
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		return c, fmt.Errorf("nginx config: listen %q: %w", c.Listen, err)
	}
	return c, nil
}

// nginxFiles are the paths of one nginx's files inside its directory.
type nginxFiles struct {
	dir, conf, pid, errorLog, accessLog, stderr string
}

func newNginxFiles(dir string) nginxFiles {
	return nginxFiles{
		dir:       dir,
		conf:      filepath.Join(dir, "nginx.conf"),
		pid:       filepath.Join(dir, "nginx.pid"),
		errorLog:  filepath.Join(dir, "error.log"),
		accessLog: filepath.Join(dir, "access.log"),
		stderr:    filepath.Join(dir, "nginx.stderr"),
	}
}

// writeConf writes the whole nginx.conf for cfg listening on addr.
func writeConf(f nginxFiles, cfg NginxConfig, addr string) error {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	p("# Written by netdoctor's internal/load/loadtest.")
	p("daemon off;")
	p("master_process on;")
	p("worker_processes %d;", cfg.Workers)
	if cfg.CPU >= 0 {
		p("worker_cpu_affinity 1%s;", strings.Repeat("0", cfg.CPU))
	}
	if os.Geteuid() == 0 {
		p("user root;") // else the workers run as nobody and cannot write to dir
	}
	if n := fileLimit(); n > 0 {
		p("worker_rlimit_nofile %d;", n)
	}
	p("pid %s;", quote(f.pid))
	p("error_log %s;", quote(f.errorLog))
	p("events { worker_connections 20000; }")
	p("http {")
	for _, d := range []string{"client_body", "proxy", "fastcgi", "uwsgi", "scgi"} {
		p("  %s_temp_path %s;", d, quote(filepath.Join(f.dir, d+"_temp")))
	}
	if cfg.AccessLog {
		p("  log_format loadtest %s;", quote(AccessLogFormat))
		p("  access_log %s loadtest;", quote(f.accessLog))
	} else {
		p("  access_log off;")
	}
	if cfg.KeepaliveRequests > 0 {
		p("  keepalive_requests %d;", cfg.KeepaliveRequests)
	}
	p("  default_type text/plain;")
	p("  server {")
	listen := addr
	if cfg.Backlog > 0 {
		listen += " backlog=" + strconv.Itoa(cfg.Backlog)
	}
	p("    listen %s;", listen)
	if cfg.Extra != "" {
		p("    %s", cfg.Extra)
	}
	p("    location / { return 200 %s; }", quote(cfg.Body))
	p("  }")
	p("}")
	return os.WriteFile(f.conf, []byte(b.String()), 0o644)
}

// quote makes s an nginx quoted string, with the escapes nginx's config
// parser knows. It leaves $ alone: nginx has no escape for it.
func quote(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`, "\r", `\r`, "\t", `\t`)
	return `"` + r.Replace(s) + `"`
}
