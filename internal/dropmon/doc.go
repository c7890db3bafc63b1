// Package dropmon is netdoctor's drop monitor, named after the kernel's
// own (net/core/drop_monitor.c, which this kernel may not have): BPF
// programs on the tracepoints skb:kfree_skb and tcp:tcp_retransmit_skb
// that count, host-wide, every packet the kernel frees as dropped by
// (network namespace, SKB_DROP_REASON_*, the function that freed it,
// protocol, local port, interface), and every TCP retransmission by
// flow with its size.
//
// The counts stay in the kernel, in bounded per-CPU hash maps: no event
// crosses to user space, so none is lost under a flood, and a key that
// finds its map full is counted as overflowed. Reasons are numbered
// differently by each kernel, so they are named from the running
// kernel's BTF (enum skb_drop_reason) when the monitor starts.
//
// One Monitor serves a whole process: run and the agent start it once,
// check for its window; every collector of every namespace reads it
// (Namespace), and Close detaches the programs. A process killed
// without Close loses them too: the links are file descriptors, never
// pinned.
//
// Where BPF cannot run (not root, kernel lockdown, no BTF, a kernel
// without these tracepoints) Start says why, and netdoctor runs on the
// kernel's counters alone.
package dropmon
