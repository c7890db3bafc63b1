package tune

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	udiff "github.com/aymanbagabas/go-udiff"
	"golang.org/x/sys/unix"

	"github.com/netdoctor/netdoctor/internal/app"
	"github.com/netdoctor/netdoctor/internal/durable"
	"github.com/netdoctor/netdoctor/internal/journal"
	"github.com/netdoctor/netdoctor/internal/netns"
	"github.com/netdoctor/netdoctor/internal/nginx"
	"github.com/netdoctor/netdoctor/internal/phpfpm"
	"github.com/netdoctor/netdoctor/internal/sizing"
	"github.com/netdoctor/netdoctor/internal/sysctl"
	"github.com/netdoctor/netdoctor/internal/trust"
)

// ErrNotRoot reports an apply or rollback without the privileges to
// write kernel settings and other processes' sockets.
var ErrNotRoot = errors.New("not permitted: tune apply and rollback need root")

// ErrUnfinished reports an apply that did not finish.
var ErrUnfinished = errors.New("a previous apply did not finish")

// Options steer Apply.
type Options struct {
	// NetNS, unless the caller's own, overrides the namespace of every
	// per-namespace change.
	NetNS netns.NS
	// Persist writes host-namespace settings to PersistFile; Config
	// writes the configuration files, validates them and reloads.
	Persist, Config bool
	// DryRun shows what would change and changes nothing.
	DryRun bool
	// StepDelay pauses between changes (tests kill apply halfway).
	StepDelay time.Duration
	Out       io.Writer
}

// op is one concrete step: a journal entry and how to make it.
type op struct {
	entry Entry
	do    func() error
	desc  string
	// detail is what the dry run shows below desc: a file's diff, as
	// computed now from the file and the content apply would write.
	detail []string
}

// Apply makes a plan's changes, journal first. On any failure it rolls
// back what it changed and returns the error; the journal then says
// rolled-back.
func Apply(ctx context.Context, p *Plan, planPath string, o Options) (*Journal, error) {
	out := o.Out
	if out == nil {
		out = io.Discard
	}
	if !o.DryRun && os.Geteuid() != 0 {
		return nil, ErrNotRoot
	}
	if open, err := Open(); err != nil {
		return nil, err
	} else {
		for _, j := range open {
			if j.State == StateApplying && j.PID != os.Getpid() && j.Alive() {
				return nil, fmt.Errorf("%w: apply pid %d is still running (%s)", ErrUnfinished, j.PID, j.Path)
			}
			if j.State == StateApplying {
				return nil, fmt.Errorf("%w (%s): run `netdoctor tune rollback` first", ErrUnfinished, j.Path)
			}
		}
	}
	ops, skipped, err := prepare(p, o)
	if err != nil {
		return nil, err
	}
	for _, s := range skipped {
		fmt.Fprintf(out, "  skip: %s\n", s)
	}
	if len(ops) == 0 {
		fmt.Fprintf(out, "Nothing to change: every setting is already as planned.\n")
		return nil, nil
	}
	if o.DryRun {
		fmt.Fprintf(out, "Dry run: %d changes would be made (apply with --yes to make them):\n", len(ops))
		for i, op := range ops {
			fmt.Fprintf(out, "  %d. %s\n", i+1, op.desc)
			for _, l := range op.detail {
				fmt.Fprintf(out, "     | %s\n", l)
			}
		}
		return nil, nil
	}
	j, err := newJournal(planPath)
	if err != nil {
		return nil, err
	}
	for _, op := range ops {
		j.Entries = append(j.Entries, op.entry)
	}
	if err := j.save(); err != nil {
		return nil, err
	}
	fmt.Fprintf(out, "Journal: %s\n", j.Path)
	for i, op := range ops {
		if i > 0 && o.StepDelay > 0 {
			time.Sleep(o.StepDelay)
		}
		if err := ctx.Err(); err != nil {
			return j, undo(j, out, fmt.Errorf("interrupted before %s", op.desc))
		}
		if err := op.do(); err != nil {
			return j, undo(j, out, fmt.Errorf("%s: %w", op.desc, err))
		}
		j.Entries[i].Done = true
		if err := j.save(); err != nil {
			return j, undo(j, out, err)
		}
		fmt.Fprintf(out, "  done: %s\n", op.desc)
	}
	j.State = StateApplied
	if err := j.save(); err != nil {
		return j, err
	}
	return j, nil
}

