package procnet

import (
	"bytes"
	"errors"
	"io/fs"
	"strconv"
)

// Counters reads the SNMP MIB counters of net/snmp, the Linux extensions
// of net/netstat and the IPv6 counters of net/snmp6 into one map keyed
// "Group.Name": "TcpExt.ListenOverflows", "Tcp.RetransSegs",
// "IpExt.InOctets", "IcmpMsg.InType3", "Ip6.InReceives". Negative values,
// such as Tcp.MaxConn's -1 (no limit), are left out. A missing snmp6 means
// IPv6 is disabled and is not an error.
//
// The map holds whatever could be read and parsed; the error joins the
// read errors (unwrapped) and the parse errors (wrapping ErrParse).
//
// See snmp_seq_show and netstat_seq_show in
// https://elixir.bootlin.com/linux/v6.6/source/net/ipv4/proc.c and
// snmp6_seq_show in
// https://elixir.bootlin.com/linux/v6.6/source/net/ipv6/proc.c.
func (p Proc) Counters() (map[string]uint64, error) {
	// A 6.x kernel prints about 430 counters in the three files.
	m := make(map[string]uint64, 512)
	var errs []error
	for _, f := range [...]struct{ name, file string }{
		{"snmp", "net/snmp"},
		{"netstat", "net/netstat"},
	} {
		b, err := p.readNet(f.name)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if err := parsePaired(b, f.file, m); err != nil {
			errs = append(errs, err)
		}
	}
	if err := p.parseIPv6("snmp6", func(b []byte) error { return parseSnmp6(b, m) }); err != nil {
		errs = append(errs, err)
	}
	return m, joinErrs(errs)
}

// parsePaired adds to m the counters of a file made of line pairs, a
// header naming the counters of a group and a line with their values:
//
//	TcpExt: SyncookiesSent SyncookiesRecv ...
//	TcpExt: 0 0 ...
//
// A group may come in several pairs (IcmpMsg does, 16 types per pair). A
// header without its value line, or a value line whose count of values
// differs from its header's, is damage: the group is left out with an
// ErrParse and the following groups are still parsed.
func parsePaired(b []byte, file string, m map[string]uint64) error {
	keys.lock()
	defer keys.unlock()
	pe := parseErrs{file: file}
	body, truncated := completeLines(b)
	var (
		key     []byte // reused buffer for "Group.Name"
		hdr     []byte // pending header line, nil when a header is expected
		hdrLine int
		lineNo  int
	)
	for len(body) > 0 {
		var line []byte
		line, body = nextLine(body)
		lineNo++
		group, fields, ok := cutColon(line)
		if !ok {
			if countFields(line) > 0 {
				pe.addf(lineNo, "no group name before a colon")
			}
			continue
		}
		if !isWord(group) {
			pe.addf(lineNo, "bad group name %q", group)
			continue
		}
		first, _ := nextField(fields)
		isValues := len(first) > 0 && (first[0] == '-' || first[0] >= '0' && first[0] <= '9')
		if hdr != nil {
			hgroup, hnames, _ := cutColon(hdr)
			if isValues && bytes.Equal(group, hgroup) {
				key = parseGroup(hgroup, hnames, fields, m, &pe, lineNo, key)
				hdr = nil
				continue
			}
			pe.addf(hdrLine, "%s: header without a value line", hgroup)
			hdr = nil
		}
		if isValues {
			pe.addf(lineNo, "%s: values without a header line", group)
			continue
		}
		hdr, hdrLine = line, lineNo
	}
	if hdr != nil {
		hgroup, _, _ := cutColon(hdr)
		pe.addf(hdrLine, "%s: header without a value line", hgroup)
	}
	if truncated {
		pe.truncated(lineNo + 1)
	}
	return pe.err()
}

// parseGroup adds to m the values of one header/value pair. Key is a
// buffer for building keys; the grown buffer is returned for reuse.
func parseGroup(group, names, values []byte, m map[string]uint64, pe *parseErrs, lineNo int, key []byte) []byte {
	if nn, nv := countFields(names), countFields(values); nn != nv {
		pe.addf(lineNo, "%s: %d names but %d values", group, nn, nv)
		return key
	}
	key = append(append(key[:0], group...), '.')
	prefix := len(key)
	for {
		var name, value []byte
		name, names = nextField(names)
		value, values = nextField(values)
		if len(name) == 0 {
			return key
		}
		v, ok, err := parseCounter(value)
		if err != nil {
			pe.addf(lineNo, "%s.%s: %v", group, name, err)
			continue
		}
		if !ok {
			continue
		}
		key = append(key[:prefix], name...)
		m[keys.get(key)] = v
	}
}

// parseCounter parses a decimal counter. It reports ok false, without an
// error, for a negative number: the kernel prints -1 for "no limit"
// (Tcp.MaxConn), which is not a counter.
func parseCounter(b []byte) (v uint64, ok bool, err error) {
	if len(b) > 0 && b[0] == '-' {
		if _, err := strconv.ParseInt(string(b), 10, 64); err != nil {
			return 0, false, err
		}
		return 0, false, nil
	}
	v, err = strconv.ParseUint(string(b), 10, 64)
	if err != nil {
		return 0, false, err
	}
	return v, true, nil
}

// parseSnmp6 adds to m the counters of net/snmp6, one per line:
//
//	Ip6InReceives                   	12
//
// The group is the name up to its first '6' (Ip6, Icmp6, Udp6, UdpLite6),
// so "Ip6InReceives" becomes "Ip6.InReceives" and "Icmp6InType133"
// becomes "Icmp6.InType133".
func parseSnmp6(b []byte, m map[string]uint64) error {
	keys.lock()
	defer keys.unlock()
	pe := parseErrs{file: "net/snmp6"}
	body, truncated := completeLines(b)
	var key []byte
	lineNo := 0
	for len(body) > 0 {
		var line []byte
		line, body = nextLine(body)
		lineNo++
		name, rest := nextField(line)
		if len(name) == 0 {
			continue
		}
		value, rest := nextField(rest)
		if extra, _ := nextField(rest); len(value) == 0 || len(extra) > 0 {
			pe.addf(lineNo, "want a name and a value, got %q", line)
			continue
		}
		i := bytes.IndexByte(name, '6')
		if i <= 0 || i == len(name)-1 {
			pe.addf(lineNo, "%s: no group prefix such as Ip6", name)
			continue
		}
		v, ok, err := parseCounter(value)
		if err != nil {
			pe.addf(lineNo, "%s: %v", name, err)
			continue
		}
		if !ok {
			continue
		}
		key = append(append(append(key[:0], name[:i+1]...), '.'), name[i+1:]...)
		m[keys.get(key)] = v
	}
	if truncated {
		pe.truncated(lineNo + 1)
	}
	return pe.err()
}

// parseIPv6 reads an IPv6 net file and parses it. A missing file is not an
// error: the kernel does not create it when IPv6 is disabled.
func (p Proc) parseIPv6(name string, parse func([]byte) error) error {
	b, err := p.readNet(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	return parse(b)
}
