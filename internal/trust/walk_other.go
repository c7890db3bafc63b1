//go:build !linux

package trust

import (
	"errors"
	"os"
)

var errUnsupported = errors.New("reading a process's files: Linux only")

func (f FS) open(string) (*os.File, error)  { return nil, errUnsupported }
func readSmall(string) ([]byte, error)      { return nil, errUnsupported }
func Exe(string, int) (string, error)       { return "", errUnsupported }
func OpenExe(string, int) (*os.File, error) { return nil, errUnsupported }
