package perf

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// RingPages is each CPU's ring buffer, in pages (256 KiB with 4 KiB
// pages): at 99 Hz a sample with a deep kernel and user chain is about
// 1 KiB, so a ring holds more than two seconds of one CPU, and the
// caller drains it every 100 ms.
const RingPages = 64

// MaxStack is the deepest call chain asked for (sample_max_stack).
const MaxStack = 127

// Sampler samples every CPU it was opened on.
type Sampler struct {
	Hz    int
	rings []*ring
	// Lost counts samples the kernel could not write (a full ring).
	Lost    uint64
	scratch []byte
	sample  Sample
}

type ring struct {
	cpu  int
	fd   int
	mem  []byte
	meta *unix.PerfEventMmapPage
	data []byte
}

// Open starts sampling the cpu-clock at hz on each of cpus (every
// online CPU when nil), kernel and user call chains, every process.
// It needs CAP_PERFMON (or root) or kernel.perf_event_paranoid ≤ 0.
func Open(hz int, cpus []int) (*Sampler, error) {
	if hz <= 0 || hz > 1000 {
		return nil, fmt.Errorf("perf: frequency %d Hz, want 1 to 1000", hz)
	}
	if cpus == nil {
		for i := range runtime.NumCPU() {
			cpus = append(cpus, i)
		}
		if online, err := onlineCPUs(); err == nil {
			cpus = online
		}
	}
	s := &Sampler{Hz: hz}
	attr := unix.PerfEventAttr{
		Type:             unix.PERF_TYPE_SOFTWARE,
		Config:           unix.PERF_COUNT_SW_CPU_CLOCK,
		Sample:           uint64(hz),
		Sample_type:      SampleType,
		Bits:             unix.PerfBitFreq | unix.PerfBitDisabled,
		Sample_max_stack: MaxStack,
	}
	attr.Size = uint32(unsafe.Sizeof(attr))
	page := os.Getpagesize()
	for _, cpu := range cpus {
		fd, err := unix.PerfEventOpen(&attr, -1, cpu, -1, unix.PERF_FLAG_FD_CLOEXEC)
		if err != nil {
			s.Close()
			return nil, openErr(err)
		}
		mem, err := unix.Mmap(fd, 0, (1+RingPages)*page, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
		if err != nil {
			unix.Close(fd)
			s.Close()
			return nil, fmt.Errorf("perf: mmap the ring of CPU %d: %w", cpu, err)
		}
		r := &ring{cpu: cpu, fd: fd, mem: mem, meta: (*unix.PerfEventMmapPage)(unsafe.Pointer(&mem[0]))}
		off, size := r.meta.Data_offset, r.meta.Data_size
		if off == 0 || size == 0 { // kernels before 4.1 leave them 0
			off, size = uint64(page), uint64(RingPages*page)
		}
		r.data = mem[off : off+size]
		s.rings = append(s.rings, r)
	}
	for _, r := range s.rings {
		if err := unix.IoctlSetInt(r.fd, unix.PERF_EVENT_IOC_ENABLE, 0); err != nil {
			s.Close()
			return nil, fmt.Errorf("perf: enable CPU %d: %w", r.cpu, err)
		}
	}
	return s, nil
}

// openErr says why perf_event_open was refused, and what allows it.
func openErr(err error) error {
	switch {
	case errors.Is(err, unix.EACCES), errors.Is(err, unix.EPERM):
		p, _ := os.ReadFile("/proc/sys/kernel/perf_event_paranoid")
		return fmt.Errorf("perf: perf_event_open refused (%w): profiling every process of a CPU needs root or CAP_PERFMON, or kernel.perf_event_paranoid ≤ 0 (it is %s)", err, trim(p))
	case errors.Is(err, unix.ENOENT), errors.Is(err, unix.ENOSYS), errors.Is(err, unix.EOPNOTSUPP):
		return fmt.Errorf("perf: this kernel has no perf events (CONFIG_PERF_EVENTS): %w", err)
	}
	return fmt.Errorf("perf: perf_event_open: %w", err)
}

func trim(b []byte) string {
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == ' ') {
		b = b[:len(b)-1]
	}
	if len(b) == 0 {
		return "unknown"
	}
	return string(b)
}

// Read drains every CPU's ring, calling fn with each sample. The sample
// and its chains are reused after fn returns: fn copies what it keeps.
func (s *Sampler) Read(fn func(*Sample)) error {
	var errs []error
	for _, r := range s.rings {
		head := atomic.LoadUint64(&r.meta.Data_head)
		tail := r.meta.Data_tail
		var derr error
		var newTail uint64
		newTail, s.scratch, derr = Ring(r.data, tail, head, s.scratch, func(b []byte) {
			rec, err := Decode(b, &s.sample)
			switch {
			case err != nil:
				derr = err
			case rec.Sample != nil:
				fn(rec.Sample)
			default:
				s.Lost += rec.Lost
			}
		})
		atomic.StoreUint64(&r.meta.Data_tail, newTail)
		if derr != nil {
			errs = append(errs, fmt.Errorf("CPU %d: %w", r.cpu, derr))
		}
	}
	return errors.Join(errs...)
}

// CPUs are the CPUs sampled.
func (s *Sampler) CPUs() []int {
	out := make([]int, len(s.rings))
	for i, r := range s.rings {
		out[i] = r.cpu
	}
	return out
}

// Close stops sampling and frees the rings.
func (s *Sampler) Close() error {
	for _, r := range s.rings {
		unix.Munmap(r.mem)
		unix.Close(r.fd)
	}
	s.rings = nil
	return nil
}

// onlineCPUs reads /sys/devices/system/cpu/online ("0-3,6").
func onlineCPUs() ([]int, error) {
	b, err := os.ReadFile("/sys/devices/system/cpu/online")
	if err != nil {
		return nil, err
	}
	return ParseCPUList(string(b))
}
