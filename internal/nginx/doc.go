// Package nginx reads the effective configuration of a running nginx, so
// that findings can name the directive to change by file and line: an
// upstream without keepalive, a listen backlog below the kernel's, a
// location with tcp_nodelay off.
//
// ParseMaster reads the master's rewritten process title for the -c, -p,
// -g and -e options it was started with; ScanBuild reads the build's
// paths (what nginx -V prints) from the binary's bytes; Read reads the
// main file and every file its includes name, as nginx resolves them,
// through an fs.FS that decides what may be read (package trust), so
// that netdoctor runs no nginx to learn its configuration. Summary then
// applies nginx's defaults and inheritance rules to what the rules need.
// Parse reads nginx -T output into the same Config (fixtures, and Dump,
// which runs a binary: tests only compare the two).
//
// Parse, Read and Summary are pure and work on any platform, so
// configurations captured elsewhere can be replayed in tests; testdata
// holds real ones.
package nginx
