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
func Resolve(nameOrPath string) (string, error) {
	if nameOrPath == "" {
		return "", nil
	}
	return "", errNotSupported
}

// Inode is not supported.
func Inode(string) (uint64, error) { return 0, errNotSupported }

// Do runs fn when path is empty.
func Do(path string, fn func() error) error {
	if path != "" {
		return errNotSupported
	}
	return fn()
}

// DialContext dials in the caller's namespace when path is empty.
func DialContext(ctx context.Context, path, network, addr string) (net.Conn, error) {
	if path != "" {
		return nil, errNotSupported
	}
	var d net.Dialer
	return d.DialContext(ctx, network, addr)
}
