//go:build !linux

package cli

import "io"

// isTerminal is false off Linux: no live progress line there.
func isTerminal(io.Writer) bool { return false }
