package lab

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/netdoctor/netdoctor/internal/netns"
)

// Env is one test bed: a server and a client namespace joined by a veth
// pair, server at ServerIP, client at ClientIP, no route anywhere else.
type Env struct {
	Name               string
	ServerNS, ClientNS string // names under /run/netns
	ServerIP, ClientIP string
	ServerDev          string // the server's end of the veth
	ClientDev          string
	Dir                string // config files, logs and sockets

	mu       sync.Mutex
	state    *state
	procs    []*Proc
	restores []func() error // run last first by Close
	closed   bool
}

// ErrNeedsRoot reports that building a lab needs root.
var ErrNeedsRoot = errors.New("the lab needs root: it creates network namespaces")

// New creates the namespaces and the veth. id tells concurrent labs
// apart; it picks the names (nd-ID-srv, nd-ID-cli) and the subnet
// 10.99.N.0/24 with N from it. On error nothing is left behind.
func New(id string) (*Env, error) {
	if os.Geteuid() != 0 {
		return nil, ErrNeedsRoot
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return nil, fmt.Errorf("the lab needs ip(8) from iproute2: %w", err)
	}
	n := 1
	for _, c := range id {
		n = (n*31 + int(c)) % 250
	}
	e := &Env{
		Name:     id,
		ServerNS: "nd-" + id + "-srv", ClientNS: "nd-" + id + "-cli",
		ServerIP: fmt.Sprintf("10.99.%d.1", n+1), ClientIP: fmt.Sprintf("10.99.%d.2", n+1),
		ServerDev: "nds-" + short(id), ClientDev: "ndc-" + short(id),
	}
	for _, ns := range []string{e.ServerNS, e.ClientNS} {
		if _, err := os.Stat(filepath.Join("/run/netns", ns)); err == nil {
			return nil, fmt.Errorf("namespace %s exists: another lab %q is running, or was killed (`netdoctor lab clean` removes what it left)", ns, id)
		}
	}
	dir, err := os.MkdirTemp("", "netdoctor-lab-"+id+"-")
	if err != nil {
		return nil, err
	}
	e.Dir = dir
	e.restores = append(e.restores, func() error { return os.RemoveAll(dir) })
	// The journal comes before anything it describes, so that `lab clean`
	// can undo a lab killed at any point after this.
	if e.state, err = newState(id, []string{e.ServerNS, e.ClientNS}); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	e.state.Paths = []string{dir}
	if err := e.state.save(); err != nil {
		e.Close()
		return nil, err
	}
	steps := [][]string{
		{"netns", "add", e.ServerNS},
		{"netns", "add", e.ClientNS},
		{"link", "add", e.ClientDev, "type", "veth", "peer", "name", e.ServerDev},
		{"link", "set", e.ServerDev, "netns", e.ServerNS},
		{"link", "set", e.ClientDev, "netns", e.ClientNS},
		{"-n", e.ServerNS, "addr", "add", e.ServerIP + "/24", "dev", e.ServerDev},
		{"-n", e.ClientNS, "addr", "add", e.ClientIP + "/24", "dev", e.ClientDev},
		{"-n", e.ServerNS, "link", "set", e.ServerDev, "up"},
		{"-n", e.ClientNS, "link", "set", e.ClientDev, "up"},
		{"-n", e.ServerNS, "link", "set", "lo", "up"},
		{"-n", e.ClientNS, "link", "set", "lo", "up"},
	}
	for i, s := range steps {
		if err := run("ip", s...); err != nil {
			e.Close()
			return nil, err
		}
		switch i {
		case 0:
			e.restores = append(e.restores, func() error { return run("ip", "netns", "del", e.ServerNS) })
		case 1:
			e.restores = append(e.restores, func() error { return run("ip", "netns", "del", e.ClientNS) })
		}
	}
	return e, nil
}

// short keeps interface names within IFNAMSIZ.
func short(id string) string {
	if len(id) > 10 {
		return id[len(id)-10:]
	}
	return id
}

