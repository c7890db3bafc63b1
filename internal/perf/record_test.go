package perf

import (
	"encoding/binary"
	"errors"
	"os"
	"slices"
	"testing"
)

func fixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestDecodeCaptured(t *testing.T) {
	// Two samples read from CPU 0's ring while a Go test spun on
	// getpid(2): one taken in the kernel, one in user mode.
	rec, err := Decode(fixture(t, "sample0.bin"), nil)
	if err != nil {
		t.Fatal(err)
	}
	s := rec.Sample
	if s == nil || s.PID != 2445 || s.TID != 2445 || s.CPU != 0 || s.Period != 10101010 {
		t.Fatalf("sample %+v", s)
	}
	if want := []uint64{0xffffffff821ecc56, 0xffffffff81000130}; !slices.Equal(s.Kernel, want) {
		t.Errorf("kernel chain %#x, want %#x", s.Kernel, want)
	}
	if want := []uint64{4814390, 4761313}; !slices.Equal(s.User, want) {
		t.Errorf("user chain %v, want %v", s.User, want)
	}
	rec, err = Decode(fixture(t, "sample1.bin"), s)
	if err != nil || len(rec.Sample.Kernel) != 0 || len(rec.Sample.User) != 2 {
		t.Errorf("user-mode sample %+v, %v", rec.Sample, err)
	}
}

func TestDecodeBad(t *testing.T) {
	b := fixture(t, "sample0.bin")
	for _, tt := range []struct {
		name string
		b    []byte
	}{
		{"short", b[:6]},
		{"cut", b[:len(b)-8]},
		{"chain longer than the record", func() []byte {
			c := slices.Clone(b)
			binary.LittleEndian.PutUint64(c[headerSize+32:], 1000)
			return c
		}()},
	} {
		if _, err := Decode(tt.b, nil); !errors.Is(err, ErrRecord) {
			t.Errorf("%s: err %v, want ErrRecord", tt.name, err)
		}
	}
	lost := make([]byte, 24)
	binary.LittleEndian.PutUint32(lost, recordLost)
	binary.LittleEndian.PutUint16(lost[6:], 24)
	binary.LittleEndian.PutUint64(lost[16:], 7)
	if rec, err := Decode(lost, nil); err != nil || rec.Lost != 7 {
		t.Errorf("lost record: %+v, %v", rec, err)
	}
}

// TestRingWraps: a record that runs past the end of the data area is
// read whole, from its two parts.
func TestRingWraps(t *testing.T) {
	s0, s1 := fixture(t, "sample0.bin"), fixture(t, "sample1.bin")
	data := make([]byte, 128)
	// s1 (72 bytes) from 100 wraps at 128; s0 (96 bytes) follows it.
	pos := uint64(100)
	for _, c := range append(slices.Clone(s1), s0...)[:72] {
		data[pos%128] = c
		pos++
	}
	var got [][]byte
	tail, scratch, err := Ring(data, 100, pos, nil, func(b []byte) { got = append(got, slices.Clone(b)) })
	if err != nil || tail != pos || len(got) != 1 || !slices.Equal(got[0], s1) {
		t.Fatalf("tail %d, %d records, err %v", tail, len(got), err)
	}
	for _, c := range s0 {
		data[pos%128] = c
		pos++
	}
	tail, _, err = Ring(data, tail, pos, scratch, func(b []byte) { got = append(got, slices.Clone(b)) })
	if err != nil || tail != pos || len(got) != 2 || !slices.Equal(got[1], s0) {
		t.Fatalf("tail %d, %d records, err %v", tail, len(got), err)
	}
	if _, _, err := Ring(data[:100], 0, 10, nil, func([]byte) {}); !errors.Is(err, ErrRecord) {
		t.Errorf("a data area not a power of two: %v", err)
	}
	if _, _, err := Ring(data, 0, 300, nil, func([]byte) {}); !errors.Is(err, ErrRecord) {
		t.Errorf("head past a whole ring: %v", err)
	}
}

func TestParseCPUList(t *testing.T) {
	got, err := ParseCPUList("0-3,6\n")
	if err != nil || !slices.Equal(got, []int{0, 1, 2, 3, 6}) {
		t.Errorf("%v %v", got, err)
	}
	if _, err := ParseCPUList("3-1"); err == nil {
		t.Error("3-1 accepted")
	}
}

func FuzzDecode(f *testing.F) {
	f.Add(fixture(f, "sample0.bin"))
	f.Add(fixture(f, "sample1.bin"))
	f.Fuzz(func(t *testing.T, b []byte) {
		rec, err := Decode(b, nil)
		if err != nil && !errors.Is(err, ErrRecord) {
			t.Fatal(err)
		}
		if s := rec.Sample; s != nil && len(s.Kernel)+len(s.User) > len(b)/8 {
			t.Fatalf("%d addresses from %d bytes", len(s.Kernel)+len(s.User), len(b))
		}
		// As a ring of 256 bytes holding b from offset 200.
		data := make([]byte, 256)
		for i, c := range b {
			data[(200+i)%256] = c
		}
		head := uint64(200 + min(len(b), 256))
		tail, _, err := Ring(data, 200, head, nil, func(r []byte) { Decode(r, nil) })
		if err != nil && !errors.Is(err, ErrRecord) || tail > head {
			t.Fatalf("ring: tail %d head %d, %v", tail, head, err)
		}
	})
}
