package nginx

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const appDir = "/tmp/netdoctor-nginx-app/"

func at(file string, line int) Pos { return Pos{File: appDir + file, Line: line} }

func inLocation(s Scope, location string) Scope {
	s.Location = location
	return s
}

// passLines prints each pass on one line with what decides its
// keepalive, so that tables of them stay readable.
func passLines(passes []Pass) []string {
	var out []string
	for _, p := range passes {
		l := fmt.Sprintf("%s %q %s -> %s", strings.TrimPrefix(p.Pos.String(), appDir), p.Location, p.Directive, p.Target)
		if p.Upstream != "" {
			l += fmt.Sprintf(" upstream=%s keepalive=%d", p.Upstream, p.UpstreamKeepalive)
		}
		if p.Directive == "proxy_pass" && !p.Stream {
			l += fmt.Sprintf(" http=%s@%s", p.HTTPVersion.Value, strings.TrimPrefix(p.HTTPVersion.Pos.String(), appDir))
			if p.Connection == nil {
				l += " connection=none"
			} else {
				l += fmt.Sprintf(" connection=%q@%s", p.Connection.Value, strings.TrimPrefix(p.Connection.Pos.String(), appDir))
			}
			if p.ConnectionClose {
				l += " close"
			}
		}
		if p.Directive == "fastcgi_pass" {
			l += fmt.Sprintf(" keep_conn=%s@%s", p.KeepConn.Value, strings.TrimPrefix(p.KeepConn.Pos.String(), appDir))
		}
		out = append(out, fmt.Sprintf("%s: %v", l, p.Keepalive))
	}
	return out
}

