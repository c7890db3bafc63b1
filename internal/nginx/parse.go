package nginx

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// ErrPartial is wrapped by errors from Parse whose Config holds only part
// of the configuration: the dump was truncated or does not parse.
var ErrPartial = errors.New("partial configuration")

// ErrNotDump is returned by Parse for input without a single
// "# configuration file NAME:" header, which nginx -T writes first.
var ErrNotDump = errors.New(`not nginx -T output: no "# configuration file" header`)

// Limits that keep Parse finite on any input. nginx has neither: it
// recurses through includes until it runs out of descriptors.
const (
	maxIncludeDepth = 32
	maxBlockDepth   = 256
	// minDirectives is the smallest budget of directives and includes
	// that expansion may produce. The budget is four times the dump's
	// length in bytes, room enough for snippets included in every server,
	// since a dump of n bytes holds at most n/2 directives of its own.
	minDirectives = 1 << 12
	maxDirectives = 1 << 20
)

// GlobalsFile is the File of directives that came from the -g option.
const GlobalsFile = "-g"

// Pos is where a directive is: a file and a 1-based line. The zero Pos
// marks a value set by no directive, nginx's default.
type Pos struct {
	File string
	Line int
}

// IsZero reports whether p is the zero Pos, nginx's default.
func (p Pos) IsZero() bool { return p == Pos{} }

// String returns "file:line", "nginx -g" for the command line, or
// "default" for the zero Pos.
func (p Pos) String() string {
	switch p.File {
	case "":
		return "default"
	case GlobalsFile:
		return "nginx -g"
	}
	return p.File + ":" + strconv.Itoa(p.Line)
}

// Directive is one nginx directive with its block, if it has one.
type Directive struct {
	Name string
	// Args are the arguments with quotes removed and escapes undone.
	Args []string
	// File and Line are where the directive's name is: the file that
	// holds it after include expansion, and the 1-based line there; Line
	// is 0 for a directive from -g.
	File string
	Line int
	// Block holds the directives inside the braces; it is nil for a
	// directive ended by ";" and non-nil, maybe empty, for one with "{}".
	Block []*Directive
}

// Pos returns d's file and line.
func (d *Directive) Pos() Pos { return Pos{File: d.File, Line: d.Line} }

// Arg returns the i-th argument, or "" when d has fewer.
func (d *Directive) Arg(i int) string {
	if i < len(d.Args) {
		return d.Args[i]
	}
	return ""
}

// Config is a configuration as nginx read it, with every include
// replaced by the directives of the files it matched.
type Config struct {
	// File is the main configuration file, the first one in the dump.
	File string
	// Files are the names of the dumped files in the dump's order, which
	// is the order nginx first read them.
	Files []string
	// Directives is the main context.
	Directives []*Directive
}

// Find returns the directives at the end of a path of names from the
// main context: Find("http", "server", "listen") returns every listen of
// every http server.
func (c *Config) Find(path ...string) []*Directive {
	level := c.Directives
	var found []*Directive
	for i, name := range path {
		found = found[:0:0]
		for _, d := range level {
			if d.Name == name {
				found = append(found, d)
			}
		}
		if i == len(path)-1 {
			break
		}
		level = nil
		for _, d := range found {
			level = append(level, d.Block...)
		}
	}
	return found
}

// dumpHeader starts each file in nginx -T output (src/core/nginx.c).
const dumpHeader = "# configuration file "

// dumpFile is one file of a dump.
type dumpFile struct {
	name string
	text []byte
}

// splitDump cuts nginx -T output into its files. nginx writes, for each
// file, the header line, the file's bytes and a newline of its own, which
// is not the file's. Lines before the first header, such as "syntax is
// ok" from a merged stderr, are skipped. nginx does not escape anything,
// so a file holding a line that reads like a header is split there.
func splitDump(dump []byte) []dumpFile {
	var files []dumpFile
	textStart := 0
	closeLast := func(end int) {
		if n := len(files); n > 0 {
			files[n-1].text = bytes.TrimSuffix(dump[textStart:end], []byte{'\n'})
		}
	}
	for off := 0; off < len(dump); {
		l, _, found := bytes.Cut(dump[off:], []byte{'\n'})
		next := off + len(l)
		if found {
			next++
		}
		if name, ok := headerName(l); ok {
			closeLast(off)
			files = append(files, dumpFile{name: name})
			textStart = next
		}
		off = next
	}
	closeLast(len(dump))
	return files
}

func headerName(line []byte) (string, bool) {
	s, ok := bytes.CutPrefix(line, []byte(dumpHeader))
	if !ok {
		return "", false
	}
	s, ok = bytes.CutSuffix(s, []byte{':'})
	if !ok || len(s) == 0 {
		return "", false
	}
	return string(s), true
}

// Parse parses the output of nginx -T. Its first file is the main
// configuration; includes are expanded from the dumped files, matching
// each pattern against their names, since those are the files nginx read.
// Relative patterns are taken relative to the main file's directory, as
// nginx takes them relative to its conf prefix.
//
// On truncated or malformed input Parse returns what it could parse with
// an error wrapping ErrPartial. It returns ErrNotDump, and a nil Config,
// for input that holds no dumped file at all.
func Parse(dump []byte) (*Config, error) {
	files := splitDump(dump)
	if len(files) == 0 {
		return nil, ErrNotDump
	}
	return parseFiles(files, len(dump), nil)
}

