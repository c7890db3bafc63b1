package rules

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/netdoctor/netdoctor/internal/app"
	"github.com/netdoctor/netdoctor/internal/evidence"
	"github.com/netdoctor/netdoctor/internal/report"
)

// FDLimit: a process (or the host) is at or near its open-file limit.
const FDLimit report.FindingID = "fd-limit"

var _ = define(Class{ID: FDLimit,
	Tunables: []Tunable{{Name: "fs.file-max", Min: 8192, Max: 1 << 40, Why: "a limit, not memory: only ever raised"}},
	Resource: "fds",
	Critical: true, Latent: true,
	Errors: true, Delays: true, Holds: true, Fails: FailsConnections,
	Meaning:    "a process (or the host) is out of file descriptors; `accept()` fails with EMFILE and connections wait in the accept queue",
	Active:     "a process at ≥ 95 % of its soft `RLIMIT_NOFILE` (critical) or ≥ 80 % (warning); host at ≥ 80 % of `fs.file-max` (critical)",
	LatentWhen: "a listener's process has a soft limit ≤ 1024 (info)",
	Seed:       "004",
	ReportedBy: "`check`, `diagnose`",
	Doc: `Rule ´fd´ (´fd.go´). It works with one snapshot.

- Per process of interest (listener owners and processes named by the user), it takes the sample with
  the most open descriptors (entries of ´/proc/PID/fd´) and compares it with the soft "Max open files"
  of ´/proc/PID/limits´. Unlimited limits and unreadable descriptor counts are skipped.
  - **Active, critical** at ≥ 95 % of the soft limit. **Active, warning** at ≥ 80 %.
  - **Latent, info** otherwise, if the soft limit is ≤ 1024 and the process owns a listener (role
    ´listener …´).

  Evidence: ´nginx pid 3677 (listener :8080): 64 open files, limit 64 (soft) / 64 (hard)´. The subject
  is the PID.
- Host: **active, critical** when ´fs.file-nr´ in the last snapshot shows allocated/max ≥ 80 %
  (´fs.file-nr: 900000 allocated of 1000000´). The subject is ´fs.file-max´, and the fix is 4 × the
  current max.
- Seed 004's fault (accept4() EMFILE) leaves no kernel counter. The accept queue fills instead, and
  ´accept-queue-overflow´ may fire alongside.`,
})

var _ = register(Rule{Name: "fd", Order: 80, Scope: PerSide, IDs: []report.FindingID{FDLimit}, Checks: "file descriptors", Check: checkFD})

// checkFD finds processes at or near their open-file limit (seeds 004
// and the fd-limit fault: accept4() fails with EMFILE, connections wait in
// the accept queue), and a host near fs.file-max.
func checkFD(in *Input) []report.Finding {
	out := kernelFD(in.Bundle)
	if in.ServerSide() {
		out = fdLogged(in, out)
	}
	return out
}

