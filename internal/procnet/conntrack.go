package procnet

// ConntrackStat reads net/stat/nf_conntrack, the per-CPU statistics of
// connection tracking, and returns each column summed over the CPUs,
// keyed by the column names of the header line: "drop", "early_drop",
// "insert_failed", "search_restart"… The "entries" column is the global
// count of connections, repeated on every line, so its value is the first
// line's, not a sum.
//
// The file is missing when nf_conntrack is not loaded; that error is
// returned unwrapped, so callers can test errors.Is(err, fs.ErrNotExist).
//
// See ct_cpu_seq_show in
// https://elixir.bootlin.com/linux/v6.6/source/net/netfilter/nf_conntrack_standalone.c.
func (p Proc) ConntrackStat() (map[string]uint64, error) {
	b, err := p.readNet("stat/nf_conntrack")
	if err != nil {
		return nil, err
	}
	return parseConntrackStat(b)
}

// conntrackMaxColumns bounds the columns of net/stat/nf_conntrack; every
// kernel so far prints 17.
const conntrackMaxColumns = 64

// parseConntrackStat parses net/stat/nf_conntrack. The header names the
// columns, and the names changed over time: v4.x prints
//
//	entries  searched found new invalid ignore delete delete_list insert insert_failed drop early_drop icmp_error  expect_new expect_create expect_delete search_restart
//
// Kernels of the v5.x series renamed searched to clashres and then
// delete_list to chainlength; 6.x prints
//
//	entries  clashres found new invalid ignore delete chainlength insert insert_failed drop early_drop icmp_error  expect_new expect_create expect_delete search_restart
//
// and some columns are always 0 there (new, ignore, delete), while
// icmp_error counts every error, not only ICMP ones. Each following line
// holds one possible CPU's values, in hex. A header made only of numbers
// is taken as a missing header.
func parseConntrackStat(b []byte) (map[string]uint64, error) {
	pe := parseErrs{file: "net/stat/nf_conntrack"}
	body, truncated := completeLines(b)
	header, body := nextLine(body)
	nCols := countFields(header)
	if nCols == 0 {
		if truncated {
			pe.truncated(1)
		} else {
			pe.addf(1, "no header line")
		}
		return nil, pe.err()
	}
	if nCols > conntrackMaxColumns {
		pe.addf(1, "%d columns, more than %d", nCols, conntrackMaxColumns)
		return nil, pe.err()
	}
	if allHexNumbers(header) {
		pe.addf(1, "header line holds numbers, not column names")
		return nil, pe.err()
	}
	var names [conntrackMaxColumns]string
	m := make(map[string]uint64, nCols)
	rest := header
	keys.lock()
	for i := range nCols {
		var f []byte
		f, rest = nextField(rest)
		names[i] = keys.get(f)
		m[names[i]] = 0
	}
	keys.unlock()
	lineNo, cpus := 1, 0
	for len(body) > 0 {
		var line []byte
		line, body = nextLine(body)
		lineNo++
		if n := countFields(line); n == 0 {
			continue
		} else if n != nCols {
			pe.addf(lineNo, "want %d columns as in the header, got %d", nCols, n)
			continue
		}
		var v [conntrackMaxColumns]uint64
		if err := parseHexColumns(line, v[:nCols]); err != nil {
			pe.addf(lineNo, "%v", err)
			continue
		}
		for i, name := range names[:nCols] {
			if name == "entries" && cpus > 0 {
				continue // global, the same on every line
			}
			m[name] += v[i]
		}
		cpus++
	}
	if truncated {
		pe.truncated(lineNo + 1)
	}
	return m, pe.err()
}

// allHexNumbers reports whether every field of line is a hex number.
func allHexNumbers(line []byte) bool {
	for {
		var f []byte
		f, line = nextField(line)
		if len(f) == 0 {
			return true
		}
		for _, c := range f {
			if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
				return false
			}
		}
	}
}
