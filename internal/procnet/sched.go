package procnet

import (
	"bytes"
	"io/fs"
	"strconv"
	"time"
)

// Schedstat is one task's scheduler accounting, from
// /proc/PID/task/TID/schedstat (CONFIG_SCHED_INFO, on in every
// distribution kernel; no sysctl needed, unlike /proc/PID/sched's
// schedstats).
type Schedstat struct {
	// OnCPU is the time the task ran on a CPU (sum_exec_runtime).
	OnCPU time.Duration
	// RunDelay is the time it was runnable on a run queue without
	// running: waiting for a CPU, and, in a cgroup whose CPU quota ran
	// out, waiting for the next period (measured on 6.18: a spinning
	// thread under a 20 % quota shows ~0.9 s of run delay a second).
	RunDelay time.Duration
	// Slices is how many times it was put on a CPU.
	Slices uint64
}

// Schedstat reads the schedstat file of a task directory inside p.FS
// ("1234/task/1235").
//
// See proc_pid_schedstat in
// https://elixir.bootlin.com/linux/v6.6/source/fs/proc/base.c.
func (p Proc) Schedstat(task string) (Schedstat, error) {
	b, err := fs.ReadFile(p.FS, task+"/schedstat")
	if err != nil {
		return Schedstat{}, err
	}
	return parseSchedstat(b)
}

// parseSchedstat parses "183756765 13744037 424\n": nanoseconds on CPU,
// nanoseconds waiting on a run queue, and time slices. The kernel has
// printed it in nanoseconds since 2.6.23.
func parseSchedstat(b []byte) (Schedstat, error) {
	pe := parseErrs{file: "schedstat"}
	var s Schedstat
	body, truncated := completeLines(b)
	if truncated || len(body) == 0 {
		pe.truncated(1)
		return s, pe.err()
	}
	line, _ := nextLine(body)
	var v [3]uint64
	rest := line
	for i := range v {
		var f []byte
		f, rest = nextField(rest)
		n, err := strconv.ParseUint(string(f), 10, 63)
		if err != nil {
			pe.addf(1, "field %d: %v", i+1, err)
			return s, pe.err()
		}
		v[i] = n
	}
	return Schedstat{OnCPU: time.Duration(v[0]), RunDelay: time.Duration(v[1]), Slices: v[2]}, nil
}

// Pressure is one resource's pressure stall information (PSI), from
// /proc/pressure/cpu or a cgroup v2 directory's cpu.pressure.
type Pressure struct {
	// Some is the share of time at least one task stalled on the
	// resource (for the CPU: runnable, not running).
	Some PressureLine
	// Full is the share of time every non-idle task stalled; HasFull is
	// false where the kernel prints no such line (the system-wide CPU
	// before 5.13).
	Full    PressureLine
	HasFull bool
}

// PressureLine is one line of a pressure file.
type PressureLine struct {
	// Avg10, Avg60 and Avg300 are the stalled share in percent over the
	// last 10 s, 60 s and 300 s.
	Avg10, Avg60, Avg300 float64
	// Total is the stalled time since boot (or the cgroup's creation).
	Total time.Duration
}

// Pressure reads the pressure file of resource ("cpu", "memory", "io").
//
// See psi_show in
// https://elixir.bootlin.com/linux/v6.6/source/kernel/sched/psi.c.
func (p Proc) Pressure(resource string) (Pressure, error) {
	b, err := fs.ReadFile(p.FS, "pressure/"+resource)
	if err != nil {
		return Pressure{}, err
	}
	return ParsePressure(b)
}

// ParsePressure parses a pressure file:
//
//	some avg10=2.13 avg60=5.37 avg300=5.09 total=23696889
//	full avg10=0.00 avg60=0.00 avg300=0.00 total=0
//
// total is in microseconds. A cgroup's cpu.pressure has the same form.
func ParsePressure(b []byte) (Pressure, error) {
	pe := parseErrs{file: "pressure"}
	var p Pressure
	body, truncated := completeLines(b)
	lineNo := 0
	some := false
	for len(body) > 0 {
		var line []byte
		line, body = nextLine(body)
		lineNo++
		kind, rest := nextField(line)
		var dst *PressureLine
		switch string(kind) {
		case "some":
			dst, some = &p.Some, true
		case "full":
			dst, p.HasFull = &p.Full, true
		default:
			pe.addf(lineNo, "unknown line %q", kind)
			continue
		}
		for {
			var f []byte
			if f, rest = nextField(rest); len(f) == 0 {
				break
			}
			k, v, ok := bytes.Cut(f, []byte("="))
			if !ok {
				pe.addf(lineNo, "field %q: no '='", f)
				continue
			}
			var err error
			switch string(k) {
			case "avg10":
				dst.Avg10, err = strconv.ParseFloat(string(v), 64)
			case "avg60":
				dst.Avg60, err = strconv.ParseFloat(string(v), 64)
			case "avg300":
				dst.Avg300, err = strconv.ParseFloat(string(v), 64)
			case "total":
				var us uint64
				us, err = strconv.ParseUint(string(v), 10, 63)
				dst.Total = time.Duration(min(us, 1<<63/1000-1)) * time.Microsecond
			}
			if err != nil {
				pe.addf(lineNo, "%s: %v", k, err)
			}
		}
	}
	if truncated {
		pe.truncated(lineNo + 1)
	}
	if !some && pe.first == nil {
		pe.addf(0, "no some line")
	}
	return p, pe.err()
}

// StatCPU is what a scan of processes reads of PID/stat: who it is,
// its CPU time and the CPU it last ran on.
type StatCPU struct {
	Comm         string
	UTime, STime uint64 // USER_HZ ticks
	// Processor is the CPU the task last ran on (field 39).
	Processor int
}

// StatCPU reads path/stat ("1234" or "1234/task/1235") for its CPU time
// and last CPU.
func (p Proc) StatCPU(path string) (StatCPU, error) {
	b, err := fs.ReadFile(p.FS, path+"/stat")
	if err != nil {
		return StatCPU{}, err
	}
	return parseStatCPU(b)
}

// processorField is the index of "processor" among PID/stat's fields
// after the command name (state is 0): field 39 of the file.
const processorField = 36

func parseStatCPU(b []byte) (StatCPU, error) {
	pr, err := parsePIDStat(b)
	s := StatCPU{Comm: pr.Comm, UTime: pr.UTime, STime: pr.STime, Processor: -1}
	if err != nil {
		return s, err
	}
	rest := b[bytes.LastIndexByte(b, ')')+1:]
	for i := 0; i < processorField; i++ {
		if _, rest = nextField(rest); len(rest) == 0 {
			return s, nil // a kernel before 2.2.8: no processor field
		}
	}
	f, _ := nextField(rest)
	if n, err := strconv.ParseUint(string(f), 10, 16); err == nil {
		s.Processor = int(n)
	}
	return s, nil
}
