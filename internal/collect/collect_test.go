package collect

import (
	"context"
	"os"
	"testing"
	"testing/fstest"

	"github.com/netdoctor/netdoctor/internal/evidence"
	"github.com/netdoctor/netdoctor/internal/procnet"
)

func states(s evidence.Snapshot) map[string]string {
	m := map[string]string{}
	for _, st := range s.Status {
		m[st.Collector] = st.State
	}
	return m
}

// TestMissingProcFiles: a /proc without most files still yields a
// snapshot; each missing part is marked unavailable, and counters, read
// from snmp without netstat, partial.
func TestMissingProcFiles(t *testing.T) {
	snmp, err := os.ReadFile("../procnet/testdata/host/net/snmp")
	if err != nil {
		t.Fatal(err)
	}
	p := procnet.Proc{FS: fstest.MapFS{"net/snmp": {Data: snmp}}, Net: "net"}
	// An empty /sys too: no nf_conntrack module, or the conntrack
	// collector would ask the real kernel over netlink.
	s, err := New(Config{Proc: &p, Sys: fstest.MapFS{}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	snap := s.Snapshot(context.Background())
	got := states(snap)
	for c, want := range map[string]string{"counters": "partial", "sockstat": "unavailable", "softnet": "unavailable", "cpu": "unavailable", "conntrack": "unavailable"} {
		if got[c] != want {
			t.Errorf("collector %s = %q, want %q (all: %v)", c, got[c], want, got)
		}
	}
	if _, ok := snap.Counters["Tcp.ActiveOpens"]; !ok {
		t.Errorf("counters not read from the one file present")
	}
	// sock_diag does not depend on the proc files and still works.
	if got["sockdiag"] != "ok" || snap.Sockets == nil {
		t.Errorf("sockdiag = %q, want ok", got["sockdiag"])
	}
}

// TestTruncatedProcFiles: damaged files give partial data, marked partial.
func TestTruncatedProcFiles(t *testing.T) {
	p := procnet.Proc{FS: os.DirFS("../procnet/testdata/truncated"), Net: "net"}
	s, err := New(Config{Proc: &p})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	snap := s.Snapshot(context.Background())
	got := states(snap)
	if got["softnet"] != "partial" || len(snap.Softnet) == 0 {
		t.Errorf("softnet = %q with %d CPUs, want partial with the lines before the damage", got["softnet"], len(snap.Softnet))
	}
	if got["counters"] != "partial" {
		t.Errorf("counters = %q, want partial", got["counters"])
	}
}
