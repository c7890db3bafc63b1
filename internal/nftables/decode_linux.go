package nftables

import (
	"encoding/binary"
	"fmt"
	"math"
	"net/netip"
	"strconv"
	"strings"

	"github.com/google/nftables/expr"
	"github.com/google/nftables/xt"
	"golang.org/x/sys/unix"
)

// Families as nf_tables numbers them (NFPROTO_*).
const (
	famInet   = 1
	famIPv4   = 2
	famARP    = 3
	famNetdev = 5
	famBridge = 7
	famIPv6   = 10
)

// familyName is a table family as nft prints it.
func familyName(f byte) string {
	switch f {
	case famInet:
		return "inet"
	case famIPv4:
		return "ip"
	case famARP:
		return "arp"
	case famNetdev:
		return "netdev"
	case famBridge:
		return "bridge"
	case famIPv6:
		return "ip6"
	}
	return strconv.Itoa(int(f))
}

// decoded is one rule, rendered.
type decoded struct {
	// nft and ipt are the rule's parts as nft and iptables print them.
	nft, ipt []string
	verdict  string // "drop", "reject", "accept", "jump X"…, "" for none
	limit    string // "10/second burst 5 packets"
	over     bool
	counted  bool
	packets  uint64
	bytes    uint64
	// unknown is set when an expression could not be rendered: the text
	// then says so where it stood.
	unknown bool
}

// loaded is what a register holds: a meta key, a packet field, a
// conntrack key, with the mask a bitwise expression applied to it.
type loaded struct {
	kind  string // "meta", "payload", "ct"
	meta  expr.MetaKey
	ct    expr.CtKey
	base  expr.PayloadBase
	off   uint32
	len   uint32
	mask  []byte
	valid bool
}

// decoder walks a rule's expressions, as the kernel runs them.
type decoder struct {
	family byte
	l3     byte  // famIPv4 or famIPv6 once known
	l4     uint8 // IPPROTO_* once matched
	regs   map[uint32]loaded
	sets   func(name string) []string
	d      decoded
}

// decode renders a rule's expressions. sets returns an anonymous set's
// elements as text (nil when unknown).
func decode(family byte, exprs []expr.Any, sets func(string) []string) decoded {
	dc := decoder{family: family, regs: map[uint32]loaded{}, sets: sets}
	if family == famIPv4 || family == famIPv6 {
		dc.l3 = family
	}
	for _, e := range exprs {
		dc.expr(e)
	}
	return dc.d
}

func (dc *decoder) add(nft, ipt string) {
	if nft != "" {
		dc.d.nft = append(dc.d.nft, nft)
	}
	if ipt != "" {
		dc.d.ipt = append(dc.d.ipt, ipt)
	}
}

func (dc *decoder) unknown(what string) {
	dc.d.unknown = true
	dc.add("["+what+"]", "["+what+"]")
}

