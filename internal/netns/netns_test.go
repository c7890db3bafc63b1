package netns

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParse(t *testing.T) {
	for _, tt := range []struct {
		in     string
		want   NS
		prefix string
	}{
		{"", NS{}, ""},
		{"srv", NS{Name: "srv", Path: "/run/netns/srv"}, "ip netns exec srv "},
		{"/run/netns/srv", NS{Name: "srv", Path: "/run/netns/srv"}, "ip netns exec srv "},
		{"/var/run/netns/srv", NS{Name: "srv", Path: "/var/run/netns/srv"}, "ip netns exec srv "},
		{"/proc/1234/ns/net", NS{Path: "/proc/1234/ns/net"}, "nsenter --net=/proc/1234/ns/net "},
		{"/run/netns/..", NS{Path: "/run/netns/.."}, "nsenter --net=/run/netns/.. "},
	} {
		got := Parse(tt.in)
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("Parse(%q) mismatch (-want +got):\n%s", tt.in, diff)
		}
		if p := got.ExecPrefix(); p != tt.prefix {
			t.Errorf("Parse(%q).ExecPrefix() = %q, want %q", tt.in, p, tt.prefix)
		}
		if got.String() != tt.in && tt.want.Name == "" {
			t.Errorf("Parse(%q).String() = %q", tt.in, got.String())
		}
	}
}

func TestResolvConf(t *testing.T) {
	etc := t.TempDir()
	nsConf := filepath.Join(etc, "netns", "feas-cli", "resolv.conf")
	if err := os.MkdirAll(filepath.Dir(nsConf), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(nsConf, []byte("nameserver 10.77.0.2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	def := filepath.Join(etc, "resolv.conf")
	for _, tt := range []struct{ netns, want string }{
		{"", def},
		{"feas-cli", nsConf},
		{"feas-srv", def},
		{"/run/netns/feas-cli", nsConf},
		{"/var/run/netns/feas-cli", nsConf},
		{"/proc/1234/ns/net", def},
		{"..", def},
	} {
		if got := Parse(tt.netns).resolvConfIn(etc); got != tt.want {
			t.Errorf("Parse(%q).resolvConfIn = %q, want %q", tt.netns, got, tt.want)
		}
	}
	if got := (NS{}).ResolvConf(); got != "/etc/resolv.conf" {
		t.Errorf("own namespace's resolv.conf = %q", got)
	}
}
