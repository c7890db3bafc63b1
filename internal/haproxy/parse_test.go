package haproxy

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"
)

func parseFile(t *testing.T, name string) *Config {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	c, err := Parse(f, name)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestLimit(t *testing.T) {
	for _, tc := range []struct {
		file  string
		host  string
		port  int
		want  Limit
		found bool
	}{
		// The lab's: the frontend's own, below the global one.
		{"lab.cfg", "10.99.1.1", 80, Limit{Frontend: "web", Scope: "frontend", Setting: Setting{20, "lab.cfg", 12}}, true},
		// A listener on another address of the same port is not bound.
		{"lab.cfg", "10.99.1.2", 80, Limit{}, false},
		// Debian's package: no frontend at all.
		{"debian.cfg", "127.0.0.1", 80, Limit{}, false},
		// A bind's maxconn below the inherited defaults'.
		{"odd.cfg", "10.0.0.1", 8444, Limit{Frontend: "public site", Scope: "bind", Setting: Setting{100, "odd.cfg", 10}}, true},
		// A range; the defaults' (3000) below the global 50000, the
		// unparsable frontend maxconn ignored.
		{"odd.cfg", "127.0.0.1", 7001, Limit{Frontend: "public site", Scope: "defaults", Setting: Setting{3000, "odd.cfg", 7}}, true},
		{"odd.cfg", "127.0.0.1", 7003, Limit{}, false},
		// IPv6 wildcard with its prefix.
		{"odd.cfg", "::1", 9000, Limit{Frontend: "public site", Scope: "defaults", Setting: Setting{3000, "odd.cfg", 7}}, true},
		// The old listen form.
		{"odd.cfg", "10.0.0.9", 8404, Limit{Frontend: "stats", Scope: "frontend", Setting: Setting{10, "odd.cfg", 18}}, true},
		// A later defaults section without maxconn resets it: global.
		{"odd.cfg", "10.0.0.5", 5432, Limit{Frontend: "plain", Scope: "global", Setting: Setting{50000, "odd.cfg", 2}}, true},
		// haproxy continues no line: "2\\" is no number, and the
		// global one holds.
		{"odd.cfg", "10.0.0.5", 6379, Limit{Frontend: "inherits-none", Scope: "global", Setting: Setting{50000, "odd.cfg", 2}}, true},
	} {
		c := parseFile(t, tc.file)
		got, ok := c.Limit(tc.host, tc.port)
		if ok != tc.found || got != tc.want {
			t.Errorf("%s %s:%d: %+v %v, want %+v %v", tc.file, tc.host, tc.port, got, ok, tc.want, tc.found)
		}
	}
}

func TestTruncated(t *testing.T) {
	c := parseFile(t, "truncated.cfg")
	l, ok := c.Limit("10.0.0.1", 80)
	if !ok || l.Scope != "global" || l.Value != 100 {
		t.Errorf("%+v %v", l, ok)
	}
}

func TestConfigFiles(t *testing.T) {
	got := ConfigFiles(strings.Split("/usr/sbin/haproxy -Ws -f /etc/haproxy/haproxy.cfg -f/etc/haproxy/conf.d -p /run/haproxy.pid -S /run/haproxy-master.sock", " "))
	if strings.Join(got, " ") != "/etc/haproxy/haproxy.cfg /etc/haproxy/conf.d" {
		t.Errorf("%q", got)
	}
	if got := ConfigFiles([]string{"haproxy", "-f"}); len(got) != 0 {
		t.Errorf("a trailing -f: %q", got)
	}
}

// TestReadDirectory: files first, then a directory's *.cfg in name
// order, read as one text (a frontend begun in one file goes on in the
// next, as haproxy reads them).
func TestReadDirectory(t *testing.T) {
	fsys := fstest.MapFS{
		"etc/haproxy/haproxy.cfg":        {Data: []byte("global\n maxconn 900\ndefaults\n maxconn 300\n")},
		"etc/haproxy/conf.d/20-api.cfg":  {Data: []byte("frontend api\n bind :8080\n")},
		"etc/haproxy/conf.d/10-web.cfg":  {Data: []byte("frontend web\n bind :80\n maxconn 40\n")},
		"etc/haproxy/conf.d/README":      {Data: []byte("frontend nope\n bind :81\n")},
		"etc/haproxy/conf.d/30-more.cfg": {Data: []byte(" bind :8081 maxconn 7\n")},
	}
	c, err := Read(fsys, []string{"/etc/haproxy/haproxy.cfg", "/etc/haproxy/conf.d"})
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Files) != 4 {
		t.Errorf("files %q", c.Files)
	}
	for _, tc := range []struct {
		port  int
		scope string
		value int
	}{{80, "frontend", 40}, {8080, "defaults", 300}, {8081, "bind", 7}} {
		l, ok := c.Limit("10.0.0.1", tc.port)
		if !ok || l.Scope != tc.scope || l.Value != tc.value {
			t.Errorf(":%d: %+v %v", tc.port, l, ok)
		}
	}
	if _, ok := c.Limit("10.0.0.1", 81); ok {
		t.Error("a file without .cfg was read")
	}
	if _, err := Read(fsys, []string{"/etc/haproxy/missing.cfg"}); err == nil {
		t.Error("a missing file: no error")
	}
}

func TestBudget(t *testing.T) {
	long := "global\n maxconn 5\n" + strings.Repeat("#"+strings.Repeat("x", 1000)+"\n", maxFileBytes/1000+10)
	c, err := Parse(strings.NewReader(long), "big.cfg")
	if err == nil || c.GlobalMaxconn.Value != 5 {
		t.Errorf("%v %+v", err, c.GlobalMaxconn)
	}
	_, err = Parse(strings.NewReader("global\n"+strings.Repeat("x", maxLineBytes+1)+"\n"), "line.cfg")
	if err == nil {
		t.Error("a line over the budget: no error")
	}
}

func FuzzParse(f *testing.F) {
	for _, name := range []string{"debian.cfg", "lab.cfg", "odd.cfg", "truncated.cfg"} {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(b))
	}
	f.Fuzz(func(t *testing.T, text string) {
		c, _ := Parse(strings.NewReader(text), "f.cfg")
		for _, fr := range c.Frontends {
			for _, b := range fr.Binds {
				if b.Port < 1 || b.Port > 65535 {
					t.Fatalf("port %d", b.Port)
				}
				if l, ok := c.Limit(b.Host, b.Port); ok && (l.Value < 0 || l.Line < 1) {
					t.Fatalf("%+v", l)
				}
			}
		}
	})
}
