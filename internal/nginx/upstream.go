package nginx

import (
	"net"
	"net/netip"
	"strconv"
	"strings"
)

// DefaultBacklog is the listen backlog nginx asks for on Linux when a
// listen has no backlog= (NGX_LISTEN_BACKLOG); the kernel caps it at
// net.core.somaxconn.
const DefaultBacklog = 511

// Listen is one listening address of a server.
type Listen struct {
	Scope
	// Addr is the address as written: "80", "[::]:80", "127.0.0.1:8080",
	// "unix:/run/app.sock"; "" for the listen nginx adds to an http server
	// without one.
	Addr string
	// HostPort is Addr in one form for every spelling: "0.0.0.0:80",
	// "[::]:80", "127.0.0.1:8080", "localhost:8080", "unix:/run/app.sock".
	HostPort string
	// Backlog is the backlog= value, or -1 when nginx uses DefaultBacklog.
	Backlog int
	// Params are the parameters after the address other than backlog=:
	// default_server, reuseport, deferred, ssl, ...
	Params []string
	// Pos is zero for the listen nginx adds.
	Pos Pos
}

// listens adds the listens of the server block list.
func (w *walker) listens(list []*Directive, sc Scope) {
	n := 0
	for _, d := range list {
		if d.Name != "listen" {
			continue
		}
		n++
		l := Listen{Scope: sc, Addr: d.Arg(0), HostPort: hostPort(d.Arg(0), "80"), Backlog: -1, Pos: d.Pos()}
		for _, p := range d.Args[min(1, len(d.Args)):] {
			if v, ok := strings.CutPrefix(p, "backlog="); ok {
				l.Backlog = int(number(v))
				continue
			}
			l.Params = append(l.Params, p)
		}
		w.s.Listens = append(w.s.Listens, l)
	}
	if n == 0 && !sc.Stream {
		// nginx listens on *:80 for a server without listen, or on *:8000
		// when the master does not run as root, which it assumes it does.
		w.s.Listens = append(w.s.Listens, Listen{Scope: sc, HostPort: "0.0.0.0:80", Backlog: -1})
	}
}

// hostPort puts an address as nginx's ngx_parse_url reads it in one form:
// a lone number is a port on every address, a lone host takes the default
// port, and "*" is every IPv4 address.
func hostPort(addr, defaultPort string) string {
	if strings.HasPrefix(addr, "unix:") {
		return addr
	}
	host, port := addr, defaultPort
	switch {
	case strings.HasPrefix(addr, "["):
		end := strings.IndexByte(addr, ']')
		if end < 0 {
			return addr
		}
		host = addr[1:end]
		if p, ok := strings.CutPrefix(addr[end+1:], ":"); ok {
			port = p
		}
	case isPort(addr):
		host, port = "*", addr
	default:
		if i := strings.LastIndexByte(addr, ':'); i >= 0 {
			host, port = addr[:i], addr[i+1:]
		}
	}
	if host == "*" || host == "" {
		host = "0.0.0.0"
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		host = ip.String()
	}
	if port == "" {
		return host
	}
	return net.JoinHostPort(host, port)
}

func isPort(s string) bool {
	n, err := strconv.ParseUint(s, 10, 16)
	return err == nil && n > 0
}

// Upstream is an upstream block.
type Upstream struct {
	Stream bool
	Name   string
	// Servers are its server directives.
	Servers []UpstreamServer
	// Keepalive is the number of idle connections each worker keeps to
	// the servers; 0 without keepalive, which closes each connection
	// after its request.
	Keepalive int
	// KeepalivePos is zero without keepalive.
	KeepalivePos Pos
	Pos          Pos
}

// UpstreamServer is a server in an upstream block.
type UpstreamServer struct {
	// Addr is the address as written: "127.0.0.1:8080", "unix:/run/a.sock".
	Addr string
	// Params are the parameters after the address: weight=, max_fails=,
	// backup, ...
	Params []string
	Pos    Pos
}

func (w *walker) upstream(d *Directive, stream bool) {
	u := Upstream{Stream: stream, Name: d.Arg(0), Pos: d.Pos()}
	for _, c := range d.Block {
		switch c.Name {
		case "server":
			s := UpstreamServer{Addr: c.Arg(0), Pos: c.Pos()}
			if len(c.Args) > 1 {
				s.Params = c.Args[1:]
			}
			u.Servers = append(u.Servers, s)
		case "keepalive":
			u.Keepalive = int(max(number(c.Arg(0)), 0))
			u.KeepalivePos = c.Pos()
		}
	}
	w.s.Upstreams = append(w.s.Upstreams, u)
}

