// Package kmsg reads the kernel log through /dev/kmsg and classifies the
// messages that name a network fault: a full conntrack table, SYN
// flooding, TIME_WAIT bucket overflow, socket memory pressure and so on.
//
// Classify and ParseRecord are pure and work on any platform, so captured
// kernel logs can be replayed in tests. Reader, which reads /dev/kmsg, only
// works on Linux; elsewhere Open returns an error wrapping ErrNotSupported.
//
// The record format is described in the kernel's
// Documentation/ABI/testing/dev-kmsg.
package kmsg
