package resolver

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/net/dns/dnsmessage"

	"github.com/netdoctor/netdoctor/internal/evidence"
)

// Defaults for a zero Prober.
const (
	DefaultTimeout = 2 * time.Second
	DefaultPort    = 53
)

// ErrTimeout is the DNSProbe.Err of a query that got no answer in time.
const ErrTimeout = "timeout"

// Prober sends DNS queries straight to one nameserver over UDP, without
// retries, caching or search lists. The zero value is ready to use.
type Prober struct {
	// Timeout bounds each query; zero means DefaultTimeout.
	Timeout time.Duration
	// Port is the nameservers' port; zero means DefaultPort.
	Port int
}

// query is one probe whose socket is open and whose message is built,
// ready to be sent from any goroutine.
type query struct {
	conn *net.UDPConn
	msg  []byte
	id   uint16
	q    dnsmessage.Question
}

// Probe sends one query of type typ ("A", "AAAA", "PTR"…) for name to
// server, an IP address, and waits for the matching reply. For "PTR", name
// is an IP address, and the query is for its in-addr.arpa or ip6.arpa name.
// The result has the Rcode of the reply, a reply with the TC bit included,
// or an Err: "timeout", "connection refused" (an ICMP port unreachable) or
// another error text. Probe opens its socket on the calling goroutine.
func (p Prober) Probe(ctx context.Context, server, typ, name string) evidence.DNSProbe {
	res := evidence.DNSProbe{Server: server, Type: typ, Name: name}
	q, err := p.prepare(server, typ, name)
	if err != nil {
		res.Err = errText(err)
		return res
	}
	return p.run(ctx, q, res)
}

// ProbeAll probes every nameserver of conf with an A query for aName and a
// PTR query for ptrAddr, in that order per server; an empty aName or
// ptrAddr skips that query. The sockets are opened on the calling
// goroutine, which may be locked to a thread in another network namespace;
// the queries then run concurrently, so ProbeAll takes about one Timeout
// at worst, not the sum.
func (p Prober) ProbeAll(ctx context.Context, conf evidence.Resolver, aName, ptrAddr string) []evidence.DNSProbe {
	return p.ProbeEach(ctx, conf, aName, ptrAddr, 1)
}

// ProbeEach is ProbeAll with repeat A queries per nameserver instead of
// one: one query says whether a nameserver answers, twenty how many of
// its packets are lost and how long its answers take. The queries of one
// nameserver leave a few milliseconds apart, as a busy application's
// would, so that a resolver or a path that drops a share of packets
// drops a share of them.
func (p Prober) ProbeEach(ctx context.Context, conf evidence.Resolver, aName, ptrAddr string, repeat int) []evidence.DNSProbe {
	var out []evidence.DNSProbe
	var qs []*query
	var delays []time.Duration
	for _, server := range conf.Nameservers {
		for _, tn := range [][2]string{{"A", aName}, {"PTR", ptrAddr}} {
			if tn[1] == "" {
				continue
			}
			n := 1
			if tn[0] == "A" {
				n = max(repeat, 1)
			}
			for i := range n {
				out = append(out, evidence.DNSProbe{Server: server, Type: tn[0], Name: tn[1]})
				delays = append(delays, time.Duration(i)*5*time.Millisecond)
				q, err := p.prepare(server, tn[0], tn[1])
				if err != nil {
					out[len(out)-1].Err = errText(err)
				}
				qs = append(qs, q) // nil for a failed prepare
			}
		}
	}
	var wg sync.WaitGroup
	for i, q := range qs {
		if q == nil {
			continue
		}
		wg.Go(func() {
			if delays[i] > 0 {
				t := time.NewTimer(delays[i])
				select {
				case <-ctx.Done():
				case <-t.C:
				}
				t.Stop()
			}
			out[i] = p.run(ctx, q, out[i])
		})
	}
	wg.Wait()
	return out
}

// prepare builds the query and opens its socket. It must run on the
// caller's goroutine: the socket belongs to the network namespace of the
// thread that creates it.
func (p Prober) prepare(server, typ, name string) (*query, error) {
	addr, err := netip.ParseAddr(server)
	if err != nil {
		return nil, fmt.Errorf("invalid server address %q", server)
	}
	qtype, ok := types[strings.ToUpper(typ)]
	if !ok {
		return nil, fmt.Errorf("unsupported query type %q", typ)
	}
	qname := name
	if qtype == dnsmessage.TypePTR {
		if qname, err = reverseName(name); err != nil {
			return nil, err
		}
	}
	if !strings.HasSuffix(qname, ".") {
		qname += "."
	}
	n, err := dnsmessage.NewName(qname)
	if err != nil {
		return nil, fmt.Errorf("invalid name %q: %w", name, err)
	}
	q := &query{id: uint16(rand.Uint32()), q: dnsmessage.Question{Name: n, Type: qtype, Class: dnsmessage.ClassINET}}
	msg := dnsmessage.Message{
		Header:    dnsmessage.Header{ID: q.id, RecursionDesired: true},
		Questions: []dnsmessage.Question{q.q},
	}
	if q.msg, err = msg.Pack(); err != nil {
		return nil, fmt.Errorf("pack query: %w", err)
	}
	port := p.Port
	if port == 0 {
		port = DefaultPort
	}
	if port < 0 || port > 65535 {
		return nil, fmt.Errorf("invalid port %d", port)
	}
	raddr := net.UDPAddrFromAddrPort(netip.AddrPortFrom(addr, uint16(port)))
	if q.conn, err = net.DialUDP("udp", nil, raddr); err != nil {
		return nil, err
	}
	return q, nil
}

