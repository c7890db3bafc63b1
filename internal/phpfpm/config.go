package phpfpm

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"
)

// ErrPartial marks a configuration that loaded only in part: a file or
// include that could not be read, a line php-fpm could not parse, or a
// value php-fpm would reject. Everything else is still in the Config.
var ErrPartial = errors.New("php-fpm config partly read")

// PartialError lists the problems of a configuration that loaded in part.
// errors.Is(err, ErrPartial) holds, and errors.As finds each *LineError.
type PartialError struct {
	Problems []*LineError
}

func (e *PartialError) Error() string {
	const show = 3
	var b strings.Builder
	b.WriteString(ErrPartial.Error())
	for i, p := range e.Problems {
		if i == show {
			fmt.Fprintf(&b, "; and %d more", len(e.Problems)-show)
			break
		}
		b.WriteString("; ")
		b.WriteString(p.Error())
	}
	return b.String()
}

// Is makes errors.Is(err, ErrPartial) true.
func (e *PartialError) Is(target error) bool { return target == ErrPartial }

// Unwrap returns the problems.
func (e *PartialError) Unwrap() []error {
	errs := make([]error, len(e.Problems))
	for i, p := range e.Problems {
		errs[i] = p
	}
	return errs
}

// LineError is one problem in a configuration file.
type LineError struct {
	File string
	Line int // 0 when the problem concerns the whole file
	Err  error
}

func (e *LineError) Error() string {
	if e.Line == 0 {
		return fmt.Sprintf("%s: %v", e.File, e.Err)
	}
	return fmt.Sprintf("%s:%d: %v", e.File, e.Line, e.Err)
}

func (e *LineError) Unwrap() error { return e.Err }

// Setting is the value php-fpm uses for one directive and where it comes
// from. File is empty when no directive set it and Value is php-fpm's
// default (or, for pm.start_servers, the value it computes).
type Setting[T any] struct {
	Value T
	File  string
	Line  int
}

// IsSet reports whether a directive set the value.
func (s Setting[T]) IsSet() bool { return s.File != "" }

// Where returns "file:line", or "default" for a value no directive set.
func (s Setting[T]) Where() string {
	if !s.IsSet() {
		return "default"
	}
	return s.File + ":" + strconv.Itoa(s.Line)
}

// String returns the value and where it comes from, as a finding quotes it:
// "5 (/etc/php/8.2/fpm/pool.d/www.conf:127)".
func (s Setting[T]) String() string {
	return fmt.Sprintf("%v (%s)", s.Value, s.Where())
}

// Directive is one "key = value" line as written. Every line is kept, so
// keys netdoctor does not model (php_admin_value[memory_limit], env[PATH])
// and keys php-fpm does not know stay visible.
type Directive struct {
	Key   string // as written, e.g. "php_admin_value[memory_limit]"
	Value string // after INI unquoting, before $pool expansion
	File  string
	Line  int
}

// Include is one include directive and the files its glob matched, so a
// pattern that matches nothing (php-fpm only warns) is visible.
type Include struct {
	Pattern string // resolved against the prefix
	File    string
	Line    int
	Matched []string
}

// Config is a php-fpm configuration as the master builds it from the files.
// The files are read as they are now: a master started before an edit runs
// with the old ones until it is reloaded (SIGUSR2).
type Config struct {
	File     string   // the main file, as given to Load
	Files    []string // every file read, in reading order
	Includes []Include
	Global   Global
	Pools    []*Pool // in the order their sections first appear
}

// Pool returns the pool named name, compared without case as php-fpm
// compares section names, or nil.
func (c *Config) Pool(name string) *Pool {
	for _, p := range c.Pools {
		if strings.EqualFold(p.Name, name) {
			return p
		}
	}
	return nil
}

// Global is the [global] section.
type Global struct {
	PIDFile                   Setting[string]
	ErrorLog                  Setting[string] // absolute path, or "syslog" in any case
	LogLevel                  Setting[string]
	EmergencyRestartThreshold Setting[int]
	EmergencyRestartInterval  Setting[time.Duration]
	ProcessControlTimeout     Setting[time.Duration]
	ProcessMax                Setting[int]
	RlimitFiles               Setting[int] // 0: inherited from whoever started php-fpm
	RlimitCore                Setting[int] // -1: unlimited
	Directives                []Directive
}

// ErrorLogFile returns the path of php-fpm's own log, or false when it
// logs to syslog.
func (g Global) ErrorLogFile() (string, bool) {
	if strings.EqualFold(g.ErrorLog.Value, "syslog") || g.ErrorLog.Value == "" {
		return "", false
	}
	return g.ErrorLog.Value, true
}

