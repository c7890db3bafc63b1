package nginx

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/google/go-cmp/cmp"
)

// fixtureFS holds testdata/NAME where nginx -T read it for NAME.dump:
// /tmp/netdoctor-nginx-NAME/.
func fixtureFS(t *testing.T, name string) fs.FS {
	t.Helper()
	m := fstest.MapFS{}
	src := os.DirFS("testdata/" + name)
	err := fs.WalkDir(src, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(src, p)
		m["tmp/netdoctor-nginx-"+name+"/"+p] = &fstest.MapFile{Data: b, Mode: 0o644}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestReadIsDump: the configuration Read finds on disk is the one nginx
// -T dumped from the same files: files, order, directives, lines.
func TestReadIsDump(t *testing.T) {
	for _, name := range []string{"app", "odd"} {
		t.Run(name, func(t *testing.T) {
			want, err := Parse(readFixture(t, name+".dump"))
			if err != nil {
				t.Fatal(err)
			}
			got, err := Read(fixtureFS(t, name), "/tmp/netdoctor-nginx-"+name+"/nginx.conf")
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("Read differs from nginx -T (-dump +read):\n%s", diff)
			}
		})
	}
}

// TestReadHeaderLine: a line that reads like nginx -T's file header is a
// comment to Read, not a file: the files are those the includes name.
func TestReadHeaderLine(t *testing.T) {
	m := fstest.MapFS{
		"etc/nginx/nginx.conf":    {Data: []byte("events {}\nhttp { include conf.d/*.conf; }\n")},
		"etc/nginx/conf.d/a.conf": {Data: []byte("# configuration file /etc/shadow:\nserver { listen 80; }\n")},
		"etc/shadow":              {Data: []byte("root:x:0:0\n")},
	}
	c, err := Read(m, "/etc/nginx/nginx.conf")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"/etc/nginx/nginx.conf", "/etc/nginx/conf.d/a.conf"}
	if !cmp.Equal(c.Files, want) {
		t.Fatalf("files %v, want %v", c.Files, want)
	}
	if l := c.Find("http", "server", "listen"); len(l) != 1 || l[0].Line != 2 {
		t.Fatalf("listen %v", l)
	}
}

// TestReadRefused: a file the FS refuses is left out and said so; the
// rest is read.
func TestReadRefused(t *testing.T) {
	m := refusing{fstest.MapFS{
		"etc/nginx/nginx.conf":    {Data: []byte("events {}\nhttp { include /home/u/evil.conf; include conf.d/*.conf; }\n")},
		"etc/nginx/conf.d/a.conf": {Data: []byte("server { listen 80; }\n")},
		"home/u/evil.conf":        {Data: []byte("server { listen 81; }\n")},
	}, "home/u/evil.conf"}
	c, err := Read(m, "/etc/nginx/nginx.conf")
	if c == nil || !errors.Is(err, ErrPartial) || !strings.Contains(err.Error(), "evil.conf: refused") {
		t.Fatalf("%v, want a partial configuration naming the refused file", err)
	}
	if l := c.Find("http", "server", "listen"); len(l) != 1 || l[0].Arg(0) != "80" {
		t.Fatalf("listen %v", l)
	}
	if _, err := Read(m, "etc/nginx/nginx.conf"); err == nil {
		t.Error("a relative main file: no error")
	}
}

type refusing struct {
	fstest.MapFS
	name string
}

func (r refusing) Open(name string) (fs.File, error) {
	if name == r.name {
		return nil, errors.New(name + ": refused")
	}
	return r.MapFS.Open(name)
}

// TestScanBuild: the build's options read from the binary's bytes are
// what nginx -V prints (testdata/debian-V.txt is Debian's nginx -V).
func TestScanBuild(t *testing.T) {
	v := readFixture(t, "debian-V.txt")
	// As in the binary: each string ends with a newline and a NUL, among
	// other bytes, across a chunk boundary.
	var bin bytes.Buffer
	bin.Write(bytes.Repeat([]byte{0x7f, 'E', 0}, 400000))
	for line := range strings.Lines(string(v)) {
		if strings.HasPrefix(line, "nginx version:") || strings.HasPrefix(line, "configure arguments:") {
			bin.WriteString(line)
			bin.WriteByte(0)
			bin.Write(bytes.Repeat([]byte{1, 2, 3}, 100000))
		}
	}
	got, ok, err := ScanBuild(&bin)
	if err != nil || !ok {
		t.Fatalf("ok %v err %v", ok, err)
	}
	if want := ParseBuild(v); got != want {
		t.Errorf("ScanBuild %+v, want %+v", got, want)
	}
	if _, ok, _ := ScanBuild(strings.NewReader("not nginx")); ok {
		t.Error("found a build in a file without one")
	}
}
