// Package collect takes snapshots: it runs every collector inside the
// observed network namespace, records each one's status and duration, and
// never lets one failure abort the others. A Sampler takes snapshots at a
// fixed interval.
package collect
