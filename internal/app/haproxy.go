package app

import (
	"fmt"
	"net"
	"strings"

	"github.com/netdoctor/netdoctor/internal/evidence/kernel"
	"github.com/netdoctor/netdoctor/internal/haproxy"
	"github.com/netdoctor/netdoctor/internal/trust"
)

// HAProxyInfo is what the rules need of an haproxy: the frontend that
// binds the listener and the smallest maxconn that caps it.
type HAProxyInfo struct {
	Frontend string `json:"frontend,omitempty"`
	// Maxconn is that maxconn with its file:line, and MaxconnScope where
	// it is written: "bind", "frontend", "defaults" (the frontend
	// inherits it) or "global". nil when none is written (haproxy then
	// derives the global one from its open-file limit).
	Maxconn      *Setting `json:"maxconn,omitempty"`
	MaxconnScope string   `json:"maxconn_scope,omitempty"`
}

// haproxy reads the configuration files of the haproxy that owns
// listener l: the -f arguments of its command line, through its root,
// only for a process that runs as root and only files root alone
// controls (package trust). A worker that dropped its privileges (user
// haproxy in the global section, under a master started with -W) is
// read through its master, the parent of the same program.
func (o *Observer) haproxy(s *Server, master procInfo, l kernel.Listener) {
	cfgProc := master
	if err := trust.Process(o.proc, master.pid); err != nil {
		if p, ok := readProc(o.proc, master.ppid); ok && p.comm == master.comm && p.exe == master.exe {
			cfgProc = p
		}
	}
	files := haproxy.ConfigFiles(strings.Fields(cfgProc.cmdline))
	if len(files) == 0 {
		s.Notes = append(s.Notes, fmt.Sprintf("haproxy %d: its command line names no configuration file (-f)", cfgProc.pid))
		return
	}
	for i, f := range files {
		if !strings.HasPrefix(f, "/") {
			files[i] = cfgProc.cwd + "/" + f // started with a relative -f
		}
	}
	s.Config = files[0]
	fsys, err := trust.ProcessFS(o.proc, cfgProc.pid, trust.Owned)
	if err != nil {
		s.Notes = append(s.Notes, fmt.Sprintf("haproxy %d: configuration not read: %v (netdoctor reads only what root controls)", cfgProc.pid, err))
		return
	}
	cfg, err := haproxy.Read(fsys, files)
	if err != nil {
		s.Notes = append(s.Notes, fmt.Sprintf("haproxy configuration read in part: %v", err))
	}
	host, _, _ := net.SplitHostPort(l.Addr)
	info := &HAProxyInfo{}
	if lim, ok := cfg.Limit(host, l.Port); ok {
		info.Frontend, info.MaxconnScope = lim.Frontend, lim.Scope
		info.Maxconn = &Setting{Value: lim.Value, Source: lim.Where()}
	} else {
		for _, f := range cfg.Frontends {
			for _, b := range f.Binds {
				if b.Port == l.Port && (b.Host == "" || b.Host == host) {
					info.Frontend = f.Name
				}
			}
		}
	}
	s.HAProxy = info
}
