// Package resolver reads the DNS resolver configuration (resolv.conf) and
// probes each nameserver directly with one A and one PTR query, so that a
// slow or silent server, or one that fails reverse lookups, shows up with
// its own latency and response code instead of as a stalled application.
//
// The probes open their UDP sockets on the calling goroutine, so a caller
// locked to a thread inside another network namespace probes from there.
package resolver
