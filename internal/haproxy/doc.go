// Package haproxy reads what netdoctor needs of an haproxy
// configuration: which frontend binds a listener, and the maxconn
// limits that cap the connections haproxy accepts on it (the bind's,
// the frontend's or the defaults' it inherits, the process's global
// one), each with its file:line. It runs nothing: the files named by
// the master's -f arguments are read through an fs.FS (package trust's,
// for a master that runs as root), within a size budget, and any line
// it does not need is skipped.
package haproxy
