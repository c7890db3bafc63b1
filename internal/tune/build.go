package tune

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/netdoctor/netdoctor/internal/app"
	"github.com/netdoctor/netdoctor/internal/netns"
	"github.com/netdoctor/netdoctor/internal/nginx"
	"github.com/netdoctor/netdoctor/internal/report"
	"github.com/netdoctor/netdoctor/internal/rules"
)

// Host is the live state a plan starts from: the values apply would
// change, read where apply would write them.
type Host interface {
	// Sysctl reads a setting; an error wrapping fs.ErrNotExist means the
	// kernel (or the namespace) does not have it.
	Sysctl(s Scope, name string) (string, error)
	ReadFile(path string) ([]byte, error)
	Process(pid int) (Proc, error)
	// MemAvailable is /proc/meminfo's MemAvailable in bytes (0: unknown).
	MemAvailable() uint64
}

// Proc is what a reload needs of a master process.
type Proc struct {
	// Runtime is what the process runs on (app.DetectRuntime); empty
	// when unknown.
	Runtime app.RuntimeName
	Exe     string
	Cmdline string // NUL-separated, as /proc/PID/cmdline
	Start   uint64
	Comm    string
	Cwd     string
	UID     int
}

// loopbackPrefix starts the addresses of upstreams on this host, which
// conntrack counts once and tcp_tw_reuse's default already covers.
const loopbackPrefix = "127."

// builder accumulates a plan. The fixes (fix_*.go) share it: what one
// plans (keep, poolPlanned, somax) sizes the ones planned after it,
// which is why the findings are ranked (fixes.go).
type builder struct {
	in     *Input
	h      Host
	p      *Plan
	scope  Scope // the server side's namespace
	files  map[string]*fileEdits
	order  []string // files in the order first edited
	somax  int      // the somaxconn the plan ends with (0: unchanged)
	relist map[string]bool
	// keep is the keepalive pool planned per php-fpm address;
	// poolPlanned the numeric pool settings planned.
	keep        map[string]int
	poolPlanned map[string]string
	// already says, per finding (key), the settings it would change that
	// are already as its fix wants: why it has no change.
	already map[string][]string
}

// Build computes a plan from a report. name is how the report is named in
// the plan (its path).
func Build(in *Input, name string, h Host) (*Plan, error) {
	b := newBuilder(in, name, h)
	if in.FixesAsText {
		b.p.Notes = append(b.p.Notes, "the report was written by an older netdoctor, before its fixes were data: settings its fixes only name are not planned; diagnose its bundle again for a full plan")
	}
	findings := slices.Clone(in.Findings)
	slices.SortStableFunc(findings, func(a, c report.Finding) int { return fixFor(a.ID).rank - fixFor(c.ID).rank })
	for _, f := range findings {
		if f.Side == "client" {
			b.note(f, "seen on the client (the load generator), not on the server: tune that host separately")
			continue
		}
		if err := fixFor(f.ID).plan(b, f); err != nil {
			return nil, err
		}
	}
	if err := b.listeners(); err != nil {
		return nil, err
	}
	b.accountFor(in.Findings)
	for _, path := range b.order {
		fe := b.files[path]
		f, err := fe.file()
		if err != nil {
			return nil, err
		}
		// Apply accepts only these edits (editcheck.go): a fix that makes
		// another is a bug.
		if err := checkBuilt(f.App, fe.old, []byte(f.Content)); err != nil {
			return nil, fmt.Errorf("internal error: the plan's change to %s is not one apply accepts: %w", path, err)
		}
		b.p.add(Change{Kind: KindFile, Key: "file:" + path, Findings: fe.findings, Why: fe.why, File: f})
	}
	b.p.order()
	b.p.seen(in.Findings)
	if err := checkPlan(b.p, func() int { v, _ := b.current("net.netfilter.nf_conntrack_buckets"); return atoi(v) }); err != nil {
		return nil, fmt.Errorf("internal error: the plan proposes outdated advice: %w", err)
	}
	return b.p, nil
}

