package nginx

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"slices"
	"strings"
)

// Limits of Read: no configuration nginx would load comes near them.
const (
	maxFiles     = 4096
	maxReadBytes = maxOutput
)

// Read reads the configuration nginx reads from main, an absolute path,
// the way nginx does (ngx_conf_parse, ngx_conf_include): the main file,
// then each file an include names, relative patterns taken against the
// main file's directory, globs in glob(3)'s sorted order without hidden
// files, each file once. It runs no nginx: fsys decides what may be read
// (trust.FS), and a file it refuses is an error wrapping ErrPartial with
// the rest of the configuration read. The Config is Parse's, as if from
// nginx -T, except that the files are only ever those the includes name:
// a line inside one that reads like a dump header is a comment.
func Read(fsys fs.FS, main string) (*Config, error) {
	if !path.IsAbs(main) {
		return nil, fmt.Errorf("nginx configuration %q: not an absolute path", main)
	}
	r := &reader{fsys: fsys, prefix: path.Dir(main), seen: map[string]bool{}}
	if err := r.file(main, 0); err != nil {
		return nil, err
	}
	return parseFiles(r.files, r.size, r.errs)
}

type reader struct {
	fsys   fs.FS
	prefix string
	files  []dumpFile
	seen   map[string]bool
	size   int
	errs   []error
}

// file reads one file and, depth first, the files its includes name, in
// the order nginx opens them.
func (r *reader) file(name string, depth int) error {
	if r.seen[name] {
		return nil
	}
	r.seen[name] = true
	if len(r.files) >= maxFiles {
		return fmt.Errorf("%w: more than %d files", ErrPartial, maxFiles)
	}
	text, err := r.read(name)
	if err != nil {
		return err
	}
	r.files = append(r.files, dumpFile{name: name, text: text})
	if depth >= maxIncludeDepth {
		return nil // the expander says so
	}
	tree, _ := parseFile(name, text)
	for _, inc := range includes(tree) {
		names, err := r.glob(inc.Args[0])
		if err != nil {
			r.errs = append(r.errs, fmt.Errorf("%w: %s: include %s: %w", ErrPartial, inc.Pos(), inc.Args[0], err))
			continue
		}
		for _, n := range names {
			if err := r.file(n, depth+1); err != nil {
				r.errs = append(r.errs, fmt.Errorf("%w: %s: include %s: %w", ErrPartial, inc.Pos(), n, err))
			}
		}
	}
	return nil
}

func (r *reader) read(name string) ([]byte, error) {
	f, err := r.fsys.Open(strings.TrimPrefix(path.Clean(name), "/"))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file", name)
	}
	left := maxReadBytes - r.size
	b, err := io.ReadAll(io.LimitReader(bufio.NewReader(f), int64(left)+1))
	if err != nil {
		return nil, err
	}
	if len(b) > left {
		return nil, fmt.Errorf("%w: the configuration is larger than %d bytes", ErrPartial, maxReadBytes)
	}
	r.size += len(b)
	return b, nil
}

// glob returns the files an include pattern names, as nginx's
// ngx_conf_include does: a pattern without glob characters names one
// file; a glob any number, sorted, hidden files only when the pattern's
// last element starts with ".", directories skipped. Names are spelled
// as nginx spells them, the prefix and the pattern joined as written
// ("/etc/nginx/./conf.d/a.conf"), since they are the files' names in
// every position the configuration reports.
func (r *reader) glob(pattern string) ([]string, error) {
	if !path.IsAbs(pattern) {
		pattern = strings.TrimSuffix(r.prefix, "/") + "/" + pattern
	}
	if !strings.ContainsAny(pattern, "*?[") {
		return []string{pattern}, nil
	}
	matches, err := r.expand("/", components(pattern))
	if err != nil {
		return nil, err
	}
	slices.Sort(matches)
	return matches, nil
}