func TestSummaryApp(t *testing.T) {
	s := parseFixture(t, "app.dump").Summary(Build{Prefix: appDir})

	settings := []Setting{s.WorkerProcesses, s.WorkerConnections, s.WorkerRlimitNofile}
	wantSettings := []Setting{
		{Value: "4", N: 4, Pos: at("nginx.conf", 3)},
		{Value: "1024", N: 1024, Pos: at("nginx.conf", 9)},
		{Value: "8192", N: 8192, Pos: at("nginx.conf", 4)},
	}
	if diff := cmp.Diff(wantSettings, settings); diff != "" {
		t.Errorf("worker settings mismatch (-want +got):\n%s", diff)
	}

	api := Scope{Server: at("conf.d/api.conf", 1), ServerNames: []string{"api.example.com"}}
	php := Scope{Server: at("conf.d/php.conf", 1), ServerNames: []string{"php.example.com", "www.php.example.com"}}
	inherit := Scope{Server: at("conf.d/zz-inherit.conf", 1), ServerNames: []string{"inherit.example.com"}}
	noListen := Scope{Server: at("conf.d/zz-inherit.conf", 24), ServerNames: []string{"default-listen.example.com"}}
	wantListens := []Listen{
		{Scope: api, Addr: "127.0.0.1:18080", HostPort: "127.0.0.1:18080", Backlog: 4096, Params: []string{"default_server"}, Pos: at("conf.d/api.conf", 2)},
		{Scope: api, Addr: "[::1]:18080", HostPort: "[::1]:18080", Backlog: 4096, Pos: at("conf.d/api.conf", 3)},
		{Scope: php, Addr: "18081", HostPort: "0.0.0.0:18081", Backlog: -1, Pos: at("conf.d/php.conf", 2)},
		{Scope: inherit, Addr: "127.0.0.1:18082", HostPort: "127.0.0.1:18082", Backlog: -1, Pos: at("conf.d/zz-inherit.conf", 2)},
		{Scope: noListen, HostPort: "0.0.0.0:80", Backlog: -1},
	}
	if diff := cmp.Diff(wantListens, s.Listens); diff != "" {
		t.Errorf("Listens mismatch (-want +got):\n%s", diff)
	}

	// php.conf's server-level off reaches every location but /status,
	// which turns it back on.
	serverOff := at("conf.d/php.conf", 5)
	wantOff := []NodelayOff{
		{Scope: inLocation(api, "/stream/"), Pos: at("conf.d/api.conf", 24)},
		{Scope: php, Pos: serverOff},
		{Scope: inLocation(php, `~ \.php$`), Pos: serverOff},
		{Scope: inLocation(php, "/grpc"), Pos: serverOff},
		{Scope: inLocation(php, "/uwsgi"), Pos: serverOff},
	}
	if diff := cmp.Diff(wantOff, s.NodelayOff); diff != "" {
		t.Errorf("NodelayOff mismatch (-want +got):\n%s", diff)
	}

	wantUpstreams := []Upstream{
		{Name: "backend", Servers: []UpstreamServer{
			{Addr: "127.0.0.1:9001", Params: []string{"max_fails=3"}, Pos: at("nginx.conf", 27)},
			{Addr: "127.0.0.1:9002", Pos: at("nginx.conf", 28)},
		}, Keepalive: 32, KeepalivePos: at("nginx.conf", 29), Pos: at("nginx.conf", 26)},
		{Name: "legacy", Servers: []UpstreamServer{
			{Addr: "unix:/run/legacy.sock", Pos: at("nginx.conf", 33)},
			{Addr: "localhost:8080", Params: []string{"backup"}, Pos: at("nginx.conf", 34)},
		}, Pos: at("nginx.conf", 32)},
		{Name: "php", Servers: []UpstreamServer{
			{Addr: "unix:/run/php/php-fpm.sock", Pos: at("nginx.conf", 38)},
		}, Keepalive: 8, KeepalivePos: at("nginx.conf", 39), Pos: at("nginx.conf", 37)},
	}
	if diff := cmp.Diff(wantUpstreams, s.Upstreams); diff != "" {
		t.Errorf("Upstreams mismatch (-want +got):\n%s", diff)
	}

	wantPasses := []string{
		`conf.d/api.conf:7 "/v1/" proxy_pass -> backend upstream=backend keepalive=32 http=1.1@conf.d/api.conf:8 connection=""@conf.d/api.conf:9: true`,
		// The http level's proxy_set_header X-Forwarded-For has no Connection.
		`conf.d/api.conf:13 "/legacy/" proxy_pass -> legacy upstream=legacy keepalive=0 http=1.0@default connection=none close: false`,
		// $connection_upgrade is "close" for a request without Upgrade.
		`conf.d/api.conf:17 "/ws/" proxy_pass -> backend upstream=backend keepalive=32 http=1.1@conf.d/api.conf:18 connection="$connection_upgrade"@conf.d/api.conf:20 close: false`,
		`conf.d/api.conf:25 "/stream/" proxy_pass -> 127.0.0.1:9100 http=1.0@default connection=none close: false`,
		`conf.d/php.conf:11 "~ \\.php$" fastcgi_pass -> php upstream=php keepalive=8 keep_conn=on@conf.d/php.conf:12: true`,
		`conf.d/php.conf:18 "/status" fastcgi_pass -> unix:/run/php/php-fpm.sock keep_conn=off@default: false`,
		`conf.d/php.conf:22 "/grpc" grpc_pass -> backend upstream=backend keepalive=32: true`,
		`conf.d/php.conf:26 "/uwsgi" uwsgi_pass -> 127.0.0.1:3031: false`,
		// The server's settings reach its locations ...
		`conf.d/zz-inherit.conf:9 "/" proxy_pass -> backend upstream=backend keepalive=32 http=1.1@conf.d/zz-inherit.conf:4 connection=""@conf.d/zz-inherit.conf:5: true`,
		// ... but one proxy_set_header drops all the inherited ones ...
		`conf.d/zz-inherit.conf:14 "/override/" proxy_pass -> backend upstream=backend keepalive=32 http=1.1@conf.d/zz-inherit.conf:4 connection=none close: false`,
		// ... and they pass through a location into one nested in it;
		// upstream names match without regard to case.
		`conf.d/zz-inherit.conf:19 "/nested/deeper/" proxy_pass -> backend upstream=backend keepalive=32 http=1.1@conf.d/zz-inherit.conf:4 connection=""@conf.d/zz-inherit.conf:5: true`,
	}
	if diff := cmp.Diff(wantPasses, passLines(s.Passes)); diff != "" {
		t.Errorf("Passes mismatch (-want +got):\n%s", diff)
	}

	mainFormat := `$remote_addr - [$time_local] "$request" $status $body_bytes_sent $request_time`
	timingFormat := `{"rt":"$request_time","urt":"$upstream_response_time"}`
	wantErrorLogs := []ErrorLog{
		{Path: "logs/error.log", File: appDir + "logs/error.log", Level: "warn", Pos: at("nginx.conf", 5)},
		{Scope: php, Path: "stderr", Level: "error", Pos: at("conf.d/php.conf", 7)},
	}
	if diff := cmp.Diff(wantErrorLogs, s.ErrorLogs); diff != "" {
		t.Errorf("ErrorLogs mismatch (-want +got):\n%s", diff)
	}
	// Every server inherits an access_log, so the compiled-in one is unused.
	wantAccessLogs := []AccessLog{
		{Path: "logs/access.log", File: appDir + "logs/access.log", Format: "main", FormatString: mainFormat, Pos: at("nginx.conf", 20)},
		{Scope: php, Path: "logs/php.access.log", File: appDir + "logs/php.access.log", Format: "timing", FormatString: timingFormat,
			Params: []string{"buffer=32k"}, Pos: at("conf.d/php.conf", 6)},
		{Scope: inherit, Path: "off", Off: true, Pos: at("conf.d/zz-inherit.conf", 6)},
	}
	if diff := cmp.Diff(wantAccessLogs, s.AccessLogs); diff != "" {
		t.Errorf("AccessLogs mismatch (-want +got):\n%s", diff)
	}
	wantFormats := []LogFormat{
		{Name: "combined", Format: combinedFormat},
		{Name: "main", Format: mainFormat, Pos: at("nginx.conf", 16)},
		{Name: "timing", Escape: "json", Format: timingFormat, Pos: at("nginx.conf", 18)},
	}
	if diff := cmp.Diff(wantFormats, s.LogFormats); diff != "" {
		t.Errorf("LogFormats mismatch (-want +got):\n%s", diff)
	}
}

