package conntrack

import (
	"encoding/binary"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// msg builds a netfilter message payload: struct nfgenmsg with res_id
// cpu, then each attribute as the kernel puts it (nla_put_be32).
func msg(cpu uint16, attrs ...[2]uint32) []byte {
	b := []byte{0, 0, byte(cpu >> 8), byte(cpu)}
	for _, a := range attrs {
		b = appendAttr(b, uint16(a[0]), binary.BigEndian.AppendUint32(nil, a[1]))
	}
	return b
}

func appendAttr(b []byte, typ uint16, v []byte) []byte {
	b = binary.NativeEndian.AppendUint16(b, uint16(4+len(v)))
	b = binary.NativeEndian.AppendUint16(b, typ)
	b = append(b, v...)
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	return b
}

// cpuMsg is what a 6.x kernel sends for one CPU, from
// ctnetlink_ct_stat_cpu_fill_info.
func cpuMsg(cpu uint16, found, insert, drop uint32) []byte {
	return msg(cpu, [2]uint32{2, found}, [2]uint32{4, 1}, [2]uint32{8, insert}, [2]uint32{9, 0},
		[2]uint32{10, drop}, [2]uint32{11, 0}, [2]uint32{12, 3}, [2]uint32{13, 0}, [2]uint32{14, 1}, [2]uint32{15, 0})
}

func TestSumCPU(t *testing.T) {
	m := map[string]uint64{}
	for cpu, b := range [][]byte{cpuMsg(0, 10, 5, 1), cpuMsg(1, 20, 7, 0)} {
		if err := SumCPU(m, b, false); err != nil {
			t.Fatalf("cpu %d: %v", cpu, err)
		}
	}
	if err := SumCPU(m, msg(0, [2]uint32{1, 4}, [2]uint32{2, 2}, [2]uint32{3, 1}), true); err != nil {
		t.Fatal(err)
	}
	want := map[string]uint64{
		"found": 30, "invalid": 2, "insert": 12, "insert_failed": 0, "drop": 1, "early_drop": 0,
		"icmp_error": 6, "search_restart": 0, "clashres": 2, "chainlength": 0,
		"expect_new": 4, "expect_create": 2, "expect_delete": 1,
	}
	if diff := cmp.Diff(want, m); diff != "" {
		t.Errorf("SumCPU mismatch (-want +got):\n%s", diff)
	}
}

// TestDecodeOdd: what a kernel should never send costs a value or the
// message, never a panic, and never a counter under another name.
func TestDecodeOdd(t *testing.T) {
	short := appendAttr([]byte{0, 0, 0, 0}, 10, []byte{0, 0, 1}) // a 3-byte drop
	long := appendAttr([]byte{0, 0, 0, 0}, 10, make([]byte, 8))  // a u64 drop
	overrun := msg(0, [2]uint32{2, 5}, [2]uint32{10, 9})
	binary.NativeEndian.PutUint16(overrun[nfgenmsgLen+8:], 200)
	tests := []struct {
		name    string
		b       []byte
		want    map[string]uint64
		wantErr bool
	}{
		{"empty", nil, map[string]uint64{}, true},
		{"header only", []byte{0, 0, 0, 1}, map[string]uint64{}, false},
		{"unknown types", msg(0, [2]uint32{16, 1}, [2]uint32{0, 1}, [2]uint32{0x3fff, 1}), map[string]uint64{}, false},
		{"a 3-byte value", short, map[string]uint64{}, false},
		{"an 8-byte value", long, map[string]uint64{}, false},
		{"nested flag masked", msg(0, [2]uint32{0x8000 | 10, 4}), map[string]uint64{"drop": 4}, false},
		{"overrun", overrun, map[string]uint64{"found": 5}, true},
		{"cut header", []byte{0, 0, 0, 0, 8, 0}, map[string]uint64{}, true},
	}
	for _, tt := range tests {
		m := map[string]uint64{}
		err := SumCPU(m, tt.b, false)
		if (err != nil) != tt.wantErr {
			t.Errorf("%s: err = %v, want error %v", tt.name, err, tt.wantErr)
		}
		if diff := cmp.Diff(tt.want, m); diff != "" {
			t.Errorf("%s: mismatch (-want +got):\n%s", tt.name, diff)
		}
	}
	if _, err := DecodeGlobal([]byte{1}); !errors.Is(err, ErrTruncated) {
		t.Errorf("DecodeGlobal(1 byte) = %v, want ErrTruncated", err)
	}
}

func TestDecodeGlobal(t *testing.T) {
	g, err := DecodeGlobal(msg(0, [2]uint32{1, 42}, [2]uint32{2, 262144}))
	if err != nil || g != (Global{Entries: 42, Max: 262144}) {
		t.Errorf("DecodeGlobal = %+v, %v", g, err)
	}
	// Before 4.18 there is no CTA_STATS_GLOBAL_MAX_ENTRIES.
	g, err = DecodeGlobal(msg(0, [2]uint32{1, 7}))
	if err != nil || g != (Global{Entries: 7}) {
		t.Errorf("DecodeGlobal without max = %+v, %v", g, err)
	}
}

// FuzzDecode feeds arbitrary payloads to both decoders: no panic, and
// only the known names, each no larger than the 32-bit values the
// message can hold.
func FuzzDecode(f *testing.F) {
	f.Add(cpuMsg(3, 100, 50, 2))
	f.Add(msg(0, [2]uint32{1, 42}, [2]uint32{2, 262144}))
	f.Add(msg(1, [2]uint32{1, 4}, [2]uint32{2, 2}, [2]uint32{3, 1}))
	f.Add([]byte{0, 0, 0, 0, 8, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		known := map[string]bool{}
		for _, n := range append(cpuNames[:], expectNames[:]...) {
			known[n] = n != ""
		}
		for _, expect := range []bool{false, true} {
			m := map[string]uint64{}
			_ = SumCPU(m, b, expect)
			for k, v := range m {
				if !known[k] {
					t.Fatalf("unknown key %q", k)
				}
				if v > uint64(len(b)/8)*(1<<32-1) {
					t.Fatalf("%s = %d from %d bytes", k, v, len(b))
				}
			}
		}
		_, _ = DecodeGlobal(b)
	})
}
