package haproxy

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"path"
	"sort"
	"strconv"
	"strings"
)

// Budget bounds what one configuration may cost to read: a file is
// another user's words until trust says otherwise, and a huge one is
// still read only this far.
const (
	maxFileBytes = 4 << 20
	maxLineBytes = 64 << 10
	maxFiles     = 64
)

// Setting is a maxconn as written: its value and where.
type Setting struct {
	Value int
	File  string
	Line  int
}

// Set reports whether the configuration wrote it.
func (s Setting) Set() bool { return s.File != "" }

// Where is file:line.
func (s Setting) Where() string { return fmt.Sprintf("%s:%d", s.File, s.Line) }

// Bind is one bind line of a frontend or listen section.
type Bind struct {
	Host    string // "" for every address ("*", "0.0.0.0", "::" or none)
	Port    int
	Maxconn Setting // the bind's own maxconn, when set
	File    string
	Line    int
}

// Frontend is a frontend or listen section: the part that accepts.
type Frontend struct {
	Name    string
	Listen  bool // a listen section
	File    string
	Line    int
	Maxconn Setting // its own maxconn
	// Defaults is the maxconn of the defaults section it inherits,
	// which its own replaces.
	Defaults Setting
	Binds    []Bind
}

// Config is what was read of the configuration.
type Config struct {
	Files         []string
	GlobalMaxconn Setting
	Frontends     []Frontend
}

// Limit is the smallest maxconn that caps a listener, and its scope.
type Limit struct {
	Frontend string
	Scope    string // "bind", "frontend", "defaults" or "global"
	Setting
}

// Limit finds the frontend that binds host:port and its smallest
// maxconn: a bind's own, the frontend's (written in it or inherited
// from a defaults section), the global one; haproxy enforces each. ok
// is false when no frontend binds the address, or none of these is
// written (haproxy then derives the global one from its file limit).
func (c *Config) Limit(host string, port int) (Limit, bool) {
	for _, f := range c.Frontends {
		for _, b := range f.Binds {
			if b.Port != port || (b.Host != "" && b.Host != host) {
				continue
			}
			var best Limit
			consider := func(scope string, s Setting) {
				if s.Set() && (!best.Set() || s.Value < best.Value) {
					best = Limit{Frontend: f.Name, Scope: scope, Setting: s}
				}
			}
			consider("bind", b.Maxconn)
			if f.Maxconn.Set() {
				consider("frontend", f.Maxconn)
			} else {
				consider("defaults", f.Defaults)
			}
			consider("global", c.GlobalMaxconn)
			return best, best.Set()
		}
	}
	return Limit{}, false
}

// ConfigFiles are the configuration files an haproxy command line
// names: each -f (or -f=) argument, in order; a directory stands for
// its *.cfg files, which Read lists. NUL-separated /proc cmdline
// arguments are what it takes.
func ConfigFiles(args []string) []string {
	var out []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "-f" && i+1 < len(args):
			out = append(out, args[i+1])
			i++
		case strings.HasPrefix(a, "-f") && len(a) > 2 && !strings.HasPrefix(a, "-f="):
			out = append(out, a[2:])
		}
	}
	return out
}

// Read reads the named files (absolute paths, as the master sees them)
// through fsys, in order, as haproxy concatenates them. A file that
// cannot be read ends the read with what was read so far and the error.
func Read(fsys fs.FS, files []string) (*Config, error) {
	c := &Config{}
	var p parser
	p.c = c
	var errs []error
	for _, name := range expand(fsys, files, &errs) {
		if len(c.Files) == maxFiles {
			errs = append(errs, fmt.Errorf("more than %d files: the rest not read", maxFiles))
			break
		}
		f, err := fsys.Open(strings.TrimPrefix(path.Clean(name), "/"))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		c.Files = append(c.Files, name)
		err = p.parse(f, name)
		f.Close()
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
		}
	}
	return c, errors.Join(errs...)
}

// expand lists a directory's *.cfg files in name order, as haproxy
// loads them.
func expand(fsys fs.FS, files []string, errs *[]error) []string {
	var out []string
	for _, name := range files {
		rel := strings.TrimPrefix(path.Clean(name), "/")
		st, err := fs.Stat(fsys, rel)
		if err != nil || !st.IsDir() {
			out = append(out, name)
			continue
		}
		ents, err := fs.ReadDir(fsys, rel)
		if err != nil {
			*errs = append(*errs, err)
			continue
		}
		var cfgs []string
		for _, e := range ents {
			if !e.IsDir() && strings.HasSuffix(e.Name(), ".cfg") {
				cfgs = append(cfgs, path.Join(path.Clean(name), e.Name()))
			}
		}
		sort.Strings(cfgs)
		out = append(out, cfgs...)
	}
	return out
}

// Parse reads one file's text: for tests and the fuzzer, and for Read.
func Parse(r io.Reader, name string) (*Config, error) {
	c := &Config{Files: []string{name}}
	p := parser{c: c}
	return c, p.parse(r, name)
}

// parser carries the section being read across files: haproxy reads
// them as one text.
type parser struct {
	c        *Config
	section  string
	defaults Setting // the maxconn of the last defaults section
	front    int     // index of the frontend being read, or -1
	started  bool
}