func TestSummaryDebian(t *testing.T) {
	b := ParseBuild(readFixture(t, "debian-V.txt"))
	wantBuild := Build{
		Version:      "1.22.1",
		Prefix:       "/usr/share/nginx",
		ConfPath:     "/etc/nginx/nginx.conf",
		ErrorLogPath: "stderr",
		HTTPLogPath:  "/var/log/nginx/access.log",
	}
	if diff := cmp.Diff(wantBuild, b); diff != "" {
		t.Errorf("ParseBuild mismatch (-want +got):\n%s", diff)
	}

	s := parseFixture(t, "debian.dump").Summary(b)
	def := Scope{Server: Pos{"/etc/nginx/sites-enabled/default", 21}, ServerNames: []string{"_"}}
	want := Summary{
		WorkerProcesses:    Setting{Value: "auto", N: -1, Pos: Pos{"/etc/nginx/nginx.conf", 2}},
		WorkerConnections:  Setting{Value: "768", N: 768, Pos: Pos{"/etc/nginx/nginx.conf", 8}},
		WorkerRlimitNofile: Setting{Value: "", N: -1},
		Listens: []Listen{
			{Scope: def, Addr: "80", HostPort: "0.0.0.0:80", Backlog: -1, Params: []string{"default_server"}, Pos: Pos{"/etc/nginx/sites-enabled/default", 22}},
			{Scope: def, Addr: "[::]:80", HostPort: "[::]:80", Backlog: -1, Params: []string{"default_server"}, Pos: Pos{"/etc/nginx/sites-enabled/default", 23}},
		},
		ErrorLogs: []ErrorLog{
			{Path: "/var/log/nginx/error.log", File: "/var/log/nginx/error.log", Level: "error", Pos: Pos{"/etc/nginx/nginx.conf", 4}},
		},
		AccessLogs: []AccessLog{
			{Path: "/var/log/nginx/access.log", File: "/var/log/nginx/access.log", Format: "combined", FormatString: combinedFormat, Pos: Pos{"/etc/nginx/nginx.conf", 40}},
		},
		LogFormats: []LogFormat{{Name: "combined", Format: combinedFormat}},
	}
	if diff := cmp.Diff(want, s); diff != "" {
		t.Errorf("Summary mismatch (-want +got):\n%s", diff)
	}
}