// undo rolls back after a failed apply and returns the failure.
func undo(j *Journal, out io.Writer, cause error) error {
	fmt.Fprintf(out, "  FAILED: %v\nRolling back:\n", cause)
	if err := Rollback(j, out); err != nil {
		return fmt.Errorf("%w; rollback: %v (journal %s)", cause, err, j.Path)
	}
	return cause
}

// prepare reads the live state for every change and turns the plan into
// steps; changes already made are skipped, unsafe ones refused. What
// decides what happens is derived here, now: the setting's name and the
// value's bounds from the set netdoctor plans (allowed.go), a file from
// the master that reads it (master_linux.go) with only netdoctor's edits
// (editcheck.go), the commands from that master. The plan contributes
// values and diffs, checked before anything is written or run.
func prepare(p *Plan, o Options) (ops []op, skipped []string, err error) {
	var persist []Sysctl
	masters := map[int]*master{}
	for _, c := range p.Changes {
		var (
			st   op
			skip string
			err  error
		)
		switch {
		case c.Sysctl != nil:
			s := *c.Sysctl
			if !o.NetNS.Own() && !s.Global {
				s.Scope = Scope{NetNS: o.NetNS.String()}
			}
			st, skip, err = sysctlOp(s)
			if hostNS(s.Scope) {
				persist = append(persist, s)
			} else if o.Persist {
				skipped = append(skipped, fmt.Sprintf("not persisted: %s in %s (%s applies to the initial namespace at boot: set it where the namespace is created)", s.Name, s.Scope, PersistFile))
			}
		case c.File != nil && !o.Config:
			skip = fmt.Sprintf("%s (configuration: apply with --config)", c.Title())
		case c.File != nil:
			st, skip, err = fileOp(c.File, masters)
		case c.Listen != nil:
			l := *c.Listen
			if !o.NetNS.Own() {
				l.Scope = Scope{NetNS: o.NetNS.String()}
			}
			st, skip, err = listenOp(l)
		}
		switch {
		case err != nil:
			return nil, nil, err
		case skip != "":
			skipped = append(skipped, skip)
		default:
			ops = append(ops, st)
		}
	}
	if o.Persist {
		po, skip, err := persistOp(persist)
		if err != nil {
			return nil, nil, err
		}
		if skip != "" {
			skipped = append(skipped, skip)
		} else if po != nil {
			ops = append(ops, *po)
		}
	}
	return ops, skipped, nil
}

// hostNS reports a scope in the initial namespace: only its settings
// belong in /etc/sysctl.d, which boot applies there.
func hostNS(s Scope) bool {
	if s.Global {
		return true
	}
	p, err := s.path()
	if err != nil {
		return false
	}
	init, err := initNetNS()
	if err != nil {
		return false
	}
	a, err1 := netnsInode(p)
	b, err2 := netnsInode(init)
	return err1 == nil && err2 == nil && a == b
}

