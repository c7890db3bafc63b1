// Package evidence holds the data that collectors produce and rules
// consume: bundles of snapshots, JSON-tagged and free of I/O. It is the
// contract between `netdoctor collect` and `netdoctor diagnose`.
package evidence