// Pool is one [name] section. Relative paths are resolved as php-fpm
// resolves them; durations are php-fpm's seconds (0 disables).
type Pool struct {
	Name string
	File string // where the section first opened
	Line int

	Prefix               Setting[string]
	User                 Setting[string]
	Group                Setting[string]
	Listen               Setting[Listen]
	ListenBacklog        Setting[int]
	ListenAllowedClients Setting[string]

	PM                 Setting[string] // "static", "dynamic" or "ondemand"
	MaxChildren        Setting[int]
	StartServers       Setting[int]
	MinSpareServers    Setting[int]
	MaxSpareServers    Setting[int]
	MaxSpawnRate       Setting[int]
	ProcessIdleTimeout Setting[time.Duration]
	MaxRequests        Setting[int]

	StatusPath   Setting[string]
	StatusListen Setting[Listen] // a second listener serving only the status page
	PingPath     Setting[string]

	RequestTerminateTimeout Setting[time.Duration]
	RequestSlowlogTimeout   Setting[time.Duration]
	Slowlog                 Setting[string]
	AccessLog               Setting[string]
	CatchWorkersOutput      Setting[bool]
	RlimitFiles             Setting[int] // 0: the master's limit

	Directives []Directive

	listen       Setting[string] // raw, resolved in finish
	statusListen Setting[string]
}

// DefaultListenBacklog is listen.backlog when no directive sets it. php-fpm
// 8.2 passes -1 to listen(2) on Linux, FreeBSD, OpenBSD and macOS, and 511
// elsewhere (sapi/fpm/fpm/fpm_sockets.h, FPM_BACKLOG_DEFAULT; Linux joined
// in php/php-src#8410, first released in 8.2; Debian's 8.2 www.conf says
// "Default Value: 511 (-1 on Linux, FreeBSD and OpenBSD)"). Linux reads a
// negative backlog as unsigned and so caps it at net.core.somaxconn of the
// socket's network namespace: php-fpm8.2 -tt prints "listen.backlog = -1"
// and the status page's "listen queue len" equals somaxconn. PHP 8.1 and
// earlier used 511 on Linux (php/php-src#731), which a finding about an
// older master must not take from this constant.
const DefaultListenBacklog = -1

// EffectiveBacklog returns the accept queue the kernel gives the pool's
// listener, given net.core.somaxconn in the listener's network namespace:
// listen(2) truncates larger and negative values to it.
func (p *Pool) EffectiveBacklog(somaxconn int) int {
	b := p.ListenBacklog.Value
	if b < 0 || b > somaxconn {
		return somaxconn
	}
	return b
}

// Listen is a normalised listen address.
type Listen struct {
	Network string // "tcp" or "unix"
	// Host is the address as written without brackets, or "" for every
	// address: a bare port or "*:port", which php-fpm binds as [::] (IPv4
	// mapped too), falling back to 0.0.0.0 without IPv6.
	Host string
	Port int
	Path string // for "unix": absolute
}

// Addr returns the address to dial on Network: "host:port" (":port" dials
// the local host) or the socket path.
func (l Listen) Addr() string {
	if l.Network == "unix" {
		return l.Path
	}
	return net.JoinHostPort(l.Host, strconv.Itoa(l.Port))
}

func (l Listen) String() string {
	if l.Network == "tcp" && l.Host == "" {
		return "*:" + strconv.Itoa(l.Port)
	}
	return l.Addr()
}

// parseListen follows fpm_sockets_domain_from_address and
// fpm_socket_af_inet_listening_socket: an address with a ':' or made of
// digits only is TCP, split at the last ':'; anything else is a unix
// socket path, which the caller resolves against the prefix.
func parseListen(s string) (Listen, error) {
	colon := strings.LastIndexByte(s, ':')
	if colon < 0 && strings.Trim(s, "0123456789") != "" {
		return Listen{Network: "unix", Path: s}, nil
	}
	host, port := "", s
	if colon >= 0 {
		host, port = s[:colon], s[colon+1:]
		if len(host) >= 2 && host[0] == '[' && host[len(host)-1] == ']' {
			host = host[1 : len(host)-1]
		}
		if host == "*" {
			host = ""
		}
	}
	n := cAtoi(port)
	if n < 1 || n > 65535 {
		return Listen{}, fmt.Errorf("invalid port %q in listen address %q", port, s)
	}
	return Listen{Network: "tcp", Host: host, Port: n}, nil
}
