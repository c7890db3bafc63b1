package procnet

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/google/go-cmp/cmp"
)

func TestSysctl(t *testing.T) {
	p := fixture("host")
	tests := []struct {
		name string
		want string
	}{
		{"net.core.somaxconn", "4096"},
		{"net.ipv4.ip_local_port_range", "32768 60999"}, // a tab in the file
		{"net.ipv4.tcp_rmem", "4096 131072 33554432"},
		{"net/ipv4/tcp_rmem", "4096 131072 33554432"},
	}
	for _, tt := range tests {
		got, err := p.Sysctl(tt.name)
		if err != nil {
			t.Errorf("Sysctl(%q) error = %v", tt.name, err)
			continue
		}
		if got != tt.want {
			t.Errorf("Sysctl(%q) = %q, want %q", tt.name, got, tt.want)
		}
	}
	// The fixture really holds the tab that Sysctl folds.
	raw, err := os.ReadFile(filepath.Join("testdata", "host", "sys", "net", "ipv4", "ip_local_port_range"))
	if err != nil || !strings.Contains(string(raw), "\t") {
		t.Errorf("ip_local_port_range fixture = %q, %v; want a tab in it", raw, err)
	}
}

func TestSysctlErrors(t *testing.T) {
	p := fixture("host")
	for _, name := range []string{"net.core.nope", "net..core", "net/../stat", ""} {
		if _, err := p.Sysctl(name); err == nil {
			t.Errorf("Sysctl(%q) error = nil, want one", name)
		}
	}
	if _, err := p.Sysctl("net.core.nope"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Sysctl(\"net.core.nope\") error = %v, want fs.ErrNotExist", err)
	}
}

func TestSysctlsPartial(t *testing.T) {
	p := fixture("host")
	p.FS = errFS{FS: p.FS, errs: map[string]error{"sys/net/ipv4/tcp_rmem": fs.ErrPermission}}
	got, err := p.Sysctls([]string{"net.core.somaxconn", "net.ipv4.tcp_rmem", "net.core.nope", "net.ipv4.ip_local_port_range"})
	want := map[string]string{"net.core.somaxconn": "4096", "net.ipv4.ip_local_port_range": "32768 60999"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Sysctls() mismatch (-want +got):\n%s", diff)
	}
	if !errors.Is(err, fs.ErrPermission) || !strings.Contains(err.Error(), "net.ipv4.tcp_rmem") {
		t.Errorf("Sysctls() error = %v, want fs.ErrPermission naming net.ipv4.tcp_rmem", err)
	}
	if errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Sysctls() error = %v, want no error for the missing net.core.nope", err)
	}

	got, err = fixture("host").Sysctls([]string{"net.core.somaxconn", "net.core.nope"})
	if err != nil {
		t.Errorf("Sysctls() error = %v, want nil", err)
	}
	if diff := cmp.Diff(map[string]string{"net.core.somaxconn": "4096"}, got); diff != "" {
		t.Errorf("Sysctls() mismatch (-want +got):\n%s", diff)
	}
}

func TestFoldSpace(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", ""},
		{"\n", ""},
		{"4096\n", "4096"},
		{"32768\t60999\n", "32768 60999"},
		{"  a \t\t b  c \n", "a b c"},
		{"cubic reno\n", "cubic reno"},
	}
	for _, tt := range tests {
		if got := foldSpace([]byte(tt.in)); got != tt.want {
			t.Errorf("foldSpace(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestSysctlMapFS(t *testing.T) {
	p := Proc{FS: fstest.MapFS{"sys/net/ipv4/conf/eth0.100/rp_filter": {Data: []byte("2\n")}}}
	got, err := p.Sysctl("net/ipv4/conf/eth0.100/rp_filter")
	if err != nil || got != "2" {
		t.Errorf("Sysctl(\"net/ipv4/conf/eth0.100/rp_filter\") = %q, %v, want \"2\", nil", got, err)
	}
}