// Pass is a directive that hands requests to another server: proxy_pass,
// fastcgi_pass, uwsgi_pass, scgi_pass or grpc_pass.
type Pass struct {
	Scope
	// Directive is the directive's name.
	Directive string
	// Arg is its argument as written: "http://backend/api/".
	Arg string
	// Target is where it leads: an upstream name, a host:port or a
	// unix:/path; Arg itself when Arg holds variables, which nginx
	// resolves per request.
	Target string
	// Upstream is the name of the upstream block Target names, "" when it
	// names none.
	Upstream string
	// UpstreamKeepalive is that upstream's keepalive, 0 without one.
	UpstreamKeepalive int
	// HTTPVersion is the proxy_http_version in effect for a proxy_pass in
	// http, zero for other directives; "1.0", nginx's default, closes each
	// connection.
	HTTPVersion Setting
	// Connection is the proxy_set_header Connection in effect for a
	// proxy_pass in http; nil when none is, and nginx sends its default
	// "Connection: close".
	Connection *Header
	// KeepConn is the fastcgi_keep_conn in effect for a fastcgi_pass, zero
	// for other directives; "off" by default, which asks the FastCGI
	// server to close the connection after each request.
	KeepConn Setting
	// Keepalive reports whether nginx keeps connections to Target open
	// between requests: Target is an upstream with keepalive and, for
	// proxy_pass, HTTPVersion is 1.1 and Connection does not send "close"
	// to a request without Upgrade (a Connection set from a map on
	// $http_upgrade is looked up; any other variable is taken as not
	// "close"); for fastcgi_pass, KeepConn is on. uwsgi and scgi always
	// close; grpc_pass needs only the upstream's keepalive.
	Keepalive bool
	// ConnectionClose reports, for a proxy_pass in http, that nginx sends
	// "Connection: close" to a request without Upgrade: no Connection
	// header is set, or the one set is "close" for it.
	ConnectionClose bool
	Pos             Pos
}

// Header is a proxy_set_header in effect.
type Header struct {
	// Value is the value as written; "" removes the header.
	Value string
	Pos   Pos
}

func (w *walker) pass(d *Directive, in inherited, sc Scope) {
	p := Pass{Scope: sc, Directive: d.Name, Arg: d.Arg(0), Pos: d.Pos()}
	switch {
	case d.Name == "proxy_pass" && !sc.Stream:
		p.HTTPVersion = setting(in.httpVersion, "1.0")
		for _, h := range in.setHeaders {
			if strings.EqualFold(h.Arg(0), "Connection") {
				p.Connection = &Header{Value: h.Arg(1), Pos: h.Pos()}
			}
		}
	case d.Name == "fastcgi_pass":
		p.KeepConn = setting(in.keepConn, "off")
	}
	w.s.Passes = append(w.s.Passes, p)
}

// resolvePass sets what depends on upstream blocks, which may come after
// the pass in the configuration.
func (w *walker) resolvePass(p *Pass) {
	var name string
	p.Target, name = passTarget(p.Directive, p.Arg, p.Stream)
	if name != "" {
		for _, u := range w.s.Upstreams {
			// nginx matches upstream names without regard to case.
			if u.Stream == p.Stream && strings.EqualFold(u.Name, name) {
				p.Target, p.Upstream, p.UpstreamKeepalive = u.Name, u.Name, u.Keepalive
			}
		}
	}
	if p.Directive == "proxy_pass" && !p.Stream {
		p.ConnectionClose = p.Connection == nil || w.closes(p.Connection.Value)
	}
	if p.UpstreamKeepalive == 0 || p.Stream {
		return
	}
	switch p.Directive {
	case "proxy_pass":
		p.Keepalive = p.HTTPVersion.Value == "1.1" && !p.ConnectionClose
	case "fastcgi_pass":
		p.Keepalive = strings.EqualFold(p.KeepConn.Value, "on")
	case "grpc_pass":
		p.Keepalive = true
	}
}

// passTarget returns where a pass's argument leads and, when it has no
// port, the host, which may name an upstream block: nginx only looks a
// name up when the argument gives no port.
func passTarget(directive, arg string, stream bool) (target, name string) {
	if strings.Contains(arg, "$") {
		return arg, ""
	}
	rest, port := arg, ""
	if !stream {
		for _, s := range []struct{ directive, scheme, port string }{
			{"proxy_pass", "http://", "80"}, {"proxy_pass", "https://", "443"},
			{"grpc_pass", "grpc://", "80"}, {"grpc_pass", "grpcs://", "443"},
			{"uwsgi_pass", "uwsgi://", ""}, {"uwsgi_pass", "suwsgi://", ""},
		} {
			if s.directive == directive && len(rest) >= len(s.scheme) && strings.EqualFold(rest[:len(s.scheme)], s.scheme) {
				rest, port = rest[len(s.scheme):], s.port
				break
			}
		}
	}
	if path, ok := strings.CutPrefix(rest, "unix:"); ok {
		if directive == "proxy_pass" || directive == "grpc_pass" {
			// http://unix:/run/app.sock:/uri/: the socket path ends at ":".
			path, _, _ = strings.Cut(path, ":")
		}
		return "unix:" + path, ""
	}
	if i := strings.IndexAny(rest, "/?"); i >= 0 {
		rest = rest[:i]
	}
	hp := hostPort(rest, "")
	if _, p, err := net.SplitHostPort(hp); err == nil && p != "" {
		return hp, ""
	}
	if port != "" {
		return hostPort(rest, port), rest
	}
	return rest, rest
}

// closes reports whether a Connection header value is "close" for a
// request that has no Upgrade header. The usual
//
//	map $http_upgrade $connection_upgrade { default upgrade; '' close; }
//
// makes it "close", so that such a location keeps no connection alive.
func (w *walker) closes(v string) bool {
	if !strings.HasPrefix(v, "$") {
		return strings.EqualFold(strings.TrimSpace(v), "close")
	}
	m := w.maps[v]
	if m == nil || m.Arg(0) != "$http_upgrade" {
		return false
	}
	// A request without Upgrade has an empty $http_upgrade: the '' entry
	// applies, else default, else the empty string.
	for _, key := range []string{"", "default"} {
		for _, e := range m.Block {
			if e.Name == key {
				return strings.EqualFold(e.Arg(0), "close")
			}
		}
	}
	return false
}
