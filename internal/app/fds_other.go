//go:build !linux

package app

import "os"

// listFDs is only implemented on Linux, where /proc/PID/fd exists.
func listFDs(string, int, []byte, func(int) bool) (bool, error) {
	return false, os.ErrNotExist
}
