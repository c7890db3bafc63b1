package procnet

import (
	"strconv"
)

// Sockstat reads net/sockstat and net/sockstat6 into one map keyed
// "Protocol.name": "sockets.used", "TCP.inuse", "TCP.orphan", "TCP.tw",
// "TCP.alloc", "TCP.mem" (in pages), "UDP.inuse", "FRAG.memory",
// "TCP6.inuse". A missing sockstat6 means IPv6 is disabled and is not an
// error.
//
// See sockstat_seq_show in
// https://elixir.bootlin.com/linux/v6.6/source/net/ipv4/proc.c and
// sockstat6_seq_show in
// https://elixir.bootlin.com/linux/v6.6/source/net/ipv6/proc.c.
func (p Proc) Sockstat() (map[string]int64, error) {
	b, err := p.readNet("sockstat")
	if err != nil {
		return nil, err
	}
	m := make(map[string]int64, 32)
	var errs []error
	if err := parseSockstat(b, "net/sockstat", m); err != nil {
		errs = append(errs, err)
	}
	if err := p.parseIPv6("sockstat6", func(b []byte) error { return parseSockstat(b, "net/sockstat6", m) }); err != nil {
		errs = append(errs, err)
	}
	return m, joinErrs(errs)
}

// parseSockstat adds to m the name/value pairs of a sockstat file:
//
//	TCP: inuse 1 orphan 0 tw 0 alloc 1 mem 110
//
// The values are signed: they are sums of per-CPU counters, which can be
// briefly negative.
func parseSockstat(b []byte, file string, m map[string]int64) error {
	keys.lock()
	defer keys.unlock()
	pe := parseErrs{file: file}
	body, truncated := completeLines(b)
	var key []byte
	lineNo := 0
	for len(body) > 0 {
		var line []byte
		line, body = nextLine(body)
		lineNo++
		proto, pairs, ok := cutColon(line)
		if !ok {
			if countFields(line) > 0 {
				pe.addf(lineNo, "no protocol name before a colon")
			}
			continue
		}
		if !isWord(proto) {
			pe.addf(lineNo, "bad protocol name %q", proto)
			continue
		}
		key = append(append(key[:0], proto...), '.')
		prefix := len(key)
		for {
			var name, value []byte
			name, pairs = nextField(pairs)
			if len(name) == 0 {
				break
			}
			value, pairs = nextField(pairs)
			if len(value) == 0 {
				pe.addf(lineNo, "%s.%s: no value", proto, name)
				break
			}
			v, err := strconv.ParseInt(string(value), 10, 64)
			if err != nil {
				pe.addf(lineNo, "%s.%s: %v", proto, name, err)
				continue
			}
			key = append(key[:prefix], name...)
			m[keys.get(key)] = v
		}
	}
	if truncated {
		pe.truncated(lineNo + 1)
	}
	return pe.err()
}
