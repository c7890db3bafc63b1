package app

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/netdoctor/netdoctor/internal/trust"
)

// maxLogRead bounds what one run reads of a log. A run of a few minutes
// at tens of thousands of requests per second writes a few hundred MiB of
// access log; the counts are then reported as partial rather than reading
// without limit.
const maxLogRead = 64 << 20

// Log is one log file a server's configuration names.
type Log struct {
	Path string `json:"path"`
	// Kind is "error" (nginx error_log, php-fpm error_log, slowlog),
	// "access", or "found": a file the server's processes hold open for
	// appending, whatever the server (findLogs), read as both.
	Kind   string `json:"kind"`
	Source string `json:"source,omitempty"` // file:line of the directive
	// Status reports how reading went: "ok", "partial" (the run wrote
	// more than maxLogRead), or why it could not be read.
	Status string `json:"status"`
	// Lines read, written during the run.
	Lines int `json:"lines"`
	// Events counts error-log lines by class (see classify), Statuses
	// access-log responses by HTTP status.
	Events   map[string]int `json:"events,omitempty"`
	Statuses map[int]int    `json:"statuses,omitempty"`
	// Samples keeps the first line of each event class, for evidence.
	Samples map[string]string `json:"samples,omitempty"`
	// Zones counts the limiter lines (EventLimitReq, EventLimitConn) by
	// class, then by the zone nginx names in them (by zone "one").
	Zones map[string]map[string]int `json:"zones,omitempty"`
	// Messages counts the other lines by their shape (Shape: numbers,
	// addresses and quoted text masked), at most maxMessages shapes
	// (the rest under "…"); MessageSamples keeps each shape's first
	// line. What a server says that netdoctor has no class for.
	Messages       map[string]int    `json:"messages,omitempty"`
	MessageSamples map[string]string `json:"message_samples,omitempty"`

	offset int64
	inode  uint64
	root   string // the server's /proc/PID/root; "" reads Path as is
}

// open opens the log through the server's root, as a file the server
// writes: a regular file with one link, never through a symlink another
// user could have made, never blocking (trust.Written).
func (l *Log) open() (*os.File, error) {
	root := l.root
	if root == "" {
		root = "/"
	}
	f, err := trust.FS{Root: root, Mode: trust.Written}.Open(strings.TrimPrefix(path.Clean("/"+l.Path), "/"))
	if err != nil {
		return nil, err
	}
	return f.(*os.File), nil
}

// Mark remembers where the log ends now, so that Read sees only the lines
// written after it. A missing file is not an error: the server may create
// it on its first message.
func (l *Log) Mark() {
	f, err := l.open()
	if err != nil {
		return
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return
	}
	l.offset = fi.Size()
	l.inode = inodeOf(fi)
}

// Read reads the lines written since Mark and counts them. A log that was
// rotated (another inode) or truncated since is read from its start.
func (l *Log) Read() {
	f, err := l.open()
	if err != nil {
		switch {
		case errors.Is(err, os.ErrNotExist):
			l.Status = "ok" // nothing was written
		case errors.Is(err, trust.ErrUntrusted):
			l.Status = fmt.Sprintf("not read: %v", err)
		default:
			l.Status = fmt.Sprintf("unreadable: %v", err)
		}
		return
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		l.Status = fmt.Sprintf("unreadable: %v", err)
		return
	}
	off := l.offset
	if inodeOf(fi) != l.inode || fi.Size() < off {
		off = 0
	}
	if _, err := f.Seek(off, io.SeekStart); err != nil {
		l.Status = fmt.Sprintf("unreadable: %v", err)
		return
	}
	l.Status = "ok"
	if fi.Size()-off > maxLogRead {
		l.Status = fmt.Sprintf("partial: the run wrote %d MiB, the first %d MiB were read", (fi.Size()-off)>>20, maxLogRead>>20)
	}
	l.count(io.LimitReader(f, maxLogRead))
}

