package phpfpm

import (
	"strings"
)

// finish applies what php-fpm does after reading every file
// (fpm_conf_post_process and fpm_conf_process_all_pools): defaults that
// depend on other values, and relative paths made absolute.
func (l *loader) finish() {
	g := &l.cfg.Global
	// pid and error_log fall back to PHP_LOCALSTATEDIR, not PHP_PREFIX.
	stateDir := l.opts.Prefix
	if stateDir == "" {
		stateDir = l.opts.BuildLocalStateDir
	}
	if g.PIDFile.Value != "" {
		g.PIDFile.Value = fullPath(g.PIDFile.Value, stateDir)
	}
	if !g.ErrorLog.IsSet() {
		g.ErrorLog.Value = "log/php-fpm.log"
	}
	if !strings.EqualFold(g.ErrorLog.Value, "syslog") {
		g.ErrorLog.Value = fullPath(g.ErrorLog.Value, stateDir)
	}
	if !g.LogLevel.IsSet() {
		g.LogLevel.Value = "notice"
	}
	for _, p := range l.cfg.Pools {
		l.finishPool(p)
	}
}

func (l *loader) finishPool(p *Pool) {
	if p.Prefix.Value != "" {
		p.Prefix.Value = fullPath(p.Prefix.Value, l.prefix())
	}
	// A pool's own prefix wins for its listen socket and logs
	// (fpm_evaluate_full_path with wp set).
	base := p.Prefix.Value
	if base == "" {
		base = l.prefix()
	}
	p.Listen = l.listen(p.listen, base)
	// The status listener becomes a hidden "<pool>_status" pool that copies
	// neither prefix nor status path (fpm_worker_pool_shared_status_alloc),
	// and php-fpm then serves the status page at "/" unless told otherwise.
	if p.statusListen.Value != "" {
		p.StatusListen = l.listen(p.statusListen, l.prefix())
		if p.StatusPath.Value == "" {
			p.StatusPath = Setting[string]{Value: "/"}
		}
	}
	if p.Slowlog.Value != "" {
		p.Slowlog.Value = fullPath(p.Slowlog.Value, base)
	}
	if p.AccessLog.Value != "" {
		p.AccessLog.Value = fullPath(p.AccessLog.Value, base)
	}
	switch p.PM.Value {
	case "dynamic":
		if p.StartServers.Value <= 0 {
			n := p.MinSpareServers.Value + (p.MaxSpareServers.Value-p.MinSpareServers.Value)/2
			p.StartServers = Setting[int]{Value: n}
		}
	case "ondemand":
		// php-fpm zeroes these for ondemand whatever the file says; the
		// lines stay in Directives.
		p.StartServers = Setting[int]{}
		p.MinSpareServers = Setting[int]{}
		p.MaxSpareServers = Setting[int]{}
	}
}

func (l *loader) listen(raw Setting[string], base string) Setting[Listen] {
	if raw.Value == "" {
		return Setting[Listen]{}
	}
	addr, err := parseListen(raw.Value)
	if err != nil {
		l.problem(raw.File, raw.Line, err)
		return Setting[Listen]{}
	}
	if addr.Network == "unix" {
		addr.Path = fullPath(addr.Path, base)
	}
	return Setting[Listen]{Value: addr, File: raw.File, Line: raw.Line}
}

// fullPath is fpm_evaluate_full_path without $prefix: a relative path is
// joined to the prefix with a plain "/" and not cleaned, because a unix
// socket keeps the exact name it was bound with and matching it against
// /proc/net/unix needs that name. A path starting with ${VAR} is left
// alone: php-fpm expanded it from its environment first, most likely to
// an absolute path.
func fullPath(p, prefix string) string {
	if p == "" || strings.HasPrefix(p, "/") || strings.HasPrefix(p, "${") {
		return p
	}
	return prefix + "/" + p
}
