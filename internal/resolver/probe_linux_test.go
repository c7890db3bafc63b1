package resolver

import (
	"context"
	"os"
	"runtime"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/netdoctor/netdoctor/internal/evidence"
)

// setLinkUp sets the IFF_UP flag of the device name in the calling
// thread's network namespace.
func setLinkUp(name string) error {
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_DGRAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer syscall.Close(fd)
	var ifr struct {
		name  [syscall.IFNAMSIZ]byte
		flags uint16
		_     [22]byte
	}
	copy(ifr.name[:], name)
	for _, req := range []uintptr{syscall.SIOCGIFFLAGS, syscall.SIOCSIFFLAGS} {
		if req == syscall.SIOCSIFFLAGS {
			ifr.flags |= syscall.IFF_UP
		}
		_, _, errno := syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), req, uintptr(unsafe.Pointer(&ifr)))
		if errno != 0 {
			return errno
		}
	}
	return nil
}

// TestProbeAllNetNS checks that ProbeAll opens its sockets on the calling
// goroutine: run on a thread in a new network namespace, it must reach
// that namespace's loopback and not the host's.
func TestProbeAllNetNS(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to create a network namespace")
	}
	type result struct {
		down, up []evidence.DNSProbe
		err      error
	}
	ch := make(chan result, 1)
	go func() {
		// The thread never returns to the host namespace: the goroutine
		// exits locked, so the runtime discards the thread.
		runtime.LockOSThread()
		var res result
		defer func() { ch <- res }()
		if res.err = syscall.Unshare(syscall.CLONE_NEWNET); res.err != nil {
			return
		}
		conf := evidence.Resolver{Nameservers: []string{"127.0.0.1"}}
		// Both cases are answered at once (unreachable, or a server on
		// lo): the timeout only ends a broken test.
		p := Prober{Timeout: 10 * time.Second, Port: 53}
		// In a new namespace lo is down, so 127.0.0.1 has no route.
		res.down = p.ProbeAll(context.Background(), conf, "app.svc.test", "10.77.0.1")

		if res.err = setLinkUp("lo"); res.err != nil {
			return
		}
		port, stop, err := startServer(t, responder)
		if res.err = err; err != nil {
			return
		}
		defer stop()
		p.Port = port
		res.up = p.ProbeAll(context.Background(), conf, "app.svc.test", "10.77.0.1")
	}()
	res := <-ch
	if res.err != nil {
		t.Fatalf("set up network namespace: %v", res.err)
	}
	for _, g := range res.down {
		if g.Err != "network is unreachable" {
			t.Errorf("with lo down: probe %+v, want Err network is unreachable", g)
		}
	}
	if len(res.up) != 2 || res.up[0].Rcode != "NOERROR" || res.up[1].Rcode != "NXDOMAIN" {
		t.Errorf("with lo up: probes %+v, want NOERROR and NXDOMAIN", res.up)
	}
}