func (l *Log) count(r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Bytes()
		l.Lines++
		if l.Kind == "access" || l.Kind == "found" {
			if code, ok := accessStatus(line); ok {
				if l.Statuses == nil {
					l.Statuses = map[int]int{}
				}
				l.Statuses[code]++
				continue
			}
			if l.Kind == "access" {
				continue
			}
		}
		known := false
		for _, p := range patterns {
			if bytes.Contains(line, p.text) {
				if l.Events == nil {
					l.Events, l.Samples = map[string]int{}, map[string]string{}
				}
				if l.Events[p.class] == 0 {
					l.Samples[p.class] = string(line)
				}
				l.Events[p.class]++
				if z, ok := limitZone(line); ok && (p.class == EventLimitReq || p.class == EventLimitConn) {
					if l.Zones == nil {
						l.Zones = map[string]map[string]int{}
					}
					if l.Zones[p.class] == nil {
						l.Zones[p.class] = map[string]int{}
					}
					if len(l.Zones[p.class]) < 64 || l.Zones[p.class][z] > 0 {
						l.Zones[p.class][z]++
					}
				}
				known = true
				break
			}
		}
		if !known {
			l.message(line)
		}
	}
}

// maxMessages bounds the shapes one log keeps: a server that writes a
// new shape each line (a counter in a word) costs no more than this.
const (
	maxMessages    = 32
	maxShape       = 160
	maxSampleBytes = 240
	otherMessages  = "…"
)

func (l *Log) message(line []byte) {
	if len(bytes.TrimSpace(line)) == 0 {
		return
	}
	if l.Messages == nil {
		l.Messages, l.MessageSamples = map[string]int{}, map[string]string{}
	}
	k := Shape(line)
	if _, ok := l.Messages[k]; !ok && len(l.Messages) >= maxMessages {
		k = otherMessages
	}
	if l.Messages[k] == 0 {
		l.MessageSamples[k] = string(line[:min(len(line), maxSampleBytes)])
	}
	l.Messages[k]++
}

// Shape is a log line's message with what changes from one line to the
// next masked: a run that starts with a digit (numbers, times, dates'
// parts, addresses and ports, hexadecimal ids) becomes N, quoted text
// "…"; at most maxShape bytes. Lines that say the same thing of other
// requests share a shape.
func Shape(line []byte) string {
	var b strings.Builder
	for i := 0; i < len(line) && b.Len() < maxShape; {
		c := line[i]
		switch {
		case c >= '0' && c <= '9':
			for i < len(line) && (isHex(line[i]) || line[i] == '.' || line[i] == ':' || line[i] == 'x') {
				i++
			}
			b.WriteByte('N')
		case c == '"':
			j := bytes.IndexByte(line[i+1:], '"')
			if j < 0 {
				i = len(line)
			} else {
				i += j + 2
			}
			b.WriteString(`"…"`)
		default:
			b.WriteByte(c)
			i++
		}
	}
	return strings.TrimSpace(b.String())
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// TopMessages are a log's most frequent shapes, most first (ties by
// shape), at most n.
func (l *Log) TopMessages(n int) []string {
	keys := make([]string, 0, len(l.Messages))
	for k := range l.Messages {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if a, b := l.Messages[keys[i]], l.Messages[keys[j]]; a != b {
			return a > b
		}
		return keys[i] < keys[j]
	})
	return keys[:min(n, len(keys))]
}