func dumpOf(files ...string) []byte {
	var b strings.Builder
	for i := 0; i+1 < len(files); i += 2 {
		fmt.Fprintf(&b, "# configuration file %s:\n%s\n", files[i], files[i+1])
	}
	return []byte(b.String())
}

func summarize(t *testing.T, b Build, files ...string) Summary {
	t.Helper()
	c, err := Parse(dumpOf(files...))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return c.Summary(b)
}

func TestSummaryDefaults(t *testing.T) {
	s := summarize(t, Build{}, "/etc/nginx/nginx.conf", `
events {}
http {
    server {
        location / { proxy_pass http://127.0.0.1:8080; }
        location /fcgi { fastcgi_pass 127.0.0.1:9000; }
    }
}`)
	sc := Scope{Server: Pos{"/etc/nginx/nginx.conf", 4}}
	want := Summary{
		WorkerProcesses:    Setting{Value: "1", N: 1},
		WorkerConnections:  Setting{Value: "512", N: 512},
		WorkerRlimitNofile: Setting{Value: "", N: -1},
		Listens:            []Listen{{Scope: sc, HostPort: "0.0.0.0:80", Backlog: -1}},
		Passes: []Pass{
			{Scope: inLocation(sc, "/"), Directive: "proxy_pass", Arg: "http://127.0.0.1:8080", Target: "127.0.0.1:8080",
				HTTPVersion: Setting{Value: "1.0", N: -1}, ConnectionClose: true, Pos: Pos{"/etc/nginx/nginx.conf", 5}},
			{Scope: inLocation(sc, "/fcgi"), Directive: "fastcgi_pass", Arg: "127.0.0.1:9000", Target: "127.0.0.1:9000",
				KeepConn: Setting{Value: "off", N: -1}, Pos: Pos{"/etc/nginx/nginx.conf", 6}},
		},
		ErrorLogs:  []ErrorLog{{Path: "logs/error.log", File: "/usr/local/nginx/logs/error.log", Level: "error"}},
		AccessLogs: []AccessLog{{Path: "logs/access.log", File: "/usr/local/nginx/logs/access.log", Format: "combined", FormatString: combinedFormat}},
		LogFormats: []LogFormat{{Name: "combined", Format: combinedFormat}},
	}
	if diff := cmp.Diff(want, s); diff != "" {
		t.Errorf("Summary mismatch (-want +got):\n%s", diff)
	}
}

