package phpfpm

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
	"time"
)

// Options says where the files are and how the master resolved relative
// paths. The zero value reads this host's files the way Debian's
// php-fpm8.2 started without -p does.
type Options struct {
	// FS holds the files, named by their absolute path without the
	// leading "/". Nil means os.DirFS("/"); os.DirFS("/proc/PID/root")
	// reads another mount namespace (absolute symlinks inside it still
	// resolve on the host). Paths in the Config stay as php-fpm sees them.
	FS fs.FS
	// Prefix is php-fpm's -p, or "" when it was started without one.
	// The master's title does not show it.
	Prefix string
	// BuildPrefix is the build's PHP_PREFIX, which stands in for Prefix
	// when it is empty: "/usr" (the default) for Debian's packages,
	// "/usr/local" for the official Docker images.
	BuildPrefix string
	// BuildLocalStateDir is the build's PHP_LOCALSTATEDIR, which stands in
	// for Prefix for error_log and pid: "/var" by default.
	BuildLocalStateDir string
}

const (
	// maxConfigBytes bounds one file; the rest is reported and ignored.
	maxConfigBytes = 4 << 20
	// maxIncludeDepth is php-fpm's: ini_recursion++ > 4 in
	// fpm_conf_load_ini_file lets the main file include four levels.
	maxIncludeDepth = 4
)

// Load reads the configuration at confPath, an absolute path as the
// master's title shows it, with the zero Options. A Config returned with a
// *PartialError (errors.Is(err, ErrPartial)) holds everything that could be
// read; a main
// file that cannot be read at all returns a nil Config and an error for
// which errors.Is(err, fs.ErrNotExist) works.
func Load(confPath string) (*Config, error) {
	return LoadWith(confPath, Options{})
}

// LoadWith is Load with Options.
func LoadWith(confPath string, opts Options) (*Config, error) {
	if opts.FS == nil {
		opts.FS = os.DirFS("/")
	}
	if opts.BuildPrefix == "" {
		opts.BuildPrefix = "/usr"
	}
	if opts.BuildLocalStateDir == "" {
		opts.BuildLocalStateDir = "/var"
	}
	l := &loader{opts: opts, cfg: &Config{File: confPath}}
	data, err := l.read(confPath)
	if err != nil {
		return nil, fmt.Errorf("read php-fpm config: %w", err)
	}
	l.parseFile(confPath, data, 0)
	l.finish()
	if len(l.problems) > 0 {
		return l.cfg, &PartialError{Problems: l.problems}
	}
	return l.cfg, nil
}

type loader struct {
	opts     Options
	cfg      *Config
	cur      *Pool // nil in [global]; php-fpm keeps it across included files
	problems []*LineError
}

func (l *loader) problem(file string, line int, err error) {
	l.problems = append(l.problems, &LineError{File: file, Line: line, Err: err})
}

// read returns at most maxConfigBytes of a file; a larger file is a
// problem but its start is still used.
func (l *loader) read(name string) ([]byte, error) {
	f, err := l.opts.FS.Open(fsPath(name))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxConfigBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxConfigBytes {
		l.problem(name, 0, fmt.Errorf("larger than %d bytes, the rest is ignored", maxConfigBytes))
		data = data[:maxConfigBytes]
	}
	return data, nil
}

// fsPath turns an absolute path into an fs.FS name.
func fsPath(name string) string {
	p := strings.TrimPrefix(path.Clean("/"+name), "/")
	if p == "" {
		return "."
	}
	return p
}

// parseFile reads one file line by line, as php-fpm does: a line is
// everything up to '\n', so "\r\n" files and a missing final newline work,
// and line numbers count every '\n'.
func (l *loader) parseFile(name string, data []byte, depth int) {
	l.cfg.Files = append(l.cfg.Files, name)
	for lineNo := 1; len(data) > 0; lineNo++ {
		var line []byte
		if i := indexNL(data); i >= 0 {
			line, data = data[:i], data[i+1:]
		} else {
			line, data = data, nil
		}
		parsed, err := parseINILine(string(line))
		switch {
		case err != nil:
			l.problem(name, lineNo, err)
		case parsed.isHeader:
			l.section(parsed.section, name, lineNo)
		case parsed.isEntry:
			l.entry(parsed.key, parsed.value, name, lineNo, depth)
		}
	}
}

