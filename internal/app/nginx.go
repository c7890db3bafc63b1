package app

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/netdoctor/netdoctor/internal/nginx"
	"github.com/netdoctor/netdoctor/internal/trust"
)

// nginx reads a master's effective configuration the way nginx reads it
// (nginx.Read: the main file and its includes, with the master's -c, -p
// and -g), without running anything: the build's paths come from the
// binary's bytes (nginx.ScanBuild). Only for a master running as root,
// and only files root alone controls (package trust): any user can
// start a program called nginx that names any file.
func (o *Observer) nginx(ctx context.Context, s *Server, master procInfo) {
	inv, ok := nginx.ParseMaster(master.cmdline)
	if !ok {
		s.Notes = append(s.Notes, fmt.Sprintf("nginx %d: %q is not a master's title; configuration not read", master.pid, master.cmdline))
		return
	}
	fsys, err := trust.ProcessFS(o.proc, master.pid, trust.Owned)
	if err != nil {
		s.Notes = append(s.Notes, fmt.Sprintf("nginx %d: configuration not read: %v (netdoctor reads only what root controls)", master.pid, err))
		return
	}
	build, err := scanBuild(o.proc, master.pid)
	if err != nil {
		s.Notes = append(s.Notes, fmt.Sprintf("nginx %d: build options not read (%v): nginx's defaults assumed", master.pid, err))
	}
	build = build.With(inv)
	main := build.Main(master.cwd)
	s.Config = main
	cfg, err := nginx.Read(fsys, main)
	if cfg == nil {
		s.Notes = append(s.Notes, fmt.Sprintf("nginx %d: configuration not read: %v", master.pid, err))
		return
	}
	if err != nil {
		s.Notes = append(s.Notes, fmt.Sprintf("nginx configuration read in part: %v", err))
	}
	if inv.Globals != "" {
		if err := cfg.AddGlobals(inv.Globals); err != nil {
			s.Notes = append(s.Notes, fmt.Sprintf("nginx -g %q: %v", inv.Globals, err))
		}
	}
	if cfg.File != "" {
		s.Config = cfg.File
	}
	sum := cfg.Summary(build)
	info := &NginxInfo{
		WorkerProcesses:    nginxSetting(sum.WorkerProcesses),
		WorkerConnections:  nginxSetting(sum.WorkerConnections),
		WorkerRlimitNofile: nginxSetting(sum.WorkerRlimitNofile),
	}
	for _, l := range sum.Listens {
		info.Listens = append(info.Listens, NginxListen{Addr: l.HostPort, Backlog: l.Backlog, Source: l.Pos.String()})
	}
	info.Limits = nginxLimits(cfg.Directives, nil)
	for _, n := range sum.NodelayOff {
		info.NoDelayOff = append(info.NoDelayOff, n.Pos.String())
	}
	seen := map[string]bool{}
	for _, p := range sum.Passes {
		u := NginxUpstream{Pass: p.Directive, PassSource: p.Pos.String(), Target: p.Target, Reuse: p.Keepalive, Keepalive: p.UpstreamKeepalive}
		switch {
		case p.Directive == "fastcgi_pass":
			u.KeepConn = &Param{Value: p.KeepConn.Value, Source: p.KeepConn.Pos.String()}
		case p.Directive == "proxy_pass" && !p.Stream:
			u.HTTPVersion = &Param{Value: p.HTTPVersion.Value, Source: p.HTTPVersion.Pos.String()}
			if c := p.Connection; c != nil {
				u.Connection = &Param{Value: c.Value, Source: c.Pos.String()}
			}
			u.ConnectionClose = p.ConnectionClose
		}
		if p.Upstream != "" {
			for _, up := range sum.Upstreams {
				if up.Name == p.Upstream && !up.Stream {
					u.Block = up.Pos.String()
					for _, sv := range up.Servers {
						u.Servers = append(u.Servers, serverAddr(sv.Addr))
					}
				}
			}
		} else {
			u.Servers = []string{serverAddr(strings.TrimPrefix(strings.TrimPrefix(p.Target, "http://"), "https://"))}
		}
		if !u.Reuse {
			u.Why = noReuseWhy(p)
		}
		info.Upstreams = append(info.Upstreams, u)
		for _, a := range u.Servers {
			if !seen[a] {
				seen[a] = true
				s.Upstreams = append(s.Upstreams, a)
			}
		}
	}
	s.Nginx = info
	for _, l := range nginxLogs(sum) {
		l.root = fsys.Root
		s.Logs = append(s.Logs, l)
	}
}

