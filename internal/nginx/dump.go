package nginx

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"time"
)

// ErrDeleted is wrapped by errors from Dump and ReadBuild when the binary
// a master runs from has been deleted, as a package upgrade does: the
// file at its old path, if any, is another nginx, which may not read the
// configuration the same way.
var ErrDeleted = errors.New("nginx binary deleted since the master started")

// DefaultTimeout bounds Dump and ReadBuild when their context has no
// deadline.
const DefaultTimeout = 5 * time.Second

// maxOutput caps what Dump keeps of nginx's output, far above any real
// configuration, so that a runaway program cannot exhaust memory.
const maxOutput = 64 << 20

// Dump runs exe -T with the -c, -p, -g and -e options of inv and returns
// what it writes to its standard output: the configuration files, each
// after a "# configuration file NAME:" line. exe should be the master's
// own binary, the target of /proc/PID/exe, since another nginx version
// may parse the configuration differently or not at all.
//
// nginx -T does what the master did at startup short of serving: it
// opens the log files, creating those that are missing, and binds every
// listen address, forgiving only "address in use", which the master's
// are. So it must run in the master's network namespace, where those
// addresses exist, and as root for ports below 1024. It leaves the pid
// file alone. It runs for at most ctx's deadline, or DefaultTimeout
// without one. On failure the error holds the line of nginx's standard
// error that says why, such as
// `nginx: [emerg] open() "/etc/nginx/x.conf" failed`.
func Dump(ctx context.Context, exe string, inv Invocation) ([]byte, error) {
	args := []string{"-T"}
	for _, o := range []struct{ flag, value string }{
		{"-c", inv.Conf}, {"-p", inv.Prefix}, {"-g", inv.Globals}, {"-e", inv.ErrorLog},
	} {
		if o.value != "" {
			args = append(args, o.flag, o.value)
		}
	}
	stdout, _, err := run(ctx, exe, inv.Dir, args...)
	if err != nil {
		return nil, err
	}
	return stdout, nil
}

// run runs exe with args in dir and returns its standard output and
// error. nginx writes -V's output and -T's messages to the standard error.
func run(ctx context.Context, exe, dir string, args ...string) (stdout, stderr []byte, err error) {
	if strings.HasSuffix(exe, " (deleted)") {
		return nil, nil, fmt.Errorf("%w: %s: read the configuration with the new binary or restart nginx", ErrDeleted, exe)
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultTimeout)
		defer cancel()
	}
	var out, errOut capped
	cmd := exec.CommandContext(ctx, exe, args...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = &out, &errOut
	// A child that inherited the pipes must not hold Wait past the
	// deadline.
	cmd.WaitDelay = time.Second
	runErr := cmd.Run()
	name := exe + " " + strings.Join(args, " ")
	switch {
	case ctx.Err() != nil:
		return nil, nil, fmt.Errorf("%s: %w", name, ctx.Err())
	case runErr != nil && failure(errOut.b) != "":
		return nil, nil, fmt.Errorf("%s: %w: %s", name, runErr, failure(errOut.b))
	case runErr != nil:
		return nil, nil, fmt.Errorf("%s: %w", name, runErr)
	case out.over || errOut.over:
		return nil, nil, fmt.Errorf("%s: output longer than %d bytes", name, maxOutput)
	}
	return out.b, errOut.b, nil
}

// failure returns the line of nginx's standard error that says why it
// failed: the last [emerg], [alert] or [crit] line, since nginx ends with
// "configuration file ... test failed", which does not say why; else the
// last line.
func failure(stderr []byte) string {
	var last, severe string
	for line := range strings.Lines(string(stderr)) {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		last = line
		if strings.Contains(line, "[emerg]") || strings.Contains(line, "[alert]") || strings.Contains(line, "[crit]") {
			severe = line
		}
	}
	if severe != "" {
		return severe
	}
	return last
}

// capped is an io.Writer that keeps the first maxOutput bytes.
type capped struct {
	b    []byte
	over bool
}