// Close stops every process the lab started, removes its namespaces (the
// veth goes with them) and files, and restores every global setting, in
// reverse order. It is safe to call more than once.
func (e *Env) Close() error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil
	}
	e.closed = true
	procs, restores := e.procs, e.restores
	e.mu.Unlock()
	var errs []error
	for i := len(procs) - 1; i >= 0; i-- {
		procs[i].Stop()
	}
	// Anything still running in the namespaces (a daemon that forked
	// away from its group) is killed before they are deleted.
	for _, ns := range []string{e.ServerNS, e.ClientNS} {
		killIn(ns)
	}
	for i := len(restores) - 1; i >= 0; i-- {
		if err := restores[i](); err != nil {
			errs = append(errs, err)
		}
	}
	// The journal stays when something could not be undone: `lab clean`
	// tries again.
	if len(errs) == 0 && e.state != nil {
		if err := e.state.remove(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (e *Env) onClose(f func() error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.restores = append(e.restores, f)
}

// Exec runs a command inside namespace ns and returns its error with
// its output.
func (e *Env) Exec(ns string, args ...string) error {
	return run("ip", append([]string{"netns", "exec", ns}, args...)...)
}

func run(name string, args ...string) error {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// Sysctl sets a namespace's own sysctl (net.core.somaxconn,
// net.ipv4.ip_local_port_range… are per namespace); the namespace takes
// it with it when it is deleted.
func (e *Env) Sysctl(ns, key, value string) error {
	return e.Exec(ns, "sysctl", "-qw", key+"="+value)
}

// SetGlobal writes a host-wide /proc/sys file (nf_conntrack_max is one:
// read-only inside a namespace) and restores its old value on Close.
func (e *Env) SetGlobal(path, value string) error {
	unlock, err := lockState()
	if err != nil {
		return err
	}
	defer unlock()
	cur, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	// Another live lab may have changed it already: the value to come
	// back to is the one from before the first of them.
	orig := string(cur)
	if o, ok := otherLabs(e.state.journal)[path]; ok {
		orig = o
	}
	e.mu.Lock()
	e.state.Globals = append(e.state.Globals, global{Path: path, Old: orig})
	err = e.state.save()
	e.mu.Unlock()
	if err != nil {
		return fmt.Errorf("lab journal: %w", err)
	}
	if err := os.WriteFile(path, []byte(value), 0o644); err != nil {
		return fmt.Errorf("set %s: %w", path, err)
	}
	e.onClose(func() error {
		unlock, err := lockState()
		if err != nil {
			return err
		}
		defer unlock()
		// The last lab out restores it; while another still runs, its
		// change stands and its journal keeps the original value.
		if _, ok := otherLabs(e.state.journal)[path]; ok {
			return nil
		}
		if err := os.WriteFile(path, []byte(orig), 0o644); err != nil {
			return fmt.Errorf("restore %s: %w", path, err)
		}
		return nil
	})
	return nil
}

// Proc is a process the lab started in a namespace.
type Proc struct {
	Name string
	Cmd  *exec.Cmd
	Log  string // its stdout and stderr
	done chan struct{}
	once sync.Once
}

// Start runs a command in namespace ns, in a process group of its own
// that dies with the lab's thread, logging to Dir/name.out.
func (e *Env) Start(ns, name string, args ...string) (*Proc, error) {
	return e.start(ns, name, nil, args...)
}

func (e *Env) start(ns, name string, env []string, args ...string) (*Proc, error) {
	logPath := filepath.Join(e.Dir, name+".out")
	f, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	cmd := exec.Command("ip", append([]string{"netns", "exec", ns}, args...)...)
	cmd.Stdout, cmd.Stderr = f, f
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &Proc{Name: name, Cmd: cmd, Log: logPath, done: make(chan struct{})}
	go func() { cmd.Wait(); close(p.done) }()
	e.mu.Lock()
	e.procs = append(e.procs, p)
	e.mu.Unlock()
	return p, nil
}

// Stop asks the process group to quit (SIGTERM), then kills it after 3 s.
func (p *Proc) Stop() {
	p.once.Do(func() {
		select {
		case <-p.done:
			return
		default:
		}
		syscall.Kill(-p.Cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(3 * time.Second):
			syscall.Kill(-p.Cmd.Process.Pid, syscall.SIGKILL)
			<-p.done
		}
	})
}

// Exited reports whether the process has ended.
func (p *Proc) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// tail returns the end of the process's output, for errors.
func (p *Proc) tail() string {
	b, _ := os.ReadFile(p.Log)
	s := strings.TrimSpace(string(b))
	if len(s) > 600 {
		s = "…" + s[len(s)-600:]
	}
	if s == "" {
		return "(no output)"
	}
	return s
}

// WaitListening waits until addr ("host:port" or "unix:/path") accepts
// connections inside namespace ns, or p exits, or 10 s pass.
func (e *Env) WaitListening(ctx context.Context, p *Proc, ns, addr string) error {
	nsh, err := netns.Resolve(ns)
	if err != nil {
		return err
	}
	network, a := "tcp", addr
	if strings.HasPrefix(addr, "unix:") {
		network, a = "unix", strings.TrimPrefix(addr, "unix:")
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		dctx, cancel := context.WithTimeout(ctx, time.Second)
		c, err := nsh.Dial(dctx, network, a)
		cancel()
		if err == nil {
			c.Close()
			return nil
		}
		if p != nil && p.Exited() {
			return fmt.Errorf("%s exited before listening on %s: %s", p.Name, addr, p.tail())
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("%s not listening on %s after 10 s: %v", p.Name, addr, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
