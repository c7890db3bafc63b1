package procnet

import (
	"strconv"

	"github.com/netdoctor/netdoctor/internal/evidence/kernel"
)

// Softnet reads net/softnet_stat: one line per online CPU with the
// packets its backlog processed and dropped and how often net_rx_action
// ran out of budget (time_squeeze).
func (p Proc) Softnet() ([]kernel.Softnet, error) {
	b, err := p.readNet("softnet_stat")
	if err != nil {
		return nil, err
	}
	return parseSoftnet(b)
}

// Columns of net/softnet_stat, all printed with %08x. Columns 3 to 8 are
// always 0 (they were fastroute and cpu_collision).
const (
	snProcessed   = 0
	snDropped     = 1
	snTimeSqueeze = 2
	snReceivedRPS = 9
	snFlowLimit   = 10 // since v3.11
	snBacklogLen  = 11 // since v5.10
	snCPU         = 12 // since v5.10
	// snMaxColumns bounds the columns parsed; later ones are ignored.
	snMaxColumns = 16
)

// parseSoftnet parses net/softnet_stat. The number of columns tells the
// kernel version:
//
//   - 15 columns, v6.4 and later: ... received_rps(9) flow_limit_count(10)
//     backlog_len(11) cpu(12) input_qlen(13) process_qlen(14), see
//     https://elixir.bootlin.com/linux/v6.6/source/net/core/net-procfs.c
//   - 13 columns, v5.10 to v6.3: backlog_len(11) and cpu(12) last, see
//     https://elixir.bootlin.com/linux/v5.10/source/net/core/net-procfs.c
//   - 11 columns, v3.11 to v5.9: flow_limit_count(10) last, no CPU
//     index, see
//     https://elixir.bootlin.com/linux/v4.19/source/net/core/net-procfs.c
//   - 10 columns, v2.6.35 to v3.10: received_rps(9) last, see
//     https://elixir.bootlin.com/linux/v3.10/source/net/core/net-procfs.c
//
// Without a CPU column the CPU is the line index, which is wrong when a
// CPU below the last is offline: the kernel skips offline CPUs. BacklogLen
// is then 0. Every line must have the count of columns of the first; more
// than 15 columns are taken as a later kernel that appended some.
func parseSoftnet(b []byte) ([]kernel.Softnet, error) {
	pe := parseErrs{file: "net/softnet_stat"}
	body, truncated := completeLines(b)
	var out []kernel.Softnet
	lineNo, columns := 0, 0
	for len(body) > 0 {
		var line []byte
		line, body = nextLine(body)
		lineNo++
		n := countFields(line)
		switch {
		case n == 0:
			continue
		case n < 10:
			pe.addf(lineNo, "want at least 10 columns, got %d", n)
			continue
		case columns == 0:
			columns = n
		case n != columns:
			pe.addf(lineNo, "want %d columns as on line 1, got %d", columns, n)
			continue
		}
		var c [snMaxColumns]uint64
		if err := parseHexColumns(line, c[:min(n, snMaxColumns)]); err != nil {
			pe.addf(lineNo, "%v", err)
			continue
		}
		s := kernel.Softnet{
			CPU:            len(out),
			Processed:      c[snProcessed],
			Dropped:        c[snDropped],
			TimeSqueeze:    c[snTimeSqueeze],
			ReceivedRPS:    c[snReceivedRPS],
			FlowLimitCount: c[snFlowLimit], // 0 when absent (10 columns)
		}
		if n > snCPU {
			s.BacklogLen = c[snBacklogLen]
			s.CPU = int(c[snCPU])
		}
		if out == nil {
			out = make([]kernel.Softnet, 0, countLines(body)+1)
		}
		out = append(out, s)
	}
	if truncated {
		pe.truncated(lineNo + 1)
	}
	return out, pe.err()
}

// parseHexColumns parses the first len(dst) fields of line as 32-bit hex
// numbers into dst. The kernel prints them with %08x.
func parseHexColumns(line []byte, dst []uint64) error {
	for i := range dst {
		var f []byte
		f, line = nextField(line)
		v, err := strconv.ParseUint(string(f), 16, 32)
		if err != nil {
			return err
		}
		dst[i] = v
	}
	return nil
}