// newBuilder starts an empty plan in the server side's namespace: the
// report's own, unless the run observed the server in another.
func newBuilder(in *Input, name string, h Host) *builder {
	b := &builder{in: in, h: h, files: map[string]*fileEdits{}, relist: map[string]bool{}, keep: map[string]int{}, poolPlanned: map[string]string{}, already: map[string][]string{},
		p: &Plan{Version: Version, Created: time.Now().UTC(), Report: name, Command: in.Command, Kernel: in.Host.Kernel}}
	if in.Load != nil {
		b.p.Target = in.Load.URL
	}
	b.scope = Scope{NetNS: in.Host.NetNS, NetNSInode: in.Host.NetNSInode}
	for _, s := range in.Sides {
		if s.Name == "server" && s.Observed {
			b.scope.NetNS = s.NetNS
		}
	}
	return b
}

// satisfied records that a finding's fix asks for what is already so:
// the reason it has no change (accountFor).
func (b *builder) satisfied(f report.Finding, why string) {
	b.already[key(f)] = append(b.already[key(f)], why)
}

// accountFor makes every finding end in a change or in a note that says
// why it has none: a plan that leaves a finding out silently reads as if
// netdoctor had not seen it.
func (b *builder) accountFor(fs []report.Finding) {
	planned := map[string]bool{}
	for _, c := range b.p.Changes {
		for _, k := range c.Findings {
			planned[k] = true
		}
	}
	for _, path := range b.order {
		for _, k := range b.files[path].findings {
			planned[k] = true
		}
	}
	for _, f := range fs {
		k := key(f)
		if planned[k] || slices.ContainsFunc(b.p.Notes, func(n string) bool { return strings.HasPrefix(n, k+": ") }) {
			continue
		}
		switch {
		case len(b.already[k]) > 0:
			b.note(f, "not planned, because "+strings.Join(slices.Compact(b.already[k]), "; "))
		case len(f.Fix) > 0:
			b.note(f, "not planned, because its fix is for a person to carry out: "+f.Fix[0])
		default:
			b.note(f, "not planned, because its rule gives no fix: see its evidence in the report")
		}
	}
}

// note records why a finding gets no (or not only an) automatic change,
// once.
func (b *builder) note(f report.Finding, why string) {
	n := key(f) + ": " + why
	if !slices.Contains(b.p.Notes, n) {
		b.p.Notes = append(b.p.Notes, n)
	}
}

// rate is a counter's per-second rate over the report's window, named as
// nstat names it ("TcpPassiveOpens"), as the report's rates are.
func (b *builder) rate(name string) float64 { return b.in.Summary.Rates[name] }

// concurrency is the requests in flight the load asked for.
func (b *builder) concurrency() int {
	if b.in.Load != nil {
		return b.in.Load.Connections
	}
	return 0
}

// sysctl proposes a setting in the server's namespace (or host-wide for a
// global one). Limits only ever go up: a proposal below the current
// value is dropped.
func (b *builder) sysctl(f report.Finding, name, proposed string, why ...string) error {
	// Apply writes only what netdoctor plans (allowed.go). A fix of
	// netdoctor's that needs another setting is a bug the tests catch
	// (TestAllowedSource, TestFixturePlansAllowed); a report whose fix
	// text names another (edited, or from another tool) gets a note.
	if _, ok := allowed(name); !ok {
		b.note(f, fmt.Sprintf("not planned: %v", errNotPlanned{name}))
		return nil
	}
	sc := b.scope
	if rules.GlobalSysctl(name) {
		sc = Scope{Global: true}
	}
	cur, err := b.h.Sysctl(sc, name)
	if errors.Is(err, netns.ErrNotFound) {
		// Planned away from the host (or after the namespace went): the
		// report's value stands in, and apply checks the live one.
		v, ok := b.in.Summary.Sysctls[name]
		if !ok {
			b.note(f, fmt.Sprintf("%s: %s is not here and the report lacks the value", name, sc))
			return nil
		}
		cur, err = v, nil
		if n := fmt.Sprintf("%s is not here: current values are the report's", sc); !slices.Contains(b.p.Notes, n) {
			b.p.Notes = append(b.p.Notes, n)
		}
	}
	if errors.Is(err, fs.ErrNotExist) {
		b.note(f, fmt.Sprintf("%s: this kernel (%s) does not have it", name, sc))
		return nil
	}
	if err != nil {
		return fmt.Errorf("read %s (%s): %w", name, sc, err)
	}
	cur = normalize(cur)
	proposed = normalize(proposed)
	if cur == proposed || isLimit(name) && !larger(proposed, cur) {
		b.satisfied(f, fmt.Sprintf("%s is already %s (its fix wants %s)", name, cur, proposed))
		return nil
	}
	// A host whose numbers go past the bounds gets a note, not a change
	// apply would refuse.
	s := Sysctl{Name: name, Current: cur, Proposed: proposed, Scope: sc, Persist: name + " = " + proposed}
	if err := errors.Join(checkAllowed(s), checkLive(s, cur)); err != nil {
		b.note(f, fmt.Sprintf("not planned: %v: set it by hand if the host needs it", err))
		return nil
	}
	if name == "net.core.somaxconn" {
		b.somax = max(b.somax, atoi(proposed))
	}
	b.p.add(Change{Kind: KindSysctl, Key: "sysctl:" + name + "@" + sc.String(), Findings: []string{key(f)}, Why: why,
		Sysctl: &s})
	return nil
}