func (c *capped) Write(p []byte) (int, error) {
	if n := maxOutput - len(c.b); len(p) > n {
		c.b = append(c.b, p[:n]...)
		c.over = true
		return len(p), nil // keep draining, so nginx is not killed by SIGPIPE
	}
	c.b = append(c.b, p...)
	return len(p), nil
}

// Build is what nginx -V says about how the binary was built: its version
// and the compiled-in paths nginx uses when neither the command line nor
// the configuration sets them.
type Build struct {
	// Version is the version number, such as "1.22.1".
	Version string
	// Prefix is --prefix, where relative paths lead (-p overrides it);
	// "/usr/local/nginx/" when configure was not given one.
	Prefix string
	// ConfPath is --conf-path, the configuration -c overrides.
	ConfPath string
	// ErrorLogPath is --error-log-path, the error log when the main
	// context has no error_log (-e overrides it); "stderr" for the
	// standard error, as in Debian's build.
	ErrorLogPath string
	// HTTPLogPath is --http-log-path, the access log of an http server or
	// location that sets none.
	HTTPLogPath string
}

// nginx's defaults for the configure options Build reads (auto/options).
var defaultBuild = Build{
	Prefix:       "/usr/local/nginx/",
	ConfPath:     "conf/nginx.conf",
	ErrorLogPath: "logs/error.log",
	HTTPLogPath:  "logs/access.log",
}

// ReadBuild runs exe -V, bounded like Dump, and parses its output.
func ReadBuild(ctx context.Context, exe string) (Build, error) {
	stdout, stderr, err := run(ctx, exe, "", "-V")
	if err != nil {
		return Build{}, err
	}
	return ParseBuild(append(stdout, stderr...)), nil
}

// ParseBuild parses nginx -V output:
//
//	nginx version: nginx/1.22.1
//	configure arguments: --with-cc-opt='-g -O2' --prefix=/usr/share/nginx ...
//
// Paths configure was not given are nginx's defaults, relative ones
// resolved against the prefix as nginx resolves them.
func ParseBuild(out []byte) Build {
	b := defaultBuild
	for line := range strings.Lines(string(out)) {
		line = strings.TrimSpace(line)
		if v, ok := strings.CutPrefix(line, "nginx version: "); ok {
			v, _, _ = strings.Cut(v, " ") // "nginx/1.25.3 (Ubuntu)"
			_, b.Version, _ = strings.Cut(v, "/")
		}
		args, ok := strings.CutPrefix(line, "configure arguments:")
		if !ok {
			continue
		}
		for _, a := range shellWords(args) {
			name, value, _ := strings.Cut(a, "=")
			switch name {
			case "--prefix":
				b.Prefix = value
			case "--conf-path":
				b.ConfPath = value
			case "--error-log-path":
				b.ErrorLogPath = value
			case "--http-log-path":
				b.HTTPLogPath = value
			}
		}
	}
	if b.ErrorLogPath == "" {
		b.ErrorLogPath = "stderr" // as nginx reads an empty --error-log-path
	}
	return b
}

// With returns b with the options of inv that override its paths: -p the
// prefix, -e the error log, -c the configuration.
func (b Build) With(inv Invocation) Build {
	if inv.Prefix != "" {
		b.Prefix = inv.Prefix
	}
	if inv.ErrorLog != "" {
		b.ErrorLogPath = inv.ErrorLog
	}
	if inv.Conf != "" {
		b.ConfPath = inv.Conf
	}
	return b
}

// shellWords splits configure's arguments as the shell that ran it did,
// since nginx -V prints them quoted: --with-cc-opt='-g -O2'.
func shellWords(s string) []string {
	var words []string
	var w strings.Builder
	inWord := false
	var quote byte
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote != 0 && c == quote:
			quote = 0
		case quote != 0:
			w.WriteByte(c)
		case c == '\'' || c == '"':
			quote, inWord = c, true
		case c == '\\' && i+1 < len(s):
			i++
			w.WriteByte(s[i])
			inWord = true
		case c == ' ' || c == '\t':
			if inWord {
				words = append(words, w.String())
				w.Reset()
				inWord = false
			}
		default:
			w.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, w.String())
	}
	return words
}
