package tune

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	udiff "github.com/aymanbagabas/go-udiff"
)

// edit is one line-level change to a configuration file, addressed by
// the line number of the file as the plan read it, so that several edits
// of one file compose whatever their order.
type edit struct {
	line    int                          // 1-based
	replace func(string) (string, error) // nil: keep the line
	after   []string                     // lines inserted after it, indented like it
	// inside: the line opens a block and the lines go into it, indented
	// like the block's first line (one level deeper than the line).
	inside bool
}

// fileEdits collects a file's edits until the plan is built.
type fileEdits struct {
	path     string
	app      string
	old      []byte
	edits    []edit
	findings []string
	why      []string
	validate []string
	reload   Reload
}

// apply returns the new content. Edits of the same line run in the order
// they were added; insertions after one line keep their order too.
func (f *fileEdits) apply() ([]byte, error) {
	lines := strings.SplitAfter(string(f.old), "\n")
	if n := len(lines); n > 0 && lines[n-1] == "" {
		lines = lines[:n-1]
	}
	after := map[int][]string{}
	for _, e := range f.edits {
		if e.line < 1 || e.line > len(lines) {
			return nil, fmt.Errorf("%s has no line %d (changed since the report?)", f.path, e.line)
		}
		cur := lines[e.line-1]
		body, nl := strings.CutSuffix(cur, "\n")
		if e.replace != nil {
			nb, err := e.replace(body)
			if err != nil {
				return nil, fmt.Errorf("%s:%d: %w", f.path, e.line, err)
			}
			lines[e.line-1] = nb
			if nl {
				lines[e.line-1] += "\n"
			}
		}
		if len(e.after) > 0 {
			ind := leadingSpace(body)
			if e.inside {
				ind = blockIndent(body, lines[min(e.line, len(lines)-1)])
			}
			for _, a := range e.after {
				after[e.line] = append(after[e.line], ind+a+"\n")
			}
			if !nl {
				lines[e.line-1] += "\n"
			}
		}
	}
	var b strings.Builder
	for i, l := range lines {
		b.WriteString(l)
		b.WriteString(strings.Join(after[i+1], ""))
	}
	return []byte(b.String()), nil
}

// file turns the edits into a plan's file change.
func (f *fileEdits) file() (*File, error) {
	nb, err := f.apply()
	if err != nil {
		return nil, err
	}
	diff := udiff.Unified("a"+f.path, "b"+f.path, string(f.old), string(nb))
	return &File{Path: f.path, App: f.app, Old: sum(f.old), New: sum(nb), Diff: diff, Content: string(nb),
		Validate: f.validate, Reload: f.reload}, nil
}

func sum(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

func leadingSpace(s string) string {
	return s[:len(s)-len(strings.TrimLeft(s, " \t"))]
}

// blockIndent indents lines inserted inside a block opened on line: as
// the block's next line when it is deeper, else one level deeper than
// line in the file's own style.
func blockIndent(line, next string) string {
	ind := leadingSpace(line)
	if n := leadingSpace(next); len(n) > len(ind) && strings.TrimSpace(next) != "" {
		return n
	}
	if strings.Contains(ind, "\t") {
		return ind + "\t"
	}
	return ind + "    "
}

// nginxDirective matches one simple directive on a line: its name, then
// its arguments up to the ";". A quoted ";" is not expected in the
// directives netdoctor edits (listen, keepalive, tcp_nodelay…).
func nginxDirective(name string) *regexp.Regexp {
	return regexp.MustCompile(`(^|[\s;{}])(` + regexp.QuoteMeta(name) + `)(\s+[^;{}]*)?;`)
}

// setNginxArgs replaces a directive's arguments on a line.
func setNginxArgs(name, args string) func(string) (string, error) {
	re := nginxDirective(name)
	return func(line string) (string, error) {
		loc := re.FindStringSubmatchIndex(line)
		if loc == nil {
			return "", fmt.Errorf("no `%s …;` on this line (written over several lines?)", name)
		}
		return line[:loc[4]] + name + " " + args + ";" + line[loc[1]:], nil
	}
}

// nginxListenBacklog sets backlog= on a listen directive, keeping its
// other parameters.
func nginxListenBacklog(backlog int) func(string) (string, error) {
	re := nginxDirective("listen")
	bre := regexp.MustCompile(`\bbacklog=\S+`)
	return func(line string) (string, error) {
		loc := re.FindStringSubmatchIndex(line)
		if loc == nil || loc[6] < 0 {
			return "", fmt.Errorf("no `listen …;` on this line (written over several lines?)")
		}
		args := line[loc[6]:loc[7]]
		if bre.MatchString(args) {
			args = bre.ReplaceAllString(args, "backlog="+strconv.Itoa(backlog))
		} else {
			args = strings.TrimRight(args, " \t") + " backlog=" + strconv.Itoa(backlog)
		}
		return line[:loc[6]] + args + line[loc[7]:], nil
	}
}

// setINI replaces the value of a php-fpm "key = value" line.
func setINI(key, value string) func(string) (string, error) {
	return func(line string) (string, error) {
		k, _, ok := strings.Cut(line, "=")
		if !ok || strings.TrimSpace(k) != key {
			return "", fmt.Errorf("no `%s = …` on this line", key)
		}
		return leadingSpace(line) + key + " = " + value, nil
	}
}

// iniKeyLine finds the line of key in section pool of a php-fpm file
// (1-based; 0 when absent). A key before any section header is global.
func iniKeyLine(text []byte, pool, key string) int {
	section := ""
	for i, l := range strings.Split(string(text), "\n") {
		t := strings.TrimSpace(l)
		if strings.HasPrefix(t, "[") && strings.HasSuffix(t, "]") {
			section = t[1 : len(t)-1]
			continue
		}
		if section != pool || t == "" || t[0] == ';' || t[0] == '#' {
			continue
		}
		if k, _, ok := strings.Cut(t, "="); ok && strings.TrimSpace(k) == key {
			return i + 1
		}
	}
	return 0
}

// source splits "file:line" as app.Setting and nginx positions write it;
// ok is false for "default" and anything without a line.
func source(s string) (file string, line int, ok bool) {
	i := strings.LastIndexByte(s, ':')
	if i <= 0 {
		return "", 0, false
	}
	n, err := strconv.Atoi(s[i+1:])
	if err != nil || n < 1 {
		return "", 0, false
	}
	return s[:i], n, true
}