func sysctlOp(s Sysctl) (op, string, error) {
	if err := checkAllowed(s); err != nil {
		return op{}, "", fmt.Errorf("refused: %w: the plan was edited, or not made by netdoctor", err)
	}
	if err := Check(Change{Sysctl: &s}); err != nil {
		return op{}, "", fmt.Errorf("refused: %w", err)
	}
	if err := s.Scope.check(); err != nil {
		return op{}, "", err
	}
	path, err := s.Scope.path()
	if err != nil {
		return op{}, "", err
	}
	cur, err := sysctl.Read(netns.NS{Path: path}, s.Name)
	if errors.Is(err, fs.ErrNotExist) {
		return op{}, "", fmt.Errorf("refused: %s does not exist on this kernel (%s)", s.Name, s.Scope)
	}
	if err != nil {
		return op{}, "", fmt.Errorf("read %s (%s): %w", s.Name, s.Scope, err)
	}
	if cur == s.Proposed {
		return op{}, fmt.Sprintf("sysctl %s is already %s (%s)", s.Name, cur, s.Scope), nil
	}
	if err := checkLive(s, cur); err != nil {
		return op{}, "", fmt.Errorf("refused: %w: make a new plan", err)
	}
	if used, what, ok := usage(s); ok && atoi(s.Proposed) < used {
		return op{}, "", fmt.Errorf("refused: %s = %s is below current usage (%s %d): make a new plan", s.Name, s.Proposed, what, used)
	}
	ino, err := netnsInode(path)
	if err != nil {
		return op{}, "", err
	}
	desc := fmt.Sprintf("sysctl %s: %s → %s (%s)", s.Name, cur, s.Proposed, s.Scope)
	if cur != s.Current {
		desc += fmt.Sprintf(" [was %s when planned]", s.Current)
	}
	e := Entry{Key: "sysctl:" + s.Name + "@" + s.Scope.String(), Title: desc,
		Sysctl: &SysctlWas{Name: s.Name, Old: cur, New: s.Proposed, Path: path, Inode: ino, Global: s.Global, Scope: s.Scope.String()}}
	return op{entry: e, desc: desc, do: func() error { return sysctl.Write(netns.NS{Path: path}, s.Name, s.Proposed) }}, "", nil
}

func netnsInode(path string) (uint64, error) {
	if path == "" {
		path = "/proc/thread-self/ns/net"
	}
	return netns.Inode(path)
}

// usage is what a limit must not go below.
func usage(s Sysctl) (int, string, bool) {
	switch s.Name {
	case "net.netfilter.nf_conntrack_max":
		v, err := Live{}.Sysctl(Scope{Global: true}, "net.netfilter.nf_conntrack_count")
		return atoi(v), "nf_conntrack_count", err == nil
	case "fs.file-max":
		v, err := Live{}.Sysctl(Scope{Global: true}, "fs.file-nr")
		return atoi(v), "open files (fs.file-nr)", err == nil
	}
	return 0, "", false
}

