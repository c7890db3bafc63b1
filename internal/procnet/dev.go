package procnet

import (
	"bytes"
	"fmt"
	"strconv"

	"github.com/netdoctor/netdoctor/internal/evidence/kernel"
)

// Dev reads the per-device counters of net/dev. Only the counter fields
// of each kernel.Interface are set; the link attributes come from
// rtnetlink elsewhere.
//
// See dev_seq_printf_stats in
// https://elixir.bootlin.com/linux/v6.6/source/net/core/net-procfs.c.
func (p Proc) Dev() ([]kernel.Interface, error) {
	b, err := p.readNet("dev")
	if err != nil {
		return nil, err
	}
	return parseDev(b)
}

// devColumns is the number of counters on each line of net/dev, eight
// for receive and eight for transmit.
const devColumns = 16

// parseDev parses net/dev. After two header lines, each line is
//
//	eth0: 9012493     219    0 ...
//
// printed with "%6s:%8llu", so a large byte count follows the colon with
// no space ("eth0:123456789"). Device names cannot contain a colon
// (dev_valid_name rejects it), so the first colon ends the name.
func parseDev(b []byte) ([]kernel.Interface, error) {
	pe := parseErrs{file: "net/dev"}
	body, truncated := completeLines(b)
	ifaces := make([]kernel.Interface, 0, countLines(body))
	lineNo := 0
	for len(body) > 0 {
		var line []byte
		line, body = nextLine(body)
		lineNo++
		if bytes.IndexByte(line, '|') >= 0 {
			continue // one of the two header lines
		}
		name, counters, ok := cutColon(line)
		if !ok {
			if countFields(line) > 0 {
				pe.addf(lineNo, "no device name before a colon")
			}
			continue
		}
		name = trimSpace(name)
		if !isWord(name) {
			pe.addf(lineNo, "bad device name %q", name)
			continue
		}
		var c [devColumns]uint64
		if err := parseColumns(counters, c[:], 10); err != nil {
			pe.addf(lineNo, "%s: %v", name, err)
			continue
		}
		ifaces = append(ifaces, kernel.Interface{
			Name:      string(name),
			RxBytes:   c[0],
			RxPackets: c[1],
			RxErrs:    c[2],
			RxDrop:    c[3],
			RxFifo:    c[4],
			RxFrame:   c[5],
			// c[6] is rx compressed, c[7] rx multicast.
			TxBytes:   c[8],
			TxPackets: c[9],
			TxErrs:    c[10],
			TxDrop:    c[11],
			TxFifo:    c[12],
			TxColls:   c[13],
			TxCarrier: c[14],
			// c[15] is tx compressed.
		})
	}
	if truncated {
		pe.truncated(lineNo + 1)
	}
	return ifaces, pe.err()
}

// parseColumns parses exactly len(dst) unsigned numbers in base from the
// fields of b into dst.
func parseColumns(b []byte, dst []uint64, base int) error {
	if n := countFields(b); n != len(dst) {
		return fmt.Errorf("want %d columns, got %d", len(dst), n)
	}
	for i := range dst {
		var f []byte
		f, b = nextField(b)
		v, err := strconv.ParseUint(string(f), base, 64)
		if err != nil {
			return err
		}
		dst[i] = v
	}
	return nil
}
