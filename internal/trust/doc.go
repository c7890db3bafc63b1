// Package trust is the one place that decides what netdoctor, running as
// root, may run or read on a process's say-so.
//
// Discovery learns of files from processes: a master's command line names
// its configuration, the configuration names includes, modules and logs,
// /proc/PID/exe names the binary. Any local user can start a process
// that names anything, under any name ("nginx"). So a file is read as
// root on a process's behalf only when root already controls it, and a
// program is run only when root controls it and everything it would load:
//
//   - Process: the process runs as root (every uid 0). A server of
//     another user is observed from /proc and its sockets only.
//   - Owned (configurations, includes, binaries, modules): the file and
//     every directory from the process's root down to it belong to root
//     and no one else may write them (a sticky directory such as /tmp
//     excepted: others cannot replace what root made there). A symlink is
//     followed only where root alone could have made it.
//   - Written (the logs a server writes): any owner, since the server's
//     user writes them, but a regular file with one link (not a hard link
//     to a file of root's), never reached through a symlink another user
//     could have made, opened without blocking (a FIFO planted at a log's
//     path hangs nothing).
//
// Every file is opened component by component from a directory
// descriptor (openat with O_NOFOLLOW), so the checks hold for the file
// read, not for a name that may change between a check and an open.
package trust