// fileOp checks a file change against its master as it runs now: the
// file one it reads, the content the file as it is with netdoctor's
// edits only, and the validation and reload the master's own.
func fileOp(f *File, masters map[int]*master) (op, string, error) {
	refuse := func(err error) (op, string, error) {
		return op{}, "", fmt.Errorf("refused: %s config %s: %w: make a new plan", f.App, f.Path, err)
	}
	if f.App != "nginx" && f.App != "php-fpm" {
		return refuse(fmt.Errorf("netdoctor changes nginx's and php-fpm's configuration only"))
	}
	m, ok := masters[f.Reload.PID]
	if !ok {
		var err error
		if m, err = findMaster(f.Reload.PID, f.Reload.Start); err != nil {
			if errors.Is(err, fs.ErrPermission) && os.Geteuid() != 0 {
				return op{}, "", fmt.Errorf("%s config %s: checking its master needs root: %w", f.App, f.Path, err)
			}
			return refuse(err)
		}
		masters[f.Reload.PID] = m
	}
	if m.app != f.App {
		return refuse(fmt.Errorf("pid %d is %s's master", m.pid, m.app))
	}
	path, st, err := m.configFile(f.Path)
	if err != nil {
		return refuse(err)
	}
	if !slices.Equal(f.Validate, m.validate) {
		return refuse(fmt.Errorf("the plan validates with `%s`, not with the master's own `%s`", strings.Join(f.Validate, " "), strings.Join(m.validate, " ")))
	}
	if f.Reload != m.reload {
		return refuse(fmt.Errorf("the plan reloads with %s, not %s", f.Reload, m.reload))
	}
	old, err := os.ReadFile(path)
	if err != nil {
		return refuse(err)
	}
	content := []byte(f.Content)
	switch {
	case sum(content) != f.New:
		return refuse(fmt.Errorf("its content does not hash to its new_sha256"))
	case sum(old) == f.New:
		return op{}, fmt.Sprintf("%s already has the planned content", f.Path), nil
	case sum(old) != f.Old:
		return refuse(fmt.Errorf("changed since the plan was made (sha256 %s, planned from %.12s)", sum(old)[:12], f.Old))
	}
	if err := checkEdits(f.App, old, content); err != nil {
		return refuse(fmt.Errorf("not an edit netdoctor makes: %w", err))
	}
	if m.untrusted != nil {
		return refuse(fmt.Errorf("its validation would read or load what root does not control alone: %w", m.untrusted))
	}
	sys := st.Sys().(*syscall.Stat_t)
	mode, uid, gid := st.Mode().Perm(), int(sys.Uid), int(sys.Gid)
	diff := udiff.Unified("a"+path, "b"+path, string(old), f.Content)
	argv, reload := m.validate, m.reload
	desc := fmt.Sprintf("%s config %s: %d lines changed, validate (%s), reload (%s)", f.App, path, changedLines(diff), strings.Join(argv, " "), reload)
	e := Entry{Key: "file:" + path, Title: desc, File: &FileWas{Path: path, Existed: true, Mode: uint32(mode),
		UID: uid, GID: gid, Old: old, OldSHA: f.Old, NewSHA: f.New, App: f.App, Check: argv, Reload: &reload}}
	return op{entry: e, desc: desc, detail: strings.Split(strings.TrimRight(diff, "\n"), "\n"), do: func() error {
		if err := durable.WriteFile(path, content, mode, uid, gid); err != nil {
			return err
		}
		if err := validate(argv, reload.PID); err != nil {
			// Put the old file back at once; rollback would too, but the
			// error should leave no doubt the file is as it was.
			if rerr := durable.WriteFile(path, old, mode, uid, gid); rerr != nil {
				return fmt.Errorf("%w; restoring %s: %v", err, path, rerr)
			}
			return fmt.Errorf("%w (old %s restored)", err, path)
		}
		return reloadApp(reload)
	}}, "", nil
}

// validate runs the application's configuration check in the
// application's network namespace (nginx -t binds its listen addresses):
// the child is forked from a thread inside it.
func validate(argv []string, pid int) error {
	if len(argv) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out []byte
	err := netns.NS{Path: fmt.Sprintf("/proc/%d/ns/net", pid)}.Do(func() error {
		var err error
		out, err = exec.CommandContext(ctx, argv[0], argv[1:]...).CombinedOutput()
		return err
	})
	if err != nil {
		msg := strings.Join(strings.Fields(strings.ReplaceAll(string(out), "\n", "; ")), " ")
		return fmt.Errorf("validation failed: %s: %v: %s", strings.Join(argv, " "), err, msg)
	}
	return nil
}

// reloadApp signals the master and waits until it has taken the new
// configuration: nginx starts new workers; php-fpm's master re-executes
// itself in place (same PID) and forks its pool again.
func reloadApp(r Reload) error {
	if err := alive(r.PID, r.Start); err != nil {
		return err
	}
	before := app.Children(r.PID)
	sig := unix.SIGHUP
	if r.Signal == "USR2" {
		sig = unix.SIGUSR2
	}
	if err := unix.Kill(r.PID, sig); err != nil {
		return fmt.Errorf("reload %s: %w", r, err)
	}
	// A worker the master did not have before is the new
	// configuration's: nginx forks them only once it has read it. The
	// old workers are waited for while they finish what they hold, but
	// not past the deadline: after a load that overflowed an upstream,
	// they may finish its requests for longer (TestTuneLab's rollback),
	// and the new configuration is in force already.
	deadline := time.Now().Add(10 * time.Second)
	fresh := false
	for time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
		if !processAlive(r.PID) {
			return fmt.Errorf("reload %s: the master exited", r)
		}
		now := app.Children(r.PID)
		fresh = slices.ContainsFunc(now, func(c int) bool { return !slices.Contains(before, c) })
		if fresh && !overlaps(before, now) {
			return nil
		}
	}
	if fresh {
		return nil
	}
	return fmt.Errorf("reload %s: no new workers within 10 s", r)
}