func (dc *decoder) expr(e expr.Any) {
	switch e := e.(type) {
	case *expr.Meta:
		if !e.SourceRegister {
			dc.regs[e.Register] = loaded{kind: "meta", meta: e.Key, valid: true}
		}
	case *expr.Payload:
		if e.OperationType == expr.PayloadLoad {
			dc.regs[e.DestRegister] = loaded{kind: "payload", base: e.Base, off: e.Offset, len: e.Len, valid: true}
		}
	case *expr.Ct:
		if !e.SourceRegister {
			dc.regs[e.Register] = loaded{kind: "ct", ct: e.Key, valid: true}
		}
	case *expr.Bitwise:
		l := dc.regs[e.SourceRegister]
		l.mask = e.Mask
		dc.regs[e.DestRegister] = l
	case *expr.Cmp:
		dc.cmp(dc.regs[e.Register], e.Op, e.Data)
	case *expr.Range:
		l := dc.regs[e.Register]
		n, _ := dc.field(l)
		f := dc.formatter(l)
		op := ""
		if e.Op == expr.CmpOpNeq {
			op = "!= "
		}
		dc.add(fmt.Sprintf("%s %s%s-%s", n, op, f(e.FromData), f(e.ToData)), "")
	case *expr.Lookup:
		l := dc.regs[e.SourceRegister]
		if l.kind == "payload" && l.base == expr.PayloadBaseTransportHeader {
			dc.foldProto()
		}
		n, ipt := dc.field(l)
		elems := "@" + e.SetName
		if dc.sets != nil {
			if vs := dc.sets(e.SetName); vs != nil {
				elems = "{ " + strings.Join(vs, ", ") + " }"
			}
		}
		neg := ""
		if e.Invert {
			neg = "!= "
		}
		dc.add(n+" "+neg+elems, iptSet(ipt, e.Invert, elems))
	case *expr.Limit:
		dc.d.limit, dc.d.over = limitText(e), e.Over
		over := ""
		if e.Over {
			over = "over "
		}
		dc.add("limit rate "+over+dc.d.limit, iptLimit(e))
	case *expr.Counter:
		dc.d.counted, dc.d.packets, dc.d.bytes = true, e.Packets, e.Bytes
	case *expr.Verdict:
		dc.verdict(e)
	case *expr.Reject:
		dc.d.verdict = "reject"
		dc.add("reject", "-j REJECT")
	case *expr.Log:
		dc.add("log", "-j LOG")
	case *expr.Match:
		dc.match(e)
	case *expr.Target:
		dc.target(e)
	case *expr.Immediate, *expr.Notrack, *expr.Masq, *expr.NAT, *expr.Redir, *expr.Queue, *expr.Dynset, *expr.Objref, *expr.Quota,
		*expr.Connlimit, *expr.Numgen, *expr.Hash, *expr.Rt, *expr.Fib, *expr.Exthdr, *expr.Socket:
		dc.unknown(exprName(e))
	default:
		dc.unknown(exprName(e))
	}
}

// exprName is an expression's kind, for what cannot be rendered.
func exprName(e expr.Any) string {
	n := fmt.Sprintf("%T", e)
	return strings.ToLower(strings.TrimPrefix(n, "*expr."))
}

func (dc *decoder) verdict(e *expr.Verdict) {
	switch e.Kind {
	case expr.VerdictDrop:
		dc.d.verdict = "drop"
		dc.add("drop", "-j DROP")
	case expr.VerdictAccept:
		dc.d.verdict = "accept"
		dc.add("accept", "-j ACCEPT")
	case expr.VerdictJump:
		dc.d.verdict = "jump " + e.Chain
		dc.add("jump "+e.Chain, "-j "+e.Chain)
	case expr.VerdictGoto:
		dc.d.verdict = "goto " + e.Chain
		dc.add("goto "+e.Chain, "-g "+e.Chain)
	case expr.VerdictReturn:
		dc.d.verdict = "return"
		dc.add("return", "-j RETURN")
	case expr.VerdictQueue:
		dc.d.verdict = "queue"
		dc.add("queue", "-j NFQUEUE")
	case expr.VerdictContinue:
	default:
		dc.unknown(fmt.Sprintf("verdict %d", e.Kind))
	}
}

var cmpOps = map[expr.CmpOp]string{expr.CmpOpEq: "", expr.CmpOpNeq: "!= ", expr.CmpOpLt: "< ", expr.CmpOpLte: "<= ", expr.CmpOpGt: "> ", expr.CmpOpGte: ">= "}

