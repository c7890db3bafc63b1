//go:build !linux

package dropmon

// joiner does nothing off Linux.
type joiner struct{}
