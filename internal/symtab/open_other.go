//go:build !linux

package symtab

import (
	"errors"
	"os"
)

var errNotLinux = errors.New("symbolization reads /proc: Linux only")

func openMapped(string, int, Mapping) (*os.File, error) { return nil, errNotLinux }

// OpenExe is Linux only.
func OpenExe(string, int) (*os.File, error) { return nil, errNotLinux }
