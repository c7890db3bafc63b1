package tune

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/netdoctor/netdoctor/internal/report"
	"github.com/netdoctor/netdoctor/internal/rules"
)

// TestCheckAllowed: the names, values and scopes apply accepts, and a
// clear refusal naming the setting for the others.
func TestCheckAllowed(t *testing.T) {
	ns := Scope{NetNS: "srv"}
	for _, c := range []struct {
		s    Sysctl
		want string // "" accepted; else a part of the error
	}{
		{Sysctl{Name: "net.core.somaxconn", Proposed: "4096", Scope: ns}, ""},
		{Sysctl{Name: "net.core.somaxconn", Proposed: "65535", Scope: ns}, ""},
		{Sysctl{Name: "net.core.somaxconn", Proposed: "65536", Scope: ns}, "outside netdoctor's bounds 4096–65535"},
		{Sysctl{Name: "net.core.somaxconn", Proposed: "10", Scope: ns}, "outside"},
		{Sysctl{Name: "net.core.somaxconn", Proposed: "4096\nkernel.core_pattern = |/tmp/x", Scope: ns}, "outside"},
		{Sysctl{Name: "net.core.somaxconn", Proposed: "4096", Scope: Scope{Global: true}}, "not host-wide"},
		{Sysctl{Name: "kernel.core_pattern", Proposed: "|/tmp/evil %p"}, "kernel.core_pattern is not a setting netdoctor plans"},
		{Sysctl{Name: "net.ipv4.tcp_fin_timeout", Proposed: "10"}, "net.ipv4.tcp_fin_timeout is not a setting"},
		{Sysctl{Name: "net.ipv4.ip_local_port_range", Proposed: "10000 65535", Scope: ns}, ""},
		{Sysctl{Name: "net.ipv4.ip_local_port_range", Proposed: "37000 65535", Scope: ns}, ""},
		{Sysctl{Name: "net.ipv4.ip_local_port_range", Proposed: "1024 65535", Scope: ns}, "outside"},
		{Sysctl{Name: "net.ipv4.ip_local_port_range", Proposed: "60000 65535", Scope: ns}, "outside"},
		{Sysctl{Name: "net.ipv4.ip_local_port_range", Proposed: "10000 70000", Scope: ns}, "outside"},
		{Sysctl{Name: "net.ipv4.ip_local_port_range", Proposed: "10000  65535", Scope: ns}, "outside"},
		{Sysctl{Name: "net.ipv4.tcp_tw_reuse", Proposed: "1", Scope: ns}, ""},
		{Sysctl{Name: "net.ipv4.tcp_tw_reuse", Proposed: "0", Scope: ns}, "only sets it to 1"},
		{Sysctl{Name: "net.netfilter.nf_conntrack_max", Proposed: "262144", Scope: Scope{Global: true}}, ""},
		{Sysctl{Name: "net.netfilter.nf_conntrack_max", Proposed: "262144", Scope: ns}, "host-wide"},
		{Sysctl{Name: "net.netfilter.nf_conntrack_max", Proposed: "1000000000", Scope: Scope{Global: true}}, "outside"},
		{Sysctl{Name: "net.ipv4.neigh.default.gc_thresh3", Proposed: "8192", Scope: Scope{Global: true}}, ""},
		{Sysctl{Name: "fs.file-max", Proposed: "262144", Scope: Scope{Global: true}}, ""},
		// Numbers only as netdoctor writes them; the kernel would take these.
		{Sysctl{Name: "net.core.somaxconn", Proposed: "+61", Scope: ns}, "outside"},
		{Sysctl{Name: "net.core.somaxconn", Proposed: "+8192", Scope: ns}, "outside"},
		{Sysctl{Name: "net.core.somaxconn", Proposed: "08192", Scope: ns}, "outside"},
		{Sysctl{Name: "net.ipv4.ip_local_port_range", Proposed: "+10000 65535", Scope: ns}, "outside"},
		// The range ends at 65535 and starts on a thousand, as sizing.Ports makes it.
		{Sysctl{Name: "net.ipv4.ip_local_port_range", Proposed: "10000 60999", Scope: ns}, "outside"},
		{Sysctl{Name: "net.ipv4.ip_local_port_range", Proposed: "10001 65535", Scope: ns}, "outside"},
		{Sysctl{Name: "net.ipv4.ip_local_port_range", Proposed: "38000 65535", Scope: ns}, "outside"},
		// No keepalive time but the advice table's.
		{Sysctl{Name: "net.ipv4.tcp_keepalive_time", Proposed: "7200", Scope: ns}, ""},
		{Sysctl{Name: "net.ipv4.tcp_keepalive_time", Proposed: "61", Scope: ns}, "only sets it to 7200"},
	} {
		err := checkAllowed(c.s)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s = %q (%s): %v, want accepted", c.s.Name, c.s.Proposed, c.s.Scope, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s = %q (%s): %v, want refused with %q", c.s.Name, c.s.Proposed, c.s.Scope, err, c.want)
		}
	}
}

// TestAllowedDocumented: docs/tune.md lists every setting apply accepts,
// so that a reviewer knows what a plan can change.
func TestAllowedDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../docs/tune.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range AllowedSysctls() {
		if !strings.Contains(string(doc), "`"+name+"`") {
			t.Errorf("docs/tune.md does not list `%s`", name)
		}
	}
}

