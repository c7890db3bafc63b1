// Package sockdiag dumps sockets through NETLINK_SOCK_DIAG, the interface
// ss(8) uses, and aggregates them without a per-socket allocation: counts
// per state, every listener with its accept queue and effective backlog,
// and connections per remote endpoint. The decoder is pure and fuzzed; the
// dump is Linux-only.
package sockdiag

import "errors"

// ErrNotSupported is returned on systems without sock_diag.
var ErrNotSupported = errors.New("sock_diag not supported")