func (dc *decoder) cmp(l loaded, op expr.CmpOp, data []byte) {
	if !l.valid {
		dc.unknown("cmp")
		return
	}
	// What the rule learns about the packet: later fields are named
	// after it (the transport header is TCP's).
	if l.kind == "meta" && l.meta == expr.MetaKeyL4PROTO && op == expr.CmpOpEq && len(data) == 1 {
		dc.l4 = data[0]
		// nft folds it into a transport field that follows ("tcp dport
		// 80"): foldProto takes it back out then.
		dc.add("meta l4proto "+protoName(data[0]), "-p "+protoName(data[0]))
		return
	}
	if l.kind == "meta" && l.meta == expr.MetaKeyNFPROTO && op == expr.CmpOpEq && len(data) == 1 {
		dc.l3 = data[0]
		return
	}
	if l.kind == "payload" && l.base == expr.PayloadBaseNetworkHeader && op == expr.CmpOpEq && len(data) == 1 &&
		((dc.l3 == famIPv4 && l.off == 9) || (dc.l3 == famIPv6 && l.off == 6)) {
		dc.l4 = data[0]
		dc.add("", "-p "+protoName(data[0]))
		return
	}
	// ct state new: a bitwise test against the state bits.
	if l.kind == "ct" && l.ct == expr.CtKeySTATE && len(l.mask) == 4 && op == expr.CmpOpNeq && allZero(data) {
		st := ctStates(binary.NativeEndian.Uint32(l.mask))
		dc.add("ct state "+st, "-m conntrack --ctstate "+strings.ToUpper(st))
		return
	}
	// tcp flags syn / fin,syn,rst,ack
	if l.kind == "payload" && l.base == expr.PayloadBaseTransportHeader && dc.l4 == unix.IPPROTO_TCP && l.off == 13 && len(data) == 1 {
		mask := byte(0xff)
		if len(l.mask) == 1 {
			mask = l.mask[0]
		}
		n := "tcp flags " + tcpFlags(data[0])
		if mask != 0xff {
			n += " / " + tcpFlags(mask)
		}
		ipt := "--tcp-flags " + strings.ToUpper(tcpFlags(mask)) + " " + strings.ToUpper(tcpFlags(data[0]))
		if mask == 0x17 && data[0] == 0x02 {
			ipt = "--syn"
		}
		dc.foldProto()
		dc.add(n, ipt)
		return
	}
	if l.kind == "payload" && l.base == expr.PayloadBaseTransportHeader {
		dc.foldProto()
	}
	name, ipt := dc.field(l)
	val := dc.formatter(l)(data)
	// An address compared on its first bytes only is a prefix that nft
	// shortened: ip saddr 10.0.0.0/8 is one byte.
	if p, ok := dc.shortPrefix(l, data); ok {
		val = p
	}
	// An address compared under a mask is a prefix: 10.0.0.0/8.
	if bits, ok := prefixLen(l.mask); ok && l.kind == "payload" && (l.len == 4 || l.len == 16) {
		val += "/" + strconv.Itoa(bits)
	}
	if l.kind == "meta" && l.meta == expr.MetaKeyPRANDOM {
		// iptables' statistic match, translated: random < p·2³¹.
		dc.add(fmt.Sprintf("meta random %s%s", cmpOps[op], val), "")
		return
	}
	dc.add(name+" "+cmpOps[op]+val, iptCmp(ipt, op, val))
}

// foldProto drops a "meta l4proto tcp" just before a TCP field, which
// names the protocol itself, as nft prints it.
func (dc *decoder) foldProto() {
	if n := len(dc.d.nft); n > 0 && dc.d.nft[n-1] == "meta l4proto "+protoName(dc.l4) {
		dc.d.nft = dc.d.nft[:n-1]
	}
}

// shortPrefix renders an address field compared on its first bytes.
func (dc *decoder) shortPrefix(l loaded, data []byte) (string, bool) {
	if l.kind != "payload" || l.base != expr.PayloadBaseNetworkHeader || len(l.mask) != 0 {
		return "", false
	}
	size := 4
	if dc.l3 == famIPv6 {
		size = 16
	}
	isAddr := (size == 4 && (l.off == 12 || l.off == 16)) || (size == 16 && (l.off == 8 || l.off == 24))
	if !isAddr || int(l.len) >= size || len(data) != int(l.len) {
		return "", false
	}
	full := make([]byte, size)
	copy(full, data)
	return addrVal(full) + "/" + strconv.Itoa(len(data)*8), true
}

