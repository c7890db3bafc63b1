// Package nginx reads the effective configuration of a running nginx, so
// that findings can name the directive to change by file and line: an
// upstream without keepalive, a listen backlog below the kernel's, a
// location with tcp_nodelay off.
//
// The configuration comes from the binary itself: ParseMaster reads the
// master's rewritten process title for the -c, -p, -g and -e options it
// was started with, Dump runs the same binary with -T and those options,
// and Parse rebuilds the directive tree from the dump, expanding every
// include from the files nginx dumped rather than from the disk, which
// may have changed since nginx read it. Summary then applies nginx's
// defaults and inheritance rules to what the rules need.
//
// Parse and Summary are pure and work on any platform, so dumps captured
// elsewhere can be replayed in tests; testdata holds real ones.
package nginx
