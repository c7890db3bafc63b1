// Package perf samples what runs on each CPU through perf_event_open(2):
// the software cpu-clock event (a timer, no hardware counter needed, so
// it works in VMs and containers), with kernel and user call chains,
// read from each CPU's memory-mapped ring buffer.
//
// It samples per CPU, every process: a fixed number of descriptors
// (one per CPU) whatever the servers' threads, with threads that start
// during the profile covered without a race, a cost bounded by CPUs ×
// frequency, and the other processes on the servers' CPUs seen too,
// which is who took the CPU from them. The caller keeps the samples of
// the processes it profiles and counts the others'.
package perf

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Record types and the sample layout this package asks for (see
// include/uapi/linux/perf_event.h).
const (
	recordLost   = 2
	recordSample = 9

	// SampleType is TID | TIME | CPU | PERIOD | CALLCHAIN: a sample is
	// {pid, tid u32; time u64; cpu, res u32; period u64; nr u64; ips[nr] u64}.
	SampleType = 0x2 | 0x4 | 0x80 | 0x100 | 0x20

	headerSize = 8
	// sampleFixed is the bytes of a sample before its call chain.
	sampleFixed = 8 + 8 + 8 + 8 + 8
)

// Call chain context markers: an entry at or above ContextMax is no
// address but says whose addresses follow.
const (
	ContextKernel = ^uint64(0x80 - 1)  // -128: kernel addresses follow
	ContextUser   = ^uint64(0x200 - 1) // -512: user addresses follow
	ContextMax    = ^uint64(0xfff - 1) // -4095: every marker is above it
)

// ErrRecord is wrapped by the errors about a record that cannot be read.
var ErrRecord = errors.New("bad perf record")

// Sample is one cpu-clock sample.
type Sample struct {
	PID, TID uint32
	Time     uint64 // perf clock, ns
	CPU      uint32
	// Period is the CPU time this sample stands for, ns (the cpu-clock
	// event's period: 1/frequency, adjusted by the kernel).
	Period uint64
	// Kernel and User are the call chain's addresses, innermost first.
	// User is empty for a kernel thread, or when the sample hit the
	// kernel and the user stack could not be read.
	Kernel, User []uint64
}

// Record is one decoded record: a sample, or a count of lost ones.
type Record struct {
	Sample *Sample
	Lost   uint64
}

// Decode decodes one record (header included) of the layout SampleType
// gives. Records of other types decode to a zero Record. The sample's
// chains are appended to the ones of s (reused by the caller) when s is
// not nil.
func Decode(b []byte, s *Sample) (Record, error) {
	if len(b) < headerSize {
		return Record{}, fmt.Errorf("%w: %d bytes, less than a header", ErrRecord, len(b))
	}
	typ := binary.LittleEndian.Uint32(b)
	size := int(binary.LittleEndian.Uint16(b[6:]))
	if size < headerSize || size > len(b) {
		return Record{}, fmt.Errorf("%w: size %d of %d bytes", ErrRecord, size, len(b))
	}
	b = b[headerSize:size]
	switch typ {
	case recordLost:
		if len(b) < 16 {
			return Record{}, fmt.Errorf("%w: lost record of %d bytes", ErrRecord, len(b))
		}
		return Record{Lost: binary.LittleEndian.Uint64(b[8:])}, nil
	case recordSample:
	default:
		return Record{}, nil
	}
	if len(b) < sampleFixed {
		return Record{}, fmt.Errorf("%w: sample of %d bytes", ErrRecord, len(b))
	}
	if s == nil {
		s = &Sample{}
	}
	s.PID = binary.LittleEndian.Uint32(b)
	s.TID = binary.LittleEndian.Uint32(b[4:])
	s.Time = binary.LittleEndian.Uint64(b[8:])
	s.CPU = binary.LittleEndian.Uint32(b[16:])
	s.Period = binary.LittleEndian.Uint64(b[24:])
	nr := binary.LittleEndian.Uint64(b[32:])
	ips := b[sampleFixed:]
	if nr > uint64(len(ips)/8) {
		return Record{}, fmt.Errorf("%w: %d call chain entries in %d bytes", ErrRecord, nr, len(ips))
	}
	s.Kernel, s.User = s.Kernel[:0], s.User[:0]
	var dst *[]uint64
	for i := range int(nr) {
		ip := binary.LittleEndian.Uint64(ips[8*i:])
		if ip >= ContextMax {
			switch ip {
			case ContextKernel:
				dst = &s.Kernel
			case ContextUser:
				dst = &s.User
			default:
				dst = nil // hypervisor, guest: not kept
			}
			continue
		}
		if dst != nil {
			*dst = append(*dst, ip)
		}
	}
	return Record{Sample: s}, nil
}

// Ring reads the records of a ring buffer's data area: data is the area
// (a power of two in size), tail and head the kernel's positions (bytes
// since the start, not wrapped). Each record is passed to fn whole: one
// that wraps past the end of the area is copied into scratch first.
// It returns the new tail, which is head unless a record is damaged
// (then the rest is skipped: the kernel writes whole records, so a
// damaged one means the reader lost its place).
func Ring(data []byte, tail, head uint64, scratch []byte, fn func([]byte)) (uint64, []byte, error) {
	size := uint64(len(data))
	if size == 0 || size&(size-1) != 0 {
		return head, scratch, fmt.Errorf("%w: data area of %d bytes, not a power of two", ErrRecord, size)
	}
	if head < tail || head-tail > size {
		return head, scratch, fmt.Errorf("%w: head %d, tail %d in a %d-byte ring", ErrRecord, head, tail, size)
	}
	for tail < head {
		if head-tail < headerSize {
			return head, scratch, fmt.Errorf("%w: %d bytes left, less than a header", ErrRecord, head-tail)
		}
		var hdr [headerSize]byte
		for i := range hdr {
			hdr[i] = data[(tail+uint64(i))&(size-1)]
		}
		n := uint64(binary.LittleEndian.Uint16(hdr[6:]))
		if n < headerSize || n > head-tail {
			return head, scratch, fmt.Errorf("%w: record of %d bytes with %d left", ErrRecord, n, head-tail)
		}
		start := tail & (size - 1)
		if start+n <= size {
			fn(data[start : start+n])
		} else {
			scratch = append(scratch[:0], data[start:]...)
			scratch = append(scratch, data[:n-(size-start)]...)
			fn(scratch)
		}
		tail += n
	}
	return tail, scratch, nil
}