// Event classes of error-log lines, the ones the rules read. The texts
// are nginx's and php-fpm's own messages (src/event/ngx_event_connect.c,
// src/http/ngx_http_upstream.c, sapi/fpm/fpm/fpm_process_ctl.c).
const (
	EventMaxChildren      = "max-children"        // php-fpm: server reached pm.max_children
	EventCannotAssign     = "cannot-assign"       // connect() to upstream: EADDRNOTAVAIL
	EventUpstreamTimeout  = "upstream-timeout"    // upstream timed out
	EventTooManyFiles     = "too-many-open-files" // accept4()/socket()/open(): EMFILE/ENFILE
	EventWorkerConns      = "worker-connections"  // worker_connections are not enough
	EventUpstreamAgain    = "upstream-eagain"     // connect() to a unix socket whose backlog is full
	EventUpstreamRefused  = "upstream-refused"
	EventUpstreamReset    = "upstream-reset"
	EventExecutionTimeout = "execution-timeout" // php-fpm request_terminate_timeout
	EventSlow             = "slow-request"      // php-fpm slowlog
	// nginx's limit_req and limit_conn refusing (or delaying) a request
	// (src/http/modules/ngx_http_limit_req_module.c, …limit_conn…).
	EventLimitReq  = "limit-req"
	EventLimitConn = "limit-conn"
)

var patterns = []struct {
	class string
	text  []byte
}{
	{EventMaxChildren, []byte("reached pm.max_children")},
	{EventMaxChildren, []byte("reached max_children")},
	{EventCannotAssign, []byte("(99: Cannot assign requested address)")},
	{EventUpstreamTimeout, []byte("upstream timed out")},
	{EventTooManyFiles, []byte("(24: Too many open files)")},
	{EventTooManyFiles, []byte("(23: Too many open files in system)")},
	{EventWorkerConns, []byte("worker_connections are not enough")},
	{EventUpstreamAgain, []byte("(11: Resource temporarily unavailable) while connecting to upstream")},
	{EventUpstreamRefused, []byte("(111: Connection refused) while connecting to upstream")},
	{EventUpstreamReset, []byte("upstream prematurely closed")},
	{EventUpstreamReset, []byte("(104: Connection reset by peer) while reading response header from upstream")},
	{EventExecutionTimeout, []byte("execution timed out")},
	{EventSlow, []byte("executing too slow")},
	{EventLimitReq, []byte("limiting requests, excess:")},
	{EventLimitConn, []byte("limiting connections by zone")},
}

// limitZone is the zone nginx names in a limiter's line: `by zone "one"`
// (ngx_http_limit_req_module.c, ngx_http_limit_conn_module.c).
func limitZone(line []byte) (string, bool) {
	_, after, ok := bytes.Cut(line, []byte(`by zone "`))
	if !ok {
		return "", false
	}
	z, _, ok := bytes.Cut(after, []byte(`"`))
	if !ok || len(z) > 128 {
		return "", false
	}
	return string(z), true
}

// Zone is the zone of class's limiter lines that most were logged in,
// over logs, and how many.
func Zone(logs []*Log, class string) (string, int) {
	sum := map[string]int{}
	for _, l := range logs {
		for z, n := range l.Zones[class] {
			sum[z] += n
		}
	}
	best, most := "", 0
	for z, n := range sum {
		if n > most || (n == most && z < best) {
			best, most = z, n
		}
	}
	return best, most
}

// requestStatus finds the status that follows the quoted request line in
// nginx's "combined" and "main" formats: `"GET / HTTP/1.1" 200 612`.
var requestStatus = regexp.MustCompile(`"(?:[^"\\]|\\.)*" ([1-5][0-9][0-9]) `)

func accessStatus(line []byte) (int, bool) {
	m := requestStatus.FindSubmatch(line)
	if m == nil {
		return 0, false
	}
	n, err := strconv.Atoi(string(m[1]))
	return n, err == nil
}

// Count sums the lines of one event class over logs.
func Count(logs []*Log, class string) int {
	n := 0
	for _, l := range logs {
		n += l.Events[class]
	}
	return n
}

// FirstLine returns one line of the class, from the first log that has one.
func FirstLine(logs []*Log, class string) (string, string) {
	for _, l := range logs {
		if s, ok := l.Samples[class]; ok {
			return s, l.Path
		}
	}
	return "", ""
}