func (p *parser) parse(r io.Reader, name string) error {
	if !p.started {
		p.front, p.started = -1, true
	}
	sc := bufio.NewScanner(io.LimitReader(r, maxFileBytes+1))
	sc.Buffer(make([]byte, 4096), maxLineBytes)
	read, line := 0, 0
	for sc.Scan() {
		line++
		read += len(sc.Bytes()) + 1
		if read > maxFileBytes {
			return fmt.Errorf("longer than %d bytes: the rest not read", maxFileBytes)
		}
		p.line(fields(sc.Text()), name, line)
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("line %d: %w", line+1, err)
	}
	return nil
}

func (p *parser) line(w []string, file string, n int) {
	if len(w) == 0 {
		return
	}
	switch w[0] {
	case "global", "defaults", "frontend", "listen", "backend", "peers", "resolvers", "userlist", "mailers", "program", "http-errors", "ring", "cache", "fcgi-app":
		p.section, p.front = w[0], -1
		if w[0] == "defaults" {
			// A new defaults section starts from haproxy's own defaults.
			p.defaults = Setting{}
		}
		if w[0] == "frontend" || w[0] == "listen" {
			f := Frontend{Listen: w[0] == "listen", File: file, Line: n, Defaults: p.defaults}
			if len(w) > 1 {
				f.Name = w[1]
			}
			p.c.Frontends = append(p.c.Frontends, f)
			p.front = len(p.c.Frontends) - 1
			if f.Listen && len(w) > 2 {
				// The old form: listen NAME ADDR:PORT.
				p.bind(w[2], nil, file, n)
			}
		}
		return
	}
	switch {
	case w[0] == "maxconn" && len(w) > 1:
		v, err := strconv.Atoi(w[1])
		if err != nil || v < 0 {
			return
		}
		s := Setting{Value: v, File: file, Line: n}
		switch p.section {
		case "global":
			p.c.GlobalMaxconn = s
		case "defaults":
			p.defaults = s
		case "frontend", "listen":
			if p.front >= 0 {
				p.c.Frontends[p.front].Maxconn = s
			}
		}
	case w[0] == "bind" && len(w) > 1 && p.front >= 0:
		p.bind(w[1], w[2:], file, n)
	}
}

// bind adds the addresses of one bind line: a comma-separated list of
// [host]:port or port ranges; unix sockets and abstract names are not
// TCP listeners and are skipped.
func (p *parser) bind(addrs string, opts []string, file string, n int) {
	var mc Setting
	for i := 0; i+1 < len(opts); i++ {
		if opts[i] == "maxconn" {
			if v, err := strconv.Atoi(opts[i+1]); err == nil && v >= 0 {
				mc = Setting{Value: v, File: file, Line: n}
			}
		}
	}
	f := &p.c.Frontends[p.front]
	for _, a := range strings.Split(addrs, ",") {
		a = strings.TrimPrefix(strings.TrimPrefix(a, "ipv4@"), "ipv6@")
		if strings.HasPrefix(a, "/") || strings.Contains(a, "@") {
			continue
		}
		host, port, err := net.SplitHostPort(a)
		if err != nil {
			// haproxy's own form for IPv6: the port after the last
			// colon, no brackets (":::80").
			i := strings.LastIndexByte(a, ':')
			if i < 0 || strings.Count(a, ":") < 2 {
				continue
			}
			host, port = a[:i], a[i+1:]
		}
		lo, hi := port, port
		if i := strings.IndexByte(port, '-'); i > 0 {
			lo, hi = port[:i], port[i+1:]
		}
		from, err1 := strconv.Atoi(lo)
		to, err2 := strconv.Atoi(hi)
		if err1 != nil || err2 != nil || from < 1 || to > 65535 || from > to || to-from > 1024 {
			continue
		}
		switch host {
		case "*", "0.0.0.0", "::", "":
			host = ""
		}
		for port := from; port <= to; port++ {
			f.Binds = append(f.Binds, Bind{Host: host, Port: port, Maxconn: mc, File: file, Line: n})
		}
	}
}

// fields splits a line into words as haproxy does for what this
// package reads: blanks separate, '#' starts a comment, a backslash
// escapes the next byte, quotes group. Anything else (environment
// variables, conditional blocks) is kept as written.
func fields(s string) []string {
	var out []string
	var cur strings.Builder
	in, quote := false, byte(0)
	for i := 0; i < len(s); i++ {
		ch := s[i]
		switch {
		case ch == '\\' && i+1 < len(s):
			i++
			cur.WriteByte(s[i])
			in = true
		case quote != 0:
			if ch == quote {
				quote = 0
			} else {
				cur.WriteByte(ch)
			}
		case ch == '"' || ch == '\'':
			quote, in = ch, true
		case ch == '#':
			if in {
				out = append(out, cur.String())
			}
			return out
		case ch == ' ' || ch == '\t' || ch == '\r':
			if in {
				out = append(out, cur.String())
				cur.Reset()
				in = false
			}
		default:
			cur.WriteByte(ch)
			in = true
		}
	}
	if in {
		out = append(out, cur.String())
	}
	return out
}
