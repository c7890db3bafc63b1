//go:build !linux

package collect

// scanFDs is Linux-only.
func scanFDs(string, int, map[uint64]bool, int) []inodeRef { return nil }
