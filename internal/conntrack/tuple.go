package conntrack

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// ErrNotFound reports that the table holds no entry with the tuple.
var ErrNotFound = errors.New("no conntrack entry with this tuple")

// Tuple is one direction of a connection as conntrack keys it: the
// transport protocol, and the source and destination with their ports.
type Tuple struct {
	Proto    uint8 // IPPROTO_TCP, IPPROTO_UDP…
	Src, Dst netip.AddrPort
}

// Reverse is the tuple of the other direction.
func (t Tuple) Reverse() Tuple { return Tuple{Proto: t.Proto, Src: t.Dst, Dst: t.Src} }

// Valid reports whether t can be asked for: both addresses of one
// family.
func (t Tuple) Valid() bool {
	s, d := t.Src.Addr().Unmap(), t.Dst.Addr().Unmap()
	return s.IsValid() && d.IsValid() && s.Is4() == d.Is4()
}

// Entry is one connection of the table: its tuple in the direction of
// its first packet (Orig) and of the answers (Reply). A connection
// translated by NAT has a Reply that is not Orig reversed.
type Entry struct {
	Orig, Reply Tuple
	// Status is the entry's IPS_* bits.
	Status uint32
}

// NAT reports whether the entry translates its packets: the answers
// come from, or go to, another address or port than the first packet's.
func (e Entry) NAT() bool { return e.Reply != e.Orig.Reverse() }

// Attribute types from include/uapi/linux/netfilter/nfnetlink_conntrack.h.
const (
	ctaTupleOrig  = 1 // CTA_TUPLE_ORIG
	ctaTupleReply = 2 // CTA_TUPLE_REPLY
	ctaStatus     = 3 // CTA_STATUS

	ctaTupleIP    = 1 // CTA_TUPLE_IP
	ctaTupleProto = 2 // CTA_TUPLE_PROTO

	ctaIPv4Src = 1 // CTA_IP_V4_SRC
	ctaIPv4Dst = 2 // CTA_IP_V4_DST
	ctaIPv6Src = 3 // CTA_IP_V6_SRC
	ctaIPv6Dst = 4 // CTA_IP_V6_DST

	ctaProtoNum     = 1 // CTA_PROTO_NUM
	ctaProtoSrcPort = 2 // CTA_PROTO_SRC_PORT
	ctaProtoDstPort = 3 // CTA_PROTO_DST_PORT

	ipctnlMsgCTGet = 1 // IPCTNL_MSG_CT_GET
)

// EncodeGet is the payload of IPCTNL_MSG_CT_GET for t: the kernel looks
// the tuple up in its hash, which holds both directions of every entry,
// so it finds the entry whose Orig or Reply is t.
func EncodeGet(t Tuple) ([]byte, error) {
	if !t.Valid() {
		return nil, fmt.Errorf("conntrack tuple %v → %v: not one address family", t.Src, t.Dst)
	}
	family := byte(unix.AF_INET)
	if !t.Src.Addr().Unmap().Is4() {
		family = unix.AF_INET6
	}
	ae := netlink.NewAttributeEncoder()
	ae.ByteOrder = binary.BigEndian
	ae.Nested(ctaTupleOrig, func(ae *netlink.AttributeEncoder) error {
		ae.Nested(ctaTupleIP, func(ae *netlink.AttributeEncoder) error {
			s, d := t.Src.Addr().Unmap(), t.Dst.Addr().Unmap()
			if family == unix.AF_INET {
				a, b := s.As4(), d.As4()
				ae.Bytes(ctaIPv4Src, a[:])
				ae.Bytes(ctaIPv4Dst, b[:])
			} else {
				a, b := s.As16(), d.As16()
				ae.Bytes(ctaIPv6Src, a[:])
				ae.Bytes(ctaIPv6Dst, b[:])
			}
			return nil
		})
		ae.Nested(ctaTupleProto, func(ae *netlink.AttributeEncoder) error {
			ae.Uint8(ctaProtoNum, t.Proto)
			ae.Uint16(ctaProtoSrcPort, t.Src.Port())
			ae.Uint16(ctaProtoDstPort, t.Dst.Port())
			return nil
		})
		return nil
	})
	attrs, err := ae.Encode()
	if err != nil {
		return nil, err
	}
	// struct nfgenmsg: the family the tuple's addresses are of.
	return append([]byte{family, 0, 0, 0}, attrs...), nil
}

// DecodeEntry reads an IPCTNL_MSG_CT_NEW message, the kernel's answer to
// a get: its two tuples and status. Anything else it carries (counters,
// timeouts, labels) is skipped.
func DecodeEntry(b []byte) (Entry, error) {
	var e Entry
	if len(b) < nfgenmsgLen {
		return e, fmt.Errorf("%w: %d bytes, want at least %d", ErrTruncated, len(b), nfgenmsgLen)
	}
	ad, err := netlink.NewAttributeDecoder(b[nfgenmsgLen:])
	if err != nil {
		return e, fmt.Errorf("decode conntrack entry: %w", err)
	}
	ad.ByteOrder = binary.BigEndian
	var orig, reply bool
	for ad.Next() {
		switch ad.Type() {
		case ctaTupleOrig:
			ad.Nested(func(nad *netlink.AttributeDecoder) error { return decodeTuple(nad, &e.Orig) })
			orig = true
		case ctaTupleReply:
			ad.Nested(func(nad *netlink.AttributeDecoder) error { return decodeTuple(nad, &e.Reply) })
			reply = true
		case ctaStatus:
			e.Status = ad.Uint32()
		}
	}
	if err := ad.Err(); err != nil {
		return Entry{}, fmt.Errorf("decode conntrack entry: %w", err)
	}
	if !orig || !reply || !e.Orig.Valid() || !e.Reply.Valid() {
		return Entry{}, fmt.Errorf("%w: a conntrack entry without both tuples", ErrTruncated)
	}
	return e, nil
}

// decodeTuple reads a CTA_TUPLE_* nest.
func decodeTuple(ad *netlink.AttributeDecoder, t *Tuple) error {
	ad.ByteOrder = binary.BigEndian
	var src, dst netip.Addr
	var sport, dport uint16
	for ad.Next() {
		switch ad.Type() {
		case ctaTupleIP:
			ad.Nested(func(ad *netlink.AttributeDecoder) error {
				for ad.Next() {
					b := ad.Bytes()
					switch {
					case (ad.Type() == ctaIPv4Src || ad.Type() == ctaIPv4Dst) && len(b) == 4,
						(ad.Type() == ctaIPv6Src || ad.Type() == ctaIPv6Dst) && len(b) == 16:
						a, _ := netip.AddrFromSlice(b)
						if ad.Type() == ctaIPv4Src || ad.Type() == ctaIPv6Src {
							src = a
						} else {
							dst = a
						}
					}
				}
				return nil
			})
		case ctaTupleProto:
			ad.Nested(func(ad *netlink.AttributeDecoder) error {
				ad.ByteOrder = binary.BigEndian
				for ad.Next() {
					switch {
					case ad.Type() == ctaProtoNum && len(ad.Bytes()) == 1:
						t.Proto = ad.Uint8()
					case ad.Type() == ctaProtoSrcPort && len(ad.Bytes()) == 2:
						sport = ad.Uint16()
					case ad.Type() == ctaProtoDstPort && len(ad.Bytes()) == 2:
						dport = ad.Uint16()
					}
				}
				return nil
			})
		}
	}
	t.Src, t.Dst = netip.AddrPortFrom(src, sport), netip.AddrPortFrom(dst, dport)
	return nil
}