// field names what a register holds, as nft and iptables print it.
func (dc *decoder) field(l loaded) (nft, ipt string) {
	switch l.kind {
	case "meta":
		switch l.meta {
		case expr.MetaKeyIIFNAME:
			return "iifname", "-i"
		case expr.MetaKeyOIFNAME:
			return "oifname", "-o"
		case expr.MetaKeyIIF:
			return "iif", "-i"
		case expr.MetaKeyOIF:
			return "oif", "-o"
		case expr.MetaKeyMARK:
			return "meta mark", "-m mark --mark"
		case expr.MetaKeyL4PROTO:
			return "meta l4proto", "-p"
		case expr.MetaKeyPKTTYPE:
			return "meta pkttype", "-m pkttype --pkt-type"
		case expr.MetaKeySKUID:
			return "meta skuid", "-m owner --uid-owner"
		}
		return fmt.Sprintf("meta %d", l.meta), ""
	case "ct":
		switch l.ct {
		case expr.CtKeySTATE:
			return "ct state", "-m conntrack --ctstate"
		case expr.CtKeySTATUS:
			return "ct status", "-m conntrack --ctstatus"
		case expr.CtKeyMARK:
			return "ct mark", "-m connmark --mark"
		}
		return fmt.Sprintf("ct %d", l.ct), ""
	case "payload":
		switch l.base {
		case expr.PayloadBaseNetworkHeader:
			if dc.l3 == famIPv6 {
				switch l.off {
				case 8:
					return "ip6 saddr", "-s"
				case 24:
					return "ip6 daddr", "-d"
				case 6:
					return "ip6 nexthdr", "-p"
				}
				return fmt.Sprintf("ip6 @%d,%d", l.off*8, l.len*8), ""
			}
			switch l.off {
			case 12:
				return "ip saddr", "-s"
			case 16:
				return "ip daddr", "-d"
			case 9:
				return "ip protocol", "-p"
			}
			return fmt.Sprintf("ip @%d,%d", l.off*8, l.len*8), ""
		case expr.PayloadBaseTransportHeader:
			p := protoName(dc.l4)
			switch dc.l4 {
			case unix.IPPROTO_TCP, unix.IPPROTO_UDP, unix.IPPROTO_SCTP, unix.IPPROTO_UDPLITE:
				switch l.off {
				case 0:
					return p + " sport", "--sport"
				case 2:
					return p + " dport", "--dport"
				}
			case unix.IPPROTO_ICMP:
				switch l.off {
				case 0:
					return "icmp type", "--icmp-type"
				case 1:
					return "icmp code", ""
				}
			case unix.IPPROTO_ICMPV6:
				switch l.off {
				case 0:
					return "icmpv6 type", "--icmpv6-type"
				case 1:
					return "icmpv6 code", ""
				}
			}
			return fmt.Sprintf("%s @%d,%d", p, l.off*8, l.len*8), ""
		case expr.PayloadBaseLLHeader:
			return fmt.Sprintf("@ll,%d,%d", l.off*8, l.len*8), ""
		}
	}
	return "?", ""
}

// formatter formats the values a register is compared with.
func (dc *decoder) formatter(l loaded) func([]byte) string {
	switch {
	case l.kind == "meta" && (l.meta == expr.MetaKeyIIFNAME || l.meta == expr.MetaKeyOIFNAME):
		return func(b []byte) string { return strconv.Quote(strings.TrimRight(string(b), "\x00")) }
	case l.kind == "meta" && l.meta == expr.MetaKeyL4PROTO:
		return func(b []byte) string {
			if len(b) == 1 {
				return protoName(b[0])
			}
			return hexVal(b)
		}
	case l.kind == "payload" && l.base == expr.PayloadBaseTransportHeader && dc.l4 == unix.IPPROTO_ICMP && l.off == 0:
		return func(b []byte) string {
			if len(b) == 1 {
				return icmpType(b[0])
			}
			return hexVal(b)
		}
	case l.kind == "payload" && l.base == expr.PayloadBaseTransportHeader && dc.l4 == unix.IPPROTO_ICMPV6 && l.off == 0:
		return func(b []byte) string {
			if len(b) == 1 {
				return icmpv6Type(b[0])
			}
			return hexVal(b)
		}
	case l.kind == "payload" && (l.len == 4 || l.len == 16) && l.base == expr.PayloadBaseNetworkHeader:
		return addrVal
	case l.kind == "payload" && l.len == 2:
		return func(b []byte) string {
			if len(b) == 2 {
				return strconv.Itoa(int(binary.BigEndian.Uint16(b)))
			}
			return hexVal(b)
		}
	}
	return hexVal
}

// elemFormatter formats a set's elements by their length: a port, an
// address, a number.
func elemFormatter(b []byte) string {
	switch len(b) {
	case 2:
		return strconv.Itoa(int(binary.BigEndian.Uint16(b)))
	case 4, 16:
		return addrVal(b)
	case 1:
		return strconv.Itoa(int(b[0]))
	}
	return hexVal(b)
}

func addrVal(b []byte) string {
	if a, ok := netip.AddrFromSlice(b); ok {
		return a.String()
	}
	return hexVal(b)
}

