package tune

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/netdoctor/netdoctor/internal/app"
	"github.com/netdoctor/netdoctor/internal/netns"
	"github.com/netdoctor/netdoctor/internal/nginx"
	"github.com/netdoctor/netdoctor/internal/phpfpm"
)

// master is an application's master process as apply finds it now, and
// everything a change to its configuration may touch or run, derived
// from the process itself: the files it reads (its own `nginx -T`, or
// php-fpm's configuration walked as php-fpm walks it), the command that
// validates them (its own binary, /proc/PID/exe, with its own options)
// and the signal that reloads it. A plan names the master; what the plan
// says of its files, validation and reload is compared with this, never
// used.
type master struct {
	pid   int
	proc  Proc
	app   string   // "nginx", "php-fpm"
	main  string   // the main configuration file
	files []string // every file the master reads
	// tree is the main file's directory, symlinks resolved: a
	// configuration file that is a symlink must lead inside it.
	tree string
	// users may own a configuration file: root, the master and its
	// workers.
	users    []int
	validate []string
	reload   Reload
}

// masterTimeout bounds the configuration walk (nginx -T).
const masterTimeout = 10 * time.Second

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
	if pr.UID != 0 {
		// Its binary would run as root to validate the configuration:
		// only a binary root runs already.
		return nil, fmt.Errorf("%s's master pid %d runs as uid %d: netdoctor changes the configuration of masters running as root only", m.app, pid, pr.UID)
	}
	if err := sameRoot(pid); err != nil {
		return nil, err
	}
	exe, err := masterExe(pid)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), masterTimeout)
	defer cancel()
	switch m.app {
	case "nginx":
		inv.Dir = pr.Cwd
		err = m.readNginx(ctx, exe, inv)
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
	m.users = []int{0}
	for _, c := range append([]int{pid}, app.Children(pid)...) {
		if fi, err := os.Stat("/proc/" + strconv.Itoa(c)); err == nil && !slices.Contains(m.users, owner(fi)) {
			m.users = append(m.users, owner(fi))
		}
	}
	return m, nil
}

// readNginx runs the master's own binary with -T and its own options, in
// its network namespace (nginx -T binds the listen addresses), as
// discovery does.
func (m *master) readNginx(ctx context.Context, exe string, inv nginx.Invocation) error {
	var dump []byte
	err := netns.NS{Path: fmt.Sprintf("/proc/%d/ns/net", m.pid)}.Do(func() error {
		var err error
		dump, err = nginx.Dump(ctx, exe, inv)
		return err
	})
	if err != nil {
		return fmt.Errorf("nginx -T of pid %d: %w", m.pid, err)
	}
	cfg, err := nginx.Parse(dump)
	if cfg == nil {
		return fmt.Errorf("nginx -T of pid %d: %w", m.pid, err)
	}
	m.main, m.files = cfg.File, cfg.Files
	m.validate = nginxValidate(&app.Server{Config: cfg.File}, m.proc)
	m.reload = Reload{PID: m.pid, Start: m.proc.Start, Exe: m.proc.Exe, Signal: "HUP"}
	return nil
}

// readFPM walks php-fpm's configuration from its main file, as php-fpm
// does, through the master's own root.
func (m *master) readFPM(conf string) error {
	cfg, err := phpfpm.LoadWith(conf, phpfpm.Options{FS: os.DirFS(fmt.Sprintf("/proc/%d/root", m.pid))})
	if cfg == nil {
		return fmt.Errorf("php-fpm configuration of pid %d: %w", m.pid, err)
	}
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

// masterExe is the path of the binary pid runs, checked to be that
// binary still (not replaced or deleted since it started) and writable
// by root alone: apply runs it as root to validate.
func masterExe(pid int) (string, error) {
	link := fmt.Sprintf("/proc/%d/exe", pid)
	exe, err := os.Readlink(link)
	if err != nil {
		return "", fmt.Errorf("pid %d's binary: %w", pid, err)
	}
	if strings.HasSuffix(exe, " (deleted)") {
		return "", fmt.Errorf("pid %d's binary %s was deleted since it started (an upgrade?): restart it, then plan again", pid, exe)
	}
	running, err1 := os.Stat(link)
	onDisk, err2 := os.Stat(exe)
	if err := errors.Join(err1, err2); err != nil {
		return "", fmt.Errorf("pid %d's binary: %w", pid, err)
	}
	if !os.SameFile(running, onDisk) {
		return "", fmt.Errorf("%s is not the binary pid %d runs any more: restart it, then plan again", exe, pid)
	}
	if owner(onDisk) != 0 || onDisk.Mode().Perm()&0o022 != 0 {
		return "", fmt.Errorf("pid %d's binary %s may be written by others than root (uid %d, mode %v): netdoctor does not run it", pid, exe, owner(onDisk), onDisk.Mode().Perm())
	}
	return exe, nil
}

// configFile checks a file the plan changes against the master: one it
// reads, a regular file owned by root or the application's users, in a
// directory no one else may write, and when it is reached through a
// symlink, one inside the configuration's directory. It returns the file
// to write: the symlink's target, so that the link stays a link.
func (m *master) configFile(path string) (string, os.FileInfo, error) {
	if !slices.Contains(m.files, path) {
		return "", nil, fmt.Errorf("%s is not a file %s pid %d reads (its configuration has %d files, from %s)", path, m.app, m.pid, len(m.files), m.main)
	}
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return "", nil, err
	}
	if real != filepath.Clean(path) && !within(real, m.tree) {
		return "", nil, fmt.Errorf("%s leads to %s, outside %s's configuration directory %s", path, real, m.app, m.tree)
	}
	fi, err := os.Lstat(real)
	if err != nil {
		return "", nil, err
	}
	if !fi.Mode().IsRegular() {
		return "", nil, fmt.Errorf("%s is not a regular file (%v)", real, fi.Mode().Type())
	}
	if !slices.Contains(m.users, owner(fi)) {
		return "", nil, fmt.Errorf("%s belongs to uid %d, neither root nor %s's user", real, owner(fi), m.app)
	}
	dir, err := os.Stat(filepath.Dir(real))
	if err != nil {
		return "", nil, err
	}
	if !slices.Contains(m.users, owner(dir)) || dir.Mode().Perm()&0o002 != 0 {
		return "", nil, fmt.Errorf("%s's directory may be written by others (uid %d, mode %v)", real, owner(dir), dir.Mode().Perm())
	}
	return real, fi, nil
}

// within reports whether path is dir or below it.
func within(path, dir string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}

// owner is a file's owner.
func owner(fi os.FileInfo) int {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return int(st.Uid)
	}
	return -1
}
