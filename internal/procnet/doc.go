// Package procnet parses the kernel's text files below /proc that describe
// the network stack: the SNMP and extended counters, socket statistics,
// device counters, per-CPU softnet and CPU time, sysctls, conntrack
// statistics and a few per-process facts.
//
// The parsers are pure: a Proc reads through an fs.FS, so tests and replays
// use os.DirFS("testdata/...") or fstest.MapFS, and the package builds and
// tests on any platform. In production, Default reads /proc and looks up
// the net files below /proc/thread-self/net, which follow the network
// namespace of the calling thread rather than of the process.
//
// Errors come in two kinds. A file that cannot be read returns the error
// of fs.ReadFile unwrapped, so callers can test errors.Is(err,
// fs.ErrNotExist) to tell a missing kernel feature from a failure. A file
// that is truncated or damaged returns everything parsed before the damage
// together with an error wrapping ErrParse; callers record such a result
// as partial.
//
// The readers run every second in a sampler, so the parsers walk the bytes
// of each file field by field instead of building slices of strings.
package procnet
