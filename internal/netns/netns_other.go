//go:build !linux

package netns

import (
	"errors"
	"fmt"
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
