package app

import (
	"bufio"
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"github.com/netdoctor/netdoctor/internal/netns"
)

// listenIn runs a python listener on addr (an address it puts on its
// namespace's lo), started by cmd's prefix, and waits for it.
func listenIn(t *testing.T, cred *syscall.Credential, prefix []string, addr netip.AddrPort) *exec.Cmd {
	t.Helper()
	script := fmt.Sprintf("/usr/sbin/ip link set lo up && /usr/sbin/ip addr add %s/32 dev lo && exec /usr/bin/python3 -c \"import socket,sys\ns=socket.socket()\ns.bind(('%s',%d))\ns.listen()\nprint('ready',flush=True)\nsys.stdin.read()\"",
		addr.Addr(), addr.Addr(), addr.Port())
	cmd := exec.Command(prefix[0], append(prefix[1:], "sh", "-c", script)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Setpgid: true, Pdeathsig: syscall.SIGKILL}
	stdin, _ := cmd.StdinPipe()
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Skipf("%v: %v", prefix, err)
	}
	t.Cleanup(func() {
		stdin.Close()
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		cmd.Wait()
	})
	if line, _ := bufio.NewReader(out).ReadString('\n'); line != "ready\n" {
		t.Skipf("%v: no listener (user namespaces refused?): %q %s", prefix, line, stderr.String())
	}
	return cmd
}

// TestElsewhereNotUsersNamespaces: issue 39 (item 7). An unprivileged
// user (nobody) makes a network namespace of their own (`unshare -rn`),
// with a dependency's address on it and a listener there: looking for
// the dependency's owner in the host's other namespaces does not take
// theirs, and says the destination is on another host, as it is. The
// same listener in a namespace root made is found.
func TestElsewhereNotUsersNamespaces(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: namespaces, and a process of nobody's")
	}
	for _, p := range []string{"/usr/sbin/ip", "/usr/bin/python3", "/usr/bin/unshare"} {
		if _, err := os.Stat(p); err != nil {
			t.Skipf("needs %s", p)
		}
	}
	var st syscall.Stat_t
	if err := syscall.Stat("/proc/self/ns/net", &st); err != nil {
		t.Fatal(err)
	}
	dep := netip.MustParseAddrPort(fmt.Sprintf("192.0.2.%d:7777", 10+os.Getpid()%200))
	nobody := &syscall.Credential{Uid: 65534, Gid: 65534}
	users := listenIn(t, nobody, []string{"/usr/bin/unshare", "-rn"}, dep)
	if root, err := netns.OwnedByRoot(fmt.Sprintf("/proc/%d/ns/net", users.Process.Pid)); err != nil || root {
		t.Fatalf("nobody's namespace owned by root? %v %v", root, err)
	}
	o := &Observer{proc: "/proc", ownNS: st.Ino, seen: map[int]bool{}}
	f := o.lookElsewhere(context.Background(), dep.String())
	if f.name != "" || f.observed || !f.otherHost {
		t.Errorf("the user's listener was taken for the dependency: %+v", f)
	}
	for _, s := range o.Servers {
		t.Errorf("a server followed in the user's namespace: %s pids %v", s.Kind, s.PIDs)
	}

	// The same in a namespace root made: found, its owner followed.
	name := fmt.Sprintf("ndtest-elsewhere-%d", os.Getpid())
	if _, err := netns.Create(name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { netns.Delete(name) })
	roots := listenIn(t, nil, []string{"ip", "netns", "exec", name}, dep)
	o = &Observer{proc: "/proc", ownNS: st.Ino, seen: map[int]bool{}}
	f = o.lookElsewhere(context.Background(), dep.String())
	if !strings.Contains(f.name, "python3") || !strings.Contains(f.name, name) || f.otherHost {
		t.Errorf("root's namespace's listener (pid %d) not found: %+v", roots.Process.Pid, f)
	}
}
