package tune

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/netdoctor/netdoctor/internal/sizing"
)

// A plan's file change carries the whole new content. Apply writes it
// only when it is the file as it is now with nothing but the edits
// netdoctor makes (edit.go): some lines replaced by the same directive
// with another value, some directives inserted, nothing removed, each
// value within its bounds. A plan that would add `load_module`, drop an
// `allow`, or point a `listen` elsewhere is refused, whatever its diff
// says.

// maxInserted bounds the lines a plan adds to one file: netdoctor adds at
// most a few (keepalive, the pass's switches, worker_rlimit_nofile, a
// pool's settings).
const maxInserted = 64

// maxEditLines bounds the lines of a file checked, far above any real
// configuration file.
const maxEditLines = 100000

// nginxEdit is a directive netdoctor may set: args checks the new
// arguments against the old ones (old is "" for an inserted line).
type nginxEdit struct {
	name   string
	re     *regexp.Regexp
	insert bool // netdoctor may add it on a line of its own
	args   func(args, old string) error
}

func newNginxEdit(name string, insert bool, args func(args, old string) error) nginxEdit {
	return nginxEdit{name: name, re: nginxDirective(name), insert: insert, args: args}
}

// nginxEdits are the directives the fixes edit (fix_churn.go,
// fix_listen.go, fix_nagle.go, fix_workerpool.go).
var nginxEdits = []nginxEdit{
	newNginxEdit("keepalive", true, intArg(sizing.MinKeepalive, sizing.MaxKeepalive)),
	newNginxEdit("proxy_set_header", true, func(args, old string) error {
		// Only the Connection header: another header's line is not
		// netdoctor's to replace.
		if old != "" && !strings.EqualFold(firstWord(old), "Connection") {
			return fmt.Errorf("proxy_set_header %s is not the Connection header", firstWord(old))
		}
		return exactArg(`Connection ""`)(args, old)
	}),
	newNginxEdit("proxy_http_version", true, exactArg("1.1")),
	newNginxEdit("fastcgi_keep_conn", true, exactArg("on")),
	newNginxEdit("tcp_nodelay", false, exactArg("on")),
	newNginxEdit("worker_connections", false, intArg(1, 1<<20)),
	newNginxEdit("worker_rlimit_nofile", true, intArg(1, 2<<20)),
	newNginxEdit("listen", false, listenArgs),
}

// poolEdits are the php-fpm pool settings the fixes set
// (fix_workerpool.go, fix_listen.go), each either replacing its own line
// or inserted.
var poolEdits = map[string]func(v, old string) error{
	"pm.max_children": intArg(1, 1<<14),
	"pm":              exactArg("static"),
	"listen.backlog":  intArg(1, sizing.MaxBacklog),
}

// errNotEdited and errNotAdded are a line that is no edit of netdoctor's
// at all, rather than one with a value out of bounds; errLowered is an
// edit that would be netdoctor's but lowers a limit.
var (
	errNotEdited = errors.New("changes a line netdoctor does not edit")
	errNotAdded  = errors.New("adds a line netdoctor does not add")
	errLowered   = errors.New("netdoctor only raises it")
)

// checkEdits checks that content is old with only the edits netdoctor
// makes to app's configuration: what apply writes.
func checkEdits(app string, old, content []byte) error { return edits(app, old, content, false) }

// checkBuilt is checkEdits on a plan being built, where a limit lowered
// is not a bug: the report the fix sized it from is older than the file
// (apply then refuses it, as it refuses a lowered kernel limit).
func checkBuilt(app string, old, content []byte) error { return edits(app, old, content, true) }

