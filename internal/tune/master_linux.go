package tune

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/netdoctor/netdoctor/internal/app"
	"github.com/netdoctor/netdoctor/internal/nginx"
	"github.com/netdoctor/netdoctor/internal/phpfpm"
	"github.com/netdoctor/netdoctor/internal/trust"
)

// master is an application's master process as apply finds it now, and
// everything a change to its configuration may touch or run, derived
// from the process itself: the files it reads (nginx's by netdoctor's own
// parse, or php-fpm's configuration walked as php-fpm walks it), the command that
// validates them (its own binary, /proc/PID/exe, with its own options)
// and the signal that reloads it. A plan names the master; what the plan
// says of its files, validation and reload is compared with this, never
// used.
type master struct {
	pid   int
	proc  Proc
	app   string   // "nginx", "php-fpm"
	main  string   // the main configuration file
	files []string // every file the master reads, by netdoctor's own parse
	// tree is the main file's directory, symlinks resolved: a
	// configuration file that is a symlink must lead inside it.
	tree string
	// untrusted says why the validation may not run: a file it would
	// read or load (an include, a module) that root does not control
	// alone, or could not be checked. Apply then refuses.
	untrusted error
	validate  []string
	reload    Reload
}

// findMaster checks that pid is, now, the master process started at
// start, and reads what it reads.
func findMaster(pid int, start uint64) (*master, error) {
	if start == 0 {
		return nil, fmt.Errorf("the plan lacks pid %d's start time", pid)
	}
	if err := alive(pid, start); err != nil {
		return nil, err
	}
	pr, err := Live{}.Process(pid)
	if err != nil {
		return nil, fmt.Errorf("pid %d: %w", pid, err)
	}
	if pr.Start != start {
		return nil, fmt.Errorf("pid %d is another process now (restarted since the plan)", pid)
	}
	m := &master{pid: pid, proc: pr}
	inv, isNginx := nginx.ParseMaster(pr.Cmdline)
	conf, isFPM := phpfpm.ParseMaster(pr.Cmdline)
	switch {
	case isNginx:
		m.app = "nginx"
	case isFPM:
		m.app = "php-fpm"
	default:
		return nil, fmt.Errorf("pid %d (%s) is not an nginx or php-fpm master", pid, pr.Comm)
	}
	// Its binary runs as root to validate the configuration, and the
	// master reloads as root: only a master root runs already, from a
	// binary root alone controls (package trust).
	if err := trust.Process("/proc", pid); err != nil {
		return nil, fmt.Errorf("%s's master: %w: netdoctor changes the configuration of masters running as root only", m.app, err)
	}
	if err := sameRoot(pid); err != nil {
		return nil, err
	}
	exe, err := trust.Exe("/proc", pid)
	if err != nil {
		return nil, fmt.Errorf("pid %d's binary: %w: netdoctor does not run it (restart it from a binary root alone controls, then plan again)", pid, err)
	}
	switch m.app {
	case "nginx":
		err = m.readNginx(exe, inv)
	case "php-fpm":
		if !filepath.IsAbs(conf) {
			conf = filepath.Join(pr.Cwd, conf)
		}
		err = m.readFPM(conf)
	}
	if err != nil {
		return nil, err
	}
	if m.tree, err = filepath.EvalSymlinks(filepath.Dir(m.main)); err != nil {
		return nil, fmt.Errorf("%s's configuration directory: %w", m.app, err)
	}
	return m, nil
}

// rootFS reads the files of a master in apply's own root (sameRoot) as
// files root alone controls.
var rootFS = trust.FS{Root: "/", Mode: trust.Owned}