// scanBuild reads the master's binary for its build options, when root
// controls it.
func scanBuild(proc string, pid int) (nginx.Build, error) {
	f, err := trust.OpenExe(proc, pid)
	if err != nil {
		return nginx.ParseBuild(nil), err
	}
	defer f.Close()
	b, ok, err := nginx.ScanBuild(f)
	if err == nil && !ok {
		err = errors.New("no \"configure arguments:\" in the binary")
	}
	return b, err
}

func nginxSetting(st nginx.Setting) Setting {
	v := int(st.N)
	if st.N < 0 {
		v = 0
	}
	return Setting{Value: v, Source: st.Pos.String()}
}

// serverAddr is an upstream server as the kernel names its listener: a
// bare host means port 80.
func serverAddr(a string) string {
	if strings.HasPrefix(a, "unix:") {
		return a
	}
	if _, _, err := net.SplitHostPort(a); err != nil {
		return net.JoinHostPort(strings.Trim(a, "[]"), "80")
	}
	return a
}

// noReuseWhy says what keeps nginx from reusing connections to a target.
func noReuseWhy(p nginx.Pass) string {
	var why []string
	if p.Upstream == "" {
		why = append(why, "no upstream block, so no keepalive pool")
	} else if p.UpstreamKeepalive == 0 {
		why = append(why, fmt.Sprintf("upstream %s has no keepalive", p.Upstream))
	}
	switch p.Directive {
	case "fastcgi_pass":
		if p.KeepConn.Value != "on" {
			why = append(why, fmt.Sprintf("fastcgi_keep_conn %s (%s)", p.KeepConn.Value, p.KeepConn.Pos))
		}
	case "proxy_pass":
		if p.HTTPVersion.Value != "1.1" {
			why = append(why, fmt.Sprintf("proxy_http_version %s (%s)", p.HTTPVersion.Value, p.HTTPVersion.Pos))
		}
		switch {
		case p.Connection == nil:
			why = append(why, "no proxy_set_header Connection \"\" (nginx sends Connection: close)")
		case p.HTTPVersion.Value == "1.1" && p.UpstreamKeepalive > 0:
			why = append(why, fmt.Sprintf("proxy_set_header Connection %q (%s) sends close to requests without Upgrade", p.Connection.Value, p.Connection.Pos))
		}
	case "uwsgi_pass", "scgi_pass":
		why = append(why, p.Directive+" always closes")
	}
	if len(why) == 0 {
		why = append(why, "nginx closes each connection after its request")
	}
	return strings.Join(why, "; ")
}

// nginxLogs are the files nginx logs to; an access log whose format
// lacks the combined layout's `"$request" $status` cannot be counted by
// status and is left out.
func nginxLogs(sum nginx.Summary) []*Log {
	var out []*Log
	seen := map[string]bool{}
	for _, e := range sum.ErrorLogs {
		if e.File != "" && !seen[e.File] {
			seen[e.File] = true
			out = append(out, &Log{Path: e.File, Kind: "error", Source: e.Pos.String()})
		}
	}
	for _, a := range sum.AccessLogs {
		if a.Off || a.File == "" || strings.Contains(a.File, "$") || seen[a.File] {
			continue
		}
		if a.Format != "combined" && !strings.Contains(a.FormatString, `"$request" $status`) {
			continue
		}
		seen[a.File] = true
		out = append(out, &Log{Path: a.File, Kind: "access", Source: a.Pos.String()})
	}
	return out
}

// nginxLimits collects the limiter directives of a configuration, in
// every block.
func nginxLimits(list []*nginx.Directive, out []NginxLimit) []NginxLimit {
	for _, d := range list {
		switch d.Name {
		case "limit_req", "limit_req_zone", "limit_conn", "limit_conn_zone":
			l := NginxLimit{Directive: d.Name, Args: strings.Join(d.Args, " "), Source: d.Pos().String()}
			for _, a := range d.Args {
				if z, ok := strings.CutPrefix(a, "zone="); ok {
					l.Zone, _, _ = strings.Cut(z, ":")
				}
			}
			if d.Name == "limit_conn" && l.Zone == "" {
				l.Zone = d.Arg(0)
			}
			out = append(out, l)
		}
		out = nginxLimits(d.Block, out)
	}
	return out
}