func edits(app string, old, content []byte, lowering bool) error {
	var line func(o, n string) error
	var insert func(n string) error
	switch app {
	case "nginx":
		line, insert = nginxLine, nginxInsert
	case "php-fpm":
		line, insert = iniLine, iniInsert
	default:
		return fmt.Errorf("netdoctor does not edit %q's configuration", app)
	}
	ol, nl := lines(old), lines(content)
	extra := len(nl) - len(ol)
	switch {
	case len(nl) > maxEditLines:
		return fmt.Errorf("%d lines: larger than any configuration netdoctor edits", len(nl))
	case extra < 0:
		return fmt.Errorf("the new content has %d lines fewer: netdoctor removes no line", -extra)
	case extra > maxInserted:
		return fmt.Errorf("the new content adds %d lines: netdoctor adds at most %d", extra, maxInserted)
	}
	inserts := make([]error, len(nl))
	for j, l := range nl {
		inserts[j] = insert(l)
	}
	// reach[i*w+d]: the first i old lines can become the first i+d new
	// ones, d of them inserted. Every old line stays, as it was or with a
	// directive's value changed, so this is the whole search; best is
	// the reachable state furthest into the new content, where a refusal
	// is explained.
	w := extra + 1
	reach := make([]bool, (len(ol)+1)*w)
	reach[0] = true
	bi, bd := 0, 0
	for i := 0; i <= len(ol); i++ {
		for d := 0; d <= extra; d++ {
			if !reach[i*w+d] {
				continue
			}
			j := i + d
			if j > bi+bd || j == bi+bd && d < bd {
				bi, bd = i, d
			}
			if i < len(ol) && j < len(nl) && (ol[i] == nl[j] || edited(line(ol[i], nl[j]), lowering)) {
				reach[(i+1)*w+d] = true
			}
			if d < extra && j < len(nl) && inserts[j] == nil {
				reach[i*w+d+1] = true
			}
		}
	}
	if reach[len(ol)*w+extra] {
		return nil
	}
	j := bi + bd
	if j >= len(nl) {
		return fmt.Errorf("line %d %q of the file is gone: netdoctor removes no line", bi+1, strings.TrimSpace(ol[bi]))
	}
	// The more telling of the two ways the line could have come: a value
	// out of bounds over "not netdoctor's"; an insertion while lines may
	// still be added.
	err := inserts[j]
	if bi < len(ol) {
		lerr := line(ol[bi], nl[j])
		if !errors.Is(lerr, errNotEdited) || errors.Is(err, errNotAdded) && bd == extra {
			err = lerr
		}
	}
	return fmt.Errorf("line %d %q: %w", j+1, strings.TrimSpace(nl[j]), err)
}

// edited says whether a line's check let it through.
func edited(err error, lowering bool) bool {
	return err == nil || lowering && errors.Is(err, errLowered)
}

// lines splits a file into its lines without their "\n": a final line
// that gains its newline (a line inserted after it) is the same line.
func lines(b []byte) []string {
	s := strings.Split(string(b), "\n")
	if n := len(s); n > 0 && s[n-1] == "" {
		s = s[:n-1]
	}
	return s
}

// nginxLine accepts n as o with one editable directive's arguments
// changed: the text before and after it the same.
func nginxLine(o, n string) error {
	var last error
	for _, e := range nginxEdits {
		if !strings.Contains(o, e.name) || !strings.Contains(n, e.name) {
			continue // most lines: no regular expression to run
		}
		lo, ln := e.re.FindStringSubmatchIndex(o), e.re.FindStringSubmatchIndex(n)
		if lo == nil || ln == nil || o[:lo[4]] != n[:ln[4]] || o[lo[1]:] != n[ln[1]:] {
			continue
		}
		if err := e.args(args(n, ln), args(o, lo)); err != nil {
			last = fmt.Errorf("%s: %w", e.name, err)
			continue
		}
		return nil
	}
	if last != nil {
		return last
	}
	return fmt.Errorf("%w (was %q)", errNotEdited, strings.TrimSpace(o))
}

// args is a directive match's arguments, trimmed.
func args(s string, loc []int) string {
	if loc[6] < 0 {
		return ""
	}
	return strings.TrimSpace(s[loc[6]:loc[7]])
}

