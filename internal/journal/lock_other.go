//go:build !linux

package journal

import (
	"fmt"
	"runtime"
)

// Lock is not supported.
func Lock(string) (func(), error) {
	return nil, fmt.Errorf("journal locks are not supported on %s", runtime.GOOS)
}