// expand matches the pattern's elements from dir down, listing only the
// directories whose element holds glob characters.
func (r *reader) expand(dir string, elems []string) ([]string, error) {
	if len(elems) == 0 {
		return []string{dir}, nil
	}
	e, rest := elems[0], elems[1:]
	if !strings.ContainsAny(e, "*?[") {
		return r.expand(join(dir, e), rest)
	}
	ents, err := fs.ReadDir(r.fsys, strings.TrimPrefix(path.Clean(dir), "/"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []string
	for _, ent := range ents {
		ok, err := path.Match(e, ent.Name())
		if err != nil {
			return nil, err
		}
		if !ok || (strings.HasPrefix(ent.Name(), ".") && !strings.HasPrefix(e, ".")) {
			continue
		}
		if len(rest) == 0 && ent.IsDir() {
			continue
		}
		m, err := r.expand(join(dir, ent.Name()), rest)
		if err != nil {
			return nil, err
		}
		out = append(out, m...)
	}
	return out, nil
}

// join joins as glob(3) does, without cleaning.
func join(dir, name string) string {
	if strings.HasSuffix(dir, "/") {
		return dir + name
	}
	return dir + "/" + name
}

func components(p string) []string {
	var out []string
	for c := range strings.SplitSeq(p, "/") {
		if c != "" {
			out = append(out, c)
		}
	}
	return out
}

// includes returns the include directives of a tree, at any depth, in
// order.
func includes(list []*Directive) []*Directive {
	var out []*Directive
	for _, d := range list {
		if d.Name == "include" && len(d.Args) == 1 && d.Block == nil {
			out = append(out, d)
		}
		if d.Block != nil {
			out = append(out, includes(d.Block)...)
		}
	}
	return out
}

// Modules returns the files load_module directives name, resolved
// against prefix as nginx resolves them (ngx_conf_full_name against the
// prefix, not the configuration's directory): what nginx would load,
// and run, to test the configuration.
func (c *Config) Modules(prefix string) []string {
	var out []string
	for _, d := range c.Find("load_module") {
		if p := d.Arg(0); p != "" {
			if !path.IsAbs(p) {
				p = path.Join(prefix, p)
			}
			out = append(out, path.Clean(p))
		}
	}
	return out
}

// ScanBuild finds what nginx -V prints in the binary itself: nginx
// writes it from two string constants ("nginx version: " NGINX_VER_BUILD
// and "configure arguments:" NGX_CONFIGURE, src/core/nginx.c), which the
// compiler keeps whole. So the build's paths are known without running
// the binary. ok is false when neither is found.
func ScanBuild(r io.Reader) (b Build, ok bool, err error) {
	var out []byte
	found := 0
	keys := [][]byte{[]byte("nginx version: nginx/"), []byte("configure arguments:")}
	got := make([]bool, len(keys))
	const chunk, keep = 1 << 20, 1 << 16 // a string is at most keep long
	buf := make([]byte, 0, chunk+keep)
	var total int64
	for found < len(keys) {
		n, rerr := io.ReadFull(r, buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		total += int64(n)
		eof := rerr != nil
		if rerr != nil && !errors.Is(rerr, io.EOF) && !errors.Is(rerr, io.ErrUnexpectedEOF) {
			return Build{}, false, rerr
		}
		for i, k := range keys {
			if got[i] {
				continue
			}
			at := bytes.Index(buf, k)
			if at < 0 {
				continue
			}
			end := bytes.IndexAny(buf[at:], "\x00\n")
			if end < 0 && !eof {
				continue // the rest comes with the next chunk
			}
			if end < 0 {
				end = len(buf) - at
			}
			got[i] = true
			found++
			out = append(out, buf[at:at+end]...)
			out = append(out, '\n')
		}
		if eof || total > 1<<30 {
			break
		}
		if len(buf) > keep {
			buf = append(buf[:0], buf[len(buf)-keep:]...)
		}
	}
	if found == 0 {
		return defaultBuild, false, nil
	}
	return ParseBuild(out), true, nil
}

// Main is the main configuration file as nginx names it: -c or the
// build's --conf-path, relative to the prefix (-p or --prefix), itself
// relative to the master's working directory cwd (ngx_process_options).
func (b Build) Main(cwd string) string {
	prefix := b.Prefix
	if !path.IsAbs(prefix) {
		prefix = path.Join(cwd, prefix) + "/"
	}
	conf := b.ConfPath
	if !path.IsAbs(conf) {
		conf = strings.TrimSuffix(prefix, "/") + "/" + conf
	}
	return conf
}

// AbsPrefix is the prefix relative paths lead to, relative to the
// master's working directory cwd when it is relative itself.
func (b Build) AbsPrefix(cwd string) string {
	if path.IsAbs(b.Prefix) {
		return b.Prefix
	}
	return path.Join(cwd, b.Prefix) + "/"
}