func hexVal(b []byte) string {
	if len(b) <= 4 {
		var v uint64
		for _, c := range b {
			v = v<<8 | uint64(c)
		}
		return strconv.FormatUint(v, 10)
	}
	return fmt.Sprintf("0x%x", b)
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// prefixLen is the prefix a mask of leading ones makes.
func prefixLen(mask []byte) (int, bool) {
	if len(mask) == 0 {
		return 0, false
	}
	n, done := 0, false
	for _, c := range mask {
		for i := 7; i >= 0; i-- {
			one := c&(1<<i) != 0
			switch {
			case one && done:
				return 0, false
			case one:
				n++
			default:
				done = true
			}
		}
	}
	return n, n < len(mask)*8
}

func protoName(p uint8) string {
	switch p {
	case unix.IPPROTO_TCP:
		return "tcp"
	case unix.IPPROTO_UDP:
		return "udp"
	case unix.IPPROTO_ICMP:
		return "icmp"
	case unix.IPPROTO_ICMPV6:
		return "icmpv6"
	case unix.IPPROTO_SCTP:
		return "sctp"
	case unix.IPPROTO_UDPLITE:
		return "udplite"
	}
	return strconv.Itoa(int(p))
}

var icmpTypes = map[uint8]string{0: "echo-reply", 3: "destination-unreachable", 4: "source-quench", 5: "redirect", 8: "echo-request", 11: "time-exceeded", 12: "parameter-problem"}

func icmpType(t uint8) string {
	if n, ok := icmpTypes[t]; ok {
		return n
	}
	return strconv.Itoa(int(t))
}

var icmpv6Types = map[uint8]string{1: "destination-unreachable", 2: "packet-too-big", 3: "time-exceeded", 128: "echo-request", 129: "echo-reply", 135: "nd-neighbor-solicit", 136: "nd-neighbor-advert"}

func icmpv6Type(t uint8) string {
	if n, ok := icmpv6Types[t]; ok {
		return n
	}
	return strconv.Itoa(int(t))
}

// ctStates names the conntrack state bits of a mask (NF_CT_STATE_BIT).
func ctStates(mask uint32) string {
	var out []string
	for _, s := range []struct {
		bit  uint32
		name string
	}{{1, "invalid"}, {2, "established"}, {4, "related"}, {8, "new"}, {64, "untracked"}} {
		if mask&s.bit != 0 {
			out = append(out, s.name)
		}
	}
	return strings.Join(out, ",")
}

func tcpFlags(f uint8) string {
	var out []string
	for i, n := range []string{"fin", "syn", "rst", "psh", "ack", "urg", "ecn", "cwr"} {
		if f&(1<<i) != 0 {
			out = append(out, n)
		}
	}
	return strings.Join(out, ",")
}

func limitText(l *expr.Limit) string {
	unit := map[expr.LimitTime]string{expr.LimitTimeSecond: "second", expr.LimitTimeMinute: "minute", expr.LimitTimeHour: "hour", expr.LimitTimeDay: "day", expr.LimitTimeWeek: "week"}[l.Unit]
	if l.Type == expr.LimitTypePktBytes {
		s := fmt.Sprintf("%d bytes/%s", l.Rate, unit)
		if l.Burst > 0 {
			s += fmt.Sprintf(" burst %d bytes", l.Burst)
		}
		return s
	}
	s := fmt.Sprintf("%d/%s", l.Rate, unit)
	if l.Burst > 0 && l.Burst != 5 { // nft omits its default burst
		s += fmt.Sprintf(" burst %d packets", l.Burst)
	}
	return s
}

func iptLimit(l *expr.Limit) string {
	if l.Over {
		return "" // no iptables form; nft only
	}
	unit := map[expr.LimitTime]string{expr.LimitTimeSecond: "s", expr.LimitTimeMinute: "m", expr.LimitTimeHour: "h", expr.LimitTimeDay: "d"}[l.Unit]
	return fmt.Sprintf("-m limit --limit %d/%s --limit-burst %d", l.Rate, unit, l.Burst)
}

func iptCmp(opt string, op expr.CmpOp, val string) string {
	if opt == "" {
		return ""
	}
	neg := ""
	if op == expr.CmpOpNeq {
		neg = "! "
	}
	return neg + opt + " " + val
}

func iptSet(opt string, invert bool, elems string) string {
	if opt == "" {
		return ""
	}
	neg := ""
	if invert {
		neg = "! "
	}
	if opt == "--dport" || opt == "--sport" {
		return neg + "-m multiport " + strings.Replace(opt, "port", "ports", 1) + " " + strings.Join(strings.Fields(strings.Trim(elems, "{} ")), "")
	}
	return neg + opt + " " + elems
}

// match renders an iptables match kept as such (xt compat), decoding
// the ones that say how packets are limited or dropped.
func (dc *decoder) match(m *expr.Match) {
	switch info := m.Info.(type) {
	case *xt.Tcp:
		dc.foldProto()
		var parts, ipt []string
		if info.DstPorts != [2]uint16{0, 0xffff} {
			parts = append(parts, "tcp dport "+portRange(info.DstPorts))
			ipt = append(ipt, "--dport "+strings.Replace(portRange(info.DstPorts), "-", ":", 1))
		}
		if info.SrcPorts != [2]uint16{0, 0xffff} {
			parts = append(parts, "tcp sport "+portRange(info.SrcPorts))
			ipt = append(ipt, "--sport "+strings.Replace(portRange(info.SrcPorts), "-", ":", 1))
		}
		if info.FlagsMask != 0 {
			parts = append(parts, "tcp flags "+tcpFlags(info.FlagsCmp)+" / "+tcpFlags(info.FlagsMask))
			ipt = append(ipt, "--tcp-flags "+strings.ToUpper(tcpFlags(info.FlagsMask))+" "+strings.ToUpper(tcpFlags(info.FlagsCmp)))
		}
		dc.add(strings.Join(parts, " "), "-m tcp "+strings.Join(ipt, " "))
		return
	case *xt.Udp:
		dc.foldProto()
		var parts, ipt []string
		if info.DstPorts != [2]uint16{0, 0xffff} {
			parts = append(parts, "udp dport "+portRange(info.DstPorts))
			ipt = append(ipt, "--dport "+strings.Replace(portRange(info.DstPorts), "-", ":", 1))
		}
		if info.SrcPorts != [2]uint16{0, 0xffff} {
			parts = append(parts, "udp sport "+portRange(info.SrcPorts))
			ipt = append(ipt, "--sport "+strings.Replace(portRange(info.SrcPorts), "-", ":", 1))
		}
		dc.add(strings.Join(parts, " "), "-m udp "+strings.Join(ipt, " "))
		return
	case *xt.ConntrackMtinfo3:
		if info.MatchFlags&uint16(xt.ConntrackState) != 0 {
			st := ctStateBits(uint16(info.StateMask))
			dc.add("ct state "+st, "-m conntrack --ctstate "+strings.ToUpper(st))
			return
		}
	case *xt.ConntrackMtinfo2:
		if info.MatchFlags&uint16(xt.ConntrackState) != 0 {
			st := ctStateBits(info.StateMask)
			dc.add("ct state "+st, "-m conntrack --ctstate "+strings.ToUpper(st))
			return
		}
	case *xt.ConntrackMtinfo1:
		if info.MatchFlags&uint16(xt.ConntrackState) != 0 {
			st := ctStateBits(uint16(info.StateMask))
			dc.add("ct state "+st, "-m conntrack --ctstate "+strings.ToUpper(st))
			return
		}
	case *xt.Unknown:
		if n, i, ok := xtMatch(m.Name, m.Rev, *info); ok {
			if m.Name == "limit" || m.Name == "hashlimit" {
				dc.d.limit = strings.TrimPrefix(strings.TrimPrefix(n, "limit rate "), "over ")
				dc.d.over = strings.Contains(n, " over ")
			}
			dc.add(n, i)
			return
		}
	}
	dc.add("xt match "+m.Name, "-m "+m.Name)
}

// ctStateBits names xt_conntrack's state bits (XT_CONNTRACK_STATE_BIT:
// invalid 1, established 2, related 4, new 8, untracked 64).
func ctStateBits(mask uint16) string { return ctStates(uint32(mask)) }

func portRange(r [2]uint16) string {
	if r[0] == r[1] {
		return strconv.Itoa(int(r[0]))
	}
	return fmt.Sprintf("%d-%d", r[0], r[1])
}

// xtMatch decodes the xt matches iptables-nft keeps as such and that
// limit or discard packets: limit, hashlimit, statistic, icmp. The
// layouts are the kernel's (include/uapi/linux/netfilter/xt_*.h).
func xtMatch(name string, rev uint32, b []byte) (nft, ipt string, ok bool) {
	le := binary.NativeEndian
	switch name {
	case "limit": // struct xt_rateinfo { u32 avg; u32 burst; ... }
		if len(b) < 8 {
			return "", "", false
		}
		avg, burst := le.Uint32(b), le.Uint32(b[4:])
		if avg == 0 {
			return "", "", false
		}
		// avg is the time between packets in units of 1/10000 s.
		r := rate(10000, float64(avg))
		return fmt.Sprintf("limit rate %s burst %d packets", r.nft, burst), fmt.Sprintf("-m limit --limit %s --limit-burst %d", r.ipt, burst), true
	case "hashlimit": // xt_hashlimit_mtinfo1..3: name[16], then cfg
		if rev < 1 || len(b) < 16+24 {
			return "", "", false
		}
		hname := strings.TrimRight(string(b[:16]), "\x00")
		var avg, burst uint64
		var mode uint32
		scale := 10000.0
		if rev == 1 { // cfg1: u32 mode, avg, burst, ...
			mode, avg, burst = le.Uint32(b[16:]), uint64(le.Uint32(b[20:])), uint64(le.Uint32(b[24:]))
		} else { // cfg2/3: u64 avg, u64 burst, u32 mode
			avg, burst, mode = le.Uint64(b[16:]), le.Uint64(b[24:]), le.Uint32(b[32:])
			scale = 1000000
		}
		if avg == 0 {
			return "", "", false
		}
		r := rate(scale, float64(avg))
		over, iptOp := "", "--hashlimit-upto"
		if mode&0x10 != 0 { // XT_HASHLIMIT_INVERT
			over, iptOp = "over ", "--hashlimit-above"
		}
		return fmt.Sprintf("limit rate %s%s burst %d packets (per %s hash)", over, r.nft, burst, hname),
			fmt.Sprintf("-m hashlimit %s %s --hashlimit-burst %d --hashlimit-name %s", iptOp, r.ipt, burst, hname), true
	case "statistic": // struct xt_statistic_info { u16 mode, flags; u32 probability/every; ... }
		if len(b) < 8 {
			return "", "", false
		}
		mode, flags := le.Uint16(b), le.Uint16(b[2:])
		neg := ""
		if flags&1 != 0 {
			neg = "! "
		}
		if mode == 0 {
			p := float64(le.Uint32(b[4:])) / (1 << 31)
			return fmt.Sprintf("%sstatistic random probability %.4g", neg, p), fmt.Sprintf("%s-m statistic --mode random --probability %.4g", neg, p), true
		}
		every := le.Uint32(b[4:]) + 1
		return fmt.Sprintf("%sstatistic nth every %d", neg, every), fmt.Sprintf("%s-m statistic --mode nth --every %d", neg, every), true
	case "icmp": // struct ipt_icmp { u8 type; u8 code[2]; u8 invflags; }
		if len(b) < 4 {
			return "", "", false
		}
		t := icmpType(b[0])
		if b[0] == 3 && b[1] == 4 && b[2] == 4 {
			return "icmp type destination-unreachable icmp code frag-needed", "-p icmp --icmp-type fragmentation-needed", true
		}
		return "icmp type " + t, "-p icmp --icmp-type " + t, true
	}
	return "", "", false
}

type rateText struct{ nft, ipt string }

// rate turns xt's time between packets (in 1/scale s) into a rate.
func rate(scale, avg float64) rateText {
	perSec := scale / avg
	for _, u := range []struct {
		secs     float64
		nft, ipt string
	}{{1, "second", "s"}, {60, "minute", "m"}, {3600, "hour", "h"}, {86400, "day", "d"}} {
		if n := perSec * u.secs; n >= 1 && math.Abs(n-math.Round(n)) < 0.01 {
			return rateText{fmt.Sprintf("%d/%s", int(math.Round(n)), u.nft), fmt.Sprintf("%d/%s", int(math.Round(n)), u.ipt)}
		}
	}
	return rateText{fmt.Sprintf("%.3g/second", perSec), fmt.Sprintf("%.3g/s", perSec)}
}

// target renders an iptables target kept as such: REJECT, LOG….
func (dc *decoder) target(t *expr.Target) {
	switch t.Name {
	case "REJECT":
		dc.d.verdict = "reject"
		dc.add("reject", "-j REJECT")
	case "DROP":
		dc.d.verdict = "drop"
		dc.add("drop", "-j DROP")
	default:
		dc.add("xt target "+t.Name, "-j "+t.Name)
	}
}
