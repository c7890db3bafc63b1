package run

import (
	"fmt"
	"slices"
	"strconv"

	"github.com/netdoctor/netdoctor/internal/app"
	"github.com/netdoctor/netdoctor/internal/evidence"
	"github.com/netdoctor/netdoctor/internal/report"
	"github.com/netdoctor/netdoctor/internal/rules"
	"github.com/netdoctor/netdoctor/internal/sizing"
)

// serverSide is the side name server findings carry.
func serverSide(r *Result) report.Side {
	for _, s := range r.Sides {
		if s.Name == report.Server && s.Why == sameNamespace {
			return report.Local
		}
	}
	return report.Server
}

// appConfig adds to the kernel's findings what the servers' own
// configuration and logs say about them: the directive, with file and
// line, that sets the limit, and the log lines the fault wrote. A fix
// then names the line to change, not just the sysctl.
func appConfig(r *Result, fs *[]report.Finding) {
	for i := range *fs {
		f := &(*fs)[i]
		switch f.ID {
		case rules.AcceptQueueOverflow:
			backlogSource(r, f)
		case rules.NagleDelayedACK:
			for _, s := range r.Servers {
				if s.Nginx == nil {
					continue
				}
				for _, src := range s.Nginx.NoDelayOff {
					f.Evidence = append(f.Evidence, report.Item{Text: "nginx: tcp_nodelay off at " + src, Source: "nginx -T"})
					f.Fix = append([]string{fmt.Sprintf("set `tcp_nodelay on;` at %s (nginx's default), then nginx -s reload", src)}, f.Fix...)
				}
			}
		}
	}
	for _, s := range r.Servers {
		item, n := logItem(s, app.EventTooManyFiles, "“Too many open files”")
		if n == 0 {
			continue
		}
		logged := report.Item{Text: item, Source: "log", Window: true}
		var fix []string
		switch {
		case s.Nginx != nil:
			nf := s.Nginx.WorkerRlimitNofile
			fix = []string{fmt.Sprintf("set `worker_rlimit_nofile 65535;` (%s) — at least twice worker_connections %s, since a proxied request holds two descriptors; then nginx -s reload",
				where(nf.Source, "in the main context of "+s.Config), s.Nginx.WorkerConnections)}
		case s.Pool != nil:
			fix = []string{fmt.Sprintf("raise rlimit_files = %s for pool %s, then reload php-fpm", s.Pool.RlimitFiles, s.Pool.Name)}
		}
		// The kernel-side rule saw the process at its limit: add what the
		// server logged and the directive to change to that finding.
		merged := false
		for i := range *fs {
			f := &(*fs)[i]
			if f.ID == rules.FDLimit && f.Status == report.Active && ownedBy(f.Subject, s) {
				f.Evidence = append([]report.Item{logged}, f.Evidence...)
				f.Fix = append(fix, f.Fix...)
				f.Severity = report.Critical
				merged = true
			}
		}
		if merged {
			continue
		}
		if len(fix) == 0 {
			fix = []string{"raise the process's RLIMIT_NOFILE (ulimit -n, systemd LimitNOFILE=) and check for descriptor leaks"}
		}
		*fs = append(*fs, report.Finding{ID: rules.FDLimit, Severity: report.Critical, Status: report.Active, Side: serverSide(r),
			Subject:  strconv.Itoa(s.PIDs[0]),
			Title:    fmt.Sprintf("%s ran out of file descriptors: accept() failed with EMFILE", s.Kind),
			Evidence: []report.Item{logged}, Fix: fix})
	}
}

// ownedBy reports whether a finding's subject is one of a server's PIDs.
func ownedBy(subject string, s *app.Server) bool {
	pid, err := strconv.Atoi(subject)
	return err == nil && slices.Contains(s.PIDs, pid)
}

// backlogSource names the directive behind a listener's backlog, and
// sizes the queue with what the run knows and the kernel-only rule does
// not: the load's burst and its p99.
func backlogSource(r *Result, f *report.Finding) {
	want := resizeBacklog(r, f)
	for _, s := range r.Servers {
		if s.Addr != f.Subject {
			continue
		}
		switch {
		case s.Nginx != nil:
			for _, l := range s.Nginx.Listens {
				// Both are host:port as bound: nginx's "*:80" and
				// "80" are 0.0.0.0:80, as the kernel reports them.
				if l.Addr != f.Subject {
					continue
				}
				b := "not set (nginx's default 511)"
				if l.Backlog >= 0 {
					b = fmt.Sprintf("backlog=%d", l.Backlog)
				}
				f.Evidence = append(f.Evidence, report.Item{Text: fmt.Sprintf("nginx listen %s %s at %s", l.Addr, b, l.Source), Source: "nginx -T"})
				f.Fix = append(f.Fix, fmt.Sprintf("nginx: `listen %s backlog=%d;` at %s (with net.core.somaxconn at least as large), then nginx -s reload", l.Addr, want, l.Source))
			}
		case s.Pool != nil:
			f.Evidence = append(f.Evidence, report.Item{Text: fmt.Sprintf("php-fpm pool %s listen.backlog = %s", s.Pool.Name, s.Pool.Backlog), Source: "php-fpm config"})
			f.Fix = append(f.Fix, fmt.Sprintf("php-fpm: `listen.backlog = %d` in pool %s (%s), then reload php-fpm", want, s.Pool.Name, where(s.Pool.Backlog.Source, s.Config)))
		}
	}
}

// resizeBacklog redoes the kernel-only rule's advice for the finding's
// listener with the load's burst and p99, and returns the backlog it
// proposes.
func resizeBacklog(r *Result, f *report.Finding) int {
	burst, p99 := 0, 0.0
	if r.Load != nil {
		burst, p99 = r.Load.Connections, r.Load.Latency.P99.Seconds()
	}
	b := Window(serverBundle(r), r.LoadStart)
	if b == nil || len(b.Snapshots) == 0 {
		want, _ := sizing.Backlog(burst, 0, p99)
		return want
	}
	want, _ := rules.Backlog(b, burst, p99)
	var l evidence.Listener
	for _, s := range b.Snapshots {
		if s.Sockets == nil {
			continue
		}
		for _, sl := range s.Sockets.Listeners {
			if sl.Addr == f.Subject && sl.Proto != "unix" {
				l = sl
			}
		}
	}
	if l.Addr != "" {
		somax, _ := rules.SysctlInt(&b.Snapshots[len(b.Snapshots)-1], "net.core.somaxconn")
		f.Fix = rules.BacklogFix(b, l, somax, burst, p99)
	}
	return want
}
