package tune

import (
	"strings"
	"testing"
)

// TestPersistText: a plan persists the host's settings in PersistFile
// and a namespace's where the namespace is made, never in PersistFile,
// which the initial namespace reads at boot.
func TestPersistText(t *testing.T) {
	host := &Sysctl{Name: "net.core.somaxconn", Proposed: "4096", Persist: "net.core.somaxconn = 4096"}
	if got := host.persistText(); got != "net.core.somaxconn = 4096 in "+PersistFile+" (apply --persist)" {
		t.Errorf("host: %q", got)
	}
	global := &Sysctl{Name: "fs.file-max", Proposed: "262144", Persist: "fs.file-max = 262144", Scope: Scope{Global: true}}
	if got := global.persistText(); !strings.HasPrefix(got, "fs.file-max = 262144 in "+PersistFile) {
		t.Errorf("global: %q", got)
	}
	ns := &Sysctl{Name: "net.ipv4.ip_local_port_range", Proposed: "10000 65535", Persist: "x", Scope: Scope{NetNS: "srv"}}
	got := ns.persistText()
	for _, want := range []string{"not in " + PersistFile, `ip netns exec srv sysctl -w net.ipv4.ip_local_port_range="10000 65535"`, "securityContext.sysctls", "--sysctl"} {
		if !strings.Contains(got, want) {
			t.Errorf("netns: %q lacks %q", got, want)
		}
	}
	if strings.HasPrefix(got, ns.Persist) || strings.Contains(got, PersistFile+" (apply") {
		t.Errorf("netns: %q persists in the host's file", got)
	}
}