// kernelFD is the limits as /proc shows them.
func kernelFD(b *evidence.Bundle) []report.Finding {
	var out []report.Finding
	peak := map[int]evidence.Process{}
	var order []int
	for _, s := range b.Snapshots {
		for _, p := range s.Processes {
			if prev, ok := peak[p.PID]; !ok || p.OpenFDs > prev.OpenFDs {
				if !ok {
					order = append(order, p.PID)
				}
				peak[p.PID] = p
			}
		}
	}
	for _, pid := range order {
		p := peak[pid]
		if p.NofileSoft == 0 || p.OpenFDs < 0 {
			continue
		}
		use := float64(p.OpenFDs) / float64(p.NofileSoft)
		item := report.Item{Text: fmt.Sprintf("%s pid %d (%s): %d open files, limit %d (soft) / %d (hard)", p.Comm, p.PID, p.Role, p.OpenFDs, p.NofileSoft, p.NofileHard), Source: "process", Window: true}
		fix := notes(
			fmt.Sprintf("raise the limit where %s is started: systemd `LimitNOFILE=65535` in its unit, or `ulimit -n 65535` in its start script (a login shell's ulimit does not reach services)", p.Comm),
			"nginx: `worker_rlimit_nofile 65535;` with `worker_connections` below it (each proxied request uses two descriptors)",
		)
		about := report.About{PID: p.PID}
		switch {
		case use >= 0.95:
			out = append(out, report.Finding{ID: FDLimit, Severity: report.Critical, Status: report.Active, Subject: strconv.Itoa(p.PID), About: about,
				Title: fmt.Sprintf("%s (pid %d) is out of file descriptors: new connections cannot be accepted", p.Comm, p.PID), Evidence: []report.Item{item}, Actions: fix})
		case use >= 0.8:
			out = append(out, report.Finding{ID: FDLimit, Severity: report.Warning, Status: report.Active, Subject: strconv.Itoa(p.PID), About: about,
				Title: fmt.Sprintf("%s (pid %d) uses %.0f%% of its file descriptor limit", p.Comm, p.PID, 100*use), Evidence: []report.Item{item}, Actions: fix})
		case p.NofileSoft <= 1024 && strings.HasPrefix(p.Role, "listener"):
			item.Window = false
			out = append(out, report.Finding{ID: FDLimit, Severity: report.Info, Status: report.Latent, Subject: strconv.Itoa(p.PID), About: about,
				Title: fmt.Sprintf("%s (pid %d) serves connections with a limit of %d open files", p.Comm, p.PID, p.NofileSoft), Evidence: []report.Item{item}, Actions: fix})
		}
	}
	last := &b.Snapshots[len(b.Snapshots)-1]
	if f := strings.Fields(last.Sysctls["fs.file-nr"]); len(f) == 3 {
		used, _ := strconv.ParseFloat(f[0], 64)
		max, _ := strconv.ParseFloat(f[2], 64)
		if max > 0 && used/max >= 0.8 {
			out = append(out, report.Finding{ID: FDLimit, Severity: report.Critical, Status: report.Active, Subject: "fs.file-max", About: report.About{Setting: "fs.file-max"},
				Title:    fmt.Sprintf("The host has %.0f%% of fs.file-max open", 100*used/max),
				Evidence: []report.Item{{Text: fmt.Sprintf("fs.file-nr: %s allocated of %s", f[0], f[2]), Source: "sysctl", Window: true}},
				Actions:  []report.Action{sysctlFix(b, "fs.file-max", strconv.FormatFloat(max*4, 'f', 0, 64))}})
		}
	}
	return out
}

// fdLogged adds what a run's servers logged of EMFILE ("Too many open
// files") and the directive to change: to the kernel's finding for the
// same process when it saw the process at its limit, else as a finding
// of its own, since a limit hit and released between two samples leaves
// only the log line.
func fdLogged(in *Input, out []report.Finding) []report.Finding {
	for _, s := range in.Servers() {
		item, n := logItem(s, app.EventTooManyFiles, "“Too many open files”")
		if n == 0 {
			continue
		}
		logged := report.Item{Text: item, Source: "log", Window: true}
		var fix []report.Action
		switch {
		case s.Nginx != nil:
			nf := s.Nginx.WorkerRlimitNofile
			fix = []report.Action{edit("nginx", nf.Source, fmt.Sprintf("set `worker_rlimit_nofile 65535;` (%s) — at least twice worker_connections %s, since a proxied request holds two descriptors; then nginx -s reload",
				where(nf.Source, "in the main context of "+s.Config), s.Nginx.WorkerConnections), "worker_rlimit_nofile 65535;")}
		case s.Pool != nil:
			fix = notes(fmt.Sprintf("raise rlimit_files = %s for pool %s, then reload php-fpm", s.Pool.RlimitFiles, s.Pool.Name))
		}
		merged := false
		for i, f := range out {
			if f.ID == FDLimit && f.Status == report.Active && f.About.PID != 0 && slices.Contains(s.PIDs, f.About.PID) {
				out[i].Evidence = append([]report.Item{logged}, f.Evidence...)
				out[i].Actions = append(slices.Clone(fix), f.Actions...)
				out[i].Severity = report.Critical
				merged = true
			}
		}
		if merged {
			continue
		}
		if len(fix) == 0 {
			fix = notes("raise the process's RLIMIT_NOFILE (ulimit -n, systemd LimitNOFILE=) and check for descriptor leaks")
		}
		out = append(out, report.Finding{ID: FDLimit, Severity: report.Critical, Status: report.Active, Side: in.Run.ServerSide(),
			Subject: strconv.Itoa(s.PIDs[0]), About: report.About{Server: s.Kind, Listen: s.Addr, PID: s.PIDs[0]},
			Title:    fmt.Sprintf("%s ran out of file descriptors: accept() failed with EMFILE", s.Kind),
			Evidence: []report.Item{logged}, Actions: fix})
	}
	return out
}
