package phpfpm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"
)

// ErrNoStatus means the pool did not serve a status page at the path
// asked: it has no pm.status_path, or a different one.
var ErrNoStatus = errors.New("php-fpm status page not served")

// StatusError is php-fpm's answer when it ran the request as a script
// instead of serving the status page: "404 File not found." (stderr
// "Primary script unknown") when no file has the path, which is what a
// pool without that pm.status_path answers, or "403 Access denied." when a
// file exists but security.limit_extensions refuses it. It matches
// ErrNoStatus with errors.Is.
type StatusError struct {
	Path   string
	Code   int    // the CGI Status header; 200 when php-fpm sent none
	Body   string // the page, cut to a line
	Stderr string // php-fpm's FCGI_STDERR, e.g. "Primary script unknown"
}

func (e *StatusError) Error() string {
	s := fmt.Sprintf("php-fpm answered %q with %d %s", e.Path, e.Code, e.Body)
	if e.Stderr != "" {
		s += " (" + e.Stderr + ")"
	}
	return s + ": is pm.status_path set to this path for the pool?"
}

// Is makes errors.Is(err, ErrNoStatus) true.
func (e *StatusError) Is(target error) bool { return target == ErrNoStatus }

// PoolStatus is php-fpm's status page for one pool (sapi/fpm/fpm/
// fpm_status.c, ?json). The worker that answers the request is one of the
// active processes, so ActiveProcesses is at least 1 and a pool whose
// every worker is busy cannot answer at all: Status then ends at its
// deadline. The listen queue fields come from TCP_INFO and stay 0 for a
// pool on a unix socket, whose queue only sock_diag shows.
type PoolStatus struct {
	Pool           string
	ProcessManager string // "static", "dynamic" or "ondemand"
	StartTime      time.Time
	StartSince     time.Duration
	AcceptedConn   uint64 // requests accepted since start
	// ListenQueue is the connections waiting in the accept queue now,
	// MaxListenQueue the most seen since start and ListenQueueLen the
	// queue's size (the effective backlog).
	ListenQueue        int
	MaxListenQueue     int
	ListenQueueLen     int
	IdleProcesses      int
	ActiveProcesses    int
	TotalProcesses     int
	MaxActiveProcesses int
	MaxChildrenReached uint64 // times pm.max_children stopped a spawn
	SlowRequests       uint64
}

// statusJSON is the page as php-fpm prints it.
type statusJSON struct {
	Pool               string `json:"pool"`
	ProcessManager     string `json:"process manager"`
	StartTime          int64  `json:"start time"`
	StartSince         int64  `json:"start since"`
	AcceptedConn       uint64 `json:"accepted conn"`
	ListenQueue        int    `json:"listen queue"`
	MaxListenQueue     int    `json:"max listen queue"`
	ListenQueueLen     int    `json:"listen queue len"`
	IdleProcesses      int    `json:"idle processes"`
	ActiveProcesses    int    `json:"active processes"`
	TotalProcesses     int    `json:"total processes"`
	MaxActiveProcesses int    `json:"max active processes"`
	MaxChildrenReached uint64 `json:"max children reached"`
	SlowRequests       uint64 `json:"slow requests"`
}

const (
	// defaultStatusTimeout bounds Status when ctx has no deadline.
	defaultStatusTimeout = 2 * time.Second
	statusRequestID      = 1
	maxStatusPathLen     = 1024
)

// Status asks a pool for its status page over FastCGI, the way a web
// server would forward "GET statusPath?json", on a connection from dial
// (which may enter another network namespace). statusPath is the pool's
// pm.status_path; "" returns ErrNoStatus at once. The call ends by ctx's
// deadline, or after 2 s when ctx has none. Each call uses one connection,
// which php-fpm counts in "accepted conn".
func Status(ctx context.Context, dial func(ctx context.Context) (net.Conn, error), statusPath string) (*PoolStatus, error) {
	if statusPath == "" {
		return nil, fmt.Errorf("%w: the pool has no pm.status_path", ErrNoStatus)
	}
	if len(statusPath) > maxStatusPathLen || !strings.HasPrefix(statusPath, "/") {
		return nil, fmt.Errorf("status path %.40q: must start with / and be at most %d bytes", statusPath, maxStatusPathLen)
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, defaultStatusTimeout)
		defer cancel()
	}
	resp, err := roundTrip(ctx, dial, statusParams(statusPath))
	if err != nil {
		return nil, fmt.Errorf("php-fpm status %s: %w", statusPath, err)
	}
	return parseStatusPage(statusPath, resp)
}

// statusParams are what nginx's fastcgi_params would send for the page.
// php-fpm matches pm.status_path against the script name it derives from
// SCRIPT_NAME and SCRIPT_FILENAME, and reads the format from QUERY_STRING.
func statusParams(statusPath string) [][2]string {
	return [][2]string{
		{"GATEWAY_INTERFACE", "CGI/1.1"},
		{"SERVER_SOFTWARE", "netdoctor"},
		{"SERVER_PROTOCOL", "HTTP/1.1"},
		{"REQUEST_METHOD", "GET"},
		{"SCRIPT_NAME", statusPath},
		{"SCRIPT_FILENAME", statusPath},
		{"DOCUMENT_URI", statusPath},
		{"REQUEST_URI", statusPath + "?json"},
		{"QUERY_STRING", "json"},
	}
}