// readNginx reads the master's configuration as nginx reads it, with
// netdoctor's own parser (the files are those its includes name, never
// what a line inside one says), and checks every module it loads: nginx
// -t loads and runs them.
func (m *master) readNginx(exe string, inv nginx.Invocation) error {
	f, err := rootFS.Open(strings.TrimPrefix(exe, "/"))
	if err != nil {
		return fmt.Errorf("pid %d's binary: %w", m.pid, err)
	}
	build, ok, err := nginx.ScanBuild(f.(io.Reader))
	f.Close()
	if err != nil || !ok {
		return fmt.Errorf("pid %d's binary %s: its build options not found (%v)", m.pid, exe, err)
	}
	build = build.With(inv)
	cfg, err := nginx.Read(rootFS, build.Main(m.proc.Cwd))
	if cfg == nil {
		return fmt.Errorf("nginx configuration of pid %d: %w", m.pid, err)
	}
	var untrusted []error
	if err != nil {
		untrusted = append(untrusted, err)
	}
	for _, mod := range cfg.Modules(build.AbsPrefix(m.proc.Cwd)) {
		if f, err := rootFS.Open(strings.TrimPrefix(mod, "/")); err != nil {
			untrusted = append(untrusted, fmt.Errorf("load_module %s: %w", mod, err))
		} else {
			f.Close()
		}
	}
	m.untrusted = errors.Join(untrusted...)
	m.main, m.files = cfg.File, cfg.Files
	m.validate = nginxValidate(&app.Server{Config: cfg.File}, m.proc)
	m.reload = Reload{PID: m.pid, Start: m.proc.Start, Exe: m.proc.Exe, Signal: "HUP"}
	return nil
}

// readFPM walks php-fpm's configuration from its main file, as php-fpm
// does, as files root alone controls; an include directory that cannot
// be checked (fs.Glob skips it silently) is untrusted too.
func (m *master) readFPM(conf string) error {
	cfg, err := phpfpm.LoadWith(conf, phpfpm.Options{FS: rootFS})
	if cfg == nil {
		return fmt.Errorf("php-fpm configuration of pid %d: %w", m.pid, err)
	}
	var untrusted []error
	if errors.Is(err, trust.ErrUntrusted) {
		untrusted = append(untrusted, err)
	}
	for _, inc := range cfg.Includes {
		dir := filepath.Dir(inc.Pattern)
		if f, err := rootFS.Open(strings.TrimPrefix(filepath.Clean(dir), "/")); err != nil {
			untrusted = append(untrusted, fmt.Errorf("include %s: %w", inc.Pattern, err))
		} else {
			f.Close()
		}
	}
	m.untrusted = errors.Join(untrusted...)
	m.main, m.files = conf, cfg.Files
	m.validate = fpmValidate(&app.Server{Config: conf}, m.proc)
	m.reload = Reload{PID: m.pid, Start: m.proc.Start, Exe: m.proc.Exe, Signal: "USR2"}
	return nil
}

// sameRoot checks that pid sees the files as apply does: a master in a
// container names paths of its own root, which are other files here.
func sameRoot(pid int) error {
	theirs, err := os.Stat(fmt.Sprintf("/proc/%d/root", pid))
	if err != nil {
		return fmt.Errorf("pid %d's root: %w", pid, err)
	}
	ours, err := os.Stat("/")
	if err != nil {
		return err
	}
	if !os.SameFile(theirs, ours) {
		return fmt.Errorf("pid %d runs in another root (a container): change its configuration there", pid)
	}
	return nil
}

// configFile checks a file the plan changes against the master: one it
// reads by netdoctor's own parse, a regular file root alone controls down
// its whole path (package trust), and when it is reached through a
// symlink, one inside the configuration's directory. It returns the file
// to write: the symlink's target, so that the link stays a link.
func (m *master) configFile(path string) (string, os.FileInfo, error) {
	if !slices.Contains(m.files, path) {
		if f, err := rootFS.Open(strings.TrimPrefix(filepath.Clean(path), "/")); errors.Is(err, trust.ErrUntrusted) {
			return "", nil, err // why the parse left it out
		} else if err == nil {
			f.Close()
		}
		return "", nil, fmt.Errorf("%s is not a file %s pid %d reads (its configuration has %d files, from %s)", path, m.app, m.pid, len(m.files), m.main)
	}
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return "", nil, err
	}
	if real != filepath.Clean(path) && !within(real, m.tree) {
		return "", nil, fmt.Errorf("%s leads to %s, outside %s's configuration directory %s", path, real, m.app, m.tree)
	}
	f, err := rootFS.Open(strings.TrimPrefix(filepath.Clean(path), "/"))
	if err != nil {
		return "", nil, err
	}
	defer f.Close()
	opened, err := f.Stat()
	if err != nil {
		return "", nil, err
	}
	fi, err := os.Lstat(real)
	if err != nil {
		return "", nil, err
	}
	if !fi.Mode().IsRegular() || !os.SameFile(fi, opened) {
		return "", nil, fmt.Errorf("%s changed while being checked", real)
	}
	return real, fi, nil
}

// within reports whether path is dir or below it.
func within(path, dir string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}