// run sends q, waits for its reply and closes its socket. It fills
// Duration and either Rcode or Err of res.
func (p Prober) run(ctx context.Context, q *query, res evidence.DNSProbe) evidence.DNSProbe {
	defer q.conn.Close()
	if err := ctx.Err(); err != nil {
		res.Err = ctxErrText(err)
		return res
	}
	timeout := p.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	start := time.Now()
	deadline := start.Add(timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	if err := q.conn.SetDeadline(deadline); err != nil {
		res.Err = errText(err)
		return res
	}
	// Cancelling ctx wakes the read by moving the deadline to now.
	stop := context.AfterFunc(ctx, func() { q.conn.SetDeadline(time.Now()) })
	defer stop()

	rcode, err := q.exchange()
	res.Duration = time.Since(start)
	switch {
	case err == nil:
		res.Rcode = rcode
	case ctx.Err() != nil:
		res.Err = ctxErrText(ctx.Err())
	default:
		res.Err = errText(err)
	}
	return res
}

// ctxErrText is errText for the error of a done context: "timeout" when
// its deadline passed, "context canceled" otherwise.
func ctxErrText(err error) string {
	if errors.Is(err, context.DeadlineExceeded) {
		return ErrTimeout
	}
	return err.Error()
}

// exchange sends the query and reads until the reply to it arrives. The
// socket is connected, so the kernel drops datagrams from other addresses;
// replies with another ID or question are skipped.
func (q *query) exchange() (rcode string, err error) {
	if _, err := q.conn.Write(q.msg); err != nil {
		return "", err
	}
	buf := make([]byte, 4096)
	for {
		n, err := q.conn.Read(buf)
		if err != nil {
			return "", err
		}
		if h, ok := q.matches(buf[:n]); ok {
			return rcodeName(h.RCode), nil
		}
	}
}

// matches parses the header of a reply and reports whether it answers q.
// A reply without a question section, as some servers send with REFUSED
// or FORMERR, is accepted on its ID alone.
func (q *query) matches(b []byte) (dnsmessage.Header, bool) {
	var p dnsmessage.Parser
	h, err := p.Start(b)
	if err != nil || !h.Response || h.ID != q.id {
		return h, false
	}
	got, err := p.Question()
	if errors.Is(err, dnsmessage.ErrSectionDone) {
		return h, true
	}
	if err != nil {
		return h, false
	}
	return h, got.Type == q.q.Type && got.Class == q.q.Class &&
		strings.EqualFold(got.Name.String(), q.q.Name.String())
}

// types are the query types Probe accepts.
var types = map[string]dnsmessage.Type{
	"A":     dnsmessage.TypeA,
	"AAAA":  dnsmessage.TypeAAAA,
	"PTR":   dnsmessage.TypePTR,
	"NS":    dnsmessage.TypeNS,
	"SOA":   dnsmessage.TypeSOA,
	"MX":    dnsmessage.TypeMX,
	"TXT":   dnsmessage.TypeTXT,
	"SRV":   dnsmessage.TypeSRV,
	"CNAME": dnsmessage.TypeCNAME,
}

// rcodeNames are the RFC 1035 and RFC 2136 response codes.
var rcodeNames = [...]string{
	"NOERROR", "FORMERR", "SERVFAIL", "NXDOMAIN", "NOTIMP", "REFUSED",
	"YXDOMAIN", "YXRRSET", "NXRRSET", "NOTAUTH", "NOTZONE",
}

// rcodeName returns the usual name of a response code, as dig prints it.
func rcodeName(c dnsmessage.RCode) string {
	if int(c) < len(rcodeNames) {
		return rcodeNames[c]
	}
	return fmt.Sprintf("RCODE%d", c)
}

// reverseName returns the PTR query name of an IP address:
// "1.0.77.10.in-addr.arpa." or the nibbles of an IPv6 address under
// "ip6.arpa.". An IPv4-mapped IPv6 address counts as IPv4.
func reverseName(ip string) (string, error) {
	addr, err := netip.ParseAddr(ip)
	if err != nil {
		return "", fmt.Errorf("invalid address %q for a PTR query", ip)
	}
	addr = addr.Unmap()
	var b strings.Builder
	if addr.Is4() {
		a := addr.As4()
		for i := len(a) - 1; i >= 0; i-- {
			fmt.Fprintf(&b, "%d.", a[i])
		}
		b.WriteString("in-addr.arpa.")
		return b.String(), nil
	}
	const hex = "0123456789abcdef"
	a := addr.As16()
	for i := len(a) - 1; i >= 0; i-- {
		b.WriteByte(hex[a[i]&0xf])
		b.WriteByte('.')
		b.WriteByte(hex[a[i]>>4])
		b.WriteByte('.')
	}
	b.WriteString("ip6.arpa.")
	return b.String(), nil
}

// errText turns an error into the short text of DNSProbe.Err: "timeout",
// the system error ("connection refused", "network is unreachable"), or
// the error itself.
func errText(err error) string {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return ErrTimeout
	}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return errno.Error()
	}
	return err.Error()
}
