//go:build !linux

package netns

import (
	"context"
	"errors"
	"fmt"
	"net"
	"runtime"
)

// ErrNotFound reports a namespace that does not exist.
var ErrNotFound = errors.New("no such network namespace")

// ErrPermission reports missing privileges.
var ErrPermission = errors.New("entering a network namespace needs root")

var errNotSupported = fmt.Errorf("network namespaces are not supported on %s", runtime.GOOS)

// Resolve fails unless nameOrPath is empty.
func Resolve(nameOrPath string) (NS, error) {
	if nameOrPath == "" {
		return NS{}, nil
	}
	return NS{}, errNotSupported
}

// ErrNoInitial reports that the initial namespace cannot be found.
var ErrNoInitial = errors.New("cannot find the initial network namespace")

// Create is not supported.
func Create(string) (NS, error) { return NS{}, errNotSupported }

// Delete is not supported.
func Delete(string) error { return errNotSupported }

// List finds no namespace.
func List() ([]string, error) { return nil, nil }

// PIDs is not supported.
func PIDs(NS) ([]int, error) { return nil, errNotSupported }

// Initial is not supported.
func Initial() (NS, error) { return NS{}, errNotSupported }

// Inode is not supported.
func Inode(string) (uint64, error) { return 0, errNotSupported }

// Do runs fn in the caller's own namespace only.
func (n NS) Do(fn func() error) error {
	if !n.Own() {
		return errNotSupported
	}
	return fn()
}

// Dial dials in the caller's own namespace only.
func (n NS) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	if !n.Own() {
		return nil, errNotSupported
	}
	var d net.Dialer
	return d.DialContext(ctx, network, addr)
}

// All finds no namespace where there are none.
func All() []Found { return nil }

// OwnedByRoot says no: there are no namespaces here.
func OwnedByRoot(string) (bool, error) { return false, errNotSupported }
