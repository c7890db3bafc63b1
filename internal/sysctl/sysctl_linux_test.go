package sysctl

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"testing"

	"github.com/netdoctor/netdoctor/internal/netns"
)

// newNS creates a namespace that the test's end deletes, on failure too.
func newNS(t *testing.T) netns.NS {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: it creates a network namespace")
	}
	name := fmt.Sprintf("ndtest-sysctl-%d", os.Getpid())
	ns, err := netns.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := netns.Delete(name); err != nil {
			t.Error(err)
		}
	})
	return ns
}

// keepHost restores the host's value of name when the test ends, in
// case a write meant for the namespace reached the host.
func keepHost(t *testing.T, name string) string {
	t.Helper()
	was, err := Read(netns.NS{}, name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if now, _ := Read(netns.NS{}, name); now != was {
			t.Errorf("host %s changed to %s: restoring %s", name, now, was)
			Write(netns.NS{}, name, was)
		}
	})
	return was
}

func TestWriteRead(t *testing.T) {
	ns := newNS(t)
	host := keepHost(t, "net.core.somaxconn")
	keepHost(t, "net.ipv4.ip_local_port_range")
	want := "1234"
	if host == want {
		want = "1235"
	}
	if err := Write(ns, "net.core.somaxconn", want); err != nil {
		t.Fatal(err)
	}
	if got, err := Read(ns, "net.core.somaxconn"); err != nil || got != want {
		t.Errorf("Read(%s, net.core.somaxconn) = %q, %v; want %q", ns, got, err, want)
	}
	if got, err := Read(netns.NS{}, "net.core.somaxconn"); err != nil || got != host {
		t.Errorf("the host's somaxconn reads %q, %v after the namespace's was written; want %q", got, err, host)
	}
	// Written with a run of spaces, read back with a tab: the same value.
	if err := Write(ns, "net.ipv4.ip_local_port_range", "20000   20050"); err != nil {
		t.Fatal(err)
	}
	if got, err := Read(ns, "net.ipv4.ip_local_port_range"); err != nil || got != "20000 20050" {
		t.Errorf("ip_local_port_range = %q, %v; want %q", got, err, "20000 20050")
	}
}

// TestMissing: a setting the kernel lacks, and one only the initial
// namespace has, are fs.ErrNotExist with the name in the message.
func TestMissing(t *testing.T) {
	ns := newNS(t)
	for _, tt := range []struct {
		ns   netns.NS
		name string
	}{
		{ns, "net.core.no_such_setting"},
		{netns.NS{}, "net.core.no_such_setting"},
		{ns, "net.core.netdev_max_backlog"},
	} {
		_, rerr := Read(tt.ns, tt.name)
		// The host's own value: should the write reach the host by
		// mistake, it changes nothing there.
		v, err := Read(netns.NS{}, tt.name)
		if err != nil {
			v = "1"
		}
		werr := Write(tt.ns, tt.name, v)
		for _, err := range []error{rerr, werr} {
			if !errors.Is(err, fs.ErrNotExist) || err.Error() != tt.name+": this kernel or namespace does not have it" {
				t.Errorf("%s in %q: %v, want fs.ErrNotExist with the name", tt.name, tt.ns, err)
			}
		}
	}
}

// TestRefused: a value the kernel rejects, and one it takes as another,
// are errors that say so; neither is fs.ErrNotExist.
func TestRefused(t *testing.T) {
	ns := newNS(t)
	keepHost(t, "net.core.somaxconn")
	if err := Write(ns, "net.core.somaxconn", "100"); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ value, want string }{
		{"many", `write net.core.somaxconn = "many": `},
		{"0x10", `net.core.somaxconn reads "16" after writing "0x10"`},
	} {
		err := Write(ns, "net.core.somaxconn", tt.value)
		if err == nil || !strings.Contains(err.Error(), tt.want) || errors.Is(err, fs.ErrNotExist) {
			t.Errorf("Write(%q) = %v, want an error containing %q", tt.value, err, tt.want)
		}
	}
	if err := Write(ns, "net/../stat", "1"); err == nil || !strings.Contains(err.Error(), "invalid sysctl name") {
		t.Errorf("Write(net/../stat) = %v, want invalid name", err)
	}
	if got, _ := Read(ns, "net.core.somaxconn"); got != "16" && got != "100" {
		t.Errorf("somaxconn %s after the refusals", got)
	}
}