// current reads a setting for sizing, falling back on the report's value.
func (b *builder) current(name string) (string, bool) {
	sc := b.scope
	if rules.GlobalSysctl(name) {
		sc = Scope{Global: true}
	}
	if v, err := b.h.Sysctl(sc, name); err == nil {
		return normalize(v), true
	}
	v, ok := b.in.Summary.Sysctls[name]
	return normalize(v), ok
}

// upstreamOf finds the nginx pass that sends requests to addr.
func (b *builder) upstreamOf(addr string) (*app.Server, *app.NginxUpstream) {
	for _, s := range b.in.Servers {
		if s.Nginx == nil {
			continue
		}
		for i := range s.Nginx.Upstreams {
			if slices.Contains(s.Nginx.Upstreams[i].Servers, addr) {
				return s, &s.Nginx.Upstreams[i]
			}
		}
	}
	return nil, nil
}

// serverAt finds the server that listens on addr: by its address, its
// pool's listen or one of nginx's listens.
func (b *builder) serverAt(addr string) *app.Server {
	for _, s := range b.in.Servers {
		if s.Addr == addr {
			return s
		}
		if s.Pool != nil && s.Pool.Listen == addr {
			return s
		}
		if s.Nginx != nil {
			for _, l := range s.Nginx.Listens {
				if l.Addr == addr {
					return s
				}
			}
		}
	}
	return nil
}

// nginxWorkers is worker_processes (at least 1).
func nginxWorkers(s *app.Server) int {
	if s.Nginx == nil {
		return 1
	}
	return s.Nginx.Workers()
}

// editNginx adds an edit at a "file:line" source of an nginx server.
func (b *builder) editNginx(s *app.Server, src string, f report.Finding, why string, e edit) error {
	file, line, ok := source(src)
	if !ok {
		b.note(f, fmt.Sprintf("where to write it is unknown (%q): %s", src, why))
		return nil
	}
	return b.editNginxAt(s, file, line, f, why, e)
}

// editNginxAt adds an edit at a line of a file of an nginx server.
func (b *builder) editNginxAt(s *app.Server, file string, line int, f report.Finding, why string, e edit) error {
	fe, err := b.fileFor(s, file, f, why)
	if err != nil || fe == nil {
		return err
	}
	e.line = line
	fe.edits = append(fe.edits, e)
	return nil
}

