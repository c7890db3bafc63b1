package lab

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// Nginx describes the nginx a lab runs in its server namespace.
type Nginx struct {
	// Name tells several nginx apart (directory and process name);
	// default "nginx".
	Name string
	// Listen is the address, default ServerIP:Port.
	Listen            string
	Port              int // on ServerIP; default 80
	Backlog           int // listen backlog=; 0 leaves nginx's 511
	Workers           int // worker_processes; default 1
	WorkerConnections int // default 4096
	RlimitNofile      int // worker_rlimit_nofile; 0 leaves it out
	NoDelayOff        bool
	// Sendfile turns sendfile on (nginx's default is off): headers and a
	// static body then leave in two writes, which Nagle holds apart.
	Sendfile bool
	// Proxy passes every request to this HTTP backend ("host:port");
	// ProxyKeepalive keeps those connections open (upstream keepalive
	// with HTTP/1.1 and no Connection header), else one per request.
	Proxy          string
	ProxyKeepalive bool
	// LuaFile serves every request by content_by_lua_file
	// (libnginx-mod-http-lua, with lua-nginx-redis on the package path).
	LuaFile string
	// PHP sends *.php (and /) to this pool by fastcgi_pass; KeepConn
	// keeps those connections open (an upstream block with keepalive and
	// fastcgi_keep_conn on), else nginx opens one per request.
	PHP      *FPM
	KeepConn bool
	// Keepalive is the upstream block's idle-connection cache per
	// worker; default 64. php-fpm serves one connection per worker for
	// as long as nginx keeps it, so with keepalive, pm.max_children must
	// exceed the connections nginx can hold open (concurrent requests
	// plus Keepalive × workers), or requests queued on the extra
	// connections starve.
	Keepalive int
	// Body, when PHP is nil, is what / returns; BodyBytes, when set, makes
	// it a static file of that many bytes instead.
	Body      string
	BodyBytes int
	// Files, with BodyBytes, are more static files beside it, by name
	// (served at /NAME) and size: a large one for clients that stream.
	Files map[string]int
	// TLS listens with ssl on a self-signed RSA certificate made for
	// the lab, of TLSKeyBits (default 2048): each full handshake costs
	// the worker an RSA signature, about 1 ms of CPU at 2048 bits and 7
	// at 4096, where the client's check of it stays near 0.1 ms.
	TLS        bool
	TLSKeyBits int
	// HTTP are more directives for the http block ("limit_req zone=one;").
	HTTP []string
	// Reuseport listens with reuseport: a socket of its own per worker.
	Reuseport bool
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
	// Script replaces the page's PHP code (without "<?php").
	Script string
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
	bin, err := findBinary(FPMNames()...)
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
	case f.Script != "":
		script += f.Script + "\n"
	case f.FlockLog:
		script += fmt.Sprintf("$f = fopen(%q, 'a'); flock($f, LOCK_EX); fwrite($f, date('c').\" request\\n\"); usleep(%d); flock($f, LOCK_UN); fclose($f);\n", filepath.Join(dir, "app.log"), f.SleepMS*1000)
	case f.SleepMS > 0:
		script += fmt.Sprintf("usleep(%d);\n", f.SleepMS*1000)
	}
	if f.Script == "" {
		script += "echo \"hello from php\\n\";\n"
	}
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
	if n.Name == "" {
		n.Name = "nginx"
	}
	dir := filepath.Join(e.Dir, n.Name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	if n.Port == 0 {
		n.Port = 80
	}
	if n.Listen == "" {
		n.Listen = fmt.Sprintf("%s:%d", e.ServerIP, n.Port)
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
	if n.LuaFile != "" {
		// Debian's modules, by absolute path: the lab's config does not
		// include modules-enabled, which may list modules not installed.
		for _, m := range []string{"ndk_http_module.so", "ngx_http_lua_module.so"} {
			path := filepath.Join(nginxModules, m)
			if _, err := os.Stat(path); err != nil {
				return nil, ErrMissing{[]string{"libnginx-mod-http-lua (" + path + ")"}}
			}
			p("load_module %s;", path)
		}
		if _, err := os.Stat("/usr/share/lua/5.1/nginx/redis.lua"); err != nil {
			return nil, ErrMissing{[]string{"lua-nginx-redis"}}
		}
	}
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
	if n.Sendfile {
		p("    sendfile on;")
	}
	for _, d := range n.HTTP {
		p("    %s", d)
	}
	if n.LuaFile != "" {
		p("    lua_package_path \"/usr/share/lua/5.1/?.lua;;\";")
	}
	if n.Proxy != "" {
		p("    upstream backend {")
		p("        server %s;", n.Proxy)
		if n.ProxyKeepalive {
			p("        keepalive %d;", n.keepalive())
		}
		p("    }")
	}
	if n.PHP != nil {
		p("    upstream php {")
		p("        server %s;", n.PHP.addr())
		if n.KeepConn {
			p("        keepalive %d;", n.keepalive())
		}
		p("    }")
	}
	p("    server {")
	listen := n.Listen
	if n.Backlog > 0 {
		listen += fmt.Sprintf(" backlog=%d", n.Backlog)
	}
	if n.TLS {
		cert, key, err := selfSigned(dir, n.TLSKeyBits)
		if err != nil {
			return nil, err
		}
		listen += " ssl"
		p("        ssl_certificate %s;", cert)
		p("        ssl_certificate_key %s;", key)
	}
	if n.Reuseport {
		listen += " reuseport"
	}
	p("        listen %s;", listen)
	switch {
	case n.LuaFile != "":
		p("        default_type text/plain;")
		p("        location / { content_by_lua_file %s; }", n.LuaFile)
	case n.Proxy != "":
		p("        location / {")
		p("            proxy_pass http://backend;")
		if n.ProxyKeepalive {
			p("            proxy_http_version 1.1;")
			p("            proxy_set_header Connection \"\";")
		}
		p("        }")
	case n.PHP != nil:
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
		p("            fastcgi_param REMOTE_ADDR $remote_addr;")
		p("        }")
	case n.BodyBytes > 0:
		page := filepath.Join(dir, "html")
		if err := os.MkdirAll(page, 0o755); err != nil {
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(page, "index.html"), []byte(strings.Repeat("x", n.BodyBytes)), 0o644); err != nil {
			return nil, err
		}
		for name, size := range n.Files {
			if filepath.Base(name) != name || name == "index.html" {
				return nil, fmt.Errorf("nginx file %q: want a plain name", name)
			}
			if err := os.WriteFile(filepath.Join(page, name), []byte(strings.Repeat("y", size)), 0o644); err != nil {
				return nil, err
			}
		}
		p("        root %s;", page)
	default:
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
	proc, err := e.Start(e.ServerNS, n.Name, bin, "-c", conf, "-p", dir)
	if err != nil {
		return nil, err
	}
	if err := e.WaitListening(ctx, proc, e.ServerNS, n.Listen); err != nil {
		return nil, err
	}
	return proc, nil
}

func (n *Nginx) keepalive() int {
	if n.Keepalive > 0 {
		return n.Keepalive
	}
	return 64
}

// nginxModules is where Debian's nginx keeps its dynamic modules.
const nginxModules = "/usr/lib/nginx/modules"

// ErrMissing reports a server binary that is not installed.
type ErrMissing struct{ Names []string }

func (e ErrMissing) Error() string {
	return fmt.Sprintf("%s not installed: run scripts/deps.sh", strings.Join(e.Names, " or "))
}

// FPMNames are the names php-fpm goes by: upstream's, and Debian's
// versioned ones (php-fpm8.2 in Debian 12, php-fpm8.4 in 13), newest
// first.
func FPMNames() []string {
	names := []string{"php-fpm"}
	found, _ := filepath.Glob("/usr/sbin/php-fpm[0-9]*")
	slices.Sort(found)
	for i := len(found) - 1; i >= 0; i-- {
		names = append(names, filepath.Base(found[i]))
	}
	return names
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
