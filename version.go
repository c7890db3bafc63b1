// Package netdoctor holds what the whole program shares from the
// repository's root: its version, kept in the VERSION file that the
// build, the package and `netdoctor --version` all read.
package netdoctor

import (
	_ "embed"
	"strings"
)

//go:embed VERSION
var version string

// Version is the release this source is: the VERSION file's first line.
// Only the main branch is published; a build from another commit says
// which one beside it (netdoctor version).
func Version() string { return strings.TrimSpace(version) }