func TestSummaryInheritance(t *testing.T) {
	s := summarize(t, Build{Prefix: "/srv/"}, appDir+"n.conf", `
http {
    tcp_nodelay off;
    proxy_http_version 1.1;
    proxy_set_header Connection "";
    access_log /var/log/a.log;
    server {
        listen 8080;
        location /a {
            proxy_pass http://UP/a;
        }
        location /b {
            tcp_nodelay on;
            proxy_set_header X-B b;
            access_log logs/b.log;
            if ($arg_x) {
                proxy_pass http://up;
            }
        }
        location /c {
            proxy_set_header Connection close;
            proxy_pass http://up;
        }
        location /d {
            proxy_set_header Connection keep-alive;
            proxy_pass http://up:8080;
        }
        location /e {
            proxy_set_header Connection $conn_default_close;
            proxy_pass https://up;
        }
        location /f {
            proxy_set_header Connection $conn_other;
            proxy_pass http://$backend;
        }
        location /g {
            proxy_pass http://unix:/run/app.sock:/g/;
        }
        location /h {
            proxy_set_header Connection $conn_default_close;
            proxy_pass https://other;
        }
    }
    map $http_upgrade $conn_default_close { default close; websocket upgrade; }
    map $http_x $conn_other { default close; }
    upstream up { server 127.0.0.1:1; keepalive 4; }
}`)
	wantPasses := []string{
		`n.conf:10 "/a" proxy_pass -> up upstream=up keepalive=4 http=1.1@n.conf:4 connection=""@n.conf:5: true`,
		// An if block takes its location's settings.
		`n.conf:17 "/b" proxy_pass -> up upstream=up keepalive=4 http=1.1@n.conf:4 connection=none close: false`,
		`n.conf:22 "/c" proxy_pass -> up upstream=up keepalive=4 http=1.1@n.conf:4 connection="close"@n.conf:21 close: false`,
		// With a port the name is a host, not the upstream.
		`n.conf:26 "/d" proxy_pass -> up:8080 http=1.1@n.conf:4 connection="keep-alive"@n.conf:25: false`,
		`n.conf:30 "/e" proxy_pass -> up upstream=up keepalive=4 http=1.1@n.conf:4 connection="$conn_default_close"@n.conf:29 close: false`,
		// A map on another variable cannot be decided: taken as not close.
		`n.conf:34 "/f" proxy_pass -> http://$backend http=1.1@n.conf:4 connection="$conn_other"@n.conf:33: false`,
		`n.conf:37 "/g" proxy_pass -> unix:/run/app.sock http=1.1@n.conf:4 connection=""@n.conf:5: false`,
		`n.conf:41 "/h" proxy_pass -> other:443 http=1.1@n.conf:4 connection="$conn_default_close"@n.conf:40 close: false`,
	}
	if diff := cmp.Diff(wantPasses, passLines(s.Passes)); diff != "" {
		t.Errorf("Passes mismatch (-want +got):\n%s", diff)
	}
	var off []string
	for _, o := range s.NodelayOff {
		off = append(off, fmt.Sprintf("%q %s", o.Location, strings.TrimPrefix(o.Pos.String(), appDir)))
	}
	wantOff := []string{`"" n.conf:3`, `"/a" n.conf:3`, `"/c" n.conf:3`, `"/d" n.conf:3`, `"/e" n.conf:3`, `"/f" n.conf:3`, `"/g" n.conf:3`, `"/h" n.conf:3`}
	if diff := cmp.Diff(wantOff, off); diff != "" {
		t.Errorf("NodelayOff mismatch (-want +got):\n%s", diff)
	}
	var logs []string
	for _, a := range s.AccessLogs {
		logs = append(logs, fmt.Sprintf("%q %s %s", a.Location, a.File, a.Format))
	}
	wantLogs := []string{`"" /var/log/a.log combined`, `"/b" /srv/logs/b.log combined`}
	if diff := cmp.Diff(wantLogs, logs); diff != "" {
		t.Errorf("AccessLogs mismatch (-want +got):\n%s", diff)
	}
}

// The /f case above: with a variable in the Connection value that no map
// on $http_upgrade sets, Keepalive trusts the configuration.
func TestSummaryConnectionVariable(t *testing.T) {
	s := summarize(t, Build{}, "/n.conf", `
http {
    map $http_x $conn { default close; }
    map $http_upgrade $conn_up { '' ''; default upgrade; }
    upstream up { server 127.0.0.1:1; keepalive 4; }
    server {
        proxy_http_version 1.1;
        location /x { proxy_set_header Connection $conn; proxy_pass http://up; }
        location /y { proxy_set_header Connection $conn_up; proxy_pass http://up; }
    }
}`)
	for _, p := range s.Passes {
		if !p.Keepalive {
			t.Errorf("%s: Keepalive false, want true for Connection %q", p.Location, p.Connection.Value)
		}
	}
}