func indexNL(b []byte) int {
	for i, c := range b {
		if c == '\n' {
			return i
		}
	}
	return -1
}

func (l *loader) section(name, file string, line int) {
	if strings.EqualFold(name, "global") {
		l.cur = nil
		return
	}
	if p := l.cfg.Pool(name); p != nil {
		l.cur = p
		return
	}
	if name == "" {
		l.problem(file, line, errors.New("empty section name"))
	}
	l.cur = newPool(name, file, line)
	l.cfg.Pools = append(l.cfg.Pools, l.cur)
}

// newPool sets php-fpm 8.2's defaults (fpm_worker_pool_config_alloc).
func newPool(name, file string, line int) *Pool {
	p := &Pool{Name: name, File: file, Line: line}
	p.ListenBacklog.Value = DefaultListenBacklog
	p.MaxSpawnRate.Value = 32
	p.ProcessIdleTimeout.Value = 10 * time.Second
	return p
}

func (l *loader) entry(key, value, file string, line, depth int) {
	// php-fpm matches "include" with case, every other key without.
	if key == "include" {
		l.include(value, file, line, depth)
		return
	}
	d := Directive{Key: key, Value: value, File: file, Line: line}
	var set func(Directive) error
	if l.cur == nil {
		l.cfg.Global.Directives = append(l.cfg.Global.Directives, d)
		set = l.cfg.Global.setter(strings.ToLower(key))
	} else {
		l.cur.Directives = append(l.cur.Directives, d)
		set = l.cur.setter(strings.ToLower(key))
	}
	if set == nil {
		return
	}
	if err := set(d); err != nil {
		l.problem(file, line, fmt.Errorf("%s: %w", key, err))
	}
}

// include resolves a relative pattern against the prefix, not against the
// including file's directory: fpm_conf_load_ini_file calls
// fpm_evaluate_full_path(&tmp, NULL, NULL, 0), which prepends -p or else
// PHP_PREFIX. Matches are read in glob(3)'s sorted order and directories
// are skipped (GLOB_MARK plus the trailing-slash test).
func (l *loader) include(pattern, file string, line, depth int) {
	if pattern != "" && !strings.HasPrefix(pattern, "/") {
		pattern = l.prefix() + "/" + pattern
	}
	inc := Include{Pattern: pattern, File: file, Line: line}
	matches, err := fs.Glob(l.opts.FS, fsPath(pattern))
	if err != nil {
		l.problem(file, line, fmt.Errorf("include %q: %w", pattern, err))
		return
	}
	dotted := strings.HasPrefix(path.Base(pattern), ".")
	for _, m := range matches {
		// glob(3) lets a wildcard match a leading dot only when the pattern
		// spells the dot; fs.Glob would pick up ".www.conf" too.
		if strings.HasPrefix(path.Base(m), ".") && !dotted {
			continue
		}
		if st, err := fs.Stat(l.opts.FS, m); err == nil && st.IsDir() {
			continue
		}
		inc.Matched = append(inc.Matched, "/"+m)
	}
	l.cfg.Includes = append(l.cfg.Includes, inc)
	if depth >= maxIncludeDepth && len(inc.Matched) > 0 {
		l.problem(file, line, fmt.Errorf("include %q: nested more than %d levels, as php-fpm refuses", pattern, maxIncludeDepth))
		return
	}
	for _, m := range inc.Matched {
		data, err := l.read(m)
		if err != nil {
			l.problem(file, line, fmt.Errorf("include %s: %w", m, err))
			continue
		}
		l.parseFile(m, data, depth+1)
	}
}

// prefix is what php-fpm prepends to relative paths outside a pool's own
// prefix: -p, or else the build's PHP_PREFIX.
func (l *loader) prefix() string {
	if l.opts.Prefix != "" {
		return l.opts.Prefix
	}
	return l.opts.BuildPrefix
}
