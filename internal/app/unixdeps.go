package app

import (
	"strings"
	"time"

	"github.com/netdoctor/netdoctor/internal/sockdiag"
)

// UnixUntimed is why a unix-socket dependency has no busy share nor
// time per round trip: the kernel keeps no tcp_info for a unix socket
// (no send/receive times, no segment or byte counters).
const UnixUntimed = "unix socket: no tcp_info"

// unixEnds are the names of a unix stream socket's two ends, as
// getsockname and getpeername give them, and its cookie.
type unixEnds struct {
	own, peer string
	cookie    uint64
}

// notDependencies are the unix sockets a server holds that are no
// dependency of its requests, by path or prefix (ending in "/"):
//   - syslog's /dev/log and journald's sockets: systemd connects every
//     service's stdout and stderr to /run/systemd/journal/stdout (a
//     stream socket), and a server logs there, it does not wait there
//     for an answer; journald would be observed as a server of every
//     run;
//   - the D-Bus system bus: a long-held control connection of many
//     daemons, and its owner (dbus-daemon) is a broker, not what answers
//     the calls, so observing it would mislead.
//
// systemd-resolved's varlink socket (/run/systemd/resolve/…, glibc's
// nss-resolve) stays: a name lookup is a real wait of a request.
var notDependencies = []string{"/dev/log", "/run/systemd/journal/", "/run/dbus/", "/var/run/dbus/"}

// unixOutbound says whether the unix stream socket fd, whose ends are
// named u, is a connection the process opened to another process's
// listening socket: its peer is a socket accepted from a listener, which
// carries the listener's path. listening says whether a path is a
// listening socket's of the namespace.
//
// Left out: descriptors 0-2 (stdio: a logging stream, never a request's
// way out), a peer without a name (a socketpair, or the client's end of
// a connection this process accepted: the client is usually unnamed), a
// socket named after a listener (one this process accepted; its peer is
// the client, named when the client bound a name), and the logging and
// bus sockets of notDependencies.
func unixOutbound(fd int, u *unixEnds, listening func(path string) bool) bool {
	if fd <= 2 || u.peer == "" || u.peer == u.own || u.own != "" && listening(u.own) {
		return false
	}
	for _, p := range notDependencies {
		if u.peer == p || strings.HasSuffix(p, "/") && strings.HasPrefix(u.peer, p) {
			return false
		}
	}
	return true
}

// sampleUnix adds one look at a unix connection taken at now: the
// client's end, which tells whether what the server sent is still unread
// at the dependency's end (sk_wmem_alloc, UNIX_DIAG_RQLEN's wqueue: the
// buffers it wrote stay charged to it until the peer reads them).
//
// That is the only timing a unix socket gives: no times of the last
// send and receive, no counters. Bytes unread there mean a request is
// outstanding (sent, not yet taken in whole), so unread samples are a
// lower bound on the busy ones, never an estimate of them: a request the
// dependency has read and is working on looks like an idle connection.
// What they do say depends on how the dependency reads: one that reads
// a request whole before working on it leaves it unread only while it
// waits for a worker (or, before the accept, in the accept queue); one
// that reads lazily counts its requests in service too (php-fpm read
// 100 % unread in TestLight/RunDependencyUnixPHP, with 18 of 20 requests
// queued: it may leave part of a request unread while the script runs;
// not verified).
func (c *connTrace) sampleUnix(now time.Time, m *sockdiag.UnixDiagMsg) {
	if c.n == 0 {
		c.firstAt = now
	}
	c.n++
	if m.HasRQ && m.WQueue > 0 {
		c.unread++
	}
	c.lastAt = now
}