func TestSummaryStream(t *testing.T) {
	s := summarize(t, Build{Prefix: "/srv/"}, "/s.conf", `
stream {
    log_format s '$remote_addr $upstream_addr';
    upstream db { server 127.0.0.1:5432; }
    server {
        listen 127.0.0.1:15432 backlog=128 reuseport;
        tcp_nodelay off;
        access_log logs/s.log s;
        proxy_pass db;
    }
    server {
        listen 5433;
        proxy_pass unix:/run/pg.sock;
    }
}`)
	sc := Scope{Stream: true, Server: Pos{"/s.conf", 5}}
	sc2 := Scope{Stream: true, Server: Pos{"/s.conf", 11}}
	want := Summary{
		WorkerProcesses:    Setting{Value: "1", N: 1},
		WorkerConnections:  Setting{Value: "512", N: 512},
		WorkerRlimitNofile: Setting{Value: "", N: -1},
		Listens: []Listen{
			{Scope: sc, Addr: "127.0.0.1:15432", HostPort: "127.0.0.1:15432", Backlog: 128, Params: []string{"reuseport"}, Pos: Pos{"/s.conf", 6}},
			{Scope: sc2, Addr: "5433", HostPort: "0.0.0.0:5433", Backlog: -1, Pos: Pos{"/s.conf", 12}},
		},
		NodelayOff: []NodelayOff{{Scope: sc, Pos: Pos{"/s.conf", 7}}},
		Upstreams:  []Upstream{{Stream: true, Name: "db", Servers: []UpstreamServer{{Addr: "127.0.0.1:5432", Pos: Pos{"/s.conf", 4}}}, Pos: Pos{"/s.conf", 4}}},
		Passes: []Pass{
			{Scope: sc, Directive: "proxy_pass", Arg: "db", Target: "db", Upstream: "db", Pos: Pos{"/s.conf", 9}},
			{Scope: sc2, Directive: "proxy_pass", Arg: "unix:/run/pg.sock", Target: "unix:/run/pg.sock", Pos: Pos{"/s.conf", 13}},
		},
		ErrorLogs: []ErrorLog{{Path: "logs/error.log", File: "/srv/logs/error.log", Level: "error"}},
		// A stream server without access_log logs nothing.
		AccessLogs: []AccessLog{{Scope: sc, Path: "logs/s.log", File: "/srv/logs/s.log", Format: "s", FormatString: "$remote_addr $upstream_addr", Pos: Pos{"/s.conf", 8}}},
		LogFormats: []LogFormat{{Stream: true, Name: "s", Format: "$remote_addr $upstream_addr", Pos: Pos{"/s.conf", 3}}},
	}
	if diff := cmp.Diff(want, s); diff != "" {
		t.Errorf("Summary mismatch (-want +got):\n%s", diff)
	}
}

func TestSummaryLogPaths(t *testing.T) {
	s := summarize(t, Build{Prefix: "/opt/nginx/", HTTPLogPath: "/var/log/nginx/access.log", ErrorLogPath: "stderr"}, "/n.conf", `
error_log syslog:server=unix:/dev/log;
error_log memory:32m debug;
error_log off;
http {
    server {
        access_log syslog:server=127.0.0.1 combined;
        access_log logs/$host.log;
        location /x { }
    }
    server {
        listen 81;
    }
}`)
	var got []string
	for _, e := range s.ErrorLogs {
		got = append(got, fmt.Sprintf("error %s file=%q %s %s", e.Path, e.File, e.Level, e.Pos))
	}
	for _, a := range s.AccessLogs {
		got = append(got, fmt.Sprintf("access %s file=%q %s %s", a.Path, a.File, a.Format, a.Pos))
	}
	want := []string{
		`error syslog:server=unix:/dev/log file="" error /n.conf:2`,
		`error memory:32m file="" debug /n.conf:3`,
		// nginx has no way to turn the error log off: this is a file.
		`error off file="/opt/nginx/off" error /n.conf:4`,
		`access syslog:server=127.0.0.1 file="" combined /n.conf:7`,
		`access logs/$host.log file="/opt/nginx/logs/$host.log" combined /n.conf:8`,
		// The second server logs to the compiled-in access log.
		`access /var/log/nginx/access.log file="/var/log/nginx/access.log" combined default`,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("logs mismatch (-want +got):\n%s", diff)
	}
}

