package tune

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/netdoctor/netdoctor/internal/report"
	"github.com/netdoctor/netdoctor/internal/rules"
)

// nagle is the finding of responses held back by Nagle's algorithm.
var nagle = report.Finding{ID: rules.NagleDelayedACK, Severity: report.Critical, Status: report.Active, Side: "server"}

// TestNodelay: where seed 000's nginx turns tcp_nodelay off (line 17
// here, in place of keepalive_requests), it is turned back on.
func TestNodelay(t *testing.T) {
	old, err := os.ReadFile("testdata/seed000-nginx.conf")
	if err != nil {
		t.Fatal(err)
	}
	off := strings.Replace(string(old), "    keepalive_requests 100000;\n", "    tcp_nodelay off;\n", 1)
	conf := filepath.Join(t.TempDir(), "nginx.conf")
	if err := os.WriteFile(conf, []byte(off), 0o644); err != nil {
		t.Fatal(err)
	}
	h := seed000Host()
	h.files[labDir+"/nginx/nginx.conf"] = conf
	in := readSeed000(t)
	in.Findings = []report.Finding{nagle}
	in.Servers[0].Nginx.NoDelayOff = []string{labDir + "/nginx/nginx.conf:17"}
	p := build(t, in, h)
	ng := fileChange(t, p, labDir+"/nginx/nginx.conf")
	if !strings.Contains(ng.Diff, "-    tcp_nodelay off;\n+    tcp_nodelay on;\n") || ng.Reload.Signal != "HUP" {
		t.Errorf("tcp_nodelay not turned on (reload %s):\n%s", ng.Reload, ng.Diff)
	}
}

// TestNodelayOn: an nginx that leaves tcp_nodelay on needs nothing,
// and the plan says so.
func TestNodelayOn(t *testing.T) {
	in := readSeed000(t)
	in.Findings = []report.Finding{nagle}
	onlyNote(t, build(t, in, seed000Host()), "tcp_nodelay is on wherever nginx's configuration sets it")
}

// TestNodelayLeg: a stall on a leg to a dependency changes no nginx
// configuration, even one that turns tcp_nodelay off for its clients:
// the sender of that leg sets it in its own code.
func TestNodelayLeg(t *testing.T) {
	in := readSeed000(t)
	leg := nagle
	leg.About = report.About{Server: "java", Listen: "10.0.0.1:8080", Remotes: []string{"10.0.0.9:7300"}}
	in.Findings = []report.Finding{leg}
	in.Servers[0].Nginx.NoDelayOff = []string{labDir + "/nginx/nginx.conf:17"}
	if p := build(t, in, seed000Host()); len(p.Changes) != 0 {
		t.Errorf("a leg's stall changed: %s", titles(p))
	}
}
