//go:build !linux

package app

import "strconv"

func localPort(pid, fd int) (int, bool) { return 0, false }

func isRead(int) bool { return false }

func peerPort(pid, fd int) (int, bool, bool) { return 0, false, false }

func isPoll(int) bool { return false }

func peerAddr(int, int) string { return "" }

func syscallName(nr int) string { return "syscall " + strconv.Itoa(nr) }

func isAccept(int) bool { return false }