func roundTrip(ctx context.Context, dial func(ctx context.Context) (net.Conn, error), params [][2]string) (*response, error) {
	req, err := encodeRequest(statusRequestID, params)
	if err != nil {
		return nil, err
	}
	conn, err := dial(ctx)
	if err != nil {
		return nil, ctxErr(ctx, fmt.Errorf("dial: %w", err))
	}
	if conn == nil {
		return nil, errors.New("dial returned no connection")
	}
	defer conn.Close()
	deadline, _ := ctx.Deadline()
	if err := conn.SetDeadline(deadline); err != nil {
		return nil, err
	}
	// A cancel before the deadline must end a blocked read too.
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	if _, err := conn.Write(req); err != nil {
		return nil, ctxErr(ctx, fmt.Errorf("write: %w", err))
	}
	return readResponse(ctx, conn)
}

func readResponse(ctx context.Context, conn net.Conn) (*response, error) {
	var (
		r     response
		buf   []byte
		chunk = make([]byte, 32<<10)
	)
	for !r.done {
		n, rerr := conn.Read(chunk)
		buf = append(buf, chunk[:n]...)
		used, err := r.decode(buf, statusRequestID)
		if err != nil {
			return nil, err
		}
		// Keep only the partial record; it is never above 64 KiB + 263.
		buf = append(buf[:0], buf[used:]...)
		if rerr != nil && !r.done {
			return nil, ctxErr(ctx, fmt.Errorf("read after %d bytes of page: %w", len(r.stdout), rerr))
		}
	}
	return &r, nil
}

// ctxErr prefers the context's reason over the i/o error it caused. The
// connection's deadline is the context's, and its timer may fire a moment
// before the context's does, so a timeout waits briefly for the context.
func ctxErr(ctx context.Context, err error) error {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
	if ctx.Err() != nil {
		return fmt.Errorf("%w (%w)", ctx.Err(), err)
	}
	return err
}

// parseStatusPage reads the CGI response php-fpm wrote on FCGI_STDOUT:
// headers, a blank line, then the page.
func parseStatusPage(statusPath string, r *response) (*PoolStatus, error) {
	head, body, ok := bytes.Cut(r.stdout, []byte("\r\n\r\n"))
	if !ok {
		head, body, ok = bytes.Cut(r.stdout, []byte("\n\n"))
	}
	if !ok {
		return nil, fmt.Errorf("php-fpm status %s: no CGI header in %d bytes", statusPath, len(r.stdout))
	}
	code, ctype := parseCGIHeader(head)
	if code != 200 || !strings.Contains(ctype, "json") {
		return nil, &StatusError{
			Path:   statusPath,
			Code:   code,
			Body:   firstLine(body),
			Stderr: firstLine(r.stderr),
		}
	}
	var raw statusJSON
	if err := json.Unmarshal(body, &raw); err != nil {
		return nil, fmt.Errorf("php-fpm status %s: %w", statusPath, err)
	}
	if raw.Pool == "" || raw.ProcessManager == "" {
		return nil, fmt.Errorf("php-fpm status %s: JSON without pool or process manager: %s", statusPath, firstLine(body))
	}
	return raw.status(), nil
}

func (s statusJSON) status() *PoolStatus {
	return &PoolStatus{
		Pool:               s.Pool,
		ProcessManager:     s.ProcessManager,
		StartTime:          time.Unix(s.StartTime, 0),
		StartSince:         time.Duration(s.StartSince) * time.Second,
		AcceptedConn:       s.AcceptedConn,
		ListenQueue:        s.ListenQueue,
		MaxListenQueue:     s.MaxListenQueue,
		ListenQueueLen:     s.ListenQueueLen,
		IdleProcesses:      s.IdleProcesses,
		ActiveProcesses:    s.ActiveProcesses,
		TotalProcesses:     s.TotalProcesses,
		MaxActiveProcesses: s.MaxActiveProcesses,
		MaxChildrenReached: s.MaxChildrenReached,
		SlowRequests:       s.SlowRequests,
	}
}

// parseCGIHeader returns the Status code (200 when absent, as CGI says) and
// the Content-Type.
func parseCGIHeader(head []byte) (code int, ctype string) {
	code = 200
	for line := range strings.SplitSeq(string(head), "\n") {
		name, value, ok := strings.Cut(strings.TrimRight(line, "\r"), ":")
		if !ok {
			continue
		}
		value = strings.TrimSpace(value)
		switch strings.ToLower(strings.TrimSpace(name)) {
		case "status":
			num, _, _ := strings.Cut(value, " ")
			if n, err := strconv.Atoi(num); err == nil {
				code = n
			}
		case "content-type":
			ctype = strings.ToLower(value)
		}
	}
	return code, ctype
}

func firstLine(b []byte) string {
	line, _, _ := bytes.Cut(bytes.TrimSpace(b), []byte("\n"))
	const maxLen = 200
	if len(line) > maxLen {
		line = line[:maxLen]
	}
	return strings.TrimSpace(string(line))
}
