package tune

import (
	"strings"
	"testing"
)

const nginxConf = `worker_processes 2;
events {
    worker_connections 1024;
}
http {
    tcp_nodelay off;
    upstream php {
        server 127.0.0.1:9000;
    }
    server {
        listen 10.0.0.1:80 reuseport;
        allow 10.0.0.0/8;
        deny all;
        location / { proxy_pass http://php; proxy_set_header Connection "close"; }
        proxy_set_header Host $host;
    }
}
`

const fpmConf = `[global]
error_log = /var/log/fpm.log
[www]
user = www-data
listen = 127.0.0.1:9000
pm = dynamic
pm.max_children = 5
`

// TestCheckEdits: the edits netdoctor makes are accepted, anything else
// in a plan's new content is refused with the line that is not one.
func TestCheckEdits(t *testing.T) {
	for _, c := range []struct {
		name, app, old string
		edit           func(string) string
		want           string // "" accepted; else a part of the error
	}{
		{"unchanged", "nginx", nginxConf, nil, ""},
		{"netdoctor's nginx edits", "nginx", nginxConf, func(s string) string {
			s = strings.Replace(s, "worker_processes 2;\n", "worker_processes 2;\nworker_rlimit_nofile 8192;\n", 1)
			s = strings.Replace(s, "worker_connections 1024;", "worker_connections 4096;", 1)
			s = strings.Replace(s, "tcp_nodelay off;", "tcp_nodelay on;", 1)
			s = strings.Replace(s, "127.0.0.1:9000;\n", "127.0.0.1:9000;\n        keepalive 32;\n", 1)
			s = strings.Replace(s, "listen 10.0.0.1:80 reuseport;", "listen 10.0.0.1:80 reuseport backlog=4096;", 1)
			return strings.Replace(s, `Connection "close";`, `Connection "";`, 1)
		}, ""},
		{"a module loaded", "nginx", nginxConf, func(s string) string { return "load_module /tmp/evil.so;\n" + s }, `line 1 "load_module /tmp/evil.so;": adds a line netdoctor does not add`},
		{"a line removed", "nginx", nginxConf, func(s string) string { return strings.Replace(s, "        deny all;\n", "", 1) }, "removes no line"},
		{"a line replaced", "nginx", nginxConf, func(s string) string { return strings.Replace(s, "deny all;", "allow all;", 1) }, `"allow all;": changes a line netdoctor does not edit`},
		{"a listen moved", "nginx", nginxConf, func(s string) string {
			return strings.Replace(s, "listen 10.0.0.1:80 reuseport;", "listen 0.0.0.0:80 reuseport backlog=4096;", 1)
		}, "changes more than the backlog"},
		{"a backlog past its bound", "nginx", nginxConf, func(s string) string {
			return strings.Replace(s, "listen 10.0.0.1:80 reuseport;", "listen 10.0.0.1:80 reuseport backlog=100000;", 1)
		}, `"100000" is outside netdoctor's bounds 511–65535`},
		{"keepalive past its bound", "nginx", nginxConf, func(s string) string {
			return strings.Replace(s, "127.0.0.1:9000;\n", "127.0.0.1:9000;\n        keepalive 100000;\n", 1)
		}, "outside netdoctor's bounds 16–128"},
		{"worker_connections lowered", "nginx", nginxConf, func(s string) string {
			return strings.Replace(s, "worker_connections 1024;", "worker_connections 16;", 1)
		}, "would lower 1024"},
		{"another header replaced", "nginx", nginxConf, func(s string) string {
			return strings.Replace(s, `proxy_set_header Host $host;`, `proxy_set_header Connection "";`, 1)
		}, "not the Connection header"},
		{"a directive smuggled in an argument", "nginx", nginxConf, func(s string) string {
			return strings.Replace(s, "tcp_nodelay off;", "tcp_nodelay on; include /tmp/x.conf;", 1)
		}, "changes a line netdoctor does not edit"},
		{"two directives inserted on a line", "nginx", nginxConf, func(s string) string {
			return strings.Replace(s, "127.0.0.1:9000;\n", "127.0.0.1:9000;\n        keepalive 32; include /tmp/x.conf;\n", 1)
		}, "not one `keepalive …;` directive"},
		{"netdoctor's pool edits", "php-fpm", fpmConf, func(s string) string {
			s = strings.Replace(s, "pm = dynamic", "pm = static", 1)
			s = strings.Replace(s, "pm.max_children = 5", "pm.max_children = 226", 1)
			return s + "listen.backlog = 4096\n"
		}, ""},
		{"the pool's user", "php-fpm", fpmConf, func(s string) string { return strings.Replace(s, "user = www-data", "user = root", 1) }, "user is not a pool setting netdoctor sets"},
		{"a script prepended", "php-fpm", fpmConf, func(s string) string { return s + "php_admin_value[auto_prepend_file] = /tmp/x.php\n" }, "adds a line netdoctor does not add"},
		{"a pool too large", "php-fpm", fpmConf, func(s string) string {
			return strings.Replace(s, "pm.max_children = 5", "pm.max_children = 1000000", 1)
		}, "outside netdoctor's bounds"},
		{"pm ondemand", "php-fpm", fpmConf, func(s string) string { return strings.Replace(s, "pm = dynamic", "pm = ondemand", 1) }, `netdoctor only sets "static"`},
		{"another application", "redis", "x\n", func(s string) string { return s + "y\n" }, "does not edit"},
	} {
		content := c.old
		if c.edit != nil {
			content = c.edit(c.old)
		}
		err := checkEdits(c.app, []byte(c.old), []byte(content))
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v, want accepted", c.name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: %v, want refused with %q", c.name, err, c.want)
		}
	}
}

// TestCheckEditsBuilt: a plan being built may lower a limit (its report
// is older than the file), which apply then refuses.
func TestCheckEditsBuilt(t *testing.T) {
	lowered := strings.Replace(nginxConf, "worker_connections 1024;", "worker_connections 512;", 1)
	if err := checkBuilt("nginx", []byte(nginxConf), []byte(lowered)); err != nil {
		t.Errorf("checkBuilt: %v", err)
	}
	if err := checkEdits("nginx", []byte(nginxConf), []byte(lowered)); err == nil {
		t.Errorf("checkEdits accepted a lowered worker_connections")
	}
}