// nginxInsert accepts a line netdoctor adds: one directive, indented.
func nginxInsert(n string) error {
	t := strings.TrimLeft(n, " \t")
	name, rest, _ := strings.Cut(t, " ")
	for _, e := range nginxEdits {
		if e.name != name || !e.insert {
			continue
		}
		a, ok := strings.CutSuffix(rest, ";")
		if !ok || strings.ContainsAny(a, ";{}#") {
			return fmt.Errorf("not one `%s …;` directive", name)
		}
		return e.args(strings.TrimSpace(a), "")
	}
	return errNotAdded
}

// listenBacklog finds a listen's backlog parameter.
var listenBacklog = regexp.MustCompile(`(^|\s)backlog=(\S*)`)

// listenArgs accepts a listen whose only change is its backlog, raised
// within the accept queue's bounds: the address and every other
// parameter stay.
func listenArgs(args, old string) error {
	strip := func(s string) string {
		return strings.Join(strings.Fields(listenBacklog.ReplaceAllString(s, " ")), " ")
	}
	if old == "" || strip(args) != strip(old) {
		return fmt.Errorf("changes more than the backlog (was %q)", old)
	}
	m := listenBacklog.FindStringSubmatch(args)
	if m == nil {
		return fmt.Errorf("no backlog=")
	}
	was := int64(sizing.NginxBacklog)
	if o := listenBacklog.FindStringSubmatch(old); o != nil {
		was, _ = strconv.ParseInt(o[2], 10, 64)
	}
	return bounded(m[2], strconv.FormatInt(was, 10), sizing.NginxBacklog, sizing.MaxBacklog)
}

// iniLine accepts a php-fpm "key = value" line replaced by the same key
// with another value, as setINI writes it.
func iniLine(o, n string) error {
	ko, vo, ok1 := iniKV(o)
	kn, vn, ok2 := iniKV(n)
	if !ok1 || !ok2 || ko != kn || leadingSpace(o) != leadingSpace(n) {
		return fmt.Errorf("%w (was %q)", errNotEdited, strings.TrimSpace(o))
	}
	check, ok := poolEdits[kn]
	if !ok {
		return fmt.Errorf("%w: %s is not a pool setting netdoctor sets", errNotEdited, kn)
	}
	if err := check(vn, vo); err != nil {
		return fmt.Errorf("%s: %w", kn, err)
	}
	return nil
}

// iniInsert accepts a pool setting netdoctor adds.
func iniInsert(n string) error {
	k, v, ok := iniKV(n)
	if !ok {
		return errNotAdded
	}
	check, ok := poolEdits[k]
	if !ok {
		return fmt.Errorf("%w: %s is not a pool setting netdoctor sets", errNotAdded, k)
	}
	if err := check(v, ""); err != nil {
		return fmt.Errorf("%s: %w", k, err)
	}
	return nil
}

// iniKV splits a "key = value" line that is not a comment or a section.
func iniKV(s string) (k, v string, ok bool) {
	t := strings.TrimSpace(s)
	if t == "" || t[0] == ';' || t[0] == '#' || t[0] == '[' {
		return "", "", false
	}
	k, v, ok = strings.Cut(t, "=")
	return strings.TrimSpace(k), strings.TrimSpace(v), ok
}

// exactArg accepts only value.
func exactArg(value string) func(v, old string) error {
	return func(v, _ string) error {
		if v != value {
			return fmt.Errorf("%q: netdoctor only sets %q", v, value)
		}
		return nil
	}
}

// intArg accepts an integer in [lo, hi], no lower than the old value:
// the numbers netdoctor sets are limits, only ever raised.
func intArg(lo, hi int64) func(v, old string) error {
	return func(v, old string) error { return bounded(v, old, lo, hi) }
}

func bounded(v, old string, lo, hi int64) error {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < lo || n > hi {
		return fmt.Errorf("%q is outside netdoctor's bounds %d–%d", v, lo, hi)
	}
	if o, err := strconv.ParseInt(old, 10, 64); err == nil && n < o {
		return fmt.Errorf("%d would lower %d: %w", n, o, errLowered)
	}
	return nil
}

// firstWord is s's first word ("" for none).
func firstWord(s string) string {
	f := strings.Fields(s)
	if len(f) == 0 {
		return ""
	}
	return f[0]
}
