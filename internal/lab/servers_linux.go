package lab

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Nginx describes the nginx a lab runs in its server namespace.
type Nginx struct {
	Port              int // on ServerIP; default 80
	Backlog           int // listen backlog=; 0 leaves nginx's 511
	Workers           int // worker_processes; default 1
	WorkerConnections int // default 4096
	RlimitNofile      int // worker_rlimit_nofile; 0 leaves it out
	NoDelayOff        bool
	// PHP sends *.php (and /) to this pool by fastcgi_pass; KeepConn
	// keeps those connections open (an upstream block with keepalive and
	// fastcgi_keep_conn on), else nginx opens one per request.
	PHP      *FPM
	KeepConn bool
	// Body, when PHP is nil, is what / returns; BodyBytes, when set, makes
	// it a static file of that many bytes instead.
	Body      string
	BodyBytes int
}

// FPM describes one php-fpm master with one pool.
type FPM struct {
	// Listen is "127.0.0.1:9000" or "unix:/path"; default 127.0.0.1:9000.
	Listen      string
	Backlog     int // listen.backlog; 0 leaves php-fpm's default
	MaxChildren int // pm.max_children; default 4
	// Dynamic selects pm = dynamic (Debian's default: one spare worker,
	// more spawned up to MaxChildren, and a log line when none can be)
	// instead of pm = static.
	Dynamic bool
	// SleepMS makes every request sleep this long: a slow backend.
	SleepMS int
	// FlockLog makes every request append to one shared log under an
	// exclusive flock, holding it SleepMS: the logging lock of seed 003.
	FlockLog bool
	// RlimitFiles sets rlimit_files for the workers.
	RlimitFiles int
}

func (f *FPM) listen() string {
	if f.Listen == "" {
		return "127.0.0.1:9000"
	}
	return f.Listen
}

// Dial address of the pool, as WaitListening takes it.
func (f *FPM) addr() string {
	l := f.listen()
	if strings.HasPrefix(l, "/") {
		return "unix:" + l
	}
	return l
}

// StartFPM writes the pool's config and scripts under Dir/fpm and starts
// php-fpm in the server namespace.
func (e *Env) StartFPM(ctx context.Context, f *FPM) (*Proc, error) {
	bin, err := findBinary("php-fpm", "php-fpm8.2", "php-fpm8.3", "php-fpm8.1")
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(e.Dir, "fpm")
	if err := os.MkdirAll(filepath.Join(dir, "www"), 0o755); err != nil {
		return nil, err
	}
	if f.MaxChildren == 0 {
		f.MaxChildren = 4
	}
	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format+"\n", a...) }
	p("; written by netdoctor's lab")
	p("[global]")
	p("pid = %s/php-fpm.pid", dir)
	p("error_log = %s/php-fpm.log", dir)
	p("daemonize = no")
	p("[www]")
	p("listen = %s", strings.TrimPrefix(f.listen(), "unix:"))
	if f.Backlog > 0 {
		p("listen.backlog = %d", f.Backlog)
	}
	if f.Dynamic {
		p("pm = dynamic")
		p("pm.start_servers = 1")
		p("pm.min_spare_servers = 1")
		p("pm.max_spare_servers = 1")
	} else {
		p("pm = static")
	}
	p("pm.max_children = %d", f.MaxChildren)
	p("pm.status_path = /fpm-status")
	if f.RlimitFiles > 0 {
		p("rlimit_files = %d", f.RlimitFiles)
	}
	p("catch_workers_output = yes")
	p("php_admin_value[error_log] = %s/php-error.log", dir)
	conf := filepath.Join(dir, "php-fpm.conf")
	if err := os.WriteFile(conf, []byte(b.String()), 0o644); err != nil {
		return nil, err
	}
	script := "<?php\n"
	switch {
	case f.FlockLog:
		script += fmt.Sprintf("$f = fopen(%q, 'a'); flock($f, LOCK_EX); fwrite($f, date('c').\" request\\n\"); usleep(%d); flock($f, LOCK_UN); fclose($f);\n", filepath.Join(dir, "app.log"), f.SleepMS*1000)
	case f.SleepMS > 0:
		script += fmt.Sprintf("usleep(%d);\n", f.SleepMS*1000)
	}
	script += "echo \"hello from php\\n\";\n"
	if err := os.WriteFile(filepath.Join(dir, "www", "index.php"), []byte(script), 0o644); err != nil {
		return nil, err
	}
	// -R: the lab runs as root, and php-fpm refuses to without it.
	proc, err := e.Start(e.ServerNS, "php-fpm", bin, "-F", "-R", "-y", conf, "-p", dir)
	if err != nil {
		return nil, err
	}
	if err := e.WaitListening(ctx, proc, e.ServerNS, f.addr()); err != nil {
		return nil, err
	}
	return proc, nil
}