func TestHostPort(t *testing.T) {
	tests := map[string]string{
		"80":                "0.0.0.0:80",
		"*:8080":            "0.0.0.0:8080",
		"*":                 "0.0.0.0:80",
		"127.0.0.1":         "127.0.0.1:80",
		"127.0.0.1:8080":    "127.0.0.1:8080",
		"[::]:80":           "[::]:80",
		"[::]":              "[::]:80",
		"[0:0::1]:443":      "[::1]:443",
		"[::ffff:10.0.0.1]": "[::ffff:10.0.0.1]:80",
		"localhost:8080":    "localhost:8080",
		"example.com":       "example.com:80",
		"unix:/run/a.sock":  "unix:/run/a.sock",
		"[::1":              "[::1",
	}
	for in, want := range tests {
		if got := hostPort(in, "80"); got != want {
			t.Errorf("hostPort(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestPassTarget(t *testing.T) {
	tests := []struct {
		directive, arg   string
		stream           bool
		target, upstream string
	}{
		{"proxy_pass", "http://backend", false, "backend:80", "backend"},
		{"proxy_pass", "HTTPS://Backend/x?y", false, "Backend:443", "Backend"},
		{"proxy_pass", "http://10.0.0.1:8080/api/", false, "10.0.0.1:8080", ""},
		{"proxy_pass", "http://[::1]:8080", false, "[::1]:8080", ""},
		{"proxy_pass", "http://unix:/run/a.sock:/x/", false, "unix:/run/a.sock", ""},
		{"proxy_pass", "http://$up", false, "http://$up", ""},
		{"fastcgi_pass", "php", false, "php", "php"},
		{"fastcgi_pass", "localhost:9000", false, "localhost:9000", ""},
		{"fastcgi_pass", "unix:/run/php/fpm:x.sock", false, "unix:/run/php/fpm:x.sock", ""},
		{"grpc_pass", "grpcs://api", false, "api:443", "api"},
		{"grpc_pass", "127.0.0.1:50051", false, "127.0.0.1:50051", ""},
		{"uwsgi_pass", "uwsgi://127.0.0.1:3031", false, "127.0.0.1:3031", ""},
		{"scgi_pass", "unix:/run/scgi", false, "unix:/run/scgi", ""},
		{"proxy_pass", "db", true, "db", "db"},
		{"proxy_pass", "10.0.0.1:5432", true, "10.0.0.1:5432", ""},
	}
	for _, tt := range tests {
		target, upstream := passTarget(tt.directive, tt.arg, tt.stream)
		if target != tt.target || upstream != tt.upstream {
			t.Errorf("passTarget(%s, %q, stream %v) = %q, %q; want %q, %q", tt.directive, tt.arg, tt.stream, target, upstream, tt.target, tt.upstream)
		}
	}
}

func TestParseBuildDefaults(t *testing.T) {
	got := ParseBuild([]byte("nginx version: nginx/1.25.3 (Ubuntu)\nconfigure arguments: --with-cc-opt='-O2 -g' --error-log-path= --with-debug\n"))
	want := Build{Version: "1.25.3", Prefix: "/usr/local/nginx/", ConfPath: "conf/nginx.conf", ErrorLogPath: "stderr", HTTPLogPath: "logs/access.log"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ParseBuild mismatch (-want +got):\n%s", diff)
	}
	with := got.With(Invocation{Prefix: "/srv/", ErrorLog: "/tmp/e.log", Conf: "/srv/n.conf"})
	want = Build{Version: "1.25.3", Prefix: "/srv/", ConfPath: "/srv/n.conf", ErrorLogPath: "/tmp/e.log", HTTPLogPath: "logs/access.log"}
	if diff := cmp.Diff(want, with); diff != "" {
		t.Errorf("Build.With mismatch (-want +got):\n%s", diff)
	}
}
