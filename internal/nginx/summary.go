package nginx

import (
	"path/filepath"
	"strconv"
	"strings"
)

// Summary is what netdoctor's rules need from a configuration, with
// nginx's defaults and inheritance applied. A zero Pos in it marks a
// value that no directive set.
type Summary struct {
	// WorkerProcesses is "auto" or a number; "1" by default.
	WorkerProcesses Setting
	// WorkerConnections is from the events block; "512" by default.
	WorkerConnections Setting
	// WorkerRlimitNofile has no default: without it the workers keep the
	// master's RLIMIT_NOFILE. Its Value is then "" and N -1.
	WorkerRlimitNofile Setting
	// Listens has every listen of every server, and the one nginx adds to
	// an http server that has none.
	Listens []Listen
	// NodelayOff has every server and location where tcp_nodelay is off,
	// set there or inherited.
	NodelayOff []NodelayOff
	Upstreams  []Upstream
	// Passes has every proxy_pass, fastcgi_pass, uwsgi_pass, scgi_pass and
	// grpc_pass.
	Passes []Pass
	// ErrorLogs has every error_log, and the compiled-in one when the main
	// context sets none.
	ErrorLogs []ErrorLog
	// AccessLogs has every access_log, and the compiled-in one when an
	// http server or location inherits none.
	AccessLogs []AccessLog
	// LogFormats has every log_format, after nginx's predefined
	// "combined".
	LogFormats []LogFormat
}

// Setting is the value of a directive that takes one argument.
type Setting struct {
	// Value is the argument as written, or nginx's default when Pos is
	// zero.
	Value string
	// N is Value as an integer, or -1 when it is not one ("auto", "1.1").
	N   int64
	Pos Pos
}

// Scope is the block a directive applies to.
type Scope struct {
	// Stream is true inside stream {}, false inside http {}.
	Stream bool
	// Server is where the enclosing server block starts; zero outside one.
	Server Pos
	// ServerNames are the enclosing server's server_name arguments.
	ServerNames []string
	// Location is the innermost location's arguments joined by a space,
	// such as "~ \.php$"; "" outside a location.
	Location string
}

// NodelayOff is a server or location where tcp_nodelay is off.
type NodelayOff struct {
	Scope
	// Pos is the tcp_nodelay off in effect, which may be in an enclosing
	// block.
	Pos Pos
}

// Summary applies nginx's defaults and inheritance to c. b gives the
// compiled-in paths: use ParseBuild(nginx -V).With(inv), or the zero Build
// for nginx's own defaults; relative log paths are resolved against
// b.Prefix.
func (c *Config) Summary(b Build) Summary {
	if b.Prefix == "" {
		b.Prefix = defaultBuild.Prefix
	}
	if b.ErrorLogPath == "" {
		b.ErrorLogPath = defaultBuild.ErrorLogPath
	}
	if b.HTTPLogPath == "" {
		b.HTTPLogPath = defaultBuild.HTTPLogPath
	}
	w := &walker{build: b, maps: map[string]*Directive{}}
	w.main(c.Directives)
	w.resolve()
	return w.s
}

// walker gathers a Summary in one walk of the tree.
type walker struct {
	s     Summary
	build Build
	// maps are the http map blocks by the variable they set, such as
	// "$connection_upgrade", to tell what a Connection header becomes.
	maps map[string]*Directive
	// defaultAccessLog is set when some http server or location logs to
	// the compiled-in access log.
	defaultAccessLog bool
}

func (w *walker) main(list []*Directive) {
	var processes, rlimit, connections *Directive
	mainErrorLog := false
	for _, d := range list {
		switch d.Name {
		case "worker_processes":
			processes = first(processes, d)
		case "worker_rlimit_nofile":
			rlimit = first(rlimit, d)
		case "events":
			for _, e := range d.Block {
				if e.Name == "worker_connections" {
					connections = first(connections, e)
				}
			}
		case "error_log":
			mainErrorLog = true
			w.errorLog(d, Scope{})
		case "http":
			w.s.LogFormats = append(w.s.LogFormats, LogFormat{Name: "combined", Format: combinedFormat})
			w.level(d.Block, inherited{}, Scope{}, levelTop)
		case "stream":
			w.level(d.Block, inherited{}, Scope{Stream: true}, levelTop)
		}
	}
	w.s.WorkerProcesses = setting(processes, "1")
	w.s.WorkerConnections = setting(connections, "512")
	w.s.WorkerRlimitNofile = setting(rlimit, "")
	if !mainErrorLog {
		path := w.build.ErrorLogPath
		def := ErrorLog{Path: path, File: w.file(path), Level: "error"}
		w.s.ErrorLogs = append([]ErrorLog{def}, w.s.ErrorLogs...)
	}
}

// first keeps the first of duplicate directives; nginx refuses a
// configuration with both, so only a partial dump has them.
func first(have, d *Directive) *Directive {
	if have != nil {
		return have
	}
	return d
}

