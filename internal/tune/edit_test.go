package tune

import (
	"strings"
	"testing"
)

func TestNginxEdits(t *testing.T) {
	for _, c := range []struct {
		line string
		f    func(string) (string, error)
		want string // "" for an error
	}{
		{"        listen 80;", nginxListenBacklog(512), "        listen 80 backlog=512;"},
		{"\tlisten 10.0.0.1:80 default_server backlog=100 reuseport;", nginxListenBacklog(4096), "\tlisten 10.0.0.1:80 default_server backlog=4096 reuseport;"},
		{"server { listen 80; server_name x; }", nginxListenBacklog(512), "server { listen 80 backlog=512; server_name x; }"},
		{"    listen", nginxListenBacklog(512), ""},                                   // continues on the next line
		{"    # listen 80;", nginxListenBacklog(512), "    # listen 80 backlog=512;"}, // comments are not parsed: the plan points only at directives nginx read
		{"    tcp_nodelay off;", setNginxArgs("tcp_nodelay", "on"), "    tcp_nodelay on;"},
		{"    sendfile on; tcp_nodelay off; # x", setNginxArgs("tcp_nodelay", "on"), "    sendfile on; tcp_nodelay on; # x"},
		{"    proxy_set_header Connection close;", setNginxArgs("proxy_set_header", `Connection ""`), `    proxy_set_header Connection "";`},
		{"    worker_connections 1024;", setNginxArgs("worker_connections", "8192"), "    worker_connections 8192;"},
		{"    my_worker_connections 1024;", setNginxArgs("worker_connections", "8192"), ""},
		{"pm.max_children = 5", setINI("pm.max_children", "226"), "pm.max_children = 226"},
		{"  pm.max_children=5 ; old", setINI("pm.max_children", "226"), "  pm.max_children = 226"},
		{"pm = dynamic", setINI("pm.max_children", "226"), ""},
	} {
		got, err := c.f(c.line)
		if c.want == "" {
			if err == nil {
				t.Errorf("%q: %q, want an error", c.line, got)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%q: %q, %v; want %q", c.line, got, err, c.want)
		}
	}
}

func TestFileEdits(t *testing.T) {
	old := "http {\n    upstream php {\n        server 127.0.0.1:9000;\n    }\n    location / {\n        fastcgi_pass php;\n    }\n}" // no final newline
	fe := &fileEdits{path: "/etc/nginx/nginx.conf", old: []byte(old), edits: []edit{
		{line: 6, after: []string{"fastcgi_keep_conn on;"}},
		{line: 2, after: []string{"keepalive 32;"}, inside: true},
		{line: 8, after: []string{"# end"}},
		{line: 6, replace: setNginxArgs("fastcgi_pass", "php2")},
	}}
	got, err := fe.apply()
	if err != nil {
		t.Fatal(err)
	}
	want := "http {\n    upstream php {\n        keepalive 32;\n        server 127.0.0.1:9000;\n    }\n    location / {\n        fastcgi_pass php2;\n        fastcgi_keep_conn on;\n    }\n}\n# end\n"
	if string(got) != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	f, err := fe.file()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(f.Diff, "+        keepalive 32;") || !strings.HasPrefix(f.Diff, "--- a/etc/nginx/nginx.conf\n+++ b/etc/nginx/nginx.conf\n") {
		t.Errorf("diff:\n%s", f.Diff)
	}
	fe.edits = []edit{{line: 9}}
	if _, err := fe.apply(); err == nil {
		t.Error("an edit past the end: accepted")
	}
	tabs := "upstream x {\n\tserver a;\n}\n"
	fe = &fileEdits{old: []byte(tabs), edits: []edit{{line: 1, after: []string{"keepalive 16;"}, inside: true}}}
	if got, _ := fe.apply(); string(got) != "upstream x {\n\tkeepalive 16;\n\tserver a;\n}\n" {
		t.Errorf("tab-indented file: %q", got)
	}
}

func TestINIKeyLine(t *testing.T) {
	text := []byte("[global]\npid = /run/x.pid\n; pm = static\n[www]\nlisten = 9000\npm = dynamic\n[other]\npm = static\n")
	for _, c := range []struct {
		pool, key string
		want      int
	}{{"www", "pm", 6}, {"other", "pm", 8}, {"www", "pid", 0}, {"global", "pid", 2}, {"www", "listen.backlog", 0}} {
		if got := iniKeyLine(text, c.pool, c.key); got != c.want {
			t.Errorf("%s %s: line %d, want %d", c.pool, c.key, got, c.want)
		}
	}
}

func TestPositions(t *testing.T) {
	if f, l, ok := source("/etc/nginx/conf.d/a.conf:12"); !ok || f != "/etc/nginx/conf.d/a.conf" || l != 12 {
		t.Errorf("%s %d %v", f, l, ok)
	}
	if _, _, ok := source("default"); ok {
		t.Error("default taken for a source")
	}
	for _, c := range []struct {
		a, b string
		want bool
	}{{"10000 65535", "32768 60999", true}, {"20000 20050", "32768 60999", false}, {"4096", "128", true}, {"128", "4096", false}} {
		if larger(c.a, c.b) != c.want {
			t.Errorf("larger(%q, %q) != %v", c.a, c.b, c.want)
		}
	}
}