// TestAllowedSource: every setting a fix or a rule's fix text can propose
// is in the set, read from the source: the names passed to the plan
// builder (b.sysctl) and to the rules' sysctlFix, the advice table's
// (riskySettings) and any `sysctl -w NAME=` a fix text spells out. A new
// rule that proposes a new setting fails here before any fixture shows
// it; TestFixturePlansAllowed holds the values.
func TestAllowedSource(t *testing.T) {
	names := map[string]string{} // name → where
	fset := token.NewFileSet()
	sysctlW := regexp.MustCompile(`sysctl -w ([a-z0-9_.-]+)=`)
	var files []string
	for _, pattern := range []string{"fix_*.go", "../rules/*.go"} {
		m, err := filepath.Glob(pattern)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.CallExpr:
				var fn string
				switch x := n.Fun.(type) {
				case *ast.SelectorExpr:
					fn = x.Sel.Name
				case *ast.Ident:
					fn = x.Name
				}
				if (fn == "sysctl" || fn == "sysctlFix") && len(n.Args) >= 2 {
					if s, ok := stringLit(n.Args[1]); ok {
						names[s] = fset.Position(n.Pos()).String()
					}
				}
			case *ast.ValueSpec:
				for i, id := range n.Names {
					if id.Name != "riskySettings" || i >= len(n.Values) {
						continue
					}
					for _, e := range n.Values[i].(*ast.CompositeLit).Elts {
						if s, ok := stringLit(e.(*ast.CompositeLit).Elts[0]); ok {
							names[s] = fset.Position(e.Pos()).String()
						}
					}
				}
			case *ast.BasicLit:
				if s, ok := stringLit(n); ok {
					for _, m := range sysctlW.FindAllStringSubmatch(s, -1) {
						names[m[1]] = fset.Position(n.Pos()).String()
					}
				}
			}
			return true
		})
	}
	if len(names) < 10 {
		t.Fatalf("found only %d proposed settings in the source: %v", len(names), names)
	}
	for name, where := range names {
		if _, ok := allowed(name); !ok {
			t.Errorf("%s: %s is proposed but not in tune's allowed set (allowed.go, docs/tune.md)", where, name)
		}
	}
}

func stringLit(e ast.Expr) (string, bool) {
	l, ok := e.(*ast.BasicLit)
	if !ok || l.Kind != token.STRING {
		return "", false
	}
	s, err := strconv.Unquote(l.Value)
	return s, err == nil
}

// TestBuildOutsideSet: a report whose fix names a setting outside the
// set, or a value past its bounds on this host, gets a note, not a
// change apply would refuse.
func TestBuildOutsideSet(t *testing.T) {
	in := readSeed000(t)
	in.Findings = []report.Finding{{ID: rules.NICDrops, Status: report.Active, Side: "server",
		Actions: []report.Action{{Kind: report.ActionSysctl, Setting: "kernel.core_pattern", Value: "|/tmp/evil"}}}}
	h := seed000Host()
	h.sysctls["netns kernel.core_pattern"] = "core"
	p := build(t, in, h)
	if len(p.Changes) != 0 || !strings.Contains(notes(p), "not planned: kernel.core_pattern is not a setting netdoctor plans") {
		t.Errorf("%s; want no change and a note naming kernel.core_pattern", titles(p))
	}
	h.sysctls["host net.ipv4.neigh.default.gc_thresh3"] = strconv.Itoa(1 << 19)
	in.Findings = []report.Finding{neighbourFinding("arp_cache")}
	p = build(t, in, h)
	if len(p.Changes) != 0 || !strings.Contains(notes(p), "net.ipv4.neigh.default.gc_thresh3 = \"2097152\" is outside netdoctor's bounds") {
		t.Errorf("%s; want no change and a note of the bound", titles(p))
	}
}

// TestCheckLive: against the value in force, limits only go up (the
// neighbour thresholds, the keepalive time, a port range's width too).
func TestCheckLive(t *testing.T) {
	for _, c := range []struct {
		name, cur, proposed string
		want                string
	}{
		{"net.ipv4.neigh.default.gc_thresh3", "1024", "8192", ""},
		{"net.ipv4.neigh.default.gc_thresh3", "16384", "8192", "would lower a limit"},
		{"net.ipv6.neigh.default.gc_thresh1", "4096", "1024", "would lower a limit"},
		{"net.ipv4.neigh.default.gc_thresh2", "4096", "4096", ""},
		{"net.core.somaxconn", "8192", "4096", "would lower a limit"},
		{"net.ipv4.tcp_keepalive_time", "30", "7200", ""},
		{"net.ipv4.tcp_keepalive_time", "9000", "7200", "would lower a limit"},
		{"net.ipv4.ip_local_port_range", "20000\t20050", "10000 65535", ""},
		{"net.ipv4.ip_local_port_range", "32768\t60999", "32000 65535", ""},
		{"net.ipv4.ip_local_port_range", "1024\t65535", "10000 65535", "would lower a limit"},
	} {
		err := checkLive(Sysctl{Name: c.name, Proposed: c.proposed}, c.cur)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s %q → %q: %v, want accepted", c.name, c.cur, c.proposed, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s %q → %q: %v, want refused with %q", c.name, c.cur, c.proposed, err, c.want)
		}
	}
}
