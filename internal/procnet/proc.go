package procnet

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// ErrParse is wrapped by every error about a file that could be read but
// not fully parsed. The value returned with it holds what was parsed
// before the damage.
var ErrParse = errors.New("parse error")

// Proc reads kernel files below a procfs root.
type Proc struct {
	// FS is the /proc directory: os.DirFS("/proc") in production.
	FS fs.FS
	// Net is the directory of the net files inside FS, "thread-self/net"
	// in production, which follows the calling thread's network
	// namespace. An empty Net means "net".
	Net string
	// FDCountInSize trusts the size of a PID/fd directory as its number
	// of open files, as procfs reports it since Linux 6.2. Fixtures on a
	// normal file system must leave it false.
	FDCountInSize bool
}

// Default returns a Proc that reads the real /proc, with the net files of
// the calling thread's network namespace.
func Default() Proc {
	return Proc{FS: os.DirFS("/proc"), Net: "thread-self/net", FDCountInSize: true}
}

// netPath returns the path inside p.FS of the net file name.
func (p Proc) netPath(name string) string {
	if p.Net == "" {
		return "net/" + name
	}
	return p.Net + "/" + name
}

// readNet reads the net file name. Its error is the one of fs.ReadFile,
// unwrapped on purpose: callers test errors.Is(err, fs.ErrNotExist).
func (p Proc) readNet(name string) ([]byte, error) {
	return fs.ReadFile(p.FS, p.netPath(name))
}

// parseErrs keeps the first parse error of a file and counts the others,
// so that a badly damaged file yields one readable message.
type parseErrs struct {
	file  string
	first error
	more  int
}

// addf records a parse error at line (1-based; 0 for the whole file).
func (e *parseErrs) addf(line int, format string, args ...any) {
	if e.first != nil {
		e.more++
		return
	}
	msg := fmt.Sprintf(format, args...)
	if line > 0 {
		e.first = fmt.Errorf("%w: %s line %d: %s", ErrParse, e.file, line, msg)
	} else {
		e.first = fmt.Errorf("%w: %s: %s", ErrParse, e.file, msg)
	}
}

// truncated records that the file ends inside a line.
func (e *parseErrs) truncated(line int) {
	e.addf(line, "truncated: no newline at the end of the file")
}

// err returns the recorded errors as one, or nil.
func (e *parseErrs) err() error {
	if e.first == nil || e.more == 0 {
		return e.first
	}
	return fmt.Errorf("%w (and %d more)", e.first, e.more)
}

// completeLines returns the newline-terminated part of b and whether
// anything follows it. The kernel ends every line of these files with a
// newline, so bytes after the last newline are a line cut short: a
// truncated number would otherwise pass for a valid, smaller one, and a
// softnet line cut after its 13th column would pass for an older format.
func completeLines(b []byte) (body []byte, truncated bool) {
	i := bytes.LastIndexByte(b, '\n')
	return b[:i+1], i+1 < len(b)
}

// nextLine returns the first line of b without its newline, and the rest.
func nextLine(b []byte) (line, rest []byte) {
	i := bytes.IndexByte(b, '\n')
	if i < 0 {
		return b, nil
	}
	return b[:i], b[i+1:]
}

// isSpace reports whether c separates fields in a kernel text file. A
// newline does too, for the parsers that look at more than one line.
func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'
}

// nextField returns the first field of b and the rest of b after it.
// Field is empty when b holds only white space.
func nextField(b []byte) (field, rest []byte) {
	i := 0
	for i < len(b) && isSpace(b[i]) {
		i++
	}
	j := i
	for j < len(b) && !isSpace(b[j]) {
		j++
	}
	return b[i:j], b[j:]
}

// countFields returns the number of fields in b.
func countFields(b []byte) int {
	n := 0
	for {
		var f []byte
		f, b = nextField(b)
		if len(f) == 0 {
			return n
		}
		n++
	}
}

// cutColon splits line at its first colon into the part before it and
// the part after it. It reports false when there is no colon.
func cutColon(line []byte) (before, after []byte, ok bool) {
	i := bytes.IndexByte(line, ':')
	if i < 0 {
		return nil, nil, false
	}
	return line[:i], line[i+1:], true
}

// joinErrs returns nil, the only error unchanged (so that a read error
// stays unwrapped), or all of them joined.
func joinErrs(errs []error) error {
	switch len(errs) {
	case 0:
		return nil
	case 1:
		return errs[0]
	}
	return errors.Join(errs...)
}

// countLines returns the number of newlines in b, a capacity hint.
func countLines(b []byte) int {
	return bytes.Count(b, []byte{'\n'})
}

// trimSpace returns b without the white space that isSpace reports
// around it.
func trimSpace(b []byte) []byte {
	for len(b) > 0 && isSpace(b[0]) {
		b = b[1:]
	}
	for len(b) > 0 && isSpace(b[len(b)-1]) {
		b = b[:len(b)-1]
	}
	return b
}

// isWord reports whether b is one non-empty field with no white space.
func isWord(b []byte) bool {
	for _, c := range b {
		if isSpace(c) {
			return false
		}
	}
	return len(b) > 0
}
