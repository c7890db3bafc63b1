package app

import "golang.org/x/sys/unix"

// isPollLegacy: poll(2) exists beside ppoll on amd64 (glibc's resolver
// calls poll); arm64 has only ppoll.
func isPollLegacy(nr int) bool { return uintptr(nr) == unix.SYS_POLL }

// legacySyscalls are the calls amd64 has beside their newer forms.
var legacySyscalls = map[uintptr]string{unix.SYS_POLL: "poll", unix.SYS_EPOLL_WAIT: "epoll_wait", unix.SYS_SELECT: "select"}
