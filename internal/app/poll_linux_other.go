//go:build linux && !amd64

package app

// isPollLegacy: only amd64 is tested; elsewhere glibc's poll is found
// through ppoll where the architecture has no poll(2) (arm64), and
// missed on the others.
func isPollLegacy(int) bool { return false }

// legacySyscalls: none beyond the generic table's.
var legacySyscalls = map[uintptr]string{}