func overlaps(a, b []int) bool {
	for _, x := range a {
		for _, y := range b {
			if x == y {
				return true
			}
		}
	}
	return false
}

func processAlive(pid int) bool {
	return pid > 0 && unix.Kill(pid, 0) == nil
}

// alive checks that pid is still the process the plan saw.
func alive(pid int, start uint64) error {
	st, err := procfs.Stat(strconv.Itoa(pid))
	if err != nil {
		return fmt.Errorf("pid %d is gone", pid)
	}
	if start != 0 && st.StartTime != start {
		return fmt.Errorf("pid %d is another process now (restarted since the plan)", pid)
	}
	return nil
}

// listenOp sets a listener's backlog again: on a socket of an nginx or
// php-fpm master, as the plan found it, with a backlog within the
// accept queue's bounds.
func listenOp(l Listener) (op, string, error) {
	if err := l.Scope.check(); err != nil {
		return op{}, "", err
	}
	if err := listenerOK(l); err != nil {
		return op{}, "", fmt.Errorf("refused: listener %s: %w: make a new plan", l.Addr, err)
	}
	cur, err := backlogOf(l.PID, l.Addr)
	if err != nil {
		return op{}, "", fmt.Errorf("listener %s: %w", l.Addr, err)
	}
	comm := "pid"
	if st, err := procfs.Stat(strconv.Itoa(l.PID)); err == nil {
		comm = st.Comm + " pid"
	}
	desc := fmt.Sprintf("listen() again on %s (%s %d): backlog %d → %d", l.Addr, comm, l.PID, cur, l.Proposed)
	if cur >= l.Proposed {
		return op{}, fmt.Sprintf("listener %s already has backlog %d", l.Addr, cur), nil
	}
	e := Entry{Key: "listen:" + l.Addr, Title: desc, Listen: &ListenWas{Addr: l.Addr, PID: l.PID, Start: l.Start, Old: cur, New: l.Proposed}}
	return op{entry: e, desc: desc, do: func() error {
		got, err := relisten(l.PID, l.Addr, l.Backlog)
		if err != nil {
			return err
		}
		if got < l.Proposed {
			return fmt.Errorf("listener %s: backlog %d after listen(%d), want %d (net.core.somaxconn lower than planned?)", l.Addr, got, l.Backlog, l.Proposed)
		}
		return nil
	}}, "", nil
}

// listenerOK checks a listener change: the process the plan saw, an
// nginx or php-fpm master, and backlogs netdoctor would ask for.
func listenerOK(l Listener) error {
	if l.Start == 0 {
		return fmt.Errorf("the plan lacks pid %d's start time", l.PID)
	}
	if err := alive(l.PID, l.Start); err != nil {
		return err
	}
	pr, err := Live{}.Process(l.PID)
	if err != nil {
		return err
	}
	if _, ok := nginx.ParseMaster(pr.Cmdline); !ok {
		if _, ok := phpfpm.ParseMaster(pr.Cmdline); !ok {
			return fmt.Errorf("pid %d (%s) is not an nginx or php-fpm master", l.PID, pr.Comm)
		}
	}
	// listen() on a copy of its socket acts on the process: only on a
	// master root runs already.
	if err := trust.Process("/proc", l.PID); err != nil {
		return fmt.Errorf("%w: netdoctor re-listens on masters running as root only", err)
	}
	if _, _, err := net.SplitHostPort(l.Addr); err != nil {
		return err
	}
	if l.Backlog != -1 && (l.Backlog < 1 || l.Backlog > sizing.MaxBacklog) || l.Proposed < 1 || l.Proposed > sizing.MaxBacklog {
		return fmt.Errorf("backlog %d (effective %d) is outside netdoctor's bounds: -1 or 1–%d", l.Backlog, l.Proposed, sizing.MaxBacklog)
	}
	return nil
}