// parseFiles parses a configuration's files, the main one first; size
// is their length in bytes, errs errors met while reading them.
func parseFiles(files []dumpFile, size int, errs []error) (*Config, error) {
	x := &expander{
		trees:  make(map[string][]*Directive, len(files)),
		prefix: filepath.Dir(files[0].name),
		errs:   errs,
	}
	x.budget = min(max(size*4, minDirectives), maxDirectives)
	x.limit = x.budget
	c := &Config{File: files[0].name}
	for _, f := range files {
		if _, dup := x.trees[f.name]; dup {
			continue // nginx dumps each file once: this header is a line of a file
		}
		c.Files = append(c.Files, f.name)
		x.names = append(x.names, f.name)
		tree, err := parseFile(f.name, f.text)
		if err != nil {
			x.errs = append(x.errs, err)
		}
		x.trees[f.name] = tree
	}
	c.Directives = x.expand(x.trees[c.File], 0)
	return c, errors.Join(x.errs...)
}

// parseFile builds the directive tree of one file, without expanding its
// includes. On a syntax error it returns the directives before it.
func parseFile(name string, text []byte) ([]*Directive, error) {
	s := newScanner(text)
	var root []*Directive
	var open []*Directive // the blocks the scanner is in, innermost last
	add := func(d *Directive) {
		if n := len(open); n > 0 {
			open[n-1].Block = append(open[n-1].Block, d)
		} else {
			root = append(root, d)
		}
	}
	for {
		st, err := s.next()
		if err != nil {
			return root, partial(name, err)
		}
		switch st.end {
		case endSemicolon, endBlock:
			d := &Directive{Name: st.words[0], Args: st.words[1:], File: name, Line: st.line}
			add(d)
			if st.end == endBlock {
				if len(open) >= maxBlockDepth {
					return root, partial(name, &syntaxError{st.line, fmt.Sprintf("blocks nested deeper than %d", maxBlockDepth)})
				}
				d.Block = []*Directive{}
				open = append(open, d)
			}
		case endClose:
			if len(open) == 0 {
				return root, partial(name, &syntaxError{s.line, `unexpected "}"`})
			}
			open = open[:len(open)-1]
		case endFile:
			if len(open) > 0 {
				return root, partial(name, &syntaxError{s.line, `unexpected end of file, expecting "}"`})
			}
			return root, nil
		}
	}
}

func partial(file string, e *syntaxError) error {
	return fmt.Errorf("%w: %s:%d: %s", ErrPartial, file, e.line, e.msg)
}

// expander replaces include directives by the trees of the files they
// match.
type expander struct {
	trees  map[string][]*Directive
	names  []string // dump order
	prefix string   // the conf prefix: the main file's directory
	budget int      // directives left to produce
	limit  int      // the budget at the start
	errs   []error
	seen   map[string]bool // the errors in errs, which a file included many times would repeat
}

func (x *expander) fail(err error) {
	if x.seen == nil {
		x.seen = map[string]bool{}
	}
	if msg := err.Error(); !x.seen[msg] {
		x.seen[msg] = true
		x.errs = append(x.errs, err)
	}
}

// expand returns a copy of list with its includes, and those of its
// blocks, expanded. depth counts the includes it is inside.
func (x *expander) expand(list []*Directive, depth int) []*Directive {
	out := make([]*Directive, 0, len(list))
	for _, d := range list {
		if x.budget <= 0 {
			x.fail(fmt.Errorf("%w: includes expand to more than %d directives", ErrPartial, x.limit))
			break
		}
		x.budget-- // includes count too, or files that include only each other run forever
		if d.Name == "include" && len(d.Args) == 1 && d.Block == nil {
			if depth >= maxIncludeDepth {
				x.fail(fmt.Errorf("%w: %s: includes nested deeper than %d", ErrPartial, d.Pos(), maxIncludeDepth))
				continue
			}
			for _, name := range x.match(d) {
				out = append(out, x.expand(x.trees[name], depth+1)...)
			}
			continue
		}
		c := *d
		if d.Block != nil {
			c.Block = x.expand(d.Block, depth)
		}
		out = append(out, &c)
	}
	return out
}

// match returns the dumped files an include reads, in nginx's order. A
// pattern without glob characters names one file, which nginx fails
// without; a glob matches any number, which glob(3) sorts and, with no
// leading "." in the pattern, keeps from matching hidden files.
func (x *expander) match(d *Directive) []string {
	pattern := d.Args[0]
	if !filepath.IsAbs(pattern) {
		pattern = filepath.Join(x.prefix, pattern)
	}
	pattern = filepath.Clean(pattern)
	if !strings.ContainsAny(pattern, "*?[") {
		for _, name := range x.names {
			if filepath.Clean(name) == pattern {
				return []string{name}
			}
		}
		x.fail(fmt.Errorf("%w: %s: include %s: no such file in the dump", ErrPartial, d.Pos(), d.Args[0]))
		return nil
	}
	hidden := strings.HasPrefix(filepath.Base(pattern), ".")
	var found []string
	for _, name := range x.names {
		ok, err := filepath.Match(pattern, filepath.Clean(name))
		if err != nil {
			x.fail(fmt.Errorf("%w: %s: include %s: %w", ErrPartial, d.Pos(), d.Args[0], err))
			return nil
		}
		if ok && (hidden || !strings.HasPrefix(filepath.Base(name), ".")) {
			found = append(found, name)
		}
	}
	slices.Sort(found)
	return found
}

// AddGlobals adds the directives of an -g option to the main context,
// with File set to GlobalsFile, as nginx parses them before the
// configuration file. nginx -T does not dump them.
func (c *Config) AddGlobals(globals string) error {
	tree, err := parseFile(GlobalsFile, []byte(globals))
	for _, d := range tree {
		d.Line = 0 // lines mean nothing on a command line
	}
	c.Directives = append(tree, c.Directives...)
	if err != nil {
		return fmt.Errorf("-g %q: %w", globals, err)
	}
	return nil
}