// editPool sets key = value in a php-fpm pool: where the pool sets it,
// else next to its pm.max_children (which every pool must set).
func (b *builder) editPool(s *app.Server, k, value string, f report.Finding, why string) error {
	file := poolFile(s)
	if b.poolPlanned[poolKey(s, k)] == value {
		return nil
	}
	fe, err := b.fileFor(s, file, f, why)
	if err != nil || fe == nil {
		return err
	}
	b.poolPlanned[poolKey(s, k)] = value
	if line := iniKeyLine(fe.old, s.Pool.Name, k); line > 0 {
		fe.edits = append(fe.edits, edit{line: line, replace: setINI(k, value)})
		return nil
	}
	_, line, ok := source(s.Pool.MaxChildren.Source)
	if !ok {
		b.note(f, fmt.Sprintf("where pool %s is written is unknown: set %s = %s by hand", s.Pool.Name, k, value))
		return nil
	}
	fe.edits = append(fe.edits, edit{line: line, after: []string{k + " = " + value}})
	return nil
}

// poolKey names a pool's setting in builder.poolPlanned.
func poolKey(s *app.Server, k string) string { return s.Addr + "|" + k }

// poolFile is the file that defines a pool: where its pm.max_children is.
func poolFile(s *app.Server) string {
	if file, _, ok := source(s.Pool.MaxChildren.Source); ok {
		return file
	}
	return s.Config
}

// fileFor returns the edits of a file, reading it and working out how to
// validate and reload it the first time. nil without error: the file
// cannot be edited (noted).
func (b *builder) fileFor(s *app.Server, file string, f report.Finding, why string) (*fileEdits, error) {
	if fe, ok := b.files[file]; ok {
		fe.addReason(f, why)
		return fe, nil
	}
	old, err := b.h.ReadFile(file)
	if err != nil {
		b.note(f, fmt.Sprintf("cannot read %s (%v): %s", file, err, why))
		return nil, nil
	}
	pid := s.Master
	if pid == 0 && len(s.PIDs) > 0 {
		pid = s.PIDs[0]
	}
	pr, err := b.h.Process(pid)
	if err != nil {
		b.note(f, fmt.Sprintf("%s master pid %d is gone (%v): %s", s.Kind, pid, err, why))
		return nil, nil
	}
	fe := &fileEdits{path: file, app: s.Kind, old: old}
	switch {
	case s.Nginx != nil:
		fe.validate, fe.reload = nginxValidate(s, pr), Reload{PID: pid, Start: pr.Start, Exe: pr.Exe, Signal: "HUP"}
	case s.Pool != nil:
		fe.validate, fe.reload = fpmValidate(s, pr), Reload{PID: pid, Start: pr.Start, Exe: pr.Exe, Signal: "USR2"}
	default:
		b.note(f, fmt.Sprintf("%s: netdoctor does not edit %s's configuration: %s", file, s.Kind, why))
		return nil, nil
	}
	fe.addReason(f, why)
	b.files[file] = fe
	b.order = append(b.order, file)
	return fe, nil
}

// nginxValidate is the command that checks nginx's new configuration
// as its master reads it: the same prefix and global directives.
func nginxValidate(s *app.Server, pr Proc) []string {
	inv, _ := nginx.ParseMaster(pr.Cmdline)
	v := []string{pr.Exe, "-t", "-q"}
	if p := inv.Prefix; p != "" {
		// A relative -p was taken from the master's working
		// directory; the check runs from ours.
		if !filepath.IsAbs(p) && pr.Cwd != "" {
			p = filepath.Join(pr.Cwd, p)
		}
		v = append(v, "-p", p)
	}
	v = append(v, "-c", s.Config)
	if g := inv.Globals; g != "" {
		v = append(v, "-g", g)
	}
	return v
}

// fpmValidate is the command that checks php-fpm's new configuration.
func fpmValidate(s *app.Server, pr Proc) []string {
	v := []string{pr.Exe, "-t", "-y", s.Config}
	if pr.UID == 0 {
		// A master running as root keeps a pool without `user` only
		// when started with -R, which its reload keeps (php-fpm
		// re-executes itself with its own arguments).
		v = append(v, "-R")
	}
	return v
}

// addReason records a finding and why it changes the file, once each.
func (fe *fileEdits) addReason(f report.Finding, why string) {
	if !slices.Contains(fe.findings, key(f)) {
		fe.findings = append(fe.findings, key(f))
	}
	if why != "" && !slices.Contains(fe.why, why) {
		fe.why = append(fe.why, why)
	}
}
