// Package netns runs code inside another network namespace. Work happens
// on a goroutine locked to an OS thread that has called setns(2); that
// thread is never returned to the Go scheduler, so no other goroutine can
// inherit the namespace by accident. Files under /proc/thread-self/net and
// /proc/sys/net, and sockets created on that thread, belong to the entered
// namespace.
//
// It also keeps named namespaces as `ip netns` does (Create, Delete, List,
// PIDs, under /run/netns), and finds the initial namespace, where
// host-wide settings live (Initial).
package netns
