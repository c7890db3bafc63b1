package procnet

import (
	"bytes"
	"fmt"
	"io/fs"
	"strconv"

	"github.com/netdoctor/netdoctor/internal/evidence/kernel"
)

// CPU reads the CPU time lines of stat (/proc/stat, not a net file): the
// aggregate "cpu" line as CPU -1, then one entry per "cpuN" line, in
// USER_HZ ticks.
//
// See show_stat in https://elixir.bootlin.com/linux/v6.6/source/fs/proc/stat.c.
func (p Proc) CPU() ([]kernel.CPU, error) {
	b, err := fs.ReadFile(p.FS, "stat")
	if err != nil {
		return nil, err
	}
	return parseStat(b)
}

// cpuColumns is the number of tick columns read from a cpu line: user,
// nice, system, idle, iowait, irq, softirq and steal. The guest and
// guest_nice columns that follow are already counted in user and nice.
const cpuColumns = 8

// parseStat parses the cpu lines at the top of /proc/stat:
//
//	cpu  1466 0 1150 34075 103 0 15 9 0 0
//	cpu0 634 0 498 17253 6 0 4 3 0 0
//
// Older kernels print fewer columns: 4 before v2.6 (user nice system
// idle), 7 from v2.6.0 (iowait irq softirq), 8 from v2.6.11 (steal), 9
// from v2.6.24 (guest) and 10 from v2.6.33 (guest_nice). Missing columns
// are 0. Parsing stops at the first line after the cpu lines, so the long
// intr line is never read.
func parseStat(b []byte) ([]kernel.CPU, error) {
	pe := parseErrs{file: "stat"}
	complete, truncated := completeLines(b)
	body := complete
	var out []kernel.CPU
	lineNo := 0
	for len(body) > 0 {
		var line []byte
		line, body = nextLine(body)
		lineNo++
		name, rest := nextField(line)
		if !bytes.HasPrefix(name, []byte("cpu")) {
			if out != nil {
				return out, pe.err() // the cpu lines are over
			}
			continue
		}
		c, err := parseCPULine(name, rest)
		if err != nil {
			pe.addf(lineNo, "%s: %v", name, err)
			continue
		}
		if out == nil {
			out = make([]kernel.CPU, 0, 8)
		}
		out = append(out, c)
	}
	// A cut line matters only if it may be a cpu line.
	if tail := b[len(complete):]; truncated && (len(tail) < len("cpu") || bytes.HasPrefix(tail, []byte("cpu"))) {
		pe.truncated(lineNo + 1)
	}
	return out, pe.err()
}

// parseCPULine parses one cpu line: name is "cpu" or "cpuN", rest the
// tick columns.
func parseCPULine(name, rest []byte) (kernel.CPU, error) {
	c := kernel.CPU{CPU: -1}
	if len(name) > len("cpu") {
		n, err := strconv.ParseUint(string(name[len("cpu"):]), 10, 31)
		if err != nil {
			return c, fmt.Errorf("bad cpu number: %w", err)
		}
		c.CPU = int(n)
	}
	if n := countFields(rest); n < 4 {
		return c, fmt.Errorf("want at least 4 columns, got %d", n)
	}
	var t [cpuColumns]uint64
	for i := range t {
		var f []byte
		f, rest = nextField(rest)
		if len(f) == 0 {
			break
		}
		v, err := strconv.ParseUint(string(f), 10, 64)
		if err != nil {
			return c, err
		}
		t[i] = v
	}
	c.User, c.Nice, c.System, c.Idle = t[0], t[1], t[2], t[3]
	c.IOWait, c.IRQ, c.SoftIRQ, c.Steal = t[4], t[5], t[6], t[7]
	return c, nil
}
