package lab

import (
	"context"
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

// Exec runs a command inside namespace ns and returns its error with
// its output. The command is forked from a thread inside the namespace,
// which it inherits; unlike start it needs none of `ip netns exec`'s
// /etc/netns files. The lab runs nft this way: no nftables library is
// among netdoctor's dependencies.
func (e *Env) Exec(ns netns.NS, args ...string) error {
	return ns.Do(func() error { return runCmd(args[0], args[1:]...) })
}

func runCmd(name string, args ...string) error {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
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
func (e *Env) Start(ns netns.NS, name string, args ...string) (*Proc, error) {
	return e.start(ns, name, nil, args...)
}

func (e *Env) start(ns netns.NS, name string, env []string, args ...string) (*Proc, error) {
	logPath := filepath.Join(e.Dir, name+".out")
	f, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	// Servers start under `ip netns exec`, not from a thread inside the
	// namespace as Exec does: it also unshares a mount namespace and
	// bind-mounts /etc/netns/NS/resolv.conf over /etc/resolv.conf,
	// which the DNS scenarios give their servers (ResolvConf).
	cmd := exec.Command("ip", append([]string{"netns", "exec", ns.Name}, args...)...)
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
func (e *Env) WaitListening(ctx context.Context, p *Proc, ns netns.NS, addr string) error {
	nsh := ns
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