func setting(d *Directive, def string) Setting {
	if d == nil {
		return Setting{Value: def, N: number(def)}
	}
	return Setting{Value: d.Arg(0), N: number(d.Arg(0)), Pos: d.Pos()}
}

func number(s string) int64 {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return -1
	}
	return n
}

// levelKind is the kind of block a level walks.
type levelKind int

const (
	levelTop      levelKind = iota // http {} or stream {}
	levelServer                    // server {}
	levelLocation                  // location {}
	levelInner                     // if {} or limit_except {}, which inherit but are not reported
)

// inherited is what a block takes from the blocks around it unless it
// sets its own.
type inherited struct {
	nodelay     *Directive
	httpVersion *Directive
	keepConn    *Directive
	// setHeaders are the proxy_set_header directives of the nearest block
	// with any: one proxy_set_header drops every inherited one.
	setHeaders []*Directive
	// accessLogs work the same way.
	accessLogs []*Directive
}

// own returns in overridden by the settings list makes itself. nginx
// merges a block's settings into its children whatever their order, so
// they are read before any child is walked.
func own(list []*Directive, in inherited) inherited {
	var headers, logs []*Directive
	for _, d := range list {
		switch d.Name {
		case "tcp_nodelay":
			in.nodelay = d
		case "proxy_http_version":
			in.httpVersion = d
		case "fastcgi_keep_conn":
			in.keepConn = d
		case "proxy_set_header":
			headers = append(headers, d)
		case "access_log":
			logs = append(logs, d)
		}
	}
	if headers != nil {
		in.setHeaders = headers
	}
	if logs != nil {
		in.accessLogs = logs
	}
	return in
}

// level walks one block of http or stream and the blocks inside it.
func (w *walker) level(list []*Directive, in inherited, sc Scope, kind levelKind) {
	in = own(list, in)
	if kind == levelServer || kind == levelLocation {
		if in.nodelay != nil && strings.EqualFold(in.nodelay.Arg(0), "off") {
			w.s.NodelayOff = append(w.s.NodelayOff, NodelayOff{Scope: sc, Pos: in.nodelay.Pos()})
		}
		if !sc.Stream && len(in.accessLogs) == 0 {
			w.defaultAccessLog = true
		}
	}
	if kind == levelServer {
		w.listens(list, sc)
	}
	inServer := kind != levelTop
	for _, d := range list {
		switch d.Name {
		case "server":
			if kind == levelTop && d.Block != nil {
				w.level(d.Block, in, serverScope(d, sc.Stream), levelServer)
			}
		case "location":
			if inServer && d.Block != nil {
				loc := sc
				loc.Location = strings.Join(d.Args, " ")
				w.level(d.Block, in, loc, levelLocation)
			}
		case "if", "limit_except":
			if inServer && d.Block != nil {
				w.level(d.Block, in, sc, levelInner)
			}
		case "upstream":
			if kind == levelTop {
				w.upstream(d, sc.Stream)
			}
		case "map":
			if kind == levelTop && !sc.Stream && len(d.Args) == 2 {
				w.maps[d.Args[1]] = d
			}
		case "proxy_pass", "fastcgi_pass", "uwsgi_pass", "scgi_pass", "grpc_pass":
			w.pass(d, in, sc)
		case "access_log":
			w.accessLog(d, sc)
		case "error_log":
			w.errorLog(d, sc)
		case "log_format":
			if kind == levelTop {
				w.logFormat(d, sc.Stream)
			}
		}
	}
}

func serverScope(d *Directive, stream bool) Scope {
	sc := Scope{Stream: stream, Server: d.Pos()}
	for _, c := range d.Block {
		if c.Name == "server_name" {
			sc.ServerNames = append(sc.ServerNames, c.Args...)
		}
	}
	return sc
}

// resolve fills in what needs the whole tree: the upstream each pass
// leads to, and the log format of each access log.
func (w *walker) resolve() {
	for i := range w.s.Passes {
		w.resolvePass(&w.s.Passes[i])
	}
	if w.defaultAccessLog {
		path := w.build.HTTPLogPath
		w.s.AccessLogs = append(w.s.AccessLogs, AccessLog{Path: path, File: w.file(path), Format: "combined"})
	}
	for i := range w.s.AccessLogs {
		a := &w.s.AccessLogs[i]
		for _, f := range w.s.LogFormats {
			if f.Name == a.Format && f.Stream == a.Stream {
				a.FormatString = f.Format
			}
		}
	}
}

// file resolves a log path as nginx does, against the prefix, and returns
// "" for the logs that are not files. "error_log off" is a file named
// "off": nginx has no way to turn the error log off.
func (w *walker) file(path string) string {
	switch {
	case path == "" || path == "stderr":
		return ""
	case strings.HasPrefix(path, "syslog:"), strings.HasPrefix(path, "memory:"):
		return ""
	case filepath.IsAbs(path):
		return path
	}
	return filepath.Join(w.build.Prefix, path)
}
