package resolver

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net/netip"
	"strings"

	"github.com/netdoctor/netdoctor/internal/evidence"
)

// DefaultConfPath is the resolver configuration of the host.
const DefaultConfPath = "/etc/resolv.conf"

// ParseConf parses a resolv.conf the way glibc's res_init does
// (resolv.conf(5); checked against glibc 2.36):
//
//   - A keyword counts only at the start of a line and followed by a space
//     or tab; lines starting with '#' or ';' are comments, and unknown
//     keywords are ignored.
//   - "nameserver ADDR" adds an IPv4 or IPv6 address, the latter with an
//     optional %zone. An address that does not parse up to the next space
//     or tab is skipped, as glibc skips it: a host name, "10.0.0.1#c" and
//     "10.0.0.1\r" from a file with CRLF line ends. All nameservers are
//     kept, although glibc uses only the first three (MAXNS).
//   - "search" and "domain" set the search list; the last such line wins,
//     and "domain X" stands for "search X". As in glibc, a '\r' before the
//     line end stays part of the last domain.
//   - "options" lines add their options in order.
//
// An empty file gives no nameservers; glibc would then query 127.0.0.1.
// ConfPath in the result is left empty for the caller to fill.
func ParseConf(r io.Reader) (evidence.Resolver, error) {
	var res evidence.Resolver
	sc := bufio.NewScanner(r)
	sc.Split(scanLines)
	for sc.Scan() {
		// Comment lines fall through: "#" or "#nameserver" is no keyword.
		line := sc.Text()
		i := strings.IndexAny(line, " \t")
		if i <= 0 {
			continue
		}
		words := strings.FieldsFunc(line[i+1:], func(r rune) bool { return r == ' ' || r == '\t' })
		if len(words) == 0 {
			continue
		}
		switch line[:i] {
		case "nameserver":
			if addr, err := netip.ParseAddr(words[0]); err == nil {
				res.Nameservers = append(res.Nameservers, addr.String())
			}
		case "domain":
			res.Search = words[:1]
		case "search":
			res.Search = words
		case "options":
			res.Options = append(res.Options, words...)
		}
	}
	if err := sc.Err(); err != nil {
		return evidence.Resolver{}, fmt.Errorf("read resolv.conf: %w", err)
	}
	return res, nil
}

// scanLines is bufio.ScanLines without the removal of a final '\r', which
// glibc keeps too.
func scanLines(data []byte, atEOF bool) (advance int, token []byte, err error) {
	if i := bytes.IndexByte(data, '\n'); i >= 0 {
		return i + 1, data[:i], nil
	}
	if atEOF && len(data) > 0 {
		return len(data), data, nil
	}
	return 0, nil, nil
}
