package nginx

import "strings"

// combinedFormat is the log format nginx predefines as "combined"
// (ngx_http_log_module.c).
const combinedFormat = `$remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent "$http_referer" "$http_user_agent"`

// ErrorLog is an error_log, or the compiled-in error log.
type ErrorLog struct {
	Scope
	// Path is the path as written: a file, "stderr", "syslog:server=...",
	// "memory:32m".
	Path string
	// File is the file Path resolves to against the prefix; "" when Path
	// is not a file.
	File string
	// Level is the minimum level logged; "error" by default.
	Level string
	// Pos is zero for the compiled-in error log.
	Pos Pos
}

// AccessLog is an access_log, or the compiled-in access log.
type AccessLog struct {
	Scope
	// Path is the path as written: a file, which may hold variables,
	// "syslog:server=..." or "off".
	Path string
	// File is the file Path resolves to against the prefix; "" when Path
	// is not a file.
	File string
	// Off is true for "access_log off".
	Off bool
	// Format is the log_format's name; "combined" by default in http.
	Format string
	// FormatString is that log_format's definition; "" when it is not
	// defined.
	FormatString string
	// Params are the parameters after the format: buffer=, gzip, flush=,
	// if=.
	Params []string
	// Pos is zero for the compiled-in access log.
	Pos Pos
}

// LogFormat is a log_format, or nginx's predefined "combined".
type LogFormat struct {
	Stream bool
	Name   string
	// Escape is the escape= parameter: "default", "json" or "none"; ""
	// when not given.
	Escape string
	// Format is the format: nginx joins the strings it is given with
	// nothing in between.
	Format string
	// Pos is zero for "combined".
	Pos Pos
}

func (w *walker) errorLog(d *Directive, sc Scope) {
	e := ErrorLog{Scope: sc, Path: d.Arg(0), File: w.file(d.Arg(0)), Level: d.Arg(1), Pos: d.Pos()}
	if e.Level == "" {
		e.Level = "error"
	}
	w.s.ErrorLogs = append(w.s.ErrorLogs, e)
}

func (w *walker) accessLog(d *Directive, sc Scope) {
	a := AccessLog{Scope: sc, Path: d.Arg(0), Off: d.Arg(0) == "off", Format: d.Arg(1), Pos: d.Pos()}
	if !a.Off {
		a.File = w.file(a.Path)
	}
	if a.Format == "" && !sc.Stream && !a.Off {
		a.Format = "combined"
	}
	if len(d.Args) > 2 {
		a.Params = d.Args[2:]
	}
	w.s.AccessLogs = append(w.s.AccessLogs, a)
}

func (w *walker) logFormat(d *Directive, stream bool) {
	f := LogFormat{Stream: stream, Name: d.Arg(0), Pos: d.Pos()}
	args := d.Args[min(1, len(d.Args)):]
	if len(args) > 0 {
		if v, ok := strings.CutPrefix(args[0], "escape="); ok {
			f.Escape, args = v, args[1:]
		}
	}
	f.Format = strings.Join(args, "")
	w.s.LogFormats = append(w.s.LogFormats, f)
}