// listeners finds the listening sockets bound to addr among pid's
// descriptors, as copies (pidfd_getfd) the caller closes.
func listeners(pid int, addr string) ([]int, error) {
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	pfd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return nil, fmt.Errorf("pidfd_open %d: %w", pid, err)
	}
	defer unix.Close(pfd)
	var out []int
	for _, e := range ents {
		link, err := os.Readlink(filepath.Join(dir, e.Name()))
		if err != nil || !strings.HasPrefix(link, "socket:") {
			continue
		}
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		fd, err := unix.PidfdGetfd(pfd, n, 0)
		if err != nil {
			continue
		}
		if acc, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_ACCEPTCONN); err != nil || acc != 1 || sockAddr(fd) != addr {
			unix.Close(fd)
			continue
		}
		out = append(out, fd)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("pid %d holds no listening socket on %s", pid, addr)
	}
	return out, nil
}

func sockAddr(fd int) string {
	sa, err := unix.Getsockname(fd)
	if err != nil {
		return ""
	}
	switch a := sa.(type) {
	case *unix.SockaddrInet4:
		return net.JoinHostPort(net.IP(a.Addr[:]).String(), strconv.Itoa(a.Port))
	case *unix.SockaddrInet6:
		return net.JoinHostPort(net.IP(a.Addr[:]).String(), strconv.Itoa(a.Port))
	}
	return ""
}

// backlogOf is a listener's effective backlog: for a listening socket
// TCP_INFO's sacked field is sk_max_ack_backlog.
func backlogOf(pid int, addr string) (int, error) {
	fds, err := listeners(pid, addr)
	if err != nil {
		return 0, err
	}
	defer closeAll(fds)
	ti, err := unix.GetsockoptTCPInfo(fds[0], unix.IPPROTO_TCP, unix.TCP_INFO)
	if err != nil {
		return 0, err
	}
	return int(ti.Sacked), nil
}

// relisten calls listen() on the process's own listening sockets: on a
// socket already listening the kernel only sets the new backlog,
// min(backlog, net.core.somaxconn of the socket's namespace).
func relisten(pid int, addr string, backlog int) (int, error) {
	fds, err := listeners(pid, addr)
	if err != nil {
		return 0, err
	}
	defer closeAll(fds)
	for _, fd := range fds {
		if err := unix.Listen(fd, backlog); err != nil {
			return 0, fmt.Errorf("listen(%s, %d): %w", addr, backlog, err)
		}
	}
	ti, err := unix.GetsockoptTCPInfo(fds[0], unix.IPPROTO_TCP, unix.TCP_INFO)
	if err != nil {
		return 0, err
	}
	return int(ti.Sacked), nil
}

func closeAll(fds []int) {
	for _, fd := range fds {
		unix.Close(fd)
	}
}

// persistOp writes the host-namespace settings to PersistFile, replacing
// earlier lines for the same keys and keeping everything else.
func persistOp(settings []Sysctl) (*op, string, error) {
	if len(settings) == 0 {
		return nil, "", nil
	}
	old, err := os.ReadFile(PersistFile)
	existed := err == nil
	if err != nil && !os.IsNotExist(err) {
		return nil, "", err
	}
	data := persistContent(old, existed, settings)
	if existed && bytes.Equal(old, data) {
		return nil, PersistFile + " already holds these settings", nil
	}
	desc := fmt.Sprintf("persist %d settings in %s", len(settings), PersistFile)
	e := Entry{Key: "file:" + PersistFile, Title: desc, File: &FileWas{Path: PersistFile, Existed: existed, Mode: 0o644, Old: old, OldSHA: sum(old), NewSHA: sum(data)}}
	return &op{entry: e, desc: desc, do: func() error {
		if err := os.MkdirAll(filepath.Dir(PersistFile), 0o755); err != nil {
			return err
		}
		return durable.WriteFile(PersistFile, data, 0o644, 0, 0)
	}}, "", nil
}

