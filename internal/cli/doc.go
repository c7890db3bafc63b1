// Package cli implements the netdoctor command line. It is the only
// package that sees flags, the environment and exit codes.
package cli
