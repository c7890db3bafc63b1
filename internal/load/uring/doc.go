// Package uring is the little of io_uring(7) the load engine uses: one
// ring per event-loop thread (submission and completion queues mmap'd,
// io_uring_enter(2) as a raw system call), a provided-buffer ring for
// multishot receives, a sparse table of registered files, and the probe
// that tells whether this kernel has what the engine needs.
//
// Why a layer of its own over golang.org/x/sys/unix rather than a
// library: none of the Go io_uring libraries (giouring, go-uring,
// iouring-go, dshulyak/uring) is served by the module proxy this project
// builds from, and the engine needs what the small ones lack (raw
// io_uring_enter without the scheduler's P hand-off, as the epoll loop
// makes its calls; SINGLE_ISSUER|DEFER_TASKRUN; registered ring fd;
// buffer rings). The layout of every structure below is the kernel's
// UAPI (include/uapi/linux/io_uring.h), checked by the sizes in the
// tests.
package uring
