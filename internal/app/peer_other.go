//go:build !linux

package app

func localPort(pid, fd int) (int, bool) { return 0, false }

func isRead(int) bool { return false }

func peerPort(pid, fd int) (int, bool, bool) { return 0, false, false }

func isPoll(int) bool { return false }