// StartNginx writes nginx.conf under Dir/nginx and starts nginx in the
// server namespace, listening on ServerIP.
func (e *Env) StartNginx(ctx context.Context, n *Nginx) (*Proc, error) {
	bin, err := findBinary("nginx")
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(e.Dir, "nginx")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	if n.Port == 0 {
		n.Port = 80
	}
	if n.Workers == 0 {
		n.Workers = 1
	}
	if n.WorkerConnections == 0 {
		n.WorkerConnections = 4096
	}
	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format+"\n", a...) }
	p("# written by netdoctor's lab")
	p("daemon off;")
	p("user root;")
	p("worker_processes %d;", n.Workers)
	if n.RlimitNofile > 0 {
		p("worker_rlimit_nofile %d;", n.RlimitNofile)
	}
	p("pid %s/nginx.pid;", dir)
	p("error_log %s/error.log;", dir)
	p("events {")
	p("    worker_connections %d;", n.WorkerConnections)
	p("}")
	p("http {")
	for _, d := range []string{"client_body", "proxy", "fastcgi", "uwsgi", "scgi"} {
		p("    %s_temp_path %s/%s_temp;", d, dir, d)
	}
	p("    access_log %s/access.log combined;", dir)
	p("    keepalive_requests 100000;")
	if n.NoDelayOff {
		p("    tcp_nodelay off;")
	}
	if n.PHP != nil {
		p("    upstream php {")
		p("        server %s;", n.PHP.addr())
		if n.KeepConn {
			p("        keepalive 64;")
		}
		p("    }")
	}
	p("    server {")
	listen := fmt.Sprintf("%s:%d", e.ServerIP, n.Port)
	if n.Backlog > 0 {
		listen += fmt.Sprintf(" backlog=%d", n.Backlog)
	}
	p("        listen %s;", listen)
	if n.PHP != nil {
		p("        root %s/www;", filepath.Join(e.Dir, "fpm"))
		p("        location / {")
		p("            fastcgi_pass php;")
		if n.KeepConn {
			p("            fastcgi_keep_conn on;")
		}
		p("            fastcgi_param SCRIPT_FILENAME $document_root/index.php;")
		p("            fastcgi_param SCRIPT_NAME /index.php;")
		p("            fastcgi_param REQUEST_METHOD $request_method;")
		p("            fastcgi_param QUERY_STRING $query_string;")
		p("        }")
	} else if n.BodyBytes > 0 {
		page := filepath.Join(dir, "html")
		if err := os.MkdirAll(page, 0o755); err != nil {
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(page, "index.html"), []byte(strings.Repeat("x", n.BodyBytes)), 0o644); err != nil {
			return nil, err
		}
		p("        root %s;", page)
	} else {
		body := n.Body
		if body == "" {
			body = "hello from nginx\n"
		}
		p("        default_type text/plain;")
		p("        location / { return 200 %q; }", body)
	}
	p("    }")
	p("}")
	conf := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(conf, []byte(b.String()), 0o644); err != nil {
		return nil, err
	}
	proc, err := e.Start(e.ServerNS, "nginx", bin, "-c", conf, "-p", dir)
	if err != nil {
		return nil, err
	}
	if err := e.WaitListening(ctx, proc, e.ServerNS, fmt.Sprintf("%s:%d", e.ServerIP, n.Port)); err != nil {
		return nil, err
	}
	return proc, nil
}

// ErrMissing reports a server binary that is not installed.
type ErrMissing struct{ Names []string }

func (e ErrMissing) Error() string {
	return fmt.Sprintf("%s not installed: run scripts/deps.sh", strings.Join(e.Names, " or "))
}

func findBinary(names ...string) (string, error) {
	for _, n := range names {
		for _, dir := range []string{"", "/usr/sbin/", "/sbin/"} {
			if p, err := exec.LookPath(dir + n); err == nil {
				return p, nil
			}
		}
	}
	return "", ErrMissing{names}
}
