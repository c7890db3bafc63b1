package nginx

import (
	"bytes"
	"errors"
	"testing"
)

func FuzzParse(f *testing.F) {
	for _, name := range []string{"debian.dump", "app.dump", "app-truncated.dump", "odd.dump"} {
		f.Add(readFixture(f, name))
	}
	f.Add([]byte("# configuration file /a:\ninclude /a; include /a;\n"))
	f.Add([]byte("# configuration file /a:\nhttp { include b/*; }\n# configuration file /b/c:\nserver { listen 1 backlog=x; }\n"))
	f.Add([]byte("# configuration file /a:\nstream { server { proxy_pass u; } upstream u { keepalive; } }\n"))
	f.Fuzz(func(t *testing.T, dump []byte) {
		c, err := Parse(dump)
		if c == nil {
			if !errors.Is(err, ErrNotDump) {
				t.Fatalf("Parse returned no Config with error %v, want ErrNotDump", err)
			}
			return
		}
		if err != nil && !errors.Is(err, ErrPartial) {
			t.Fatalf("Parse error %v does not wrap ErrPartial", err)
		}
		dumped := map[string]bool{}
		for _, name := range c.Files {
			dumped[name] = true
		}
		var check func([]*Directive)
		check = func(list []*Directive) {
			for _, d := range list {
				if !dumped[d.File] || d.Line < 1 {
					t.Fatalf("directive %q at %s: not a line of a dumped file", d.Name, d.Pos())
				}
				check(d.Block)
			}
		}
		check(c.Directives)
		c.Summary(Build{})
	})
}

func FuzzParseMaster(f *testing.F) {
	f.Add("nginx: master process /usr/sbin/nginx -c /tmp/x/nginx.conf -p /tmp/x/ -g daemon off;\x00\x00")
	f.Add("nginx: master process nginx -g\x00daemon off;\x00-c\x00a")
	f.Add("nginx: master process /usr/sbin/nginx -gdaemon -c")
	f.Fuzz(func(t *testing.T, cmdline string) {
		inv, ok := ParseMaster(cmdline)
		if ok && inv.Binary == "" {
			t.Fatalf("ParseMaster(%q) ok with no binary", cmdline)
		}
	})
}

// FuzzScanBuild: any bytes, as a binary may hold, give a Build or
// nothing, never a panic; a build found has the paths ParseBuild makes
// of the strings found.
func FuzzScanBuild(f *testing.F) {
	f.Add([]byte("\x00nginx version: nginx/1.22.1\n\x00configure arguments: --prefix=/usr/share/nginx --conf-path=/etc/nginx/nginx.conf\n\x00"))
	f.Add([]byte("configure arguments:"))
	f.Add([]byte("nginx version: nginx/"))
	f.Fuzz(func(t *testing.T, b []byte) {
		got, ok, err := ScanBuild(bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		if !ok && got != defaultBuild {
			t.Fatalf("nothing found, yet %+v", got)
		}
	})
}
