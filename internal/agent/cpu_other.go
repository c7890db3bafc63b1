//go:build !linux

package agent

import "time"

// threadCPU is unknown outside Linux.
func threadCPU() time.Duration { return 0 }