// Rollback restores every entry of a journal, whether or not it was
// marked done, in the order apply made them (journal.AsMade, not latest
// first): kernel limits first, so that an application reloaded with its
// old configuration, or a listener set back, is capped as it was before.
// Every entry is tried; the journal says rolled-back only when all were
// restored.
func Rollback(j *Journal, out io.Writer) error {
	if os.Geteuid() != 0 {
		return ErrNotRoot
	}
	return journal.Undo(j.Entries, journal.AsMade, func(e Entry) error {
		msg, err := restore(e)
		if err != nil {
			fmt.Fprintf(out, "  FAILED: %s: %v\n", e.Key, err)
			return fmt.Errorf("%s: %w", e.Key, err)
		}
		fmt.Fprintf(out, "  %s\n", msg)
		return nil
	}, func() error {
		j.State = StateRolledBack
		return j.save()
	})
}

func restore(e Entry) (string, error) {
	switch {
	case e.Sysctl != nil:
		s := *e.Sysctl
		if s.Global {
			p, err := initNetNS()
			if err != nil {
				return "", err
			}
			s.Path = p
		}
		if s.Path != "" {
			if _, err := os.Stat(s.Path); err != nil {
				return fmt.Sprintf("sysctl %s: namespace %s is gone, nothing to restore", s.Name, s.Path), nil
			}
		}
		ino, err := netnsInode(s.Path)
		if err != nil {
			return "", err
		}
		if ino != s.Inode {
			if s.Path == "" {
				return "", fmt.Errorf("run rollback in the namespace apply ran in (inode %d, this is %d)", s.Inode, ino)
			}
			return fmt.Sprintf("sysctl %s: %s is another namespace now (inode %d, was %d), nothing to restore", s.Name, s.Path, ino, s.Inode), nil
		}
		cur, err := sysctl.Read(netns.NS{Path: s.Path}, s.Name)
		if err != nil {
			return "", err
		}
		if cur == s.Old {
			return fmt.Sprintf("sysctl %s is %s as it was (%s)", s.Name, s.Old, s.Scope), nil
		}
		if err := sysctl.Write(netns.NS{Path: s.Path}, s.Name, s.Old); err != nil {
			return "", err
		}
		return fmt.Sprintf("sysctl %s = %s restored (%s)", s.Name, s.Old, s.Scope), nil
	case e.File != nil:
		f := e.File
		cur, err := os.ReadFile(f.Path)
		if err != nil && !os.IsNotExist(err) {
			return "", err
		}
		if !f.Existed {
			if err == nil {
				if err := os.Remove(f.Path); err != nil {
					return "", err
				}
				durable.SyncDir(filepath.Dir(f.Path))
			}
			return fmt.Sprintf("%s removed (netdoctor created it)", f.Path), nil
		}
		if err == nil && sum(cur) == f.OldSHA {
			return fmt.Sprintf("%s is as it was", f.Path), nil
		}
		if err := durable.WriteFile(f.Path, f.Old, os.FileMode(f.Mode), f.UID, f.GID); err != nil {
			return "", err
		}
		if b, err := os.ReadFile(f.Path); err != nil || sum(b) != f.OldSHA {
			return "", fmt.Errorf("%s does not read back as it was (sha256 %s)", f.Path, f.OldSHA[:12])
		}
		msg := fmt.Sprintf("%s restored (sha256 %s)", f.Path, f.OldSHA[:12])
		if f.Reload != nil {
			if err := alive(f.Reload.PID, f.Reload.Start); err != nil {
				return msg + fmt.Sprintf(" (%s not reloaded: %v)", f.App, err), nil
			}
			if err := validate(f.Check, f.Reload.PID); err != nil {
				return "", fmt.Errorf("%s restored but %w", f.Path, err)
			}
			if err := reloadApp(*f.Reload); err != nil {
				return "", fmt.Errorf("%s restored: %w", f.Path, err)
			}
			msg += ", " + f.App + " reloaded"
		}
		return msg, nil
	case e.Listen != nil:
		l := e.Listen
		if err := alive(l.PID, l.Start); err != nil {
			return fmt.Sprintf("listener %s: %v, nothing to restore", l.Addr, err), nil
		}
		got, err := relisten(l.PID, l.Addr, l.Old)
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("listener %s backlog %d restored", l.Addr, got), nil
	}
	return "", fmt.Errorf("empty journal entry")
}
