// Package collect takes snapshots: it runs every collector inside the
// observed network namespace, records each one's status and duration, and
// never lets one failure abort the others. Package source samples it.
package collect
