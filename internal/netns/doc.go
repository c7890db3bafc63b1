// Package netns names network namespaces (NS: the caller's own, one
// `ip netns` keeps, or a path such as /proc/PID/ns/net) and runs code
// inside them. Work happens on a goroutine locked to an OS thread that has
// called setns(2); the thread goes back to its own namespace before it is
// unlocked, and is thrown away if it cannot, so no other goroutine
// inherits the namespace by accident. Files under /proc/thread-self/net
// and /proc/sys/net, and sockets created on that thread, belong to the
// entered namespace.
//
// It also keeps named namespaces as `ip netns` does (Create, Delete, List,
// PIDs, under /run/netns), and finds the initial namespace, where
// host-wide settings live (Initial).
package netns
